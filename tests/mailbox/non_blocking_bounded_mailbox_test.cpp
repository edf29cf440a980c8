// non_blocking_bounded_mailbox: FIFO ring, capacity rounded up to a power of two (at least 2),
// never blocks, full -> mailbox_full.
// GoAkt: TestNonBlockingBoundedMailbox (capacity rounded up; FIFO; overflow; empty; enqueue after
// draining; concurrent producers single consumer), TestNextPowerOfTwo.

#include <akt/mailbox/non_blocking_bounded_mailbox.hpp>

#include <memory>

#include "mailbox/mailbox_test_support.hpp"

namespace akt::mbtest {
namespace {

TEST(NonBlockingBoundedMailbox, CapacityIsRoundedUpToAPowerOfTwo) {
  EXPECT_EQ(non_blocking_bounded_mailbox(20).capacity(), 32u);
  EXPECT_EQ(non_blocking_bounded_mailbox(32).capacity(), 32u);
  EXPECT_EQ(non_blocking_bounded_mailbox(33).capacity(), 64u);
  EXPECT_EQ(non_blocking_bounded_mailbox(3).capacity(), 4u);
  EXPECT_EQ(non_blocking_bounded_mailbox(2).capacity(), 2u);
  EXPECT_EQ(non_blocking_bounded_mailbox(1).capacity(), 2u) << "at least 2";
  EXPECT_EQ(non_blocking_bounded_mailbox(0).capacity(), 2u) << "at least 2";
}

TEST(NonBlockingBoundedMailbox, RoundedCapacityIsUsable) {
  non_blocking_bounded_mailbox mb(20);
  for (long i = 0; i < 32; ++i) ASSERT_FALSE(mb.enqueue(make(i))) << "refused message " << i;
  EXPECT_EQ(mb.size(), 32u);
  EXPECT_EQ(drain_values(mb), iota_values(0, 32));
}

TEST(NonBlockingBoundedMailbox, EmptyDequeueReturnsNull) {
  non_blocking_bounded_mailbox mb(8);
  EXPECT_TRUE(mb.empty());
  EXPECT_EQ(mb.size(), 0u);
  EXPECT_EQ(mb.dequeue(), nullptr);
}

TEST(NonBlockingBoundedMailbox, KeepsFifoOrder) {
  non_blocking_bounded_mailbox mb(128);
  for (long i = 0; i < 100; ++i) ASSERT_FALSE(mb.enqueue(make(i)));
  EXPECT_EQ(drain_values(mb), iota_values(0, 100));
}

TEST(NonBlockingBoundedMailbox, EmptyAndSizeTrackEnqueueAndDequeue) {
  non_blocking_bounded_mailbox mb(32);
  check_size_tracking(mb);
}

TEST(NonBlockingBoundedMailbox, OverflowReturnsMailboxFullWithoutBlocking) {
  non_blocking_bounded_mailbox mb(4);
  for (long i = 0; i < 4; ++i) ASSERT_FALSE(mb.enqueue(make(i)));
  ctx* e = make(4);
  error err;
  const bool in_time = finishes_within([&] { err = mb.enqueue(e); }, 5s, [&] { mb.dispose(); });
  EXPECT_TRUE(in_time) << "enqueue blocked on a full mailbox";
  EXPECT_EQ(err, errc::mailbox_full);
  if (err) {
    EXPECT_EQ(value_of(e), 4) << "a refused envelope stays the caller's, untouched";
    akt::recycle(e);
  }
  EXPECT_EQ(mb.size(), 4u);
  EXPECT_EQ(drain_values(mb), iota_values(0, 4)) << "the overflow disturbed queued messages";
}

TEST(NonBlockingBoundedMailbox, EnqueueAfterDrainingWorks) {
  non_blocking_bounded_mailbox mb(4);
  long next_in = 0;
  long next_out = 0;
  for (int lap = 0; lap < 10; ++lap) {
    for (int i = 0; i < 4; ++i) ASSERT_FALSE(mb.enqueue(make(next_in++)));
    ctx* extra = make(-5);
    ASSERT_EQ(mb.enqueue(extra), errc::mailbox_full);
    akt::recycle(extra);
    for (long v : drain_values(mb)) ASSERT_EQ(v, next_out++);
    ASSERT_TRUE(mb.empty());
  }
  // Partly full laps: the ring position wraps with messages queued.
  for (int lap = 0; lap < 20; ++lap) {
    ASSERT_FALSE(mb.enqueue(make(next_in++)));
    ASSERT_FALSE(mb.enqueue(make(next_in++)));
    ASSERT_FALSE(mb.enqueue(make(next_in++)));
    ASSERT_EQ(value_of(mb.dequeue()), next_out++);
    ASSERT_EQ(value_of(mb.dequeue()), next_out++);
    ASSERT_EQ(value_of(mb.dequeue()), next_out++);
  }
  EXPECT_EQ(next_in, next_out);
}

TEST(NonBlockingBoundedMailbox, DequeuedEnvelopeStaysValidUntilNextDequeueThenIsRecycled) {
  non_blocking_bounded_mailbox mb(8);
  check_recycling_contract(mb);
}

TEST(NonBlockingBoundedMailbox, DestructorRecyclesWhatIsLeft) {
  check_destructor_recycles([] { return std::make_unique<non_blocking_bounded_mailbox>(8); });
}

TEST(NonBlockingBoundedMailbox, DisposeRefusesFurtherEnqueues) {
  non_blocking_bounded_mailbox mb(8);
  check_dispose(mb);
}

// Small capacity, concurrent producers that drop on overflow: every attempt is either accepted
// or refused with mailbox_full, every accepted message is dequeued once, in producer order.
TEST(NonBlockingBoundedMailbox, ConcurrentProducersOnSmallCapacityAccountForEveryMessage) {
  non_blocking_bounded_mailbox mb(8);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 3000;
  cfg.retry_when_full = false;
  cfg.capacity = 8;
  const stress_result r = run_stress(mb, cfg);
  expect_clean(r, /*expect_all_accepted=*/false);
  EXPECT_GT(r.accepted, 0);
  EXPECT_EQ(r.accepted + r.refused_full, r.attempted);
}

TEST(NonBlockingBoundedMailbox, ConcurrentProducersThatRetryLoseNothing) {
  non_blocking_bounded_mailbox mb(16);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 3000;
  cfg.capacity = 16;
  expect_clean(run_stress(mb, cfg));
}

// Producers interrupted at random instructions (between claiming a cell and publishing it, say):
// nothing lost, and empty() never hides a returned enqueue.
TEST(NonBlockingBoundedMailbox, EmptyNeverHidesAReturnedEnqueue) {
  non_blocking_bounded_mailbox mb(16);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 3000;
  cfg.capacity = 16;
  expect_clean(run_stress_under_preemption(mb, cfg, 1000ms));
}

TEST(NonBlockingBoundedMailbox, ConsumerMayChangeThreadBetweenTurns) {
  non_blocking_bounded_mailbox mb(64);
  stress_config cfg;
  cfg.producers = 3;
  cfg.per_producer = 2000;
  cfg.consumers = 2;
  expect_clean(run_stress(mb, cfg));
}

}  // namespace
}  // namespace akt::mbtest
