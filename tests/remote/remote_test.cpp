// Two (and three) nodes in one process on loopback: lookups, tells, asks, requests, errors,
// senders, pids in messages.

#include <gtest/gtest.h>

#include <akt/testkit/manual_time.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "remote/remote_support.hpp"

namespace {

using namespace akt::remote_test;
using akt::errc;
using akt::test::eventually;

struct Remote_TwoNodes : ::testing::Test {
  node a{"alpha"};
  node b{"beta"};
  std::shared_ptr<journal> j = std::make_shared<journal>();
  akt::pid target;  // "echo" on b, as a pid on a
  void SetUp() override {
    ASSERT_TRUE(a.started) << a.started.error().message();
    ASSERT_TRUE(b.started) << b.started.error().message();
    ASSERT_TRUE(b.sys.spawn<echo>("echo", j));
    auto p = a.sys.lookup(b.sys.address() + "/user/echo");
    ASSERT_TRUE(p) << p.error().message();
    target = *p;
  }
};

TEST(Remote_Node, ASystemWithoutRemoteSettingsHasNoAddressAndRefusesLookups) {
  akt::actor_system sys("plain");
  ASSERT_TRUE(sys.start());
  EXPECT_EQ(sys.address(), "");
  EXPECT_EQ(sys.lookup("akt://x@127.0.0.1:1/user/y").code(), errc::remoting_disabled);
  EXPECT_EQ(sys.spawn_on("127.0.0.1:1", "k", "n").code(), errc::remoting_disabled);
  EXPECT_TRUE(sys.peers().empty());
}

TEST(Remote_Node, PortZeroBindsAFreePortThatTheAddressReports) {
  node a{"alpha"};
  ASSERT_TRUE(a.started) << a.started.error().message();
  const std::string addr = a.sys.address();
  EXPECT_EQ(addr.rfind("akt://alpha@127.0.0.1:", 0), 0u) << addr;
  EXPECT_NE(addr.substr(addr.rfind(':') + 1), "0");
}

TEST(Remote_Node, NodesWhoseIoThreadsPollExchangeAsksAndStop) {
  akt::remote_config rc;
  rc.io_poll = std::chrono::microseconds(200);
  node a{"alpha", rc}, b{"beta", rc};
  ASSERT_TRUE(a.started) << a.started.error().message();
  ASSERT_TRUE(b.started) << b.started.error().message();
  auto j = std::make_shared<journal>();
  ASSERT_TRUE(b.sys.spawn<echo>("echo", j));
  auto p = a.sys.lookup(b.where(), "echo");
  ASSERT_TRUE(p) << p.error().message();
  for (int i = 0; i < 200; ++i) {
    auto r = p->ask<ping>(ping{i}, 10s);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->n, i + 1);
  }
  // Both stop (their polling I/O threads end) when the nodes go out of scope; the test's time
  // bound catches a thread that keeps polling.
}

TEST(Remote_Node, ANegativeIoPollIsRefusedAtStart) {
  akt::remote_config rc;
  rc.io_poll = std::chrono::microseconds(-1);
  akt::actor_system sys("bad", node_config(rc));
  auto started = sys.start();
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().code(), errc::invalid_argument);
}

TEST(Remote_Lookup, AMalformedAddressIsRefusedWithInvalidAddress) {
  node a{"alpha"};
  ASSERT_TRUE(a.started);
  for (const char* bad : {"", "http://x@h:1/user/a", "akt://h:1/user/a", "akt://s@h/user/a",
                          "akt://s@h:0/user/a", "akt://s@h:99999/user/a", "akt://s@h:1"}) {
    EXPECT_EQ(a.sys.lookup(bad).code(), errc::invalid_address) << bad;
  }
  EXPECT_EQ(a.sys.lookup("nocolon", "x").code(), errc::invalid_address);
}

TEST_F(Remote_TwoNodes, ALookupByAddressAndByNodeAndNameFindsTheActor) {
  EXPECT_EQ(target.name(), "echo");
  EXPECT_EQ(target.path(), b.sys.address() + "/user/echo");
  EXPECT_EQ(a.sys.address_of(target), b.sys.address() + "/user/echo");
  auto by_name = a.sys.lookup(b.where(), "echo");
  ASSERT_TRUE(by_name) << by_name.error().message();
  EXPECT_EQ(*by_name, target) << "one proxy per remote actor";
  EXPECT_TRUE(target.alive());
}

TEST_F(Remote_TwoNodes, ALookupOfAMissingActorAnswersActorNotFound) {
  EXPECT_EQ(a.sys.lookup(b.sys.address() + "/user/nobody").code(), errc::actor_not_found);
  EXPECT_EQ(a.sys.lookup("akt://wrong@" + b.where() + "/user/echo").code(), errc::actor_not_found);
}

TEST(Remote_Lookup, ALookupOfAnUnreachableNodeAnswersUnreachableWithinItsTimeout) {
  node a{"alpha"};
  ASSERT_TRUE(a.started);
  // A port nobody listens on: bind one, note it, close it.
  std::string dead_node;
  {
    node gone{"gone"};
    ASSERT_TRUE(gone.started);
    dead_node = gone.where();
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = a.sys.lookup(dead_node, "x", 300ms);
  EXPECT_FALSE(r);
  EXPECT_TRUE(r.code() == errc::unreachable || r.code() == errc::request_timeout)
      << r.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST(Remote_Lookup, TheLocalNodesOwnAddressResolvesToTheLocalPid) {
  node a{"alpha"};
  ASSERT_TRUE(a.started);
  auto j = std::make_shared<journal>();
  auto local = a.sys.spawn<echo>("echo", j);
  ASSERT_TRUE(local);
  auto p = a.sys.lookup(a.sys.address() + "/user/echo");
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, *local);
}

TEST_F(Remote_TwoNodes, TellsFromOneSenderArriveAllAndInOrder) {
  constexpr int n = 20000;
  for (int i = 0; i < n; ++i) {
    akt::error e = target.tell(ping{i});
    if (e == errc::window_full) {  // the receiver is behind: wait for credit, then resend
      ASSERT_TRUE(eventually([&] { return !(e = target.tell(ping{i})); }, 20s)) << e.message();
      continue;
    }
    ASSERT_FALSE(e) << e.message();
  }
  ASSERT_TRUE(eventually([&] { return j->received.load() == n; }, 30s)) << j->received.load();
  const auto got = j->ping_list();
  ASSERT_EQ(got.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<std::size_t>(i)], i) << "at " << i;
}

TEST_F(Remote_TwoNodes, AnAskReturnsTheReplyAndTypedAsksCheckTheType) {
  auto r = target.ask<ping>(ping{41}, 5s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 42);
  auto s = target.ask<std::string>(std::string("hello"), 5s);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(*s, "HELLO");
  EXPECT_EQ(target.ask<std::string>(ping{1}, 5s).code(), errc::unexpected_reply);
}

TEST_F(Remote_TwoNodes, ErrorsComeBackAsTheSameCodesAsLocally) {
  // A handler that does not answer: no_reply.
  EXPECT_EQ(target.ask<std::string>(std::string("ignore"), 5s).code(), errc::no_reply);
  // A message no handler matches: unhandled.
  EXPECT_EQ(target.ask(std::int64_t{7}, 5s).code(), errc::unhandled);
  // A handler's own system_shutting_down is a handler's answer, not a refusal: no mark.
  auto said = target.ask<std::string>(std::string("refuse"), 5s);
  EXPECT_EQ(said.code(), errc::system_shutting_down);
  EXPECT_FALSE(akt::detail::error_access::refused(said.error()));
  // A handler that throws: handler_failed, with the text (last: the default supervisor then
  // stops the actor, as it would locally).
  auto thrown = target.ask<std::string>(std::string("throw"), 5s);
  EXPECT_EQ(thrown.code(), errc::handler_failed);
  EXPECT_NE(thrown.error().detail().find("the handler threw"), std::string_view::npos)
      << thrown.error().message();
}

TEST_F(Remote_TwoNodes, AStoppedRemoteActorAnswersDeadWithTheRefusalMark) {
  auto local = b.sys.find("echo");
  ASSERT_TRUE(local);
  ASSERT_TRUE(b.sys.stop_actor(*local));
  auto r = target.ask<ping>(ping{1}, 5s);
  EXPECT_EQ(r.code(), errc::actor_not_found) << r.error().message();
  EXPECT_TRUE(akt::detail::error_access::refused(r.error())) << "refused before any handler";
}

TEST_F(Remote_TwoNodes, AMessageWithoutASerializerIsRefusedAndDeadLettered) {
  akt::test::collector<akt::dead_letter, akt::errc> dead(
      a.sys, [](const akt::dead_letter& d) { return d.reason.code(); });
  EXPECT_EQ(target.tell(unregistered{1}).code(), errc::not_serializable);
  EXPECT_EQ(target.ask(unregistered{1}, 1s).code(), errc::not_serializable);
  ASSERT_GE(dead.wait_for(2), 2u);
  EXPECT_EQ(dead.items()[0], errc::not_serializable);
}

TEST(Remote_Deadline, AnAskThatExpiresInTheRemoteMailboxIsNeverHandled) {
  // b runs on manual time: the ask's deadline there is b's clock plus the time left when a sent
  // it, and the test moves b's clock past it while the ask waits in the mailbox.
  node a{"alpha"};
  node b{"beta", {}, true};
  ASSERT_TRUE(a.started && b.started);
  struct slow final : akt::actor {
    std::atomic<bool>* release;
    std::atomic<int>* handled;
    slow(std::atomic<bool>* r, std::atomic<int>* h) : release(r), handled(h) {}
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<std::string>()) {
        while (!release->load()) std::this_thread::sleep_for(100us);
      } else if (ctx.is<ping>()) {
        handled->fetch_add(1);
        ctx.reply(ping{0});
      }
    }
  };
  std::atomic<bool> release{false};
  std::atomic<int> handled{0};
  auto local = b.sys.spawn<slow>("slow", &release, &handled);
  ASSERT_TRUE(local);
  auto p = a.sys.lookup(b.where(), "slow");
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(std::string("hold")));
  std::thread asker([&] { EXPECT_EQ(p->ask<ping>(ping{1}, 2s).code(), errc::request_timeout); });
  // The ask waits in b's mailbox behind the held message; then b's clock passes its deadline.
  ASSERT_TRUE(eventually([&] { return b.sys.stats(*local).mailbox_length == 1; }));
  (void)akt::testkit::advance(b.sys, std::chrono::hours(1), 10ms);  // the actor is busy
  release = true;
  asker.join();
  // The expired ask is skipped there; a later one is handled.
  auto fine = p->ask<ping>(ping{2}, 5s);
  ASSERT_TRUE(fine) << fine.error().message();
  EXPECT_EQ(handled.load(), 1) << "the expired ask ran";
}

TEST_F(Remote_TwoNodes, AReplyThatArrivesAfterTheCallerGaveUpIsDroppedNotHandedToALaterAsk) {
  // "late" answers after a gate opens; the asker gives up first, then asks again.
  struct late final : akt::actor {
    std::atomic<bool>* open;
    explicit late(std::atomic<bool>* o) : open(o) {}
    void receive(akt::receive_context& ctx) override {
      if (auto* p = ctx.get_if<ping>()) {
        if (p->n == 1) {
          while (!open->load()) std::this_thread::sleep_for(100us);
        }
        ctx.reply(ping{p->n * 100});
      }
    }
  };
  std::atomic<bool> open{false};
  ASSERT_TRUE(b.sys.spawn<late>("late", &open));
  auto p = a.sys.lookup(b.where(), "late");
  ASSERT_TRUE(p);
  std::thread first([&] { EXPECT_EQ(p->ask<ping>(ping{1}, 50ms).code(), errc::request_timeout); });
  first.join();
  open = true;  // the answer to the first ask (100) is on its way now
  auto second = p->ask<ping>(ping{2}, 5s);
  ASSERT_TRUE(second) << second.error().message();
  EXPECT_EQ(second->n, 200) << "a late reply reached the next ask";
}

TEST_F(Remote_TwoNodes, ConcurrentAsksEachGetTheirOwnAnswerWhileCallEntriesAreReused) {
  // The asking node reuses the entries of answered calls (at most 64 kept): first 8 askers in
  // a steady stream, then a burst of 100 at once, more than the spares it keeps. A reused entry
  // that kept a stale route would hand an answer to the wrong ask.
  auto ask_many = [&](int threads, int asks) {
    std::atomic<int> wrong{0}, failed{0};
    std::vector<std::thread> askers;
    for (int t = 0; t < threads; ++t) {
      askers.emplace_back([&, t] {
        for (int i = 0; i < asks; ++i) {
          const int n = t * 1000 + i;
          auto r = target.ask<ping>(ping{n}, 20s);
          if (!r)
            ++failed;
          else if (r->n != n + 1)
            ++wrong;
        }
      });
    }
    for (auto& th : askers) th.join();
    EXPECT_EQ(failed.load(), 0);
    EXPECT_EQ(wrong.load(), 0);
  };
  ask_many(8, 50);
  ask_many(100, 1);
  ask_many(8, 20);  // and the stream goes on after the burst
}

TEST_F(Remote_TwoNodes, RepliesToTheSenderFindTheirWayBack) {
  // An actor on a tells echo "reply-to-sender"; echo tells its sender "back".
  struct caller final : akt::actor {
    akt::pid to;
    std::shared_ptr<journal> mine;
    caller(akt::pid t, std::shared_ptr<journal> m) : to(std::move(t)), mine(std::move(m)) {}
    void receive(akt::receive_context& ctx) override {
      if (auto* s = ctx.get_if<std::string>()) {
        if (*s == "go")
          (void)ctx.tell(to, std::string("reply-to-sender"));
        else
          mine->add(*s);
      }
    }
  };
  auto mine = std::make_shared<journal>();
  auto c = a.sys.spawn<caller>("caller", target, mine);
  ASSERT_TRUE(c);
  ASSERT_FALSE(c->tell(std::string("go")));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mine->mutex);
    return mine->texts.size() == 1;
  }));
  EXPECT_EQ(mine->texts[0], "back");
}

TEST_F(Remote_TwoNodes, ARequestFromAnActorToARemoteActorRunsItsContinuationOnTheActor) {
  struct requester final : akt::actor {
    akt::pid to;
    std::shared_ptr<journal> mine;
    requester(akt::pid t, std::shared_ptr<journal> m) : to(std::move(t)), mine(std::move(m)) {}
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<std::string>()) {
        ctx.request<ping>(to, ping{9}, 5s, [m = mine](akt::receive_context&, akt::result<ping> r) {
          m->add(r ? r->n : -1);
        });
      }
    }
  };
  auto mine = std::make_shared<journal>();
  auto r = a.sys.spawn<requester>("requester", target, mine);
  ASSERT_TRUE(r);
  ASSERT_FALSE(r->tell(std::string("go")));
  ASSERT_TRUE(eventually([&] { return mine->ping_list().size() == 1; }));
  EXPECT_EQ(mine->ping_list()[0], 10);
}

TEST_F(Remote_TwoNodes, APidSentInsideAMessageAsItsAddressIsUsableOnTheReceivingNode) {
  // b looks a's actor up from the address a sent it.
  auto mine = std::make_shared<journal>();
  auto local = a.sys.spawn<echo>("local-echo", mine);
  ASSERT_TRUE(local);
  const std::string addr = a.sys.address_of(*local);
  auto back = b.sys.lookup(addr);
  ASSERT_TRUE(back) << back.error().message();
  auto r = back->ask<ping>(ping{1}, 5s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->n, 2);
}

TEST_F(Remote_TwoNodes, PeersReportMessagesBytesAndFrames) {
  for (int i = 0; i < 100; ++i) ASSERT_FALSE(target.tell(ping{i}));
  ASSERT_TRUE(eventually([&] { return j->received.load() == 100; }));
  // The sender counts a strand write when its completion runs on a's I/O thread, which may be
  // after b handled every message: wait for the counters, do not read them once.
  ASSERT_TRUE(eventually([&] {
    auto peers = a.sys.peers();
    return peers.size() == 1 && peers[0].frames_out >= 100u;
  }));
  auto peers = a.sys.peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].address, b.sys.address());
  EXPECT_TRUE(peers[0].connected);
  EXPECT_GE(peers[0].messages_out, 100u);
  EXPECT_GT(peers[0].bytes_out, 100u * 16);
  EXPECT_GE(peers[0].frames_out, 100u);
  EXPECT_GE(peers[0].writes, 1u);
  ASSERT_TRUE(eventually([&] {
    for (const auto& p : b.sys.peers())
      if (p.messages_in >= 100) return true;
    return false;
  }));
}

TEST(Remote_Three, ThreeNodesTalkPairwise) {
  node a{"alpha"}, b{"beta"}, c{"gamma"};
  ASSERT_TRUE(a.started && b.started && c.started);
  auto jb = std::make_shared<journal>();
  auto jc = std::make_shared<journal>();
  ASSERT_TRUE(b.sys.spawn<echo>("echo", jb));
  ASSERT_TRUE(c.sys.spawn<echo>("echo", jc));
  for (node* from : {&a, &b, &c}) {
    for (node* to : {&a, &b, &c}) {
      if (from == to || to == &a) continue;
      auto p = from->sys.lookup(to->where(), "echo");
      ASSERT_TRUE(p) << p.error().message();
      auto r = p->ask<ping>(ping{100}, 5s);
      ASSERT_TRUE(r) << r.error().message();
      EXPECT_EQ(r->n, 101);
    }
  }
}

}  // namespace

namespace {

// A message with a pid field, encoded with encode_pid / decode_pid.
struct introduce {
  static constexpr std::string_view akt_type_name = "akt.test.introduce";
  akt::pid who;
  std::string note;
};

void register_introduce() {
  static const bool done = [] {
    return !akt::remote::register_message<introduce>(
        [](const introduce& m, akt::remote::byte_writer& w) -> akt::error {
          if (akt::error e = akt::remote::encode_pid(w, m.who)) return e;
          w.put_string(m.note);
          return {};
        },
        [](akt::remote::byte_reader& r) -> akt::result<introduce> {
          auto who = akt::remote::decode_pid(r);
          if (!who) return who.error();
          std::string_view note;
          if (!r.get_string(note)) return akt::error(errc::decode_failed, "short introduce");
          return introduce{std::move(*who), std::string(note)};
        });
  }();
  (void)done;
}

// Tells whoever it is introduced to (or sent, as a bare pid) a greeting.
struct greeter final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (auto* i = ctx.get_if<introduce>()) {
      (void)ctx.tell(i->who, std::string("hello from greeter: " + i->note));
      ctx.reply(std::string("introduced"));
    } else if (auto* p = ctx.get_if<akt::pid>()) {
      auto r = std::string("bare pid");
      (void)ctx.tell(*p, r);
      ctx.reply(std::string("greeted"));
    }
  }
};

TEST(Remote_Pid, APidInsideAMessageIsUsableOnTheReceivingNodeAndAsAMessageByItself) {
  register_introduce();
  node a{"alpha"}, b{"beta"}, c{"gamma"};
  ASSERT_TRUE(a.started && b.started && c.started);
  ASSERT_TRUE(b.sys.spawn<greeter>("greeter"));
  auto greeter_pid = a.sys.lookup(b.where(), "greeter");
  ASSERT_TRUE(greeter_pid);
  auto mine = std::make_shared<journal>();
  auto local = a.sys.spawn<echo>("local", mine);  // on a: receives the greetings
  ASSERT_TRUE(local);
  auto r = greeter_pid->ask<std::string>(introduce{*local, "one"}, 5s);
  ASSERT_TRUE(r) << r.error().message();
  auto bare = greeter_pid->ask<std::string>(*local, 5s);
  ASSERT_TRUE(bare) << bare.error().message();
  // A third node's pid, forwarded: c's actor receives b's greeting.
  auto theirs = std::make_shared<journal>();
  ASSERT_TRUE(c.sys.spawn<echo>("theirs", theirs));
  auto on_c = a.sys.lookup(c.where(), "theirs");
  ASSERT_TRUE(on_c);
  ASSERT_TRUE(greeter_pid->ask<std::string>(introduce{*on_c, "three"}, 5s));
  ASSERT_TRUE(
      eventually([&] { return mine->received.load() == 2 && theirs->received.load() == 1; }));
  std::lock_guard<std::mutex> lock(mine->mutex);
  EXPECT_EQ(mine->texts[0], "hello from greeter: one");
  EXPECT_EQ(mine->texts[1], "bare pid");
  // encode_pid outside a send to another node is refused.
  akt::remote::byte_writer w;
  EXPECT_EQ(akt::remote::encode_pid(w, *local).code(), errc::invalid_argument);
}

}  // namespace
