// The timer service on a manual clock (system_config::manual_time): virtual time moves only in
// advance_time, due callbacks run on the advancing thread in deadline order, each at its tick.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "dispatch/timer_service.hpp"

namespace akt::detail {
namespace {

using namespace std::chrono_literals;
using clock_type = timer_service::clock;

TEST(ManualClock, AdvanceFiresDueTimersInDeadlineOrder) {
  timer_service ts(true);
  ts.start();  // starts no thread under manual time
  const auto t0 = ts.now();
  std::vector<int> order;  // written on this thread only: advance_time runs the callbacks here
  // Scheduled out of order, in the wheel (ms) and in the heap (beyond 4096 ticks).
  ts.schedule_at(t0 + 2h, [&] { order.push_back(4); });
  ts.schedule_at(t0 + 30ms, [&] { order.push_back(2); });
  ts.schedule_at(t0 + 10s, [&] { order.push_back(3); });
  ts.schedule_at(t0 + 5ms, [&] { order.push_back(1); });
  ts.schedule_at(t0 + 3h, [&] { order.push_back(5); });
  EXPECT_EQ(ts.advance_time(1h), 3u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(ts.now(), t0 + 1h);
  EXPECT_EQ(ts.advance_time(1h), 1u) << "a deadline exactly at the new time is due";
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(ts.now(), t0 + 2h);
  EXPECT_EQ(ts.pending(), 1u);
  ts.stop();
}

TEST(ManualClock, NothingFiresUntilTimeReachesTheDeadlineHoweverLongTheTestWaits) {
  timer_service ts(true);
  ts.start();
  const auto t0 = ts.now();
  bool ran = false;
  ts.schedule_after(10ms, [&] { ran = true; });
  // Real time passing moves nothing: the clock is the test's.
  const auto real = clock_type::now();
  while (clock_type::now() - real < 20ms) std::this_thread::yield();
  EXPECT_EQ(ts.now(), t0);
  EXPECT_EQ(ts.advance_time(9ms), 0u);
  EXPECT_FALSE(ran);
  EXPECT_EQ(ts.advance_time(1ms), 1u);
  EXPECT_TRUE(ran);
  EXPECT_EQ(ts.now(), t0 + 10ms);
}

TEST(ManualClock, ACallbackSeesItsDeadlineAndWhatItSchedulesFiresWithinTheSameAdvance) {
  timer_service ts(true);
  const auto t0 = ts.now();
  std::vector<clock_type::duration> seen;
  // A periodic timer the way the scheduler makes one: each fire arms the next from now().
  std::function<void()> tick = [&] {
    seen.push_back(ts.now() - t0);
    if (seen.size() < 10) ts.schedule_after(10ms, tick);
  };
  ts.schedule_after(10ms, tick);
  EXPECT_EQ(ts.advance_time(35ms), 3u);
  EXPECT_EQ(seen, (std::vector<clock_type::duration>{10ms, 20ms, 30ms}));
  EXPECT_EQ(ts.advance_time(1h), 7u);
  EXPECT_EQ(seen.back(), 100ms);
}

TEST(ManualClock, SettleRunsAfterEachBatchAndWhatItSchedulesAtNowRunsBeforeTimeMoves) {
  timer_service ts(true);
  const auto t0 = ts.now();
  std::vector<std::pair<int, clock_type::duration>> log;
  ts.schedule_after(5ms, [&] { log.emplace_back(1, ts.now() - t0); });
  ts.schedule_after(8ms, [&] { log.emplace_back(3, ts.now() - t0); });
  int settles = 0;
  bool scheduled = false;
  EXPECT_EQ(ts.advance_time(10ms,
                            [&] {
                              ++settles;
                              // What a turn handled in settle arms: due now, so it runs at 5 ms.
                              if (!scheduled) {
                                scheduled = true;
                                ts.schedule_after(0ms, [&] { log.emplace_back(2, ts.now() - t0); });
                              }
                            }),
            3u);
  using entry = std::pair<int, clock_type::duration>;
  EXPECT_EQ(log, (std::vector<entry>{{1, 5ms}, {2, 5ms}, {3, 8ms}}));
  EXPECT_EQ(settles, 3);
}

TEST(ManualClock, ACancelledTimerNeverFiresAndStopDropsThePendingOnes) {
  timer_service ts(true);
  bool cancelled_ran = false;
  bool dropped_ran = false;
  auto h = ts.schedule_after(10ms, [&] { cancelled_ran = true; });
  ts.schedule_after(1h, [&] { dropped_ran = true; });
  EXPECT_TRUE(ts.cancel(h));
  EXPECT_EQ(ts.advance_time(20ms), 0u);
  EXPECT_FALSE(cancelled_ran);
  ts.stop();
  EXPECT_EQ(ts.advance_time(2h), 0u) << "a stopped service runs nothing";
  EXPECT_FALSE(dropped_ran);
}

TEST(ManualClock, SchedulesFromOtherThreadsAreSeenByTheNextAdvance) {
  timer_service ts(true);
  std::atomic<int> ran{0};
  std::vector<std::thread> ts_threads;
  for (int t = 0; t < 4; ++t) {
    ts_threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i)
        ts.schedule_after(std::chrono::milliseconds(i % 50),
                          [&] { ran.fetch_add(1, std::memory_order_relaxed); });
    });
  }
  for (auto& t : ts_threads) t.join();
  EXPECT_EQ(ts.advance_time(49ms), 1000u);
  EXPECT_EQ(ran.load(), 1000);
}

TEST(ManualClock, WallClockFollowsTheVirtualTime) {
  timer_service ts(true);
  const auto w0 = ts.wall_now();
  (void)ts.advance_time(24h);
  EXPECT_EQ(ts.wall_now() - w0, 24h);
}

TEST(TimerService_RealTime, AdvanceTimeDoesNothingOutsideManualTime) {
  timer_service ts;
  EXPECT_FALSE(ts.manual_time());
  EXPECT_EQ(ts.advance_time(1h), 0u);
}

}  // namespace
}  // namespace akt::detail
