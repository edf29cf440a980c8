// Tests for akt::mpmc_ring: FIFO order, full and empty, wraparound over several laps, spin-limit
// semantics, and a multi-producer multi-consumer stress where every value is seen exactly once.

#include <gtest/gtest.h>

#include <akt/pool/mpmc_ring.hpp>
#include "support/test_support.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <thread>
#include <vector>

namespace {

using akt::test::run_bounded;

using namespace std::chrono_literals;

static_assert(akt::mpmc_ring<int, 8>::capacity == 8);
static_assert(akt::mpmc_ring<int, 8>::unlimited == 0);

TEST(MpmcRing, FifoSingleThread) {
  akt::mpmc_ring<int, 8> ring;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(ring.try_push(i * 10));
  EXPECT_EQ(ring.size_approx(), 5u);
  for (int i = 0; i < 5; ++i) {
    int out = -1;
    ASSERT_TRUE(ring.try_pop(out));
    EXPECT_EQ(out, i * 10);
  }
  EXPECT_EQ(ring.size_approx(), 0u);
}

TEST(MpmcRing, EmptyPopFails) {
  akt::mpmc_ring<int, 4> ring;
  int out = 0;
  EXPECT_FALSE(ring.try_pop(out));
  EXPECT_FALSE(ring.try_pop(out, 1));
  EXPECT_EQ(ring.size_approx(), 0u);
  // Still usable afterwards.
  ASSERT_TRUE(ring.try_push(7));
  ASSERT_TRUE(ring.try_pop(out));
  EXPECT_EQ(out, 7);
  EXPECT_FALSE(ring.try_pop(out));
}

TEST(MpmcRing, FullPushFailsAndKeepsContents) {
  akt::mpmc_ring<int, 4> ring;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ring.try_push(i + 1));
  EXPECT_EQ(ring.size_approx(), 4u);
  EXPECT_FALSE(ring.try_push(99));
  EXPECT_FALSE(ring.try_push(99, 1));
  EXPECT_EQ(ring.size_approx(), 4u);
  for (int i = 0; i < 4; ++i) {
    int out = 0;
    ASSERT_TRUE(ring.try_pop(out));
    EXPECT_EQ(out, i + 1);  // the failed pushes overwrote nothing
  }
  int out = 0;
  EXPECT_FALSE(ring.try_pop(out));
}

TEST(MpmcRing, PopAfterFullMakesRoomForExactlyOne) {
  akt::mpmc_ring<int, 4> ring;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ring.try_push(i));
  int out = -1;
  ASSERT_TRUE(ring.try_pop(out));
  EXPECT_EQ(out, 0);
  EXPECT_TRUE(ring.try_push(4));
  EXPECT_FALSE(ring.try_push(5));
  for (int want = 1; want <= 4; ++want) {
    ASSERT_TRUE(ring.try_pop(out));
    EXPECT_EQ(out, want);
  }
}

TEST(MpmcRing, WraparoundOneAtATime) {
  constexpr std::size_t cap = 8;
  akt::mpmc_ring<std::uint64_t, cap> ring;
  for (std::uint64_t i = 0; i < 3 * cap + 3; ++i) {
    ASSERT_TRUE(ring.try_push(i)) << i;
    std::uint64_t out = ~0ull;
    ASSERT_TRUE(ring.try_pop(out)) << i;
    EXPECT_EQ(out, i);
    EXPECT_EQ(ring.size_approx(), 0u);
  }
}

TEST(MpmcRing, WraparoundFullLaps) {
  constexpr std::size_t cap = 8;
  akt::mpmc_ring<std::uint64_t, cap> ring;
  std::uint64_t next_in = 0;
  std::uint64_t next_out = 0;
  for (int lap = 0; lap < 3; ++lap) {
    for (std::size_t i = 0; i < cap; ++i) ASSERT_TRUE(ring.try_push(next_in++));
    EXPECT_FALSE(ring.try_push(next_in)) << "lap " << lap;
    EXPECT_EQ(ring.size_approx(), cap);
    for (std::size_t i = 0; i < cap; ++i) {
      std::uint64_t out = 0;
      ASSERT_TRUE(ring.try_pop(out));
      EXPECT_EQ(out, next_out++);
    }
    std::uint64_t out = 0;
    EXPECT_FALSE(ring.try_pop(out)) << "lap " << lap;
  }
}

TEST(MpmcRing, WraparoundWhilePartlyFull) {
  // Keeps cap/2 + 1 values in flight so the cursors sit at odd offsets while they wrap.
  constexpr std::size_t cap = 16;
  akt::mpmc_ring<std::uint64_t, cap> ring;
  std::uint64_t next_in = 0;
  std::uint64_t next_out = 0;
  for (std::size_t i = 0; i < cap / 2 + 1; ++i) ASSERT_TRUE(ring.try_push(next_in++));
  for (std::size_t i = 0; i < 3 * cap; ++i) {
    std::uint64_t out = 0;
    ASSERT_TRUE(ring.try_pop(out));
    EXPECT_EQ(out, next_out++);
    ASSERT_TRUE(ring.try_push(next_in++));
    EXPECT_EQ(ring.size_approx(), cap / 2 + 1);
  }
}

TEST(MpmcRing, HoldsPointers) {
  akt::mpmc_ring<int*, 4> ring;
  int a = 1;
  int b = 2;
  ASSERT_TRUE(ring.try_push(&a));
  ASSERT_TRUE(ring.try_push(&b));
  int* out = nullptr;
  ASSERT_TRUE(ring.try_pop(out));
  EXPECT_EQ(out, &a);
  ASSERT_TRUE(ring.try_pop(out));
  EXPECT_EQ(out, &b);
}

TEST(MpmcRing, SpinLimitUncontendedSucceeds) {
  // Uncontended, a position is decided on the first iteration; a small limit is enough.
  akt::mpmc_ring<int, 4> ring;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ring.try_push(i, 4));
  for (int i = 0; i < 4; ++i) {
    int out = -1;
    EXPECT_TRUE(ring.try_pop(out, 4));
    EXPECT_EQ(out, i);
  }
}

TEST(MpmcRing, SpinLimitReturnsFalseInsteadOfWaiting) {
  // A full ring (push) and an empty ring (pop) are decided outcomes: a limited try returns false
  // at once, and so does an unlimited one (it retries lost races only, never waits for room).
  akt::mpmc_ring<int, 2> ring;
  int out = 0;
  EXPECT_FALSE(ring.try_pop(out, 1));
  EXPECT_FALSE(ring.try_pop(out, akt::mpmc_ring<int, 2>::unlimited));
  ASSERT_TRUE(ring.try_push(1, 1));
  ASSERT_TRUE(ring.try_push(2, 1));
  EXPECT_FALSE(ring.try_push(3, 1));
  EXPECT_FALSE(ring.try_push(3, akt::mpmc_ring<int, 2>::unlimited));
}

// Producers push their indices; consumers pop them, check the payload the producer wrote before
// the push (publication order) and mark them seen (plain writes: TSan flags a value handed to two
// consumers). spin_limit is passed to every call.
void stress(int spin_limit) {
  constexpr int producers = 4;
  constexpr int consumers = 4;
  constexpr std::uint32_t per_producer = 20000;
  constexpr std::uint32_t total = producers * per_producer;

  auto ring = std::make_unique<akt::mpmc_ring<std::uint32_t, 64>>();
  std::vector<std::uint64_t> payload(total, 0);
  std::vector<std::uint32_t> seen(total, 0);
  std::vector<std::vector<std::uint32_t>> order(consumers);
  std::atomic<std::uint32_t> consumed{0};
  std::atomic<bool> stop{false};
  std::atomic<int> out_of_order{0};
  std::atomic<int> bad_payload{0};

  const bool in_time = run_bounded(producers + consumers, 30s, stop, [&](int id) {
    if (id < producers) {
      for (std::uint32_t i = 0; i < per_producer; ++i) {
        const std::uint32_t v = static_cast<std::uint32_t>(id) * per_producer + i;
        payload[v] = std::uint64_t{v} * 7 + 1;  // written before the push publishes v
        while (!ring->try_push(v, spin_limit)) {
          if (stop.load(std::memory_order_relaxed)) return;
          std::this_thread::yield();
        }
      }
      return;
    }
    const int c = id - producers;
    std::vector<std::int64_t> last(producers, -1);
    while (consumed.load(std::memory_order_relaxed) < total) {
      if (stop.load(std::memory_order_relaxed)) return;
      std::uint32_t v = 0;
      if (!ring->try_pop(v, spin_limit)) {
        std::this_thread::yield();
        continue;
      }
      consumed.fetch_add(1, std::memory_order_relaxed);
      if (v >= total) {
        bad_payload.fetch_add(1);
        continue;
      }
      if (payload[v] != std::uint64_t{v} * 7 + 1) bad_payload.fetch_add(1);
      seen[v] += 1;
      // One consumer's successive pops claim increasing positions, so it sees each
      // producer's values in push order.
      const auto p = v / per_producer;
      if (static_cast<std::int64_t>(v) <= last[p]) out_of_order.fetch_add(1);
      last[p] = v;
      order[static_cast<std::size_t>(c)].push_back(v);
    }
  });

  ASSERT_TRUE(in_time) << "stress did not finish in time; consumed " << consumed.load();
  EXPECT_EQ(consumed.load(), total);
  EXPECT_EQ(bad_payload.load(), 0);
  EXPECT_EQ(out_of_order.load(), 0);
  std::uint32_t missing = 0;
  std::uint32_t duplicated = 0;
  for (std::uint32_t v = 0; v < total; ++v) {
    if (seen[v] == 0) ++missing;
    if (seen[v] > 1) ++duplicated;
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(duplicated, 0u);
  std::size_t popped = 0;
  for (const auto& o : order) popped += o.size();
  EXPECT_EQ(popped, total);
  EXPECT_EQ(ring->size_approx(), 0u);
  std::uint32_t out = 0;
  EXPECT_FALSE(ring->try_pop(out));
}

TEST(MpmcRing, MultiProducerMultiConsumerEveryValueOnce) {
  stress(akt::mpmc_ring<int, 2>::unlimited);
}

TEST(MpmcRing, SpinLimitedMultiProducerMultiConsumerEveryValueOnce) {
  // With spin_limit 1 a lost race fails the call instead of retrying; nothing may be lost or
  // duplicated by the early exits.
  stress(1);
}

}  // namespace
