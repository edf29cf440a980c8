// testkit::probe: expectations on the messages an actor receives, on real threads and in the
// deterministic mode.

#include <gtest/gtest.h>

#include <akt/testkit/manual_time.hpp>
#include <akt/testkit/probe.hpp>

#include <stdexcept>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

using akt::testkit::probe;

struct ping {
  int n;
};
struct pong {
  int n;
};

// Answers ping{n} with pong{n + 1} to the sender; throws on boom.
class ponger : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (auto* p = ctx.get_if<ping>()) {
      ctx.reply(pong{p->n + 1});
    } else if (auto* b = ctx.get_if<boom>()) {
      throw std::runtime_error(b->why);
    }
  }
};

TEST(Testkit_Expect, ReturnsTheMessageOfTheExpectedType) {
  actor_system sys("probe-expect", {.workers = 2});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  ASSERT_TRUE(p.ref());
  EXPECT_FALSE(p.start_error());
  auto ponger_pid = sys.spawn<ponger>("ponger");
  ASSERT_TRUE(ponger_pid);
  ASSERT_FALSE(p.send(*ponger_pid, ping{1}));
  auto got = p.expect<pong>();
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(got->n, 2);
  EXPECT_EQ(p.last_sender(), *ponger_pid);
  EXPECT_EQ(p.pending(), 0u);
  // Move-only messages come out moved, in arrival order; akt::message takes anything.
  ASSERT_FALSE(p.ref().tell(std::make_unique<int>(5)));
  ASSERT_FALSE(p.ref().tell(std::string("second")));
  auto boxed = p.expect<std::unique_ptr<int>>();
  ASSERT_TRUE(boxed);
  EXPECT_EQ(**boxed, 5);
  auto any = p.expect<akt::message>();
  ASSERT_TRUE(any);
  EXPECT_TRUE(any->is<std::string>());
  EXPECT_TRUE(p.last_sender().empty()) << "told from outside any actor";
}

TEST(Testkit_Expect, WrongTypeIsReportedByNameAndConsumed) {
  actor_system sys("probe-wrong", {.workers = 1});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  ASSERT_FALSE(p.ref().tell(ping{1}));
  ASSERT_FALSE(p.ref().tell(pong{2}));
  auto r = p.expect<pong>();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::unexpected_reply);
  const std::string what = r.error().message();
  EXPECT_NE(what.find("ping"), std::string::npos) << what;
  EXPECT_NE(what.find("pong"), std::string::npos) << what;
  // The ping was consumed: the pong is next.
  EXPECT_EQ(p.expect<pong>().value_or(pong{0}).n, 2);
}

TEST(Testkit_Expect, WherePredicateMustHold) {
  actor_system sys("probe-where", {.workers = 1});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  ASSERT_FALSE(p.ref().tell(ping{3}));
  ASSERT_FALSE(p.ref().tell(ping{4}));
  auto odd = p.expect_where<ping>([](const ping& m) { return m.n % 2 == 1; });
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->n, 3);
  auto not_odd = p.expect_where<ping>([](const ping& m) { return m.n % 2 == 1; });
  ASSERT_FALSE(not_odd);
  EXPECT_EQ(not_odd.code(), errc::unexpected_reply);
  EXPECT_NE(not_odd.error().message().find("predicate"), std::string::npos);
}

TEST(Testkit_Expect, TimesOutWhenNothingComes) {
  actor_system sys("probe-timeout", {.workers = 1});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  const auto start = std::chrono::steady_clock::now();
  auto r = p.expect<ping>(std::chrono::milliseconds(50));
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::request_timeout);
  EXPECT_NE(r.error().message().find("ping"), std::string::npos) << r.error().message();
  EXPECT_GE(waited, std::chrono::milliseconds(50));
  EXPECT_LT(waited, std::chrono::seconds(3));
}

TEST(Testkit_Expect, NoMessageLeavesAnArrivalQueued) {
  actor_system sys("probe-quiet", {.workers = 1});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  EXPECT_TRUE(p.expect_no_message(std::chrono::milliseconds(20)));
  ASSERT_FALSE(p.ref().tell(ping{9}));
  EXPECT_FALSE(p.expect_no_message(std::chrono::seconds(3)));
  EXPECT_EQ(p.pending(), 1u);
  EXPECT_EQ(p.expect<ping>().value_or(ping{0}).n, 9);
  EXPECT_TRUE(p.expect_no_message(std::chrono::milliseconds(20)));
}

TEST(Testkit_Terminated, ActorStoppedByAFailure) {
  actor_system sys("probe-terminated", {.workers = 2});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  auto victim = sys.spawn<ponger>("victim");
  ASSERT_TRUE(victim);
  ASSERT_FALSE(p.watch(*victim));
  ASSERT_FALSE(victim->tell(boom{"fatal"}));  // the default supervisor stops it
  ASSERT_TRUE(p.expect_terminated(*victim));
  EXPECT_FALSE(victim->alive());
  // Watching an actor that has already stopped gives the notice at once.
  probe late(sys);
  auto r = late.expect_terminated(*victim);
  EXPECT_TRUE(r) << r.error().message();
  EXPECT_EQ(late.expect_terminated(pid()).code(), errc::empty_pid);
}

TEST(Testkit_Terminated, ReportsAnotherMessageComingFirst) {
  actor_system sys("probe-terminated-other", {.workers = 1});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  auto target = sys.spawn<ponger>("alive");
  ASSERT_TRUE(target);
  ASSERT_FALSE(p.ref().tell(ping{1}));
  auto r = p.expect_terminated(*target, std::chrono::seconds(3));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::unexpected_reply);
  EXPECT_EQ(p.expect_terminated(*target, std::chrono::milliseconds(20)).code(),
            errc::request_timeout)
      << "still alive";
}

TEST(Testkit_Watch, TheProbeIsAWatcherAndCanStopWatching) {
  actor_system sys("probe-watch", {.workers = 2});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  auto a = sys.spawn<ponger>("a");
  auto b = sys.spawn<ponger>("b");
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(p.watch(*a));
  ASSERT_FALSE(p.watch(*b));
  ASSERT_FALSE(p.unwatch(*b));
  // The probe handles its messages in order: once this comes back, it watches a and not b.
  ASSERT_FALSE(p.ref().tell(ping{0}));
  ASSERT_TRUE(p.expect<ping>());
  ASSERT_TRUE(sys.stop_actor(*b));
  ASSERT_TRUE(sys.stop_actor(*a));
  auto t = p.expect<akt::terminated>();
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ(t->actor, *a);
  EXPECT_TRUE(p.expect_no_message()) << "b was unwatched";
}

TEST(Testkit_Send, SendAndReplyRoundTrip) {
  // Asks the probe a question (as itself) when told to, and reports the answer to it.
  struct asker : akt::actor {
    void receive(akt::receive_context& ctx) override {
      if (auto* to = ctx.get_if<pid>()) {
        (void)ctx.tell(*to, std::string("question"));
        probe_ = *to;
      } else if (auto* answer = ctx.get_if<int>()) {
        (void)ctx.tell(probe_, pong{*answer});
      }
    }
    pid probe_;
  };
  actor_system sys("probe-reply", {.workers = 2});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  EXPECT_EQ(p.reply(1), errc::empty_pid) << "nobody to reply to yet";
  auto a = sys.spawn<asker>("asker");
  ASSERT_TRUE(a);
  ASSERT_FALSE(a->tell(p.ref()));
  auto q = p.expect<std::string>();
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_EQ(*q, "question");
  EXPECT_EQ(p.last_sender(), *a);
  ASSERT_FALSE(p.reply(42));
  auto answer = p.expect<pong>();
  ASSERT_TRUE(answer) << answer.error().message();
  EXPECT_EQ(answer->n, 42);
}

TEST(Testkit_Probe, NamesAreUniqueAndASpawnFailureIsReported) {
  actor_system idle("probe-not-started", {.workers = 1});
  actor_system sys("probe-names", {.workers = 1});
  ASSERT_TRUE(sys.start());
  probe a(sys), b(sys), named(sys, "my-probe");
  ASSERT_TRUE(a.ref() && b.ref() && named.ref());
  EXPECT_NE(a.ref().name(), b.ref().name());
  EXPECT_EQ(named.ref().name(), "my-probe");
  probe clash(sys, "my-probe");
  EXPECT_EQ(clash.start_error(), errc::actor_already_exists);
  probe none(idle);
  EXPECT_TRUE(none.ref().empty());
  EXPECT_EQ(none.start_error(), errc::system_not_started);
  EXPECT_EQ(none.expect<int>(std::chrono::milliseconds(1)).code(), errc::system_not_started);
  EXPECT_EQ(none.send(a.ref(), 1), errc::system_not_started);
}

TEST(Testkit_Probe, DestructorStopsTheProbeActor) {
  actor_system sys("probe-dtor", {.workers = 1});
  ASSERT_TRUE(sys.start());
  pid ref;
  {
    probe p(sys, "short-lived");
    ref = p.ref();
  }
  EXPECT_FALSE(ref.alive());
  EXPECT_FALSE(sys.find("short-lived")) << "the name is free again";
}

// ---- deterministic mode ----

struct serve {
  pid partner;
  pid report_to;
  int rounds;
};
struct join {
  pid report_to;
  int rounds;
};
struct ball {
  int hits;
};
struct rally_over {
  int hits;
};

// Two players hit a ball back and forth, logging each hit; no lock on the log, because in
// deterministic mode every turn runs on the test thread.
class player : public akt::actor {
 public:
  player(std::string tag, std::vector<std::string>* log) : tag_(std::move(tag)), log_(log) {}
  void receive(akt::receive_context& ctx) override {
    if (auto* s = ctx.get_if<serve>()) {
      report_to_ = s->report_to;
      rounds_ = s->rounds;
      (void)ctx.tell(s->partner, join{s->report_to, s->rounds});
      log_->push_back(tag_ + " serves");
      (void)ctx.tell(s->partner, ball{1});
    } else if (auto* j = ctx.get_if<join>()) {
      report_to_ = j->report_to;
      rounds_ = j->rounds;
    } else if (auto* b = ctx.get_if<ball>()) {
      log_->push_back(tag_ + " " + std::to_string(b->hits));
      if (b->hits == rounds_)
        (void)ctx.tell(report_to_, rally_over{b->hits});
      else
        (void)ctx.tell(ctx.sender(), ball{b->hits + 1});
    }
  }

 private:
  std::string tag_;
  std::vector<std::string>* log_;
  pid report_to_;
  int rounds_ = 0;
};

TEST(Testkit_Deterministic, ExpectRunsTheTurnsAndTheInterleavingIsExact) {
  std::vector<std::string> log;  // no lock: everything runs on this thread
  actor_system sys("probe-deterministic", {.deterministic = true});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  auto ping_pid = sys.spawn<player>("ping", std::string("ping"), &log);
  auto pong_pid = sys.spawn<player>("pong", std::string("pong"), &log);
  ASSERT_TRUE(ping_pid && pong_pid);
  // The join reaches pong before the ball (same sender, same receiver: in order).
  ASSERT_FALSE(ping_pid->tell(serve{*pong_pid, p.ref(), 5}));
  EXPECT_TRUE(log.empty()) << "nothing runs until the test does";
  auto over = p.expect<rally_over>();
  ASSERT_TRUE(over) << over.error().message();
  EXPECT_EQ(over->hits, 5);
  EXPECT_EQ(p.last_sender(), *pong_pid) << "pong took the fifth hit";
  EXPECT_EQ(log, (std::vector<std::string>{"ping serves", "pong 1", "ping 2", "pong 3", "ping 4",
                                           "pong 5"}));
  EXPECT_TRUE(p.expect_no_message(std::chrono::milliseconds(10)));
}

TEST(Testkit_Deterministic, TwoActorsReachTheProbeInReadyOrder) {
  // Forwards every int to the probe, tagged.
  struct relay : akt::actor {
    relay(pid to, int tag) : to_(std::move(to)), tag_(tag) {}
    void receive(akt::receive_context& ctx) override {
      if (auto* n = ctx.get_if<int>()) (void)ctx.tell(to_, ping{tag_ * 10 + *n});
    }
    pid to_;
    int tag_;
  };
  actor_system sys("probe-det-order", {.throughput = 1, .deterministic = true});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  auto a = sys.spawn<relay>("a", p.ref(), 1);
  auto b = sys.spawn<relay>("b", p.ref(), 2);
  ASSERT_TRUE(a && b);
  for (int i = 1; i <= 3; ++i) ASSERT_FALSE(a->tell(i));
  for (int i = 1; i <= 3; ++i) ASSERT_FALSE(b->tell(i));
  // One message per turn: a and b alternate, and the probe's turns interleave with theirs.
  std::vector<int> order;
  for (int i = 0; i < 6; ++i) {
    auto m = p.expect<ping>();
    ASSERT_TRUE(m) << m.error().message();
    order.push_back(m->n);
  }
  EXPECT_EQ(order, (std::vector<int>{11, 21, 12, 22, 13, 23}));
  EXPECT_TRUE(p.expect_no_message(std::chrono::milliseconds(10)));
  EXPECT_EQ(p.last_sender(), *b);
}

TEST(Testkit_Deterministic, TimeoutAndTerminatedDriveTheTurnsToo) {
  actor_system sys("probe-det-term", {.deterministic = true});
  ASSERT_TRUE(sys.start());
  probe p(sys);
  auto victim = sys.spawn<ponger>("victim");
  ASSERT_TRUE(victim);
  EXPECT_EQ(p.expect<ping>(std::chrono::milliseconds(20)).code(), errc::request_timeout);
  ASSERT_FALSE(p.send(*victim, ping{1}));
  EXPECT_EQ(p.expect<pong>().value_or(pong{0}).n, 2);
  ASSERT_FALSE(victim->tell(boom{"down"}));
  ASSERT_TRUE(p.expect_terminated(*victim));
  // A scheduled message comes from the timer thread; expect keeps polling until it is there.
  ASSERT_TRUE(sys.schedule_once(p.ref(), ping{7}, std::chrono::milliseconds(20)));
  EXPECT_EQ(p.expect<ping>().value_or(ping{0}).n, 7);
}

// ---- manual time ----

struct tick {};

// Counts ticks; each one also sends a copy onwards when `next` is set (an effect of an effect).
class tick_counter : public akt::actor {
 public:
  tick_counter(std::shared_ptr<std::atomic<int>> n, akt::pid next)
      : n_(std::move(n)), next_(std::move(next)) {}
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<tick>()) return;
    n_->fetch_add(1);
    if (next_) (void)next_.tell(tick{});
  }

 private:
  std::shared_ptr<std::atomic<int>> n_;
  akt::pid next_;
};

void advance_runs_a_schedule(bool deterministic) {
  akt::system_config cfg;
  cfg.manual_time = true;
  cfg.deterministic = deterministic;
  akt::actor_system sys("manual-time", cfg);
  ASSERT_TRUE(sys.start());
  auto first = std::make_shared<std::atomic<int>>(0);
  auto second = std::make_shared<std::atomic<int>>(0);
  auto b = sys.spawn<tick_counter>("b", second, akt::pid());
  ASSERT_TRUE(b);
  auto a = sys.spawn<tick_counter>("a", first, *b);
  ASSERT_TRUE(a);
  const auto t0 = akt::testkit::now(sys);
  ASSERT_TRUE(sys.schedule(*a, tick{}, std::chrono::minutes(10)));
  ASSERT_TRUE(akt::testkit::advance(sys, std::chrono::minutes(59)));
  // Five fires, and what each caused (a's tell to b) was handled before advance returned.
  EXPECT_EQ(first->load(), 5);
  EXPECT_EQ(second->load(), 5);
  EXPECT_EQ(akt::testkit::now(sys) - t0, std::chrono::minutes(59));
  ASSERT_TRUE(akt::testkit::advance(sys, std::chrono::minutes(1)));
  EXPECT_EQ(first->load(), 6);
  EXPECT_EQ(second->load(), 6);
  ASSERT_TRUE(sys.stop());
}

TEST(ManualTime, AdvanceFiresAScheduleAndReturnsOnceEverythingItCausedIsHandled) {
  advance_runs_a_schedule(false);
}

TEST(ManualTime, AdvanceWorksInTheDeterministicModeRunningTheTurnsOnTheTestThread) {
  advance_runs_a_schedule(true);
}

TEST(ManualTime, AdvanceNeedsASystemOnManualTime) {
  akt::actor_system sys("real-time");
  ASSERT_TRUE(sys.start());
  auto r = akt::testkit::advance(sys, std::chrono::seconds(1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), akt::errc::invalid_argument);
}

}  // namespace
}  // namespace akt::test
