// Priority mailboxes: unbounded_priority, unbounded_stable_priority, bounded_priority and
// bounded_stable_priority. before(a, b) is true when a goes first.
// GoAkt: TestUnboundedPriorityMailBox, TestUnboundedStablePriorityMailbox,
// TestBoundedPriorityMailbox, TestBoundedStablePriorityMailbox, TestPriorityIntake.

#include <akt/mailbox/priority_mailbox.hpp>

#include <algorithm>
#include <memory>
#include <random>

#include "mailbox/mailbox_test_support.hpp"

namespace akt::mbtest {
namespace {

// Higher tagged::prio first.
bool higher_first(const message& a, const message& b) {
  return a.get_if<tagged>()->prio > b.get_if<tagged>()->prio;
}
// Lower tagged::prio first.
bool lower_first(const message& a, const message& b) {
  return a.get_if<tagged>()->prio < b.get_if<tagged>()->prio;
}
// Higher long first.
bool larger_long_first(const message& a, const message& b) {
  return *a.get_if<long>() > *b.get_if<long>();
}

enum class kind { unbounded, unbounded_stable, bounded, bounded_stable };

std::unique_ptr<priority_mailbox> make_box(kind k, priority_fn f, std::size_t capacity = 1024) {
  switch (k) {
    case kind::unbounded:
      return std::make_unique<unbounded_priority_mailbox>(std::move(f));
    case kind::unbounded_stable:
      return std::make_unique<unbounded_stable_priority_mailbox>(std::move(f));
    case kind::bounded:
      return std::make_unique<bounded_priority_mailbox>(capacity, std::move(f));
    case kind::bounded_stable:
      return std::make_unique<bounded_stable_priority_mailbox>(capacity, std::move(f));
  }
  return nullptr;
}

bool is_stable(kind k) { return k == kind::unbounded_stable || k == kind::bounded_stable; }
bool is_bounded(kind k) { return k == kind::bounded || k == kind::bounded_stable; }

std::string name_of(kind k) {
  switch (k) {
    case kind::unbounded:
      return "UnboundedPriority";
    case kind::unbounded_stable:
      return "UnboundedStablePriority";
    case kind::bounded:
      return "BoundedPriority";
    case kind::bounded_stable:
      return "BoundedStablePriority";
  }
  return "?";
}

// Dequeues until null; returns (prio, seq) pairs.
std::vector<std::pair<int, int>> drain_tags(mailbox& mb) {
  std::vector<std::pair<int, int>> out;
  while (envelope* e = mb.dequeue()) {
    const tagged* t = tag_of(e);
    out.emplace_back(t != nullptr ? t->prio : -1, t != nullptr ? t->seq : -1);
  }
  return out;
}

class PriorityMailbox : public ::testing::TestWithParam<kind> {};

TEST_P(PriorityMailbox, EmptyDequeueReturnsNull) {
  auto mb = make_box(GetParam(), higher_first);
  EXPECT_TRUE(mb->empty());
  EXPECT_EQ(mb->size(), 0u);
  EXPECT_EQ(mb->dequeue(), nullptr);
  EXPECT_EQ(mb->capacity(), is_bounded(GetParam()) ? 1024u : 0u);
}

TEST_P(PriorityMailbox, HighestPriorityFirst) {
  auto mb = make_box(GetParam(), higher_first);
  const std::vector<int> prios{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 0};
  for (std::size_t i = 0; i < prios.size(); ++i) {
    ASSERT_FALSE(mb->enqueue(make_tagged(0, static_cast<int>(i), prios[i])));
  }
  std::vector<int> got;
  for (const auto& [prio, seq] : drain_tags(*mb)) got.push_back(prio);
  std::vector<int> expected = prios;
  std::sort(expected.begin(), expected.end(), std::greater<>());
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(mb->empty());
}

TEST_P(PriorityMailbox, LowestPriorityFirstWithTheOppositeFunction) {
  auto mb = make_box(GetParam(), lower_first);
  const std::vector<int> prios{3, 1, 4, 1, 5, 9, 2, 6};
  for (std::size_t i = 0; i < prios.size(); ++i) {
    ASSERT_FALSE(mb->enqueue(make_tagged(0, static_cast<int>(i), prios[i])));
  }
  std::vector<int> got;
  for (const auto& [prio, seq] : drain_tags(*mb)) got.push_back(prio);
  EXPECT_EQ(got, (std::vector<int>{1, 1, 2, 3, 4, 5, 6, 9}));
}

// A message that arrives while others wait is ranked against them, not appended.
TEST_P(PriorityMailbox, LateHighPriorityMessageOvertakesWaitingOnes) {
  auto mb = make_box(GetParam(), larger_long_first);
  for (long v : {5L, 3L, 4L}) ASSERT_FALSE(mb->enqueue(make(v)));
  EXPECT_EQ(value_of(mb->dequeue()), 5);
  ASSERT_FALSE(mb->enqueue(make(10)));
  ASSERT_FALSE(mb->enqueue(make(1)));
  EXPECT_EQ(drain_values(*mb), (std::vector<long>{10, 4, 3, 1}));
}

TEST_P(PriorityMailbox, EmptyAndSizeTrackEnqueueAndDequeue) {
  auto mb = make_box(GetParam(), larger_long_first);
  // check_size_tracking enqueues 0..19; order is by priority, which it does not check.
  check_size_tracking(*mb);
}

TEST_P(PriorityMailbox, DequeuedEnvelopeStaysValidUntilNextDequeueThenIsRecycled) {
  // Decreasing values so that priority order is enqueue order (check_recycling_contract uses
  // 1, 2, 3 and expects them back in that order).
  auto mb = make_box(GetParam(), [](const message& a, const message& b) {
    return *a.get_if<long>() < *b.get_if<long>();
  });
  check_recycling_contract(*mb);
}

TEST_P(PriorityMailbox, DestructorRecyclesWhatIsLeft) {
  const kind k = GetParam();
  check_destructor_recycles([k] {
    return make_box(k, [](const message& a, const message& b) {
      return *a.get_if<long>() < *b.get_if<long>();
    });
  });
}

TEST_P(PriorityMailbox, DisposeRefusesFurtherEnqueues) {
  auto mb = make_box(GetParam(), [](const message& a, const message& b) {
    return *a.get_if<long>() < *b.get_if<long>();
  });
  check_dispose(*mb);
}

// Concurrent producers lose nothing; for the stable variants each producer's messages of equal
// priority stay in its order.
TEST_P(PriorityMailbox, ConcurrentProducersLoseNothing) {
  const kind k = GetParam();
  auto mb = make_box(k, higher_first, 64);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 3000;
  cfg.prio_levels = 4;
  cfg.order = is_stable(k) ? order_check::per_producer_and_prio : order_check::none;
  if (is_bounded(k)) cfg.capacity = 64;  // producers retry on mailbox_full
  expect_clean(run_stress(*mb, cfg));
  EXPECT_TRUE(mb->empty());
}

// Messages enqueued from several threads, then drained: served in priority order.
TEST_P(PriorityMailbox, ConcurrentEnqueuesAreServedInPriorityOrder) {
  const kind k = GetParam();
  auto mb = make_box(k, higher_first, 4096);
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p) {
    producers.emplace_back([&, p] {
      std::minstd_rand rng(static_cast<unsigned>(p) + 1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int s = 0; s < 500; ++s) {
        ASSERT_FALSE(mb->enqueue(
            make_tagged(p, s, static_cast<int>(rng() % 10), static_cast<std::uint32_t>(p))));
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& t : producers) t.join();
  EXPECT_EQ(mb->size(), 2000u);
  int last_prio = 1000;
  std::vector<std::vector<int>> last_seq(4, std::vector<int>(10, -1));
  int n = 0;
  while (envelope* e = mb->dequeue()) {
    const tagged* t = tag_of(e);
    ASSERT_NE(t, nullptr);
    ASSERT_LE(t->prio, last_prio) << "served out of priority order at message " << n;
    last_prio = t->prio;
    if (is_stable(k)) {
      auto& last =
          last_seq[static_cast<std::size_t>(t->producer)][static_cast<std::size_t>(t->prio)];
      EXPECT_GT(t->seq, last) << "equal priorities of one producer out of arrival order";
      last = t->seq;
    }
    ++n;
  }
  EXPECT_EQ(n, 2000);
}

// Producers interrupted at random instructions (between admission and the intake push, say):
// nothing lost, and empty() never hides a returned enqueue.
TEST_P(PriorityMailbox, EmptyNeverHidesAReturnedEnqueue) {
  const kind k = GetParam();
  auto mb = make_box(k, higher_first, 32);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 2000;
  cfg.prio_levels = 3;
  cfg.order = is_stable(k) ? order_check::per_producer_and_prio : order_check::none;
  if (is_bounded(k)) cfg.capacity = 32;
  expect_clean(run_stress_under_preemption(*mb, cfg, 600ms));
}

INSTANTIATE_TEST_SUITE_P(AllVariants, PriorityMailbox,
                         ::testing::Values(kind::unbounded, kind::unbounded_stable, kind::bounded,
                                           kind::bounded_stable),
                         [](const ::testing::TestParamInfo<kind>& info) {
                           return name_of(info.param);
                         });

// ---- stable variants: equal priorities keep arrival order ----

void check_ties_keep_arrival_order(priority_mailbox& mb) {
  // 60 messages in 3 priority levels, arrival order scrambled across levels.
  std::minstd_rand rng(42);
  std::vector<std::pair<int, int>> sent;
  for (int seq = 0; seq < 60; ++seq) {
    const int prio = static_cast<int>(rng() % 3);
    sent.emplace_back(prio, seq);
    ASSERT_FALSE(mb.enqueue(make_tagged(0, seq, prio)));
  }
  std::vector<std::pair<int, int>> expected = sent;
  std::stable_sort(expected.begin(), expected.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  EXPECT_EQ(drain_tags(mb), expected);
}

TEST(UnboundedStablePriorityMailbox, EqualPrioritiesKeepArrivalOrder) {
  unbounded_stable_priority_mailbox mb(higher_first);
  check_ties_keep_arrival_order(mb);
}

TEST(BoundedStablePriorityMailbox, EqualPrioritiesKeepArrivalOrder) {
  bounded_stable_priority_mailbox mb(100, higher_first);
  check_ties_keep_arrival_order(mb);
}

// All priorities equal: a stable priority mailbox is a FIFO, also when enqueues and dequeues
// interleave (arrival numbers continue across drains of the intake).
void check_all_equal_is_fifo(priority_mailbox& mb) {
  int next_in = 0;
  int next_out = 0;
  for (int round = 0; round < 30; ++round) {
    for (int i = 0; i < 3; ++i) ASSERT_FALSE(mb.enqueue(make_tagged(0, next_in++, 7)));
    for (int i = 0; i < 2; ++i) {
      const tagged* t = tag_of(mb.dequeue());
      ASSERT_NE(t, nullptr);
      ASSERT_EQ(t->seq, next_out++);
    }
  }
  for (const auto& [prio, seq] : drain_tags(mb)) ASSERT_EQ(seq, next_out++);
  EXPECT_EQ(next_out, next_in);
}

TEST(UnboundedStablePriorityMailbox, AllEqualPrioritiesIsFifoAcrossInterleaving) {
  unbounded_stable_priority_mailbox mb(higher_first);
  check_all_equal_is_fifo(mb);
}

TEST(BoundedStablePriorityMailbox, AllEqualPrioritiesIsFifoAcrossInterleaving) {
  bounded_stable_priority_mailbox mb(50, higher_first);
  check_all_equal_is_fifo(mb);
}

// ---- bounded variants: exact capacity ----

void check_exact_capacity(priority_mailbox& mb) {
  ASSERT_EQ(mb.capacity(), 5u) << "capacity is exact, not rounded";
  for (long i = 0; i < 5; ++i) ASSERT_FALSE(mb.enqueue(make(i))) << "refused message " << i;
  EXPECT_EQ(mb.size(), 5u);
  ctx* sixth = make(100);
  const error err = mb.enqueue(sixth);
  EXPECT_EQ(err, errc::mailbox_full);
  if (err) {
    EXPECT_EQ(value_of(sixth), 100) << "a refused envelope stays the caller's, untouched";
    akt::recycle(sixth);
  }
  EXPECT_EQ(mb.size(), 5u);
  EXPECT_EQ(value_of(mb.dequeue()), 4);  // larger first
  ASSERT_FALSE(mb.enqueue(make(50))) << "one dequeue makes room for one";
  ctx* again = make(51);
  EXPECT_EQ(mb.enqueue(again), errc::mailbox_full);
  akt::recycle(again);
  EXPECT_EQ(drain_values(mb), (std::vector<long>{50, 3, 2, 1, 0}));
}

TEST(BoundedPriorityMailbox, RefusesWithMailboxFullAtExactlyCapacity) {
  bounded_priority_mailbox mb(5, larger_long_first);
  check_exact_capacity(mb);
}

TEST(BoundedStablePriorityMailbox, RefusesWithMailboxFullAtExactlyCapacity) {
  bounded_stable_priority_mailbox mb(5, larger_long_first);
  check_exact_capacity(mb);
}

// Many concurrent offers, no consumer: exactly `capacity` are accepted.
void check_concurrent_offers_accept_exactly_capacity(priority_mailbox& mb) {
  std::atomic<int> ok{0};
  std::atomic<int> full{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < 8; ++p) {
    producers.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (long i = 0; i < 64; ++i) {
        ctx* e = make(i);
        const error err = mb.enqueue(e);
        if (!err) {
          ok.fetch_add(1);
        } else {
          if (err == errc::mailbox_full) full.fetch_add(1);
          akt::recycle(e);
        }
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& t : producers) t.join();
  EXPECT_EQ(ok.load(), 64);
  EXPECT_EQ(full.load(), 8 * 64 - 64);
  EXPECT_EQ(mb.size(), 64u);
  EXPECT_EQ(drain_values(mb).size(), 64u);
}

TEST(BoundedPriorityMailbox, ConcurrentOffersAcceptExactlyCapacity) {
  bounded_priority_mailbox mb(64, larger_long_first);
  check_concurrent_offers_accept_exactly_capacity(mb);
}

TEST(BoundedStablePriorityMailbox, ConcurrentOffersAcceptExactlyCapacity) {
  bounded_stable_priority_mailbox mb(64, larger_long_first);
  check_concurrent_offers_accept_exactly_capacity(mb);
}

TEST(BoundedPriorityMailbox, ConcurrentDroppingProducersNeverExceedCapacity) {
  bounded_priority_mailbox mb(8, higher_first);
  stress_config cfg;
  cfg.producers = 4;
  cfg.per_producer = 2000;
  cfg.order = order_check::none;
  cfg.retry_when_full = false;
  cfg.capacity = 8;
  cfg.prio_levels = 3;
  const stress_result r = run_stress(mb, cfg);
  expect_clean(r, /*expect_all_accepted=*/false);
  EXPECT_GT(r.accepted, 0);
}

TEST(PriorityMailboxes, ConsumerMayChangeThreadBetweenTurns) {
  unbounded_stable_priority_mailbox mb(higher_first);
  stress_config cfg;
  cfg.producers = 3;
  cfg.per_producer = 2000;
  cfg.consumers = 2;
  cfg.prio_levels = 3;
  cfg.order = order_check::per_producer_and_prio;
  expect_clean(run_stress(mb, cfg));
}

}  // namespace
}  // namespace akt::mbtest
