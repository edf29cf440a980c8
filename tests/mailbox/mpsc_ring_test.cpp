// mpsc_ring<T>: bounded MPSC array queue with per-cell sequence numbers (the ring under
// bounded_mailbox and non_blocking_bounded_mailbox), and next_power_of_two.
// GoAkt: TestNextPowerOfTwo, the ring parts of TestNonBlockingBoundedMailbox.

#include <akt/mailbox/mpsc_ring.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace akt {
namespace {

using namespace std::chrono_literals;

TEST(NextPowerOfTwo, RoundsUp) {
  static_assert(next_power_of_two(5) == 8);
  EXPECT_EQ(next_power_of_two(0), 1u);
  EXPECT_EQ(next_power_of_two(1), 1u);
  EXPECT_EQ(next_power_of_two(2), 2u);
  EXPECT_EQ(next_power_of_two(3), 4u);
  EXPECT_EQ(next_power_of_two(20), 32u);
  EXPECT_EQ(next_power_of_two(32), 32u);
  EXPECT_EQ(next_power_of_two(33), 64u);
  EXPECT_EQ(next_power_of_two(4096), 4096u);
  EXPECT_EQ(next_power_of_two(4097), 8192u);
}

TEST(MpscRing, EmptyPopFails) {
  mpsc_ring<int> r(4);
  int out = -1;
  EXPECT_FALSE(r.try_pop(out));
  EXPECT_EQ(out, -1) << "a failed pop leaves out alone";
  EXPECT_EQ(r.claimed(), 0u);
  EXPECT_EQ(r.capacity(), 4u);
}

TEST(MpscRing, KeepsFifoOrder) {
  mpsc_ring<int> r(16);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(r.try_push(i));
  EXPECT_EQ(r.claimed(), 16u);
  for (int i = 0; i < 16; ++i) {
    int out = -1;
    ASSERT_TRUE(r.try_pop(out));
    EXPECT_EQ(out, i);
    EXPECT_EQ(r.claimed(), static_cast<std::size_t>(15 - i));
  }
  int out = -1;
  EXPECT_FALSE(r.try_pop(out));
}

TEST(MpscRing, FullPushFailsAndKeepsContents) {
  mpsc_ring<int> r(4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(r.try_push(i));
  EXPECT_FALSE(r.try_push(99));
  EXPECT_FALSE(r.try_push(100));
  EXPECT_EQ(r.claimed(), 4u);
  int out = -1;
  ASSERT_TRUE(r.try_pop(out));
  EXPECT_EQ(out, 0);
  EXPECT_TRUE(r.try_push(4)) << "one pop makes room for exactly one";
  EXPECT_FALSE(r.try_push(5));
  for (int expected : {1, 2, 3, 4}) {
    ASSERT_TRUE(r.try_pop(out));
    EXPECT_EQ(out, expected);
  }
  EXPECT_FALSE(r.try_pop(out));
}

TEST(MpscRing, SmallestRingOfTwo) {
  mpsc_ring<int> r(2);
  EXPECT_TRUE(r.try_push(1));
  EXPECT_TRUE(r.try_push(2));
  EXPECT_FALSE(r.try_push(3));
  int out = 0;
  for (int lap = 0; lap < 10; ++lap) {
    ASSERT_TRUE(r.try_pop(out));
    ASSERT_EQ(out, 2 * lap + 1);
    ASSERT_TRUE(r.try_pop(out));
    ASSERT_EQ(out, 2 * lap + 2);
    ASSERT_TRUE(r.try_push(2 * lap + 3));
    ASSERT_TRUE(r.try_push(2 * lap + 4));
    ASSERT_FALSE(r.try_push(-1));
  }
}

TEST(MpscRing, WraparoundFullLaps) {
  mpsc_ring<std::uint64_t> r(8);
  std::uint64_t next_in = 0;
  std::uint64_t next_out = 0;
  for (int lap = 0; lap < 25; ++lap) {
    while (r.try_push(next_in)) ++next_in;
    ASSERT_EQ(next_in - next_out, 8u) << "lap " << lap;
    std::uint64_t out = 0;
    while (r.try_pop(out)) ASSERT_EQ(out, next_out++);
    ASSERT_EQ(next_out, next_in);
  }
}

TEST(MpscRing, WraparoundWhilePartlyFull) {
  mpsc_ring<int> r(4);
  int next_in = 0;
  int next_out = 0;
  ASSERT_TRUE(r.try_push(next_in++));
  ASSERT_TRUE(r.try_push(next_in++));
  for (int i = 0; i < 100; ++i) {  // two queued at every step, positions wrap 50 times
    ASSERT_TRUE(r.try_push(next_in++));
    int out = -1;
    ASSERT_TRUE(r.try_pop(out));
    ASSERT_EQ(out, next_out++);
    ASSERT_EQ(r.claimed(), 2u);
  }
}

TEST(MpscRing, HoldsPointers) {
  int a = 1;
  int b = 2;
  mpsc_ring<int*> r(2);
  ASSERT_TRUE(r.try_push(&a));
  ASSERT_TRUE(r.try_push(&b));
  int* out = nullptr;
  ASSERT_TRUE(r.try_pop(out));
  EXPECT_EQ(out, &a);
  ASSERT_TRUE(r.try_pop(out));
  EXPECT_EQ(out, &b);
}

// Producers retry on full; the consumer checks nothing lost, nothing duplicated, per-producer
// FIFO, and that the ring never held more than its capacity.
void ring_stress(std::size_t capacity, int producers, int per_producer) {
  mpsc_ring<std::uint64_t> r(capacity);
  std::atomic<bool> go{false};
  std::atomic<long> pushed{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int s = 0; s < per_producer; ++s) {
        const std::uint64_t v =
            (static_cast<std::uint64_t>(p) << 32) | static_cast<std::uint32_t>(s);
        while (!r.try_push(v)) std::this_thread::yield();
        pushed.fetch_add(1, std::memory_order_seq_cst);
      }
    });
  }
  std::vector<long> last(static_cast<std::size_t>(producers), -1);
  long received = 0;
  long problems = 0;
  long over_capacity = 0;
  const long total = static_cast<long>(producers) * per_producer;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  go.store(true, std::memory_order_release);
  while (received < total && std::chrono::steady_clock::now() < deadline) {
    if (r.claimed() > capacity) ++over_capacity;
    std::uint64_t v = 0;
    if (!r.try_pop(v)) {
      std::this_thread::yield();
      continue;
    }
    ++received;
    if (pushed.load(std::memory_order_seq_cst) - received > static_cast<long>(capacity)) {
      ++over_capacity;
    }
    const auto p = static_cast<std::size_t>(v >> 32);
    const auto s = static_cast<long>(v & 0xffffffffu);
    if (p >= last.size() || s != last[p] + 1) {
      ++problems;
    } else {
      last[p] = s;
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(received, total) << "lost values (deadline)";
  EXPECT_EQ(problems, 0) << "duplicated or reordered values";
  EXPECT_EQ(over_capacity, 0);
  std::uint64_t v = 0;
  EXPECT_FALSE(r.try_pop(v));
  EXPECT_EQ(r.claimed(), 0u);
}

TEST(MpscRing, ConcurrentProducersOnASmallRing) { ring_stress(4, 4, 5000); }

TEST(MpscRing, ConcurrentProducersOnALargeRing) { ring_stress(1024, 4, 10000); }

}  // namespace
}  // namespace akt
