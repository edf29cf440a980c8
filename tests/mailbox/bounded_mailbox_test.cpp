// bounded_mailbox: FIFO with an exact capacity; a full mailbox blocks a local producer outside the
// dispatcher, and refuses at once a producer on a worker thread or a message of remote origin.
// GoAkt: TestBoundedMailbox, TestRestartKeepsMailbox (the mailbox part).

#include <akt/core/thread.hpp>
#include <akt/mailbox/bounded_mailbox.hpp>

#include <memory>

#include "mailbox/mailbox_test_support.hpp"

namespace akt::mbtest {
namespace {

ctx* make_remote(long value) {
  ctx* e = make(value);
  detail::context_access::flags(*e) |= envelope::flag_remote_origin;
  return e;
}

// "A blocked producer stays blocked" is checked over a window of real time: the mailbox does not
// expose its waiting producers (the count is private), so nothing else tells a producer blocked
// in enqueue from one about to call it. Each window starts once the producer thread is about to
// call enqueue (not when the thread was created), and a correct mailbox never fails the check;
// a load that delays the producer only makes the window catch less.
constexpr auto k_still_blocked_window = 50ms;

// Enqueues e refusing to block: as a message of remote origin. Returns the outcome; a refused
// envelope is recycled.
error offer_remote(mailbox& mb, long value) {
  ctx* e = make_remote(value);
  const error err = mb.enqueue(e);
  if (err) akt::recycle(e);
  return err;
}

TEST(BoundedMailbox, EmptyDequeueReturnsNull) {
  bounded_mailbox mb(4);
  EXPECT_TRUE(mb.empty());
  EXPECT_EQ(mb.size(), 0u);
  EXPECT_EQ(mb.dequeue(), nullptr);
}

TEST(BoundedMailbox, KeepsFifoOrder) {
  bounded_mailbox mb(64);
  for (long i = 0; i < 64; ++i) ASSERT_FALSE(mb.enqueue(make(i)));
  EXPECT_EQ(drain_values(mb), iota_values(0, 64));
}

TEST(BoundedMailbox, KeepsFifoOrderAcrossRingWraparound) {
  bounded_mailbox mb(5);  // ring of 8 cells
  long next_in = 0;
  long next_out = 0;
  for (int round = 0; round < 40; ++round) {
    while (mb.size() < 5) ASSERT_FALSE(mb.enqueue(make(next_in++)));
    for (int i = 0; i < 3; ++i) ASSERT_EQ(value_of(mb.dequeue()), next_out++);
  }
  for (long v : drain_values(mb)) ASSERT_EQ(v, next_out++);
  EXPECT_EQ(next_out, next_in);
}

// GoAkt TestBoundedMailbox: 20 enqueues, Len 19 after one dequeue.
TEST(BoundedMailbox, EmptyAndSizeTrackEnqueueAndDequeue) {
  bounded_mailbox mb(20);
  check_size_tracking(mb);
}

TEST(BoundedMailbox, CapacityIsExact) {
  bounded_mailbox mb(5);
  EXPECT_EQ(mb.capacity(), 5u) << "not rounded up to a power of two";
  for (long i = 0; i < 5; ++i) ASSERT_FALSE(offer_remote(mb, i)) << "refused message " << i;
  EXPECT_EQ(mb.size(), 5u);
  EXPECT_EQ(offer_remote(mb, 5), errc::mailbox_full) << "a sixth message fit in capacity 5";
  EXPECT_EQ(mb.size(), 5u);
  // One dequeue makes room for exactly one.
  EXPECT_EQ(value_of(mb.dequeue()), 0);
  EXPECT_FALSE(offer_remote(mb, 6));
  EXPECT_EQ(offer_remote(mb, 7), errc::mailbox_full);
  EXPECT_EQ(drain_values(mb), (std::vector<long>{1, 2, 3, 4, 6}));
}

TEST(BoundedMailbox, RemoteOriginIsRefusedAtOnceWhenFull) {
  bounded_mailbox mb(2);  // blocks forever for a local producer
  ASSERT_FALSE(mb.enqueue(make(0)));
  ASSERT_FALSE(mb.enqueue(make(1)));
  ctx* e = make_remote(2);
  error err;
  const bool in_time = finishes_within([&] { err = mb.enqueue(e); }, 5s, [&] { mb.dispose(); });
  EXPECT_TRUE(in_time) << "a message of remote origin blocked on a full mailbox";
  EXPECT_EQ(err, errc::mailbox_full);
  if (err) akt::recycle(e);
  EXPECT_EQ(mb.size(), 2u);
}

TEST(BoundedMailbox, WorkerThreadProducerIsRefusedAtOnceWhenFull) {
  bounded_mailbox mb(2);
  ASSERT_FALSE(mb.enqueue(make(0)));
  ASSERT_FALSE(mb.enqueue(make(1)));
  ctx* e = make(2);
  error err;
  const bool in_time = finishes_within(
      [&] {
        int dummy_worker = 0;
        detail::current_worker = &dummy_worker;  // this thread now looks like a worker
        err = mb.enqueue(e);
        detail::current_worker = nullptr;
      },
      5s, [&] { mb.dispose(); });
  EXPECT_TRUE(in_time) << "a producer on a worker thread blocked on a full mailbox";
  EXPECT_EQ(err, errc::mailbox_full);
  if (err) akt::recycle(e);
}

TEST(BoundedMailbox, WorkerThreadProducerIsAcceptedWhileThereIsRoom) {
  bounded_mailbox mb(2);
  int dummy_worker = 0;
  detail::current_worker = &dummy_worker;
  const error err = mb.enqueue(make(0));
  detail::current_worker = nullptr;
  EXPECT_FALSE(err);
  EXPECT_FALSE(offer_remote(mb, 1)) << "remote origin is accepted while there is room";
  EXPECT_EQ(drain_values(mb), (std::vector<long>{0, 1}));
}

// A local producer outside the dispatcher blocks on a full mailbox and proceeds after a dequeue.
TEST(BoundedMailbox, LocalProducerBlocksWhenFullAndProceedsAfterDequeue) {
  bounded_mailbox mb(2);
  ASSERT_FALSE(mb.enqueue(make(0)));
  ASSERT_FALSE(mb.enqueue(make(1)));
  std::atomic<bool> returned{false};
  std::atomic<bool> entering{false};
  std::atomic<int> outcome{-1};
  std::thread producer([&] {
    ctx* e = make(2);
    entering.store(true, std::memory_order_release);
    const error err = mb.enqueue(e);
    if (err) akt::recycle(e);
    outcome.store(static_cast<int>(err.code()));
    returned.store(true, std::memory_order_release);
  });
  // It stays blocked while the mailbox is full.
  EXPECT_TRUE(eventually([&] { return entering.load(std::memory_order_acquire); }));
  std::this_thread::sleep_for(2 * k_still_blocked_window);
  EXPECT_FALSE(returned.load(std::memory_order_acquire)) << "enqueue did not block when full";
  EXPECT_EQ(mb.size(), 2u);
  // One dequeue frees a place: it proceeds.
  envelope* d = mb.dequeue();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(value_of(d), 0);
  const bool woke = eventually([&] { return returned.load(std::memory_order_acquire); });
  if (!woke) mb.dispose();  // do not leave the thread blocked
  producer.join();
  EXPECT_TRUE(woke) << "the blocked producer did not proceed after a dequeue";
  EXPECT_EQ(outcome.load(), static_cast<int>(errc::ok));
  EXPECT_EQ(drain_values(mb), (std::vector<long>{1, 2}));
}

TEST(BoundedMailbox, MaxBlockTimeoutReturnsMailboxFull) {
  bounded_mailbox mb(1, 60ms);
  ASSERT_FALSE(mb.enqueue(make(0)));
  ctx* e = make(1);
  error err;
  const auto start = std::chrono::steady_clock::now();
  const bool in_time = finishes_within([&] { err = mb.enqueue(e); }, 10s, [&] { mb.dispose(); });
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(in_time) << "max_block was not honoured";
  EXPECT_EQ(err, errc::mailbox_full);
  EXPECT_GE(waited, 50ms) << "it did not wait for space before refusing";
  if (err) akt::recycle(e);
  EXPECT_EQ(drain_values(mb), (std::vector<long>{0}));
}

TEST(BoundedMailbox, MaxBlockProducerProceedsWhenSpaceFreesInTime) {
  bounded_mailbox mb(1, 10s);
  ASSERT_FALSE(mb.enqueue(make(0)));
  std::atomic<bool> returned{false};
  std::atomic<bool> entering{false};
  error err;
  std::thread producer([&] {
    ctx* e = make(1);
    entering.store(true, std::memory_order_release);
    err = mb.enqueue(e);
    if (err) akt::recycle(e);
    returned.store(true, std::memory_order_release);
  });
  EXPECT_TRUE(eventually([&] { return entering.load(std::memory_order_acquire); }));
  std::this_thread::sleep_for(k_still_blocked_window);
  EXPECT_FALSE(returned.load(std::memory_order_acquire));
  ASSERT_NE(mb.dequeue(), nullptr);
  const bool woke = eventually([&] { return returned.load(std::memory_order_acquire); });
  if (!woke) mb.dispose();
  producer.join();
  EXPECT_TRUE(woke);
  EXPECT_FALSE(err);
  EXPECT_EQ(drain_values(mb), (std::vector<long>{1}));
}

TEST(BoundedMailbox, DisposeWakesBlockedProducerWithMailboxDisposed) {
  bounded_mailbox mb(1);
  ASSERT_FALSE(mb.enqueue(make(0)));
  std::atomic<bool> returned{false};
  std::atomic<bool> entering{false};
  error err;
  ctx* e = make(1);
  std::thread producer([&] {
    entering.store(true, std::memory_order_release);
    err = mb.enqueue(e);
    returned.store(true, std::memory_order_release);
  });
  EXPECT_TRUE(eventually([&] { return entering.load(std::memory_order_acquire); }));
  std::this_thread::sleep_for(k_still_blocked_window);
  EXPECT_FALSE(returned.load(std::memory_order_acquire));
  mb.dispose();
  const bool woke = eventually([&] { return returned.load(std::memory_order_acquire); });
  if (!woke) (void)mb.dequeue();  // last resort: free a place so the join cannot hang
  producer.join();
  EXPECT_TRUE(woke) << "dispose did not wake the blocked producer";
  EXPECT_EQ(err, errc::mailbox_disposed);
  if (err) akt::recycle(e);
  EXPECT_EQ(drain_values(mb), (std::vector<long>{0}));
}

TEST(BoundedMailbox, DisposeWakesEveryBlockedProducer) {
  bounded_mailbox mb(1);
  ASSERT_FALSE(mb.enqueue(make(0)));
  constexpr int k_producers = 3;
  std::atomic<int> returned{0};
  std::atomic<int> entering{0};
  std::atomic<int> disposed{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < k_producers; ++p) {
    producers.emplace_back([&] {
      ctx* e = make(1);
      entering.fetch_add(1);
      const error err = mb.enqueue(e);
      if (err == errc::mailbox_disposed) disposed.fetch_add(1);
      if (err) akt::recycle(e);
      returned.fetch_add(1);
    });
  }
  EXPECT_TRUE(eventually([&] { return entering.load() == k_producers; }));
  std::this_thread::sleep_for(k_still_blocked_window);
  EXPECT_EQ(returned.load(), 0);
  mb.dispose();
  const bool all = eventually([&] { return returned.load() == k_producers; });
  for (int i = 0; !all && i < k_producers; ++i) (void)mb.dequeue();
  for (auto& t : producers) t.join();
  EXPECT_TRUE(all);
  EXPECT_EQ(disposed.load(), k_producers);
}

TEST(BoundedMailbox, DisposeRefusesFurtherEnqueues) {
  bounded_mailbox mb(8);
  check_dispose(mb);
}

TEST(BoundedMailbox, DequeuedEnvelopeStaysValidUntilNextDequeueThenIsRecycled) {
  bounded_mailbox mb(8);
  check_recycling_contract(mb);
}

TEST(BoundedMailbox, DestructorRecyclesWhatIsLeft) {
  check_destructor_recycles([] { return std::make_unique<bounded_mailbox>(8); });
}

// Blocking producers on a small capacity: nothing lost, per-producer FIFO, and the occupancy the
// consumer can observe never exceeds the capacity.
TEST(BoundedMailbox, ConcurrentBlockingProducersLoseNothingAndNeverExceedCapacity) {
  bounded_mailbox mb(4);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 1500;
  cfg.capacity = 4;
  expect_clean(run_stress(mb, cfg));
  EXPECT_TRUE(mb.empty());
}

// Remote-origin producers (never block) racing for an exact capacity: every accepted message
// comes out, refusals are mailbox_full, and the capacity is never exceeded.
TEST(BoundedMailbox, ConcurrentNonBlockingProducersNeverExceedCapacity) {
  bounded_mailbox mb(5);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 2000;
  cfg.capacity = 5;
  cfg.retry_when_full = false;
  cfg.prepare = [](ctx& e, int, int) {
    detail::context_access::flags(e) |= envelope::flag_remote_origin;
  };
  const stress_result r = run_stress(mb, cfg);
  expect_clean(r, /*expect_all_accepted=*/false);
  EXPECT_GT(r.accepted, 0);
}

// Exactly `capacity` of many concurrent non-blocking offers to a full-able mailbox succeed when
// nobody dequeues (GoAkt TestGrainMailboxBounded_DoesNotOvershootCapacity_Concurrent).
TEST(BoundedMailbox, ConcurrentOffersWithoutConsumerAcceptExactlyCapacity) {
  constexpr std::size_t k_capacity = 64;
  bounded_mailbox mb(k_capacity);
  std::atomic<int> ok{0};
  std::atomic<int> full{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < 8; ++p) {
    producers.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int i = 0; i < 64; ++i) {
        const error err = offer_remote(mb, i);
        if (!err) ok.fetch_add(1);
        if (err == errc::mailbox_full) full.fetch_add(1);
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& t : producers) t.join();
  EXPECT_EQ(ok.load(), static_cast<int>(k_capacity));
  EXPECT_EQ(full.load(), 8 * 64 - static_cast<int>(k_capacity));
  EXPECT_EQ(mb.size(), k_capacity);
  EXPECT_EQ(drain_values(mb).size(), k_capacity);
}

// Producers interrupted at random instructions (between admission and the ring push, say):
// nothing lost, capacity kept, and empty() never hides a returned enqueue.
TEST(BoundedMailbox, EmptyNeverHidesAReturnedEnqueue) {
  bounded_mailbox mb(8);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 2000;
  cfg.capacity = 8;
  expect_clean(run_stress_under_preemption(mb, cfg, 1000ms));
}

TEST(BoundedMailbox, ConsumerMayChangeThreadBetweenTurns) {
  bounded_mailbox mb(16);
  stress_config cfg;
  cfg.producers = 3;
  cfg.per_producer = 2000;
  cfg.capacity = 16;
  cfg.consumers = 2;
  expect_clean(run_stress(mb, cfg));
}

}  // namespace
}  // namespace akt::mbtest
