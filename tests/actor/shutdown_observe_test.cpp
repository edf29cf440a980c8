// Coordinated shutdown hooks, the logger, per-actor and system figures, passivation.

#include <gtest/gtest.h>

#include <akt/testkit/manual_time.hpp>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

TEST(Shutdown_Hooks, RunInOrderWhileActorsStillRun) {
  recorder::shared s;
  std::vector<std::string> ran;
  std::mutex mu;
  actor_system sys("hooks", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  sys.add_shutdown_hook(
      "second",
      [&]() -> result<void> {
        std::lock_guard<std::mutex> lock(mu);
        ran.push_back("second");
        return {};
      },
      2);
  sys.add_shutdown_hook(
      "first",
      [&, target = *p]() -> result<void> {
        // Actors still run: a hook can still talk to them.
        auto r = target.ask<long>(echo{1}, std::chrono::seconds(5));
        std::lock_guard<std::mutex> lock(mu);
        ran.push_back(r ? "first" : "first-failed");
        return {};
      },
      1);
  ASSERT_TRUE(sys.stop());
  EXPECT_EQ(ran, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(s.post_stops.load(), 1);
}

TEST(Shutdown_Hooks, FailuresAndTimeoutsAreReportedNotWaitedFor) {
  auto release_flag = std::make_shared<std::atomic<bool>>(false);
  auto& release = *release_flag;
  actor_system sys("hooks-bad", {.workers = 1, .shutdown_timeout = std::chrono::milliseconds(200)});
  ASSERT_TRUE(sys.start());
  sys.add_shutdown_hook("broken", []() -> result<void> { return error(errc::unhandled, "nope"); });
  sys.add_shutdown_hook("stuck", [release_flag]() -> result<void> {
    while (!release_flag->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return {};
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto r = sys.stop();
  const auto took = std::chrono::steady_clock::now() - t0;
  release.store(true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::request_timeout);
  EXPECT_NE(r.error().message().find("broken"), std::string::npos);
  EXPECT_NE(r.error().message().find("stuck"), std::string::npos);
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(Shutdown_Stop, AHandlerThatNeverEndsIsLeftBehindAndReported) {
  // The flags live on the heap, shared with the actor: the handler outlives this test's stack.
  struct flags {
    std::atomic<bool> release{false};
    std::atomic<bool> entered{false};
    std::atomic<bool> finished{false};
  };
  auto f = std::make_shared<flags>();
  struct stuck : akt::actor {
    std::shared_ptr<flags> f;
    explicit stuck(std::shared_ptr<flags> x) : f(std::move(x)) {}
    void receive(akt::receive_context&) override {
      f->entered.store(true);
      while (!f->release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      f->finished.store(true);
    }
  };
  result<void> r;
  std::chrono::steady_clock::duration took{};
  {
    actor_system sys("left-behind",
                     {.workers = 2, .shutdown_timeout = std::chrono::milliseconds(150)});
    ASSERT_TRUE(sys.start());
    auto p = sys.spawn<stuck>("s", f);
    ASSERT_TRUE(p);
    ASSERT_FALSE(p->tell(1));
    ASSERT_TRUE(eventually([&] { return f->entered.load(); }));  // else the pill overtakes it
    const auto t0 = std::chrono::steady_clock::now();
    r = sys.stop();
    took = std::chrono::steady_clock::now() - t0;
  }  // the system object goes; the stuck worker keeps what it needs alive
  f->release.store(true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::request_timeout);
  EXPECT_NE(r.error().message().find("1 actors"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("dispatcher threads"), std::string::npos);
  EXPECT_LT(took, std::chrono::seconds(3)) << "stop waited for the stuck handler";
  EXPECT_TRUE(eventually([&] { return f->finished.load(); }));
}

class capture_logger : public akt::logger {
 public:
  void log(log_level level, std::string_view component, std::string_view text) override {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(std::string(to_string(level)) + " " + std::string(component) + " " +
                    std::string(text));
  }
  std::mutex mu;
  std::vector<std::string> lines;
};

TEST(Observability_Logger, FailuresAreLoggedThroughTheConfiguredLogger) {
  auto log = std::make_shared<capture_logger>();
  actor_system sys("logging", {.workers = 1, .logger = log});
  ASSERT_TRUE(sys.start());
  recorder::shared s;
  auto p = sys.spawn<recorder>("noisy", &s);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(boom{"oops"}));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(log->mu);
    return !log->lines.empty();
  }));
  std::lock_guard<std::mutex> lock(log->mu);
  EXPECT_NE(log->lines[0].find("warning noisy"), std::string::npos) << log->lines[0];
  EXPECT_NE(log->lines[0].find("oops"), std::string::npos);
  EXPECT_EQ(&sys.logger(), log.get());
}

TEST(Observability_Stats, PerActorAndSystemFigures) {
  recorder::shared s;
  actor_system sys(
      "figures", {.workers = 1, .default_supervisor = supervisor().otherwise(directive::restart)});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  const auto before = std::chrono::steady_clock::now();
  for (long i = 0; i < 10; ++i) ASSERT_FALSE(p->tell(add{i}));
  ASSERT_FALSE(p->tell(boom{"x"}));
  ASSERT_TRUE(p->ask<long>(echo{1}, std::chrono::seconds(5)));
  // The count is published when the turn ends, which may be just after the reply came back.
  EXPECT_TRUE(eventually([&] { return sys.stats(*p).processed == 12u; }));
  const actor_stats st = sys.stats(*p);
  EXPECT_EQ(st.processed, 12u);
  EXPECT_EQ(st.restarts, 1u);
  EXPECT_TRUE(st.alive);
  EXPECT_GE(st.last_active, before - std::chrono::milliseconds(1));
  const system_stats all = sys.stats();
  EXPECT_EQ(all.actors, 1u);
  EXPECT_GE(all.processed, 12u);
  EXPECT_EQ(sys.stats(pid()).processed, 0u);
}

TEST(Passivation, IdleActorStopsItself) {
  recorder::shared s;
  actor_system sys("passivate-idle", {.workers = 1});
  ASSERT_TRUE(sys.start());
  collector<actor_passivated, std::string> passivated(
      sys, [](const actor_passivated& e) { return std::string(e.actor.name()); });
  auto p = sys.spawn<recorder>(
      "idle", {.passivation = passivation::after_idle(std::chrono::milliseconds(50))}, &s);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(add{1}));
  ASSERT_EQ(passivated.wait_for(1), 1u);
  EXPECT_EQ(passivated.items()[0], "idle");
  EXPECT_FALSE(p->alive());
  EXPECT_EQ(s.post_stops.load(), 1);
}

TEST(Passivation, BusyActorIsNotPassivated) {
  recorder::shared s;
  actor_system sys("passivate-busy", {.workers = 1, .manual_time = true});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>(
      "busy", {.passivation = passivation::after_idle(std::chrono::milliseconds(80))}, &s);
  ASSERT_TRUE(p);
  // A message every 10 ms for 300 ms (virtual): it is never idle for 80 ms.
  for (int i = 0; i < 30; ++i) {
    ASSERT_FALSE(p->tell(add{1})) << "passivated while busy, at " << i * 10 << " ms";
    ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(10)));
  }
  EXPECT_TRUE(p->alive());
  EXPECT_EQ(s.count.load(), 30);
  EXPECT_EQ(s.post_stops.load(), 0);
  // The last message came at 290 ms: it passivates when 80 ms of quiet have passed, not before.
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(69)));
  EXPECT_TRUE(p->alive());
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(1)));
  EXPECT_TRUE(eventually([&] { return !p->alive() && s.post_stops.load() == 1; }));
}

TEST(Passivation, AfterMessageCount) {
  recorder::shared s;
  actor_system sys("passivate-count", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("counted", {.passivation = passivation::after_messages(3)}, &s);
  ASSERT_TRUE(p);
  for (long i = 0; i < 3; ++i) (void)p->tell(add{i});
  EXPECT_TRUE(eventually([&] { return !p->alive() && s.post_stops.load() == 1; }));
  EXPECT_EQ(s.count.load(), 3);
}

TEST(Passivation, LongLivedIsTheDefault) {
  recorder::shared s;
  actor_system sys("passivate-never", {.workers = 1, .manual_time = true});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("forever", {.passivation = passivation::never()}, &s);
  auto plain = sys.spawn<recorder>("plain", &s);  // no passivation option at all
  ASSERT_TRUE(p && plain);
  ASSERT_FALSE(p->tell(add{1}));
  ASSERT_FALSE(plain->tell(add{1}));
  ASSERT_TRUE(testkit::advance(sys, std::chrono::hours(24)));  // idle for a day
  EXPECT_EQ(s.count.load(), 2);
  EXPECT_TRUE(p->alive());
  EXPECT_TRUE(plain->alive());
  EXPECT_EQ(s.post_stops.load(), 0);
}

}  // namespace
}  // namespace akt::test

namespace akt::test {
namespace {

TEST(Deterministic_Mode, TurnsRunOnlyWhenTheTestRunsThemInReadyOrder) {
  struct logger_actor : akt::actor {
    std::vector<std::string>* log;
    std::string tag;
    logger_actor(std::vector<std::string>* l, std::string t) : log(l), tag(std::move(t)) {}
    void receive(akt::receive_context& ctx) override {
      if (auto* n = ctx.get_if<int>()) log->push_back(tag + std::to_string(*n));
    }
  };
  std::vector<std::string> log;  // no lock: everything runs on this thread
  actor_system sys("deterministic", {.throughput = 1, .deterministic = true});
  ASSERT_TRUE(sys.start());
  auto a = sys.spawn<logger_actor>("a", &log, std::string("a"));
  auto b = sys.spawn<logger_actor>("b", &log, std::string("b"));
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(a->tell(1));
  ASSERT_FALSE(a->tell(2));
  ASSERT_FALSE(b->tell(1));
  EXPECT_TRUE(log.empty()) << "nothing runs until the test says so";
  EXPECT_TRUE(sys.step());
  EXPECT_EQ(log, (std::vector<std::string>{"a1"}));
  EXPECT_GE(sys.run_until_idle(), 2u);  // a turn that spent its budget yields once more
  // With a budget of one message per turn, a and b alternate: a1, b1, a2.
  EXPECT_EQ(log, (std::vector<std::string>{"a1", "b1", "a2"}));
  EXPECT_FALSE(sys.step());
  // A blocking ask drives the turns itself.
  recorder::shared s;
  auto r = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(r);
  auto reply = r->ask<long>(echo{1}, std::chrono::seconds(5));
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(*reply, 2);
  EXPECT_TRUE(sys.stop());
  EXPECT_EQ(s.post_stops.load(), 1);
}

}  // namespace
}  // namespace akt::test
