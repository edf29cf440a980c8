// Naming a node: every API that names one takes the address the system gives out
// (actor_system::address(), "akt://system@host:port", the key of peer_stats) as well as
// "host:port": lookup by name, spawn_on, ask_grain_on, tell_grain_on, the grain placement's
// owner function and declare_node_lost. With the akt:// form, lookup and spawn_on check the
// system name.

#include <gtest/gtest.h>

#include <string>

#include "remote/node.hpp"
#include "remote/node_lost.hpp"
#include "remote/remote_support.hpp"

namespace {

using namespace akt::remote_test;
using akt::errc;
namespace rd = akt::remote::detail;

// Answers ping{n} with ping{n + 1}; default-constructible, for spawn_on.
struct plus_one final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (auto* p = ctx.get_if<ping>()) ctx.reply(ping{p->n + 1});
  }
};

// Counts the pings sent to its identity, answers the count.
struct tally_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.tally";
  std::int64_t count = 0;
  void on_receive(akt::grain_context& ctx) override {
    akt::match(ctx, [&](const ping& p, auto& c) {
      count += p.n;
      c.reply(ping{count});  // an acknowledged tell takes it as the ack
    });
  }
};

TEST(Remote_NodeAddress, ParseNodeTakesHostPortAndTheSystemsOwnAddress) {
  auto plain = rd::parse_node("127.0.0.1:7400");
  ASSERT_TRUE(plain) << plain.error().message();
  EXPECT_EQ(plain->host, "127.0.0.1");
  EXPECT_EQ(plain->port, 7400);
  EXPECT_EQ(plain->system, "");
  auto full = rd::parse_node("akt://orders@127.0.0.7:7401");
  ASSERT_TRUE(full) << full.error().message();
  EXPECT_EQ(full->host, "127.0.0.7");
  EXPECT_EQ(full->port, 7401);
  EXPECT_EQ(full->system, "orders");
  auto v6 = rd::parse_node("akt://s@[::1]:9");
  ASSERT_TRUE(v6) << v6.error().message();
  EXPECT_EQ(v6->host, "::1");
  for (const char* bad : {"akt://127.0.0.1:1", "akt://@127.0.0.1:1", "akt://s@127.0.0.1:1/user/x",
                          "akt://s@127.0.0.1", "127.0.0.1", "127.0.0.1:0", "akt://s@h:99999"}) {
    EXPECT_EQ(rd::parse_node(bad).code(), errc::invalid_address) << bad;
  }
}

TEST(Remote_NodeAddress, LookupAndSpawnOnTakeTheAddressTheSystemGivesOut) {
  node a{"alpha"}, b{"beta"};
  ASSERT_TRUE(a.started && b.started);
  auto j = std::make_shared<journal>();
  ASSERT_TRUE(b.sys.spawn<echo>("echo", j));
  ASSERT_FALSE(b.sys.register_actor_kind<plus_one>("plus_one"));
  const std::string address = b.sys.address();  // akt://beta@127.0.0.1:<port>
  ASSERT_EQ(address.rfind("akt://beta@", 0), 0u) << address;

  auto found = a.sys.lookup(address, "echo", 20s);
  ASSERT_TRUE(found) << found.error().message();
  auto r = found->ask<ping>(ping{1}, 20s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 2);
  auto spawned = a.sys.spawn_on(address, "plus_one", "p1", 20s);
  ASSERT_TRUE(spawned) << spawned.error().message();
  auto s = spawned->ask<ping>(ping{41}, 20s);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->n, 42);
  // The same node by host:port: the same peer, not a second one.
  auto again = a.sys.spawn_on(b.where(), "plus_one", "p2", 20s);
  ASSERT_TRUE(again) << again.error().message();
  const auto peers = a.sys.peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].address, address);  // peer_stats are keyed by the same form
  // The akt:// form names a system: another one there is refused, nothing spawned.
  const std::string wrong = "akt://gamma@" + b.where();
  EXPECT_EQ(a.sys.lookup(wrong, "echo", 20s).code(), errc::actor_not_found);
  EXPECT_EQ(a.sys.spawn_on(wrong, "plus_one", "p3", 20s).code(), errc::invalid_address);
  EXPECT_FALSE(b.sys.find("p3"));
  EXPECT_EQ(a.sys.spawn_on(address + "/user/x", "plus_one", "p4", 20s).code(),
            errc::invalid_address);
}

TEST(Remote_NodeAddress, GrainCallsAndPlacementTakeTheAddressTheSystemGivesOut) {
  node a{"alpha"}, b{"beta"};
  ASSERT_TRUE(a.started && b.started);
  ASSERT_FALSE(akt::register_grain_kind<tally_grain>(a.sys));
  ASSERT_FALSE(akt::register_grain_kind<tally_grain>(b.sys));
  const std::string b_address = b.sys.address(), a_address = a.sys.address();
  const akt::grain_identity on_b{"test.tally", "b-1"};
  ASSERT_FALSE(akt::remote::tell_grain_on(a.sys, b_address, on_b, ping{1}));
  ASSERT_FALSE(akt::remote::tell_grain_on(a.sys, b_address, on_b, ping{2}, {.one_way = true}));
  auto asked = akt::remote::ask_grain_on<ping>(a.sys, b_address, on_b, ping{3}, 20s);
  ASSERT_TRUE(asked) << asked.error().message();
  EXPECT_EQ(asked->n, 6);
  // The owner function names nodes as the systems give them out: b's for "b-", a's own else.
  ASSERT_FALSE(akt::remote::set_grain_placement(
      a.sys, [b_address, a_address](const akt::grain_identity& id) {
        return id.name.rfind("b-", 0) == 0 ? b_address : a_address;
      }));
  auto routed = akt::ask_grain<ping>(a.sys, on_b, ping{4}, 20s);
  ASSERT_TRUE(routed) << routed.error().message();
  EXPECT_EQ(routed->n, 10);  // the same activation, on b
  auto local = akt::ask_grain<ping>(a.sys, {"test.tally", "a-1"}, ping{5}, 20s);
  ASSERT_TRUE(local) << local.error().message();
  EXPECT_EQ(local->n, 5);
  ASSERT_EQ(akt::active_grains(a.sys).size(), 1u);
  EXPECT_EQ(akt::active_grains(a.sys)[0].name, "a-1");
  ASSERT_EQ(akt::active_grains(b.sys).size(), 1u);
  EXPECT_EQ(a.sys.peers().size(), 1u);  // a's own address made no peer
}

TEST(Remote_NodeAddress, DeclareNodeLostTakesEitherForm) {
  node a{"alpha"}, b{"beta"}, c{"gamma"};
  ASSERT_TRUE(a.started && b.started && c.started);
  auto j = std::make_shared<journal>();
  ASSERT_TRUE(b.sys.spawn<echo>("echo", j));
  ASSERT_TRUE(c.sys.spawn<echo>("echo", j));
  auto on_b = a.sys.lookup(b.sys.address(), "echo", 20s);
  auto on_c = a.sys.lookup(c.where(), "echo", 20s);
  ASSERT_TRUE(on_b && on_c);
  ASSERT_FALSE(rd::declare_node_lost(a.sys, b.sys.address(), "test"));
  ASSERT_FALSE(rd::declare_node_lost(a.sys, c.where(), ""));
  EXPECT_FALSE(on_b->alive());
  EXPECT_FALSE(on_c->alive());
  EXPECT_EQ(rd::declare_node_lost(a.sys, "nowhere", "").code(), errc::invalid_address);
  EXPECT_EQ(rd::declare_node_lost(a.sys, a.sys.address(), "").code(), errc::invalid_argument);
}

}  // namespace
