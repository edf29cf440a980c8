// unbounded_mailbox: the default FIFO (lock-free MPSC list with a sentinel).
// GoAkt: TestUnboundedMailbox, TestUnboundedMailboxOneProducer, TestEmbeddedMailbox{FIFOOrder,
// ConcurrentProducers,ReleaseProtocol}.

#include <akt/mailbox/unbounded_mailbox.hpp>

#include <memory>

#include "mailbox/mailbox_test_support.hpp"

namespace akt::mbtest {
namespace {

TEST(UnboundedMailbox, EmptyDequeueReturnsNull) {
  unbounded_mailbox mb;
  EXPECT_TRUE(mb.empty());
  EXPECT_EQ(mb.size(), 0u);
  EXPECT_EQ(mb.dequeue(), nullptr);
  EXPECT_EQ(mb.dequeue(), nullptr);
  EXPECT_TRUE(mb.empty());
}

TEST(UnboundedMailbox, KeepsFifoOrder) {
  unbounded_mailbox mb;
  for (long i = 0; i < 100; ++i) ASSERT_FALSE(mb.enqueue(make(i)));
  EXPECT_EQ(drain_values(mb), iota_values(0, 100));
  EXPECT_TRUE(mb.empty());
  EXPECT_EQ(mb.dequeue(), nullptr);
}

TEST(UnboundedMailbox, InterleavedEnqueueDequeueKeepsOrder) {
  unbounded_mailbox mb;
  long next_in = 0;
  long next_out = 0;
  for (int round = 0; round < 50; ++round) {
    ASSERT_FALSE(mb.enqueue(make(next_in++)));
    ASSERT_FALSE(mb.enqueue(make(next_in++)));
    envelope* e = mb.dequeue();
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(value_of(e), next_out++);
  }
  for (long v : drain_values(mb)) EXPECT_EQ(v, next_out++);
  EXPECT_EQ(next_out, next_in);
}

TEST(UnboundedMailbox, EmptyAndSizeTrackEnqueueAndDequeue) {
  unbounded_mailbox mb;
  check_size_tracking(mb);
}

TEST(UnboundedMailbox, NeverRefuses) {
  unbounded_mailbox mb;
  for (long i = 0; i < 5000; ++i) ASSERT_FALSE(mb.enqueue(make(i))) << "refused message " << i;
  EXPECT_EQ(mb.size(), 5000u);
  EXPECT_EQ(drain_values(mb), iota_values(0, 5000));
}

TEST(UnboundedMailbox, DequeuedEnvelopeStaysValidUntilNextDequeueThenIsRecycled) {
  unbounded_mailbox mb;
  check_recycling_contract(mb);
}

// The dequeued envelope is the queue's sentinel: a later enqueue links through it, and only the
// next successful dequeue retires (recycles) it.
TEST(UnboundedMailbox, DequeuedEnvelopeIsTheSentinelUntilNextDequeue) {
  const std::uint32_t shard = take_shard();
  unbounded_mailbox mb;
  ctx* e1 = make(1, shard);
  ASSERT_FALSE(mb.enqueue(e1));
  envelope* d1 = mb.dequeue();
  ASSERT_EQ(d1, e1);

  // Drained: d1 is still the sentinel, so an empty dequeue cannot recycle it.
  EXPECT_EQ(mb.dequeue(), nullptr);
  EXPECT_EQ(shard_size(shard), 0u);
  EXPECT_EQ(value_of(d1), 1);

  ctx* e2 = make(2, shard);
  ASSERT_FALSE(mb.enqueue(e2));
  EXPECT_EQ(d1->next.load(std::memory_order_acquire), e2) << "the new message links to d1";
  EXPECT_EQ(value_of(d1), 1);

  envelope* d2 = mb.dequeue();
  ASSERT_EQ(d2, e2);
  EXPECT_EQ(shard_size(shard), 1u) << "the retired sentinel goes back to its home shard";
  EXPECT_EQ(value_of(d2), 2);
}

TEST(UnboundedMailbox, DestructorRecyclesWhatIsLeft) {
  check_destructor_recycles([] { return std::make_unique<unbounded_mailbox>(); });
}

TEST(UnboundedMailbox, DisposeRefusesFurtherEnqueues) {
  unbounded_mailbox mb;
  check_dispose(mb);
}

// mailbox.hpp: "once enqueue has returned ok, empty() is false until that envelope is dequeued".
// Producers are interrupted at random instructions (preemption injection) while the consumer,
// before every dequeue, notes the last enqueue each producer saw return and asks empty().
TEST(UnboundedMailbox, EmptyNeverHidesAReturnedEnqueue) {
  unbounded_mailbox mb;
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 5000;
  expect_clean(run_stress_under_preemption(mb, cfg, 4000ms));
}

// GoAkt TestUnboundedMailboxOneProducer: a concurrent consumer sees every message in order.
TEST(UnboundedMailbox, OneProducerConcurrentConsumer) {
  unbounded_mailbox mb;
  stress_config cfg;
  cfg.producers = 1;
  cfg.per_producer = 5000;
  expect_clean(run_stress(mb, cfg));
  EXPECT_TRUE(mb.empty());
}

TEST(UnboundedMailbox, ConcurrentProducersLoseNothingAndKeepPerProducerOrder) {
  unbounded_mailbox mb;
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 5000;
  cfg.check_visibility = false;  // EmptyNeverHidesAReturnedEnqueue checks that rule
  expect_clean(run_stress(mb, cfg));
  EXPECT_TRUE(mb.empty());
  EXPECT_EQ(mb.dequeue(), nullptr);
}

// The consumer may be a different thread each turn (the dispatcher hands the actor over).
TEST(UnboundedMailbox, ConsumerMayChangeThreadBetweenTurns) {
  unbounded_mailbox mb;
  stress_config cfg;
  cfg.producers = 3;
  cfg.per_producer = 3000;
  cfg.consumers = 2;
  cfg.check_visibility = false;  // EmptyNeverHidesAReturnedEnqueue checks that rule
  expect_clean(run_stress(mb, cfg));
}

}  // namespace
}  // namespace akt::mbtest
