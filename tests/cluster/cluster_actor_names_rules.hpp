#pragma once
// The rules of cluster-wide actor names (akt/cluster/cluster.hpp, "Actor names in a cluster"),
// as functions of the store they run on (grain_backend: the in-process store or an etcd), so
// that tests/cluster/cluster_actor_names_test.cpp runs them on the in-process store and
// tests/etcd/etcd_actor_names_test.cpp on a real etcd: a top-level actor's name is claimed in
// the whole cluster, found from every node, released when the actor stops, and lost with a
// crashed node's lease. Each is named after the rule it checks and bounds its own time.
#include <gtest/gtest.h>

#include <akt/testkit/local_cluster.hpp>

#include <atomic>
#include <future>
#include <set>
#include <string>

#include "cluster/cluster_grains_rules.hpp"

namespace akt::name_rules {

using namespace akt::cluster_test;
using akt::errc;
using akt::grain_rules::grain_backend;
using akt::grain_rules::read_key;
using akt::test::eventually;

// Tells add to a process-wide counter; an ask with a string is answered with the name of the
// system (node) the actor runs on.
inline std::atomic<int> g_told{0};

struct echo final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<std::int32_t>()) {
      g_told.fetch_add(*ctx.get_if<std::int32_t>(), std::memory_order_relaxed);
    } else if (ctx.is<std::string>()) {
      ctx.reply(ctx.system().name());
    }
  }
};

// An echo with a child named "kid" (children are not claimed: every parent may have one).
struct parent final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<std::string>()) {
      if (!kid_) {
        auto k = ctx.spawn<echo>("kid");
        if (!k) {
          ctx.reply(std::string("spawn failed: ") + k.error().message());
          return;
        }
        kid_ = *k;
      }
      ctx.reply(ctx.system().name());
    }
  }
  akt::pid kid_;
};

// Spawns a top-level actor from its handler: on a cluster node that must be refused, not block.
struct spawner final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<std::string>()) {
      auto r = ctx.system().spawn<echo>("from-a-worker");
      ctx.reply(static_cast<std::int32_t>(r ? 0 : static_cast<int>(r.code())));
    }
  }
};

inline akt::testkit::local_cluster_options options(const grain_backend& b) {
  akt::testkit::local_cluster_options o;
  o.lease_ttl = 2s;
  o.prepare = [](akt::actor_system& s, std::size_t) {
    (void)s.register_actor_kind<echo>("test.echo");
  };
  return b.apply(o);
}

// The name's key as the store holds it now (create_revision 0: none).
inline std::string name_key_of(const grain_backend& b, const std::string& name) {
  return "/akt/" + b.cluster + "/v1/actors/" + name;
}
inline akt::cluster::key_value name_key(const grain_backend& b, akt::testkit::local_cluster& c,
                                        const std::string& name) {
  auto r = read_key(b, c, name_key_of(b, name));
  if (!r || r->kvs.empty()) return {};
  return r->kvs.front();
}

// Which node runs the actor: it answers with its system's name.
inline std::string where(const akt::pid& p) {
  auto r = p.ask<std::string>(std::string("where"), 5s);
  return r ? *r : "error: " + r.error().message();
}

inline void ASecondSpawnOfANameFailsOnEveryNodeWhileTheFirstLives(const grain_backend& b) {
  akt::testkit::local_cluster c(3, options(b));
  ASSERT_TRUE(c.start());
  auto first = c.node(0).spawn<echo>("unique");
  ASSERT_TRUE(first) << first.error().message();
  const akt::cluster::key_value kv = name_key(b, c, "unique");
  ASSERT_NE(kv.create_revision, 0) << "claimed in the store";
  EXPECT_NE(kv.value.find("owner=node-0\n"), std::string::npos) << kv.value;
  EXPECT_EQ(kv.lease, akt::cluster::self(c.node(0))->epoch) << "on the owner's lease";
  for (std::size_t n = 0; n < 3; ++n) {
    auto again = c.node(n).spawn<echo>("unique");
    ASSERT_FALSE(again) << "node " << n;
    EXPECT_EQ(again.code(), errc::actor_already_exists) << again.error().message();
  }
  EXPECT_EQ(where(*first), "node-0") << "the first one is untouched";
  EXPECT_EQ(name_key(b, c, "unique").create_revision, kv.create_revision) << "and so is its claim";
}

inline void FindActorFindsItFromEveryNodeAndMessagesReachIt(const grain_backend& b) {
  akt::testkit::local_cluster c(3, options(b));
  ASSERT_TRUE(c.start());
  auto home = c.node(1).spawn<parent>("findme");
  ASSERT_TRUE(home) << home.error().message();
  g_told = 0;
  for (std::size_t n = 0; n < 3; ++n) {
    auto p = akt::cluster::find_actor(c.node(n), "findme", 5s);
    ASSERT_TRUE(p) << "from node " << n << ": " << p.error().message();
    EXPECT_EQ(where(*p), "node-1") << "from node " << n;
  }
  // Its child by path, on whichever node asks.
  auto kid = akt::cluster::find_actor(c.node(2), "findme/kid", 5s);
  ASSERT_TRUE(kid) << kid.error().message();
  EXPECT_EQ(where(*kid), "node-1");
  ASSERT_FALSE(kid->tell(std::int32_t{5})) << "sent";
  EXPECT_TRUE(eventually([] { return g_told.load() == 5; }, 10s)) << "a tell reaches it";
  auto missing = akt::cluster::find_actor(c.node(0), "nobody", 5s);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.code(), errc::actor_not_found) << missing.error().message();
}

inline void WhenTheActorStopsItsNameIsFreeAgainOnAnyNode(const grain_backend& b) {
  akt::testkit::local_cluster c(2, options(b));
  ASSERT_TRUE(c.start());
  auto a = c.node(0).spawn<echo>("reused");
  ASSERT_TRUE(a);
  ASSERT_TRUE(c.node(0).stop_actor(*a, 5s));
  // On the same node at once: the spawn waits for the release still in flight.
  auto second = c.node(0).spawn<echo>("reused");
  ASSERT_TRUE(second) << second.error().message();
  ASSERT_TRUE(c.node(0).stop_actor(*second, 5s));
  // On another node once the release committed (one store round trip).
  akt::result<akt::pid> elsewhere = errc::actor_already_exists;
  ASSERT_TRUE(eventually(
      [&] {
        elsewhere = c.node(1).spawn<echo>("reused");
        if (!elsewhere) {
          EXPECT_EQ(elsewhere.code(), errc::actor_already_exists);
        }
        return elsewhere.has_value();
      },
      10s));
  auto found = akt::cluster::find_actor(c.node(0), "reused", 5s);
  ASSERT_TRUE(found) << found.error().message();
  EXPECT_EQ(where(*found), "node-1");
  EXPECT_NE(name_key(b, c, "reused").value.find("owner=node-1\n"), std::string::npos);
}

inline void ACrashedNodesNamesAreFreeOnceItsLeaseExpired(const grain_backend& b) {
  akt::testkit::local_cluster c(2, options(b));
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.node(0).spawn<echo>("survivor"));
  ASSERT_TRUE(c.crash(0));
  // Until node 0's lease expires (TTL 2 s) the name is still its own.
  akt::result<akt::pid> r = errc::actor_already_exists;
  ASSERT_TRUE(eventually(
      [&] {
        r = c.node(1).spawn<echo>("survivor");
        if (!r) {
          EXPECT_EQ(r.code(), errc::actor_already_exists) << r.error().message();
        }
        return r.has_value();
      },
      20s));
  EXPECT_NE(name_key(b, c, "survivor").value.find("owner=node-1\n"), std::string::npos);
  auto found = akt::cluster::find_actor(c.node(1), "survivor", 5s);
  ASSERT_TRUE(found);
  EXPECT_EQ(where(*found), "node-1");
}

inline void ARecordThatDoesNotDecodeIsRefusedCleanly(const grain_backend& b) {
  akt::testkit::local_cluster c(1, options(b));
  ASSERT_TRUE(c.start());
  auto client = b.open(c, "vandal");
  ASSERT_TRUE(client);
  std::promise<akt::result<akt::cluster::op_outcome>> p;
  client->put_if_absent(name_key_of(b, "garbled"), "not a name record\x01", 0,
                        [&p](akt::result<akt::cluster::op_outcome> r) { p.set_value(r); });
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  ASSERT_TRUE(f.get());
  auto spawned = c.node(0).spawn<echo>("garbled");
  ASSERT_FALSE(spawned) << "never spawned over a record it cannot read";
  EXPECT_EQ(spawned.code(), errc::actor_already_exists) << spawned.error().message();
  auto found = akt::cluster::find_actor(c.node(0), "garbled", 5s);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.code(), errc::decode_failed) << found.error().message();
  EXPECT_TRUE(c.node(0).spawn<echo>("fine")) << "the node keeps working";
}

inline void ChildrenAndTheFrameworksOwnNamesAreNotClaimed(const grain_backend& b) {
  akt::testkit::local_cluster c(2, options(b));
  ASSERT_TRUE(c.start());
  auto p0 = c.node(0).spawn<parent>("parent-a");
  auto p1 = c.node(1).spawn<parent>("parent-b");
  ASSERT_TRUE(p0 && p1);
  EXPECT_EQ(where(*p0), "node-0");  // each spawns its child "kid"
  EXPECT_EQ(where(*p1), "node-1");
  EXPECT_TRUE(c.node(0).find("parent-a/kid"));
  EXPECT_TRUE(c.node(1).find("parent-b/kid"));
  EXPECT_EQ(name_key(b, c, "kid").create_revision, 0);
  EXPECT_TRUE(c.node(0).spawn<echo>("akt.test.local"));
  EXPECT_TRUE(c.node(1).spawn<echo>("akt.test.local"));
  EXPECT_EQ(name_key(b, c, "akt.test.local").create_revision, 0);
}

inline void ASpawnFromADispatcherWorkerIsRefusedInsteadOfBlocking(const grain_backend& b) {
  akt::testkit::local_cluster c(1, options(b));
  ASSERT_TRUE(c.start());
  auto s = c.node(0).spawn<spawner>("spawner");
  ASSERT_TRUE(s);
  auto code = s->ask<std::int32_t>(std::string("go"), 5s);
  ASSERT_TRUE(code) << code.error().message();
  EXPECT_EQ(*code, static_cast<int>(errc::blocking_on_worker));
  EXPECT_EQ(name_key(b, c, "from-a-worker").create_revision, 0);
}

inline void SpawnOnPlacesARegisteredKindRoundRobinAndTheNameIsClaimed(const grain_backend& b) {
  akt::testkit::local_cluster c(3, options(b));
  ASSERT_TRUE(c.start());
  std::set<std::string> nodes;
  for (int i = 0; i < 3; ++i) {
    auto p = akt::cluster::spawn_on(c.node(0), "test.echo", "placed-" + std::to_string(i));
    ASSERT_TRUE(p) << p.error().message();
    nodes.insert(where(*p));
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"node-0", "node-1", "node-2"})) << "one on each";
  for (auto placement :
       {akt::cluster::spawn_placement::random, akt::cluster::spawn_placement::least_load}) {
    const std::string name = "placed-" + std::to_string(static_cast<int>(placement) + 10);
    akt::cluster::spawn_on_options o;
    o.placement = placement;
    auto p = akt::cluster::spawn_on(c.node(1), "test.echo", name, o);
    ASSERT_TRUE(p) << p.error().message();
    auto found = akt::cluster::find_actor(c.node(2), name, 5s);
    ASSERT_TRUE(found) << found.error().message();
    EXPECT_EQ(where(*found), where(*p));
  }
  auto twice = akt::cluster::spawn_on(c.node(2), "test.echo", "placed-0");
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.code(), errc::actor_already_exists) << twice.error().message();
  akt::cluster::spawn_on_options gpu;
  gpu.role = "gpu";
  auto no_role = akt::cluster::spawn_on(c.node(0), "test.echo", "x", gpu);
  ASSERT_FALSE(no_role);
  EXPECT_EQ(no_role.code(), errc::invalid_argument);
  auto no_kind = akt::cluster::spawn_on(c.node(0), "test.nope", "y");
  ASSERT_FALSE(no_kind);
  EXPECT_EQ(no_kind.code(), errc::invalid_argument) << no_kind.error().message();
}

// A member whose record says it is leaving (it began to stop) gets no actor from spawn_on, by
// any placement: it would stop with it. The record is marked by hand here (a stop marks it and
// goes on at once, too fast to place anything in between).
inline void SpawnOnSkipsAMemberThatIsLeaving(const grain_backend& b) {
  akt::testkit::local_cluster c(3, options(b));
  ASSERT_TRUE(c.start());
  const std::string key = "/akt/" + b.cluster + "/v1/members/node-2";
  auto r = read_key(b, c, key);
  ASSERT_TRUE(r && r->kvs.size() == 1) << "node-2's record";
  const akt::cluster::key_value kv = r->kvs.front();
  auto client = b.open(c, "test-marker");
  ASSERT_TRUE(client);
  std::promise<akt::result<std::vector<akt::cluster::op_outcome>>> done;
  client->commit({akt::cluster::store_op::update_if_created_at(key, kv.value + "leaving=1\n",
                                                               kv.lease, kv.create_revision)},
                 [&done](auto out) { done.set_value(std::move(out)); });
  auto out = done.get_future().get();
  ASSERT_TRUE(out && out->size() == 1 && out->front().succeeded) << "the leaving mark is written";
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& m : akt::cluster::members(c.node(0)))
          if (m.name == "node-2") return m.leaving;
        return false;
      },
      10s))
      << "node-0 sees node-2 leaving";
  for (auto placement :
       {akt::cluster::spawn_placement::round_robin, akt::cluster::spawn_placement::random,
        akt::cluster::spawn_placement::least_load}) {
    for (int i = 0; i < 4; ++i) {
      const std::string name =
          "skip-" + std::to_string(static_cast<int>(placement)) + "-" + std::to_string(i);
      akt::cluster::spawn_on_options o;
      o.placement = placement;
      auto p = akt::cluster::spawn_on(c.node(0), "test.echo", name, o);
      ASSERT_TRUE(p) << p.error().message();
      EXPECT_NE(where(*p), "node-2") << name;
    }
  }
}

}  // namespace akt::name_rules
