// unbounded_fair_mailbox: one FIFO sub-queue per sender, served round-robin.
// GoAkt: TestUnboundedFairMailbox{NoStarvation,EnqueueActivatesSender,
// FinalizeSenderRequeuesWithPending,FinalizeSenderRescuesLateArrival,ProcessesMultipleSenders,
// PreservesPerSenderOrdering,ConcurrentSenderCreation,EnqueueHandlesLoadOrStoreRace,
// DequeueHandlesDrainedSender}.
//
// Senders are fake addresses (see mailbox_test_support.hpp): every envelope is cleared of its
// sender right after it is dequeued, and every mailbox is drained by a fair_drain_guard before it
// is destroyed.

#include <akt/mailbox/unbounded_fair_mailbox.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "mailbox/mailbox_test_support.hpp"

namespace akt::mbtest {
namespace {

constexpr std::size_t k_a = 1;
constexpr std::size_t k_b = 2;
constexpr std::size_t k_c = 3;

// Dequeues until null, clearing senders; returns the long payloads.
std::vector<long> drain_fair(unbounded_fair_mailbox& mb) {
  std::vector<long> out;
  while (envelope* e = dequeue_clearing(mb)) out.push_back(value_of(e));
  return out;
}

TEST(UnboundedFairMailbox, EmptyDequeueReturnsNull) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  EXPECT_TRUE(mb.empty());
  EXPECT_EQ(mb.size(), 0u);
  EXPECT_EQ(mb.dequeue(), nullptr);
  EXPECT_EQ(mb.senders(), 0u);
}

TEST(UnboundedFairMailbox, EnqueueActivatesSender) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  ASSERT_FALSE(mb.enqueue(make_from(k_a, 7)));
  EXPECT_FALSE(mb.empty());
  EXPECT_EQ(mb.size(), 1u);
  envelope* e = dequeue_clearing(mb);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(value_of(e), 7);
  EXPECT_TRUE(mb.empty());
  EXPECT_EQ(dequeue_clearing(mb), nullptr);
}

// GoAkt NoStarvation: a chatty sender does not push a quiet one to the back.
TEST(UnboundedFairMailbox, RoundRobinAcrossSenders) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  for (long i = 0; i < 10; ++i) ASSERT_FALSE(mb.enqueue(make_from(k_a, 100 + i)));
  ASSERT_FALSE(mb.enqueue(make_from(k_b, 200)));
  ASSERT_FALSE(mb.enqueue(make_from(k_b, 201)));
  EXPECT_EQ(mb.size(), 12u);
  // A, B, A, B, then the rest of A.
  EXPECT_EQ(drain_fair(mb),
            (std::vector<long>{100, 200, 101, 201, 102, 103, 104, 105, 106, 107, 108, 109}));
  EXPECT_TRUE(mb.empty());
}

TEST(UnboundedFairMailbox, ThreeSendersTakeTurns) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  for (long i = 0; i < 3; ++i) ASSERT_FALSE(mb.enqueue(make_from(k_a, 100 + i)));
  for (long i = 0; i < 3; ++i) ASSERT_FALSE(mb.enqueue(make_from(k_b, 200 + i)));
  for (long i = 0; i < 3; ++i) ASSERT_FALSE(mb.enqueue(make_from(k_c, 300 + i)));
  EXPECT_EQ(drain_fair(mb), (std::vector<long>{100, 200, 300, 101, 201, 301, 102, 202, 302}));
  EXPECT_EQ(mb.senders(), 3u);
}

TEST(UnboundedFairMailbox, PreservesPerSenderOrdering) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  // Interleave four senders irregularly; each sender's messages must come out in its order.
  for (long i = 0; i < 200; ++i) {
    const std::size_t sender = 10 + static_cast<std::size_t>((i * 7) % 4);
    ASSERT_FALSE(mb.enqueue(make_from(sender, static_cast<long>(sender) * 1000 + i)));
  }
  std::map<long, long> last;
  long count = 0;
  while (envelope* e = dequeue_clearing(mb)) {
    const long v = value_of(e);
    const long sender = v / 1000;
    auto it = last.find(sender);
    if (it != last.end()) {
      EXPECT_GT(v, it->second) << "sender " << sender << " out of order";
    }
    last[sender] = v;
    ++count;
  }
  EXPECT_EQ(count, 200);
  EXPECT_EQ(mb.senders(), 4u);
}

TEST(UnboundedFairMailbox, MessagesWithoutSenderShareOneSubQueue) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  for (long i = 0; i < 3; ++i) ASSERT_FALSE(mb.enqueue(make(i)));  // no sender
  for (long i = 0; i < 3; ++i) ASSERT_FALSE(mb.enqueue(make_from(k_c, 300 + i)));
  // One sub-queue for all sender-less messages, served in turn with C.
  EXPECT_EQ(drain_fair(mb), (std::vector<long>{0, 300, 1, 301, 2, 302}));
  EXPECT_EQ(mb.senders(), 1u) << "sender-less messages are not a sender";
}

TEST(UnboundedFairMailbox, SendersCountsDistinctSenders) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  for (int round = 0; round < 3; ++round) {
    for (std::size_t s = 0; s < 5; ++s) ASSERT_FALSE(mb.enqueue(make_from(s + 20, round)));
  }
  EXPECT_EQ(mb.senders(), 5u);
  EXPECT_EQ(drain_fair(mb).size(), 15u);
  // A sender seen before is still known after its sub-queue ran dry.
  ASSERT_FALSE(mb.enqueue(make_from(22, 9)));
  EXPECT_EQ(mb.senders(), 5u);
}

// GoAkt FinalizeSenderRescuesLateArrival / DequeueHandlesDrainedSender: a sender whose sub-queue
// ran dry is served again when it sends again.
TEST(UnboundedFairMailbox, DrainedSenderIsServedAgainWhenItSendsAgain) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  ASSERT_FALSE(mb.enqueue(make_from(k_a, 1)));
  ASSERT_FALSE(mb.enqueue(make_from(k_b, 2)));
  EXPECT_EQ(value_of(dequeue_clearing(mb)), 1);  // A is now dry
  ASSERT_FALSE(mb.enqueue(make_from(k_a, 3)));
  ASSERT_FALSE(mb.enqueue(make_from(k_a, 4)));
  EXPECT_EQ(drain_fair(mb), (std::vector<long>{2, 3, 4}));
  ASSERT_FALSE(mb.enqueue(make_from(k_a, 5)));
  EXPECT_EQ(drain_fair(mb), (std::vector<long>{5}));
  EXPECT_TRUE(mb.empty());
}

// Many senders: the sender table (16 slots at first) grows several times. Every sender keeps its
// sub-queue (one per sender), and the round-robin order survives the growth.
TEST(UnboundedFairMailbox, ManySendersGrowTheTable) {
  constexpr std::size_t k_senders = 300;
  constexpr long k_rounds = 3;
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  for (long r = 0; r < k_rounds; ++r) {
    for (std::size_t s = 0; s < k_senders; ++s) {
      ASSERT_FALSE(mb.enqueue(make_from(100 + s, static_cast<long>(s) * 10 + r)));
    }
    EXPECT_EQ(mb.senders(), k_senders);
  }
  EXPECT_EQ(mb.size(), k_senders * k_rounds);
  // Every sender became active in sender order during round 0, so service is round by round.
  std::vector<long> expected;
  for (long r = 0; r < k_rounds; ++r) {
    for (std::size_t s = 0; s < k_senders; ++s) expected.push_back(static_cast<long>(s) * 10 + r);
  }
  EXPECT_EQ(drain_fair(mb), expected);
  // Lookups still find existing senders (in whichever table they live).
  for (std::size_t s = 0; s < k_senders; s += 37) ASSERT_FALSE(mb.enqueue(make_from(100 + s, 1)));
  EXPECT_EQ(mb.senders(), k_senders);
}

TEST(UnboundedFairMailbox, EmptyAndSizeTrackEnqueueAndDequeue) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  check_size_tracking(mb);  // sender-less messages
}

TEST(UnboundedFairMailbox, DisposeRefusesFurtherEnqueues) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  check_dispose(mb);
  ctx* e = make_from(k_a, 1);
  EXPECT_EQ(mb.enqueue(e), errc::mailbox_disposed);
  clear_sender(e);
  akt::recycle(e);
}

TEST(UnboundedFairMailbox, DequeuedEnvelopeStaysValidUntilNextDequeueThenIsRecycled) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  check_recycling_contract(mb);  // one sub-queue (no sender)
}

TEST(UnboundedFairMailbox, SameSenderNextDequeueRecyclesPreviousEnvelope) {
  const std::uint32_t shard = take_shard();
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  ctx* a1 = make_from(k_a, 1, shard);
  ctx* a2 = make_from(k_a, 2, shard);
  ASSERT_FALSE(mb.enqueue(a1));
  ASSERT_FALSE(mb.enqueue(a2));
  ASSERT_EQ(dequeue_clearing(mb), a1);
  EXPECT_EQ(shard_size(shard), 0u);
  EXPECT_EQ(value_of(a1), 1);
  ASSERT_EQ(dequeue_clearing(mb), a2);
  EXPECT_EQ(shard_size(shard), 1u);
  EXPECT_EQ(value_of(a2), 2);
}

// mailbox.hpp: "a dequeued envelope stays valid, and owned by the mailbox, until the next
// dequeue or dispose; the mailbox then recycles it". Here the next dequeue serves another sender.
TEST(UnboundedFairMailbox, NextDequeueFromAnotherSenderRecyclesPreviousEnvelope) {
  const std::uint32_t shard = take_shard();
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  ctx* a1 = make_from(k_a, 1, shard);
  ctx* b1 = make_from(k_b, 2, shard);
  ASSERT_FALSE(mb.enqueue(a1));
  ASSERT_FALSE(mb.enqueue(b1));
  ASSERT_EQ(dequeue_clearing(mb), a1);
  EXPECT_EQ(value_of(a1), 1);
  ASSERT_EQ(dequeue_clearing(mb), b1);
  EXPECT_EQ(value_of(b1), 2);
  EXPECT_EQ(shard_size(shard), 1u)
      << "a1 was not recycled by the next dequeue: it stays in A's sub-queue as its sentinel "
         "until A's next message is dequeued (or the mailbox is destroyed)";
}

TEST(UnboundedFairMailbox, DestructorRecyclesWhatIsLeft) {
  const std::uint32_t shard = take_shard();
  {
    unbounded_fair_mailbox mb;
    // Sender-less messages (a fake sender cannot stay queued until the destructor).
    for (long i = 0; i < 4; ++i) ASSERT_FALSE(mb.enqueue(make(i, shard)));
    ASSERT_EQ(value_of(mb.dequeue()), 0);
    EXPECT_EQ(shard_size(shard), 0u);
  }
  EXPECT_EQ(shard_size(shard), 4u);
}

TEST(UnboundedFairMailbox, DestructorRecyclesEverySubQueueSentinel) {
  const std::uint32_t shard = take_shard();
  {
    unbounded_fair_mailbox mb;
    fair_drain_guard guard(mb);
    for (std::size_t s = 0; s < 5; ++s) ASSERT_FALSE(mb.enqueue(make_from(30 + s, 1, shard)));
  }  // the guard drains (clearing senders), the destructor recycles each sub-queue's sentinel
  EXPECT_EQ(shard_size(shard), 5u);
}

// Concurrent producers, each with its own senders; the consumer runs concurrently.
TEST(UnboundedFairMailbox, ConcurrentProducersLoseNothingAndKeepPerSenderOrder) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 4000;
  // Producer p sends as sender p (one sender per producer): per-producer FIFO is per-sender FIFO.
  cfg.prepare = [](ctx& e, int p, int) { set_fake_sender(&e, 40 + static_cast<std::size_t>(p)); };
  cfg.on_dequeued = [](envelope& e) { clear_sender(&e); };
  expect_clean(run_stress(mb, cfg));
  EXPECT_EQ(mb.senders(), 4u);
}

// Concurrent sender creation: every producer introduces many new senders while others do the
// same and the consumer runs; each producer's messages stay in order (they are sent as a
// sequence of distinct senders, each FIFO), and every sender gets exactly one sub-queue.
TEST(UnboundedFairMailbox, ConcurrentSenderCreation) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 2000;
  cfg.order = order_check::none;  // round-robin reorders across a producer's senders
  constexpr std::size_t k_per_producer_senders = 100;
  cfg.prepare = [](ctx& e, int p, int s) {
    set_fake_sender(&e, 1000 + static_cast<std::size_t>(p) * k_per_producer_senders +
                            static_cast<std::size_t>(s) % k_per_producer_senders);
  };
  cfg.on_dequeued = [](envelope& e) { clear_sender(&e); };
  expect_clean(run_stress(mb, cfg));
  EXPECT_EQ(mb.senders(), 4 * k_per_producer_senders);
}

// GoAkt EnqueueHandlesLoadOrStoreRace: producers racing to create the same senders must end up
// with one sub-queue per sender, so per-sender FIFO holds for each producer's messages. The
// producers run in lockstep over the same 200 new senders (the table grows past 8, 16, 32, 64
// and 128 used slots meanwhile), interrupted at random instructions; repeated for a while.
TEST(UnboundedFairMailbox, ConcurrentFirstUseOfTheSameSenderCreatesOneSubQueue) {
  constexpr std::size_t k_senders = 200;
  constexpr int k_producers = 4;
  const auto until = std::chrono::steady_clock::now() + 1000ms;
  int attempt = 0;
  do {
    ++attempt;
    unbounded_fair_mailbox mb;
    fair_drain_guard guard(mb);
    preempter interrupts;
    std::atomic<int> ready{0};
    std::vector<std::thread> producers;
    for (int p = 0; p < k_producers; ++p) {
      producers.emplace_back([&, p] {
        interrupts.enter();
        ready.fetch_add(1);
        while (ready.load() < k_producers) std::this_thread::yield();
        for (std::size_t s = 0; s < k_senders; ++s) {
          ctx* e = make_tagged(p, static_cast<int>(s), 0, static_cast<std::uint32_t>(p));
          set_fake_sender(e, 2000 + s);
          if (mb.enqueue(e)) {
            ADD_FAILURE() << "enqueue refused";
            clear_sender(e);
            akt::recycle(e);
          }
        }
        interrupts.leave();
      });
    }
    interrupts.start();
    for (auto& t : producers) t.join();
    interrupts.stop();
    ASSERT_EQ(mb.senders(), k_senders)
        << "a sender got more than one sub-queue (attempt " << attempt << ")";
    // One sub-queue per sender, activated in first-use order: each round serves every sender
    // once, so a round never holds two messages of one sender.
    std::vector<int> per_sender(k_senders, 0);
    std::size_t served = 0;
    while (envelope* e = dequeue_clearing(mb)) {
      const tagged* t = tag_of(e);
      ASSERT_NE(t, nullptr);
      ++per_sender[static_cast<std::size_t>(t->seq)];
      ++served;
      if (served % k_senders == 0) {
        for (std::size_t s = 0; s < k_senders; ++s) {
          ASSERT_EQ(per_sender[s], static_cast<int>(served / k_senders))
              << "sender " << s << " not served once per round (attempt " << attempt << ")";
        }
      }
    }
    ASSERT_EQ(served, k_producers * k_senders);
  } while (std::chrono::steady_clock::now() < until);
  RecordProperty("attempts", attempt);
}

// The same race, aimed at the moment the first sender table fills up: the table holds 7 senders,
// and two threads (the test thread and a helper) send the first message of the same 8th sender at
// once -- the insertion that makes the table half full. A thread that saw the 8th key's slot
// still free and then sees the table half full must not create a second sub-queue for that key
// in the next table. Repeated many times.
TEST(UnboundedFairMailbox, RacingFirstUseOfASenderAsTheTableFillsCreatesOneSubQueue) {
  constexpr std::size_t k_before = 7;  // the initial table has 16 slots, half full at 8
  const auto until = std::chrono::steady_clock::now() + 1000ms;
  std::atomic<int> generation{0};
  std::atomic<int> finished{0};
  std::atomic<bool> quit{false};
  std::unique_ptr<unbounded_fair_mailbox> mb;
  std::size_t key = 0;  // the contested sender of the current round (written before the round)
  auto send = [&](int who) {
    ctx* e = make_from(key, who, static_cast<std::uint32_t>(who));
    if (mb->enqueue(e)) {
      clear_sender(e);
      akt::recycle(e);
    }
  };
  std::thread helper([&] {
    int seen = 0;
    for (;;) {
      int g;
      for (int spins = 1; (g = generation.load(std::memory_order_acquire)) == seen; ++spins) {
        if (quit.load(std::memory_order_acquire)) return;
        if (spins % 64 == 0) std::this_thread::yield();  // spin hot, but let the test run
      }
      seen = g;
      send(1);
      finished.store(g, std::memory_order_release);
    }
  });
  int rounds = 0;
  int duplicated = 0;
  std::size_t worst = 0;
  while (std::chrono::steady_clock::now() < until) {
    mb = std::make_unique<unbounded_fair_mailbox>();
    // Different addresses from round to round, so that the hash positions vary.
    const std::size_t base = 3000 + static_cast<std::size_t>(rounds % 100) * 9;
    for (std::size_t s = 0; s < k_before; ++s) ASSERT_FALSE(mb->enqueue(make_from(base + s, 0)));
    key = base + k_before;
    const int g = generation.fetch_add(1, std::memory_order_acq_rel) + 1;  // go
    send(0);
    for (int spins = 1; finished.load(std::memory_order_acquire) != g; ++spins) {
      if (spins % 64 == 0) std::this_thread::yield();
    }
    const std::size_t senders = mb->senders();
    if (senders != k_before + 1) {
      ++duplicated;
      worst = std::max(worst, senders);
    }
    while (dequeue_clearing(*mb) != nullptr) {
    }
    mb.reset();
    ++rounds;
  }
  quit.store(true, std::memory_order_release);
  helper.join();
  RecordProperty("rounds", rounds);
  EXPECT_EQ(duplicated, 0) << "in " << duplicated << " of " << rounds
                           << " rounds the contested sender got two sub-queues (senders() = "
                           << worst << ", expected " << k_before + 1 << ")";
}

TEST(UnboundedFairMailbox, ConsumerMayChangeThreadBetweenTurns) {
  unbounded_fair_mailbox mb;
  fair_drain_guard guard(mb);
  stress_config cfg;
  cfg.producers = 3;
  cfg.per_producer = 3000;
  cfg.consumers = 2;
  cfg.prepare = [](ctx& e, int p, int) { set_fake_sender(&e, 50 + static_cast<std::size_t>(p)); };
  cfg.on_dequeued = [](envelope& e) { clear_sender(&e); };
  expect_clean(run_stress(mb, cfg));
}

}  // namespace
}  // namespace akt::mbtest
