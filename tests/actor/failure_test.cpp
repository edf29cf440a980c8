// Handler failures and shutdown accounting: nothing vanishes, workers survive.

#include <gtest/gtest.h>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

TEST(Failure_Exception, WorkerSurvivesActorStopsEventPublished) {
  recorder::shared s;
  recorder::shared other;
  actor_system sys("boom", {.workers = 1});
  ASSERT_TRUE(sys.start());
  collector<actor_failed, std::string> failures(
      sys, [](const actor_failed& f) { return std::string(f.actor.name()) + ":" + f.what; });
  auto dls = dead_letters(sys);
  auto p = sys.spawn<recorder>("fragile", &s);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(boom{"kaput"}));
  // Queued behind the failure (a dead letter when the actor stops), or refused as dead when the
  // failure already stopped it (a dead letter at once): a test thread descheduled between the
  // two tells sees the second. Either way it is not lost.
  const akt::error second = p->tell(add{1});
  EXPECT_TRUE(!second || second == akt::errc::dead) << second.message();
  ASSERT_EQ(failures.wait_for(1), 1u);
  EXPECT_EQ(failures.items()[0], "fragile:kaput");
  ASSERT_TRUE(eventually([&] { return !p->alive() && s.post_stops.load() == 1; }));
  // The single worker still runs other actors.
  auto q = sys.spawn<recorder>("sturdy", &other);
  ASSERT_TRUE(q);
  ASSERT_FALSE(q->tell(add{5}));
  EXPECT_TRUE(eventually([&] { return other.total.load() == 5; }));
  EXPECT_GE(dls.wait_for(1), 1u);
}

TEST(Failure_Exception, AskerGetsHandlerFailedNamingTheException) {
  recorder::shared s;
  actor_system sys("boom-ask", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("fragile", &s);
  ASSERT_TRUE(p);
  auto r = p->ask(boom{"disk on fire"}, std::chrono::seconds(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::handler_failed);
  EXPECT_NE(r.error().message().find("disk on fire"), std::string::npos);
}

TEST(Failure_Exception, NonStdExceptionIsCaughtToo) {
  actor_system sys("boom-int", {.workers = 1});
  ASSERT_TRUE(sys.start());
  struct thrower : akt::actor {
    void receive(akt::receive_context&) override { throw 42; }
  };
  auto p = sys.spawn<thrower>("t");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->ask(1, std::chrono::seconds(5)).code(), errc::handler_failed);
  EXPECT_TRUE(eventually([&] { return !p->alive(); }));
}

TEST(Shutdown_Accounting, EveryQueuedMessageIsHandledOrDeadLettered) {
  // Producers flood several slow actors; the system stops mid-stream. Every message that tell
  // accepted is either handled or published as a dead letter; every refused one is a dead
  // letter too. Nothing vanishes.
  std::atomic<long> handled{0};
  std::atomic<long> dead{0};
  std::atomic<long> accepted{0};
  std::atomic<long> refused{0};
  struct slowish : akt::actor {
    std::atomic<long>* handled;
    explicit slowish(std::atomic<long>* h) : handled(h) {}
    void receive(akt::receive_context&) override {
      handled->fetch_add(1);
      if (handled->load() % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  };
  {
    actor_system sys("drain", {.workers = 2});
    ASSERT_TRUE(sys.start());
    auto sub = sys.events().subscribe<dead_letter>([&](const dead_letter&) { dead.fetch_add(1); });
    std::vector<pid> actors;
    for (int i = 0; i < 4; ++i) {
      auto p = sys.spawn<slowish>("s" + std::to_string(i), &handled);
      ASSERT_TRUE(p);
      actors.push_back(*p);
    }
    std::atomic<bool> go{true};
    std::vector<std::thread> producers;
    for (int t = 0; t < 3; ++t) {
      producers.emplace_back([&, t] {
        long i = 0;
        while (go.load() && i < 200000) {
          if (actors[(t + i) % actors.size()].tell(i))
            refused.fetch_add(1);
          else
            accepted.fetch_add(1);
          ++i;
        }
      });
    }
    // Stop mid-stream: once the producers are well under way (not after a fixed time, which a
    // loaded machine may spend before they even start).
    EXPECT_TRUE(eventually([&] { return accepted.load() >= 1000; }));
    ASSERT_TRUE(sys.stop());
    go.store(false);
    for (auto& th : producers) th.join();
    // Sends after the stop were refused and dead-lettered synchronously.
  }
  EXPECT_GT(accepted.load(), 0);
  EXPECT_EQ(handled.load() + dead.load(), accepted.load() + refused.load())
      << "handled " << handled.load() << " dead " << dead.load() << " accepted " << accepted.load()
      << " refused " << refused.load();
}

TEST(Shutdown_Accounting, TellsAfterStopAreRefusedWithShuttingDown) {
  recorder::shared s;
  std::atomic<long> dead{0};
  actor_system sys("after-stop", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<recorder>("r", &s);
  ASSERT_TRUE(p);
  auto sub = sys.events().subscribe<dead_letter>([&](const dead_letter& d) {
    if (d.reason == errc::system_shutting_down) dead.fetch_add(1);
  });
  ASSERT_TRUE(sys.stop());
  EXPECT_EQ(p->tell(add{1}), errc::system_shutting_down);
  EXPECT_EQ(dead.load(), 1);
}

TEST(Shutdown_Stop, StopFromAWorkerIsRefused) {
  std::atomic<int> code{-1};
  actor_system sys("stop-worker", {.workers = 1});
  ASSERT_TRUE(sys.start());
  struct stopper : akt::actor {
    std::atomic<int>* out;
    explicit stopper(std::atomic<int>* o) : out(o) {}
    void receive(akt::receive_context& ctx) override {
      out->store(static_cast<int>(ctx.system().stop().code()));
    }
  };
  auto p = sys.spawn<stopper>("s", &code);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(1));
  ASSERT_TRUE(eventually([&] { return code.load() != -1; }));
  EXPECT_EQ(code.load(), static_cast<int>(errc::blocking_on_worker));
  EXPECT_TRUE(sys.running());
}

}  // namespace
}  // namespace akt::test
