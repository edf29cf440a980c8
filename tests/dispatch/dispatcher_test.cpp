// Dispatcher and dispatch-state tests: the Idle/Scheduled/Processing protocol, the local run
// queue, parking and waking, fairness of the throughput budget, and shutdown.

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "dispatch/dispatcher.hpp"
#include "dispatch/local_run_queue.hpp"
#include "support/test_support.hpp"

namespace akt::detail {
namespace {

using namespace std::chrono_literals;

// A schedulable with a counter of pending work items instead of a mailbox. Producers call
// post(); turns consume up to the budget. It checks the single-owner invariant: two workers
// never run its turn at once.
class task final : public schedulable {
 public:
  explicit task(dispatcher* d) : schedulable(dispatch_state::idle), d_(d) {
    add_ref();  // the test owns the task; the count never reaches zero
  }

  void post(int n = 1) {
    pending_.fetch_add(n, std::memory_order_seq_cst);
    if (try_schedule(observe())) d_->schedule(this);
  }

  bool run_turn(unsigned budget) override {
    begin_turn();
    EXPECT_FALSE(in_turn_.exchange(true)) << "two workers ran the same turn";
    unsigned done = 0;
    for (;;) {
      while (done < budget && pending_.load(std::memory_order_acquire) > 0) {
        pending_.fetch_sub(1, std::memory_order_acq_rel);
        processed_.fetch_add(1, std::memory_order_relaxed);
        last_worker_.store(std::this_thread::get_id());
        ++done;
      }
      if (done >= budget) {
        in_turn_.store(false);
        yield_turn();
        yields_.fetch_add(1);
        return true;
      }
      in_turn_.store(false);
      if (!finish_turn([this] { return pending_.load(std::memory_order_seq_cst) > 0; })) {
        return false;
      }
      EXPECT_FALSE(in_turn_.exchange(true));
    }
  }

  long processed() const { return processed_.load(); }
  long yields() const { return yields_.load(); }
  std::thread::id last_worker() const { return last_worker_.load(); }

 protected:
  void destroy() noexcept override {}

 private:
  dispatcher* d_;
  std::atomic<long> pending_{0};
  std::atomic<long> processed_{0};
  std::atomic<long> yields_{0};
  std::atomic<bool> in_turn_{false};
  std::atomic<std::thread::id> last_worker_{};
};

TEST(DispatchState_Transitions, HappyPath) {
  dispatcher d({.workers = 1});
  task t(&d);
  EXPECT_EQ(t.state(), dispatch_state::idle);
  d.start();
  t.post();
  ASSERT_TRUE(test::eventually([&] { return t.processed() == 1; }));
  ASSERT_TRUE(test::eventually([&] { return t.state() == dispatch_state::idle; }));
  d.stop();
}

TEST(DispatchState_TrySchedule, OnlyOneProducerWinsIdleToScheduled) {
  // Not started: nobody consumes, so exactly one of the racing producers may win.
  task t(nullptr);
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int k = 0; k < 1000; ++k) {
        if (t.try_schedule(t.observe())) winners.fetch_add(1);
      }
    });
  }
  go.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(winners.load(), 1);
  EXPECT_EQ(t.state(), dispatch_state::scheduled);
  EXPECT_EQ(t.ref_count(), 2u);  // the test's reference and the winner's
}

TEST(DispatchState_TrySchedule, RefusesWhenNotObservedIdle) {
  task t(nullptr);
  EXPECT_FALSE(t.try_schedule(dispatch_state::processing));
  EXPECT_FALSE(t.try_schedule(dispatch_state::scheduled));
  EXPECT_EQ(t.state(), dispatch_state::idle);
}

TEST(LocalRunQueue_Ops, PushPopFifo) {
  local_run_queue q;
  std::vector<std::unique_ptr<task>> tasks;
  for (int i = 0; i < 10; ++i) tasks.push_back(std::make_unique<task>(nullptr));
  for (auto& t : tasks) ASSERT_TRUE(q.push(t.get()));
  EXPECT_EQ(q.size(), 10u);
  for (auto& t : tasks) EXPECT_EQ(q.pop(), t.get());
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

TEST(LocalRunQueue_Ops, FullRefusesPush) {
  local_run_queue q;
  task t(nullptr);
  for (std::uint32_t i = 0; i < local_run_queue::capacity; ++i) ASSERT_TRUE(q.push(&t));
  EXPECT_FALSE(q.push(&t));
  EXPECT_NE(q.pop(), nullptr);
  EXPECT_TRUE(q.push(&t));
}

TEST(LocalRunQueue_Steal, StealHalfTakesOldestHalf) {
  local_run_queue victim;
  local_run_queue thief;
  std::vector<std::unique_ptr<task>> tasks;
  for (int i = 0; i < 10; ++i) {
    tasks.push_back(std::make_unique<task>(nullptr));
    ASSERT_TRUE(victim.push(tasks.back().get()));
  }
  schedulable* first = victim.steal_half(thief);
  EXPECT_EQ(first, tasks[0].get());
  EXPECT_EQ(thief.size(), 4u);  // five taken: one returned, four queued with the thief
  EXPECT_EQ(victim.size(), 5u);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(thief.pop(), tasks[i].get());
  for (int i = 5; i < 10; ++i) EXPECT_EQ(victim.pop(), tasks[i].get());
}

TEST(LocalRunQueue_Steal, EmptyVictimGivesNothing) {
  local_run_queue victim;
  local_run_queue thief;
  EXPECT_EQ(victim.steal_half(thief), nullptr);
}

TEST(LocalRunQueue_Steal, ConcurrentOwnerAndThievesTakeEachItemOnce) {
  constexpr int k_items = 20000;
  std::vector<std::unique_ptr<task>> tasks;
  for (int i = 0; i < 64; ++i) tasks.push_back(std::make_unique<task>(nullptr));
  local_run_queue victim;
  std::atomic<int> taken{0};
  std::atomic<bool> done{false};
  std::vector<std::atomic<int>> seen(tasks.size());
  auto touch = [&](schedulable* s) {
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].get() == s) seen[i].fetch_add(1);
    }
    taken.fetch_add(1);
  };
  std::vector<std::thread> thieves;
  for (int t = 0; t < 2; ++t) {
    thieves.emplace_back([&] {
      local_run_queue mine;
      while (!done.load() || !victim.empty()) {
        if (schedulable* s = victim.steal_half(mine)) {
          touch(s);
          while (schedulable* more = mine.pop()) touch(more);
        }
      }
    });
  }
  // The owner pushes items (cycling through the tasks) and pops some itself.
  int pushed = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (pushed < k_items && std::chrono::steady_clock::now() < deadline) {
    if (victim.push(tasks[pushed % tasks.size()].get())) {
      ++pushed;
    } else if (schedulable* s = victim.pop()) {
      touch(s);
    }
    if (pushed % 3 == 0) {
      if (schedulable* s = victim.pop()) touch(s);
    }
  }
  done.store(true);
  for (auto& th : thieves) th.join();
  while (schedulable* s = victim.pop()) touch(s);
  EXPECT_EQ(pushed, k_items);
  EXPECT_EQ(taken.load(), pushed);
  long total = 0;
  for (auto& s : seen) total += s.load();
  EXPECT_EQ(total, pushed);
}

TEST(Dispatcher_Config, WorkerCountDefaultsToHardwareConcurrency) {
  dispatcher d({});
  EXPECT_EQ(d.worker_count(), std::max(1u, std::thread::hardware_concurrency()));
  dispatcher one({.workers = 1});
  EXPECT_EQ(one.worker_count(), 1u);
  EXPECT_EQ(one.throughput(), 32u);
}

TEST(Dispatcher_Lifecycle, StartStopIdempotent) {
  dispatcher d({.workers = 2});
  d.start();
  d.start();
  d.stop();
  d.stop();
}

TEST(Dispatcher_Schedule, ProcessesWorkFromOutside) {
  dispatcher d({.workers = 2});
  d.start();
  task t(&d);
  for (int i = 0; i < 1000; ++i) t.post();
  ASSERT_TRUE(test::eventually([&] { return t.processed() == 1000; }));
  d.stop();
}

TEST(Dispatcher_Budget, TurnYieldsAfterThroughputBudget) {
  dispatcher d({.workers = 1, .throughput = 8});
  task t(&d);
  t.post(100);  // queued before start: one scheduling, then turns of at most 8
  d.start();
  ASSERT_TRUE(test::eventually([&] { return t.processed() == 100; }));
  EXPECT_GE(t.yields(), 100 / 8 - 1);
  d.stop();
}

TEST(Dispatcher_Budget, AFloodedActorDoesNotStarveAnother) {
  // One worker: a task with a long backlog must yield so that a second task gets its turn
  // long before the backlog is done.
  dispatcher d({.workers = 1, .throughput = 4});
  task flooded(&d);
  task quiet(&d);
  flooded.post(200000);
  quiet.post(1);
  d.start();
  ASSERT_TRUE(test::eventually([&] { return quiet.processed() == 1; }));
  EXPECT_LT(flooded.processed(), 200000);
  ASSERT_TRUE(test::eventually([&] { return flooded.processed() == 200000; }));
  d.stop();
}

// Posts to other tasks from inside its turn (so they land on this worker's local queue), then
// blocks the worker until released.
class fan_out_blocker final : public schedulable {
 public:
  explicit fan_out_blocker(std::vector<std::unique_ptr<task>>* targets)
      : schedulable(dispatch_state::idle), targets_(targets) {
    add_ref();
  }
  bool run_turn(unsigned) override {
    begin_turn();
    for (auto& t : *targets_) t->post();
    posted_.store(true);
    while (!release_.load()) std::this_thread::sleep_for(100us);
    return finish_turn([] { return false; });
  }
  std::atomic<bool> posted_{false};
  std::atomic<bool> release_{false};

 protected:
  void destroy() noexcept override {}

 private:
  std::vector<std::unique_ptr<task>>* targets_;
};

TEST(Dispatcher_Steal, IdleWorkerStealsFromBusySibling) {
  dispatcher d({.workers = 2});
  d.start();
  std::vector<std::unique_ptr<task>> tasks;
  for (int i = 0; i < 50; ++i) tasks.push_back(std::make_unique<task>(&d));
  fan_out_blocker b(&tasks);
  if (b.try_schedule(b.observe())) d.schedule(&b);
  // The worker running b is stuck; the other one must take the tasks off its local queue.
  ASSERT_TRUE(test::eventually([&] {
    for (auto& t : tasks) {
      if (t->processed() != 1) return false;
    }
    return true;
  }));
  EXPECT_TRUE(b.posted_.load());
  EXPECT_GE(d.stats().steals, 1u);
  b.release_.store(true);
  d.stop();
}

TEST(Dispatcher_Park, ParkedWorkersWakeForNewWork) {
  dispatcher d({.workers = 2});
  d.start();
  ASSERT_TRUE(test::eventually([&] { return d.parked() == 2; }));
  task t(&d);
  t.post();
  ASSERT_TRUE(test::eventually([&] { return t.processed() == 1; }));
  ASSERT_TRUE(test::eventually([&] { return d.parked() == 2; }));
  t.post();
  ASSERT_TRUE(test::eventually([&] { return t.processed() == 2; }));
  EXPECT_GE(d.stats().parks, 2u);
  d.stop();
}

TEST(Dispatcher_Park, IdleSystemBurnsNoCpu) {
  dispatcher d({.workers = 2});
  d.start();
  ASSERT_TRUE(test::eventually([&] { return d.parked() == 2; }));
  auto cpu = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return std::chrono::microseconds(u.ru_utime.tv_sec * 1000000L + u.ru_utime.tv_usec +
                                     u.ru_stime.tv_sec * 1000000L + u.ru_stime.tv_usec);
  };
  const auto before = cpu();
  std::this_thread::sleep_for(300ms);
  const auto used = cpu() - before;
  // Parked workers sleep in the kernel: a few milliseconds of CPU at most over 300 ms.
  EXPECT_LT(used, 30ms) << "idle dispatcher used " << used.count() << " us of CPU";
  d.stop();
}

TEST(Dispatcher_NoLostWakeUp, ManyProducersManyTasks) {
  // Producers post to random tasks while workers park and wake; every post is processed.
  dispatcher d({.workers = 2, .spin_rounds = 1});  // park quickly: exercise the wake path
  d.start();
  std::vector<std::unique_ptr<task>> tasks;
  for (int i = 0; i < 16; ++i) tasks.push_back(std::make_unique<task>(&d));
  constexpr int k_producers = 4;
  constexpr int k_posts = 5000;
  std::vector<std::thread> producers;
  for (int p = 0; p < k_producers; ++p) {
    producers.emplace_back([&, p] {
      unsigned x = static_cast<unsigned>(p) * 2654435761u + 1;
      for (int i = 0; i < k_posts; ++i) {
        x = x * 1664525u + 1013904223u;
        tasks[x % tasks.size()]->post();
        if ((i & 255) == 0) std::this_thread::sleep_for(50us);  // let workers park
      }
    });
  }
  for (auto& th : producers) th.join();
  ASSERT_TRUE(test::eventually([&] {
    long total = 0;
    for (auto& t : tasks) total += t->processed();
    return total == long(k_producers) * k_posts;
  }));
  d.stop();
}

// Blocks the worker that runs it until released (a handler that does not return for a while).
class blocker final : public schedulable {
 public:
  blocker() : schedulable(dispatch_state::idle) { add_ref(); }
  bool run_turn(unsigned) override {
    begin_turn();
    running.store(true);
    release.wait(false);  // until the test releases it (store, then notify_all)
    running.store(false);
    return finish_turn([] { return false; });
  }
  std::atomic<bool> running{false};
  std::atomic<bool> release{false};

 protected:
  void destroy() noexcept override {}
};

TEST(Dispatcher_NoLostWakeUp, ASpinnerThatTakesOneOfTwoReadyObjectsWakesAParkedWorker) {
  // Producers skip the wake-up while a worker spins ("it will find it"). With one worker
  // spinning (it never gives up here) and the other parked, two objects made ready back to back
  // both go to the global queue unannounced; the spinner takes the first, which blocks it. The
  // second must still run: the spinner, leaving with work while more is ready, wakes the parked
  // worker. Without that it waited for a wake-up nobody sent (seen once in CI as a request whose
  // actor never ran while the only other worker was held).
  constexpr int k_rounds = 20;
  dispatcher d({.workers = 2, .spin_rounds = 1u << 30});
  // Declared after d: destroyed after it stopped (a worker may still touch an object just after
  // the end of its turn).
  std::vector<std::unique_ptr<blocker>> blockers;
  std::vector<std::unique_ptr<task>> tasks;
  for (int i = 0; i < k_rounds; ++i) {
    blockers.push_back(std::make_unique<blocker>());
    tasks.push_back(std::make_unique<task>(&d));
  }
  d.start();
  for (int round = 0; round < k_rounds; ++round) {
    ASSERT_TRUE(test::eventually([&] { return d.parked() == 1; })) << "round " << round;
    blocker& b = *blockers[round];
    task& t = *tasks[round];
    ASSERT_TRUE(b.try_schedule(b.observe()));
    d.schedule(&b);
    t.post();
    const bool ran = test::eventually([&] { return t.processed() == 1; });
    b.release.store(true);
    b.release.notify_all();
    ASSERT_TRUE(ran) << "round " << round << ": the second object never ran";
    ASSERT_TRUE(test::eventually([&] { return !b.running.load(); }));
  }
  d.stop();
}

TEST(Dispatcher_Stop, WorkAfterStopRunsInlineOnTheCaller) {
  dispatcher d({.workers = 1});
  d.start();
  d.stop();
  task t(&d);
  t.post(3);
  EXPECT_EQ(t.processed(), 3);
  EXPECT_EQ(t.last_worker(), std::this_thread::get_id());
  EXPECT_EQ(t.state(), dispatch_state::idle);
}

TEST(Dispatcher_Stop, QueuedWorkIsFinishedBeforeWorkersExit) {
  dispatcher d({.workers = 1});
  task t(&d);
  t.post(10000);
  d.start();
  d.stop();
  EXPECT_EQ(t.processed(), 10000);
}

}  // namespace
}  // namespace akt::detail
