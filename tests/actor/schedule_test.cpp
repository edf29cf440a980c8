// Scheduled messages: once, interval, cron; cancel, pause, resume, list; actor-owned schedules.

#include <gtest/gtest.h>

#include <akt/testkit/manual_time.hpp>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

struct tick {
  int n;
};

class ticker : public akt::actor {
 public:
  explicit ticker(std::atomic<int>* ticks) : ticks_(ticks) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<tick>()) ticks_->fetch_add(1);
    if (auto* d = ctx.get_if<std::chrono::milliseconds>()) {
      auto r = ctx.schedule(tick{0}, *d);  // owned by this actor
      ctx.reply(r ? r->id() : 0ull);
    }
  }

 private:
  std::atomic<int>* ticks_;
};

// One worker, timers on a virtual clock: akt::testkit::advance moves it by exact amounts and
// returns once every fire it caused has been handled, so counts can be asserted exactly.
system_config manual_clock() { return {.workers = 1, .manual_time = true}; }

TEST(Schedule_Once, FiresOnceAfterTheDelay) {
  std::atomic<int> ticks{0};
  actor_system sys("once", manual_clock());
  ASSERT_TRUE(sys.start());
  auto t = sys.spawn<ticker>("t", &ticks);
  ASSERT_TRUE(t);
  auto r = sys.schedule_once(*t, tick{1}, std::chrono::milliseconds(30));
  ASSERT_TRUE(r);
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(29)));
  EXPECT_EQ(ticks.load(), 0) << "fired before the delay";
  EXPECT_TRUE(r->active());
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(1)));
  EXPECT_EQ(ticks.load(), 1) << "not fired (and handled) at the delay";
  EXPECT_FALSE(r->active());
  ASSERT_TRUE(testkit::advance(sys, std::chrono::hours(1)));
  EXPECT_EQ(ticks.load(), 1) << "a one-shot fired again";
  EXPECT_FALSE(r->cancel());
  EXPECT_TRUE(sys.schedules().empty());
}

TEST(Schedule_Once, NonPositiveDelayFiresAtOnce) {
  std::atomic<int> ticks{0};
  actor_system sys("once-now", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto t = sys.spawn<ticker>("t", &ticks);
  ASSERT_TRUE(t);
  ASSERT_TRUE(sys.schedule_once(*t, tick{1}, -std::chrono::seconds(1)));
  EXPECT_TRUE(eventually([&] { return ticks.load() == 1; }, std::chrono::milliseconds(500)));
}

TEST(Schedule_Interval, FiresRepeatedlyUntilCancelled) {
  std::atomic<int> ticks{0};
  actor_system sys("interval", manual_clock());
  ASSERT_TRUE(sys.start());
  auto t = sys.spawn<ticker>("t", &ticks);
  ASSERT_TRUE(t);
  auto r = sys.schedule(*t, tick{0}, std::chrono::milliseconds(10));
  ASSERT_TRUE(r);
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(9)));
  EXPECT_EQ(ticks.load(), 0);
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(1)));
  EXPECT_EQ(ticks.load(), 1);
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(50)));
  EXPECT_EQ(ticks.load(), 6) << "one fire per 10 ms";
  ASSERT_EQ(sys.schedules().size(), 1u);
  EXPECT_EQ(sys.schedules()[0].fired, 6u);
  EXPECT_TRUE(r->cancel());
  EXPECT_FALSE(r->active());
  ASSERT_TRUE(testkit::advance(sys, std::chrono::hours(1)));
  EXPECT_EQ(ticks.load(), 6) << "fired after cancel";
  EXPECT_TRUE(sys.schedules().empty());
}

TEST(Schedule_Interval, PauseSkipsFiresAndResumeContinues) {
  std::atomic<int> ticks{0};
  actor_system sys("pause", manual_clock());
  ASSERT_TRUE(sys.start());
  auto t = sys.spawn<ticker>("t", &ticks);
  ASSERT_TRUE(t);
  auto r = sys.schedule(*t, tick{0}, std::chrono::milliseconds(10));
  ASSERT_TRUE(r);
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(15)));
  ASSERT_EQ(ticks.load(), 1);
  ASSERT_TRUE(r->pause());
  // Paused at 15 ms: the fires due at 20..80 ms are skipped.
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(70)));
  EXPECT_EQ(ticks.load(), 1) << "fired while paused";
  auto list = sys.schedules();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_TRUE(list[0].paused);
  EXPECT_EQ(list[0].kind, schedule_kind::interval);
  EXPECT_EQ(list[0].fired, 1u);
  ASSERT_TRUE(r->resume());
  // Resumed at 85 ms: the skipped ticks are not made up; the next one, due at 90 ms, fires.
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(4)));
  EXPECT_EQ(ticks.load(), 1);
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(1)));
  EXPECT_EQ(ticks.load(), 2);
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(30)));
  EXPECT_EQ(ticks.load(), 5) << "the period is kept after a resume";
  EXPECT_FALSE(sys.schedules()[0].paused);
  EXPECT_TRUE(r->cancel());
}

TEST(Schedule_Once, APausedOneShotFiresWhenResumed) {
  std::atomic<int> ticks{0};
  actor_system sys("pause-once", manual_clock());
  ASSERT_TRUE(sys.start());
  auto t = sys.spawn<ticker>("t", &ticks);
  ASSERT_TRUE(t);
  auto r = sys.schedule_once(*t, tick{1}, std::chrono::milliseconds(20));
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->pause());
  ASSERT_TRUE(testkit::advance(sys, std::chrono::milliseconds(60)));  // its time came, paused
  EXPECT_EQ(ticks.load(), 0);
  EXPECT_TRUE(r->active());
  ASSERT_TRUE(r->resume());
  ASSERT_TRUE(testkit::settle(sys));  // fires at once, without time moving
  EXPECT_EQ(ticks.load(), 1);
  EXPECT_FALSE(r->active());
  ASSERT_TRUE(testkit::advance(sys, std::chrono::hours(1)));
  EXPECT_EQ(ticks.load(), 1);
}

TEST(Schedule_Refusal, BadArgumentsAreRefused) {
  std::atomic<int> ticks{0};
  actor_system sys("refusals", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto t = sys.spawn<ticker>("t", &ticks);
  ASSERT_TRUE(t);
  EXPECT_EQ(sys.schedule(*t, tick{0}, std::chrono::seconds(0)).code(), errc::invalid_argument);
  EXPECT_EQ(sys.schedule(*t, std::make_unique<int>(1), std::chrono::seconds(1)).code(),
            errc::invalid_argument)
      << "a repeating schedule copies its message";
  EXPECT_EQ(sys.schedule_once(pid(), tick{0}, std::chrono::seconds(1)).code(), errc::empty_pid);
  auto bad = sys.schedule_with_cron(*t, tick{0}, "0 61 * * *");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.code(), errc::invalid_cron);
  EXPECT_NE(bad.error().message().find("position"), std::string::npos) << bad.error().message();
  auto bad_zone = sys.schedule_with_cron(*t, tick{0}, "* * * * *", "Mars/Olympus_Mons");
  EXPECT_EQ(bad_zone.code(), errc::invalid_time_zone);
}

TEST(Schedule_Cron, EverySecondFiresAndListsItsSpec) {
  std::atomic<int> ticks{0};
  actor_system sys("cron", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto t = sys.spawn<ticker>("t", &ticks);
  ASSERT_TRUE(t);
  auto r = sys.schedule_with_cron(*t, tick{0}, "* * * * * *", "Europe/Paris");  // 6 fields
  ASSERT_TRUE(r) << r.error().message();
  auto list = sys.schedules();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].kind, schedule_kind::cron);
  EXPECT_NE(list[0].spec.find("Europe/Paris"), std::string::npos);
  EXPECT_TRUE(eventually([&] { return ticks.load() >= 2; }, std::chrono::seconds(4)));
  EXPECT_TRUE(r->cancel());
}

TEST(Schedule_Owned, AnActorsOwnScheduleEndsWhenItStops) {
  std::atomic<int> ticks{0};
  actor_system sys("owned", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto t = sys.spawn<ticker>("t", &ticks);
  ASSERT_TRUE(t);
  auto id = t->ask<unsigned long long>(std::chrono::milliseconds(10), std::chrono::seconds(5));
  ASSERT_TRUE(id);
  EXPECT_NE(*id, 0u);
  ASSERT_TRUE(eventually([&] { return ticks.load() >= 2; }));
  ASSERT_TRUE(sys.stop_actor(*t));
  EXPECT_TRUE(eventually([&] { return sys.schedules().empty(); }));
}

TEST(Schedule_Dead, ARepeatingScheduleToAStoppedActorEnds) {
  std::atomic<int> ticks{0};
  actor_system sys("dead-target", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto t = sys.spawn<ticker>("t", &ticks);
  ASSERT_TRUE(t);
  auto r = sys.schedule(*t, tick{0}, std::chrono::milliseconds(10));
  ASSERT_TRUE(r);
  ASSERT_TRUE(sys.stop_actor(*t));
  EXPECT_TRUE(eventually([&] { return !r->active(); }));
}

// Holds a token in its constructor arguments, which the cell keeps for restarts: the token dies
// with the cell, and the cell holds the system's core.
class holder : public akt::actor {
 public:
  explicit holder(std::shared_ptr<int> token) : token_(std::move(token)) {}
  void receive(akt::receive_context&) override {}

 private:
  std::shared_ptr<int> token_;
};

TEST(Schedule_Stop, SchedulesArmedWhenTheSystemStopsEndAndKeepNothingAlive) {
  auto token = std::make_shared<int>(0);
  const std::weak_ptr<int> alive = token;
  {
    actor_system sys("armed-at-stop", {.workers = 1});
    ASSERT_TRUE(sys.start());
    auto a = sys.spawn<holder>("a", std::move(token));
    ASSERT_TRUE(a);
    // Due long after the stop: no fire finds the target gone, which is what ended them before.
    ASSERT_TRUE(sys.schedule(*a, tick{0}, std::chrono::hours(1)));
    ASSERT_TRUE(sys.schedule_with_cron(*a, tick{1}, "0 0 1 1 *"));
    ASSERT_EQ(sys.schedules().size(), 2u);
    ASSERT_TRUE(sys.stop());
    EXPECT_TRUE(sys.schedules().empty());
    auto late = sys.schedule(*a, tick{2}, std::chrono::hours(1));
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error().code(), errc::system_shutting_down);
  }
  // The system, the pid and the schedule_refs are gone: the cell must be too.
  EXPECT_TRUE(alive.expired()) << "the actor's cell, and with it the system's core, leaked";
}

}  // namespace
}  // namespace akt::test
