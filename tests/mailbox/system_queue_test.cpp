// system_queue: an actor's control messages; lock-free intake stack, consumer reverses batches.
// GoAkt: TestSystemQueueSendOrder, TestSystemQueueConcurrentPushes.

#include <akt/mailbox/system_queue.hpp>

#include <memory>

#include "mailbox/mailbox_test_support.hpp"

namespace akt::mbtest {
namespace {

std::vector<long> pop_all(system_queue& q) {
  std::vector<long> out;
  while (envelope* e = q.pop()) out.push_back(value_of(e));
  return out;
}

TEST(SystemQueue, EmptyPopReturnsNull) {
  system_queue q;
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.intake_empty());
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_EQ(q.pop(), nullptr);
}

TEST(SystemQueue, KeepsSendOrder) {
  system_queue q;
  for (long i = 0; i < 50; ++i) q.push(make(i));
  EXPECT_FALSE(q.empty());
  EXPECT_FALSE(q.intake_empty());
  EXPECT_EQ(pop_all(q), iota_values(0, 50));
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.intake_empty());
}

// Pushes that arrive while the consumer works through a batch come after that batch.
TEST(SystemQueue, KeepsSendOrderAcrossBatches) {
  system_queue q;
  q.push(make(0));
  q.push(make(1));
  q.push(make(2));
  EXPECT_EQ(value_of(q.pop()), 0);  // takes the batch {0, 1, 2}
  EXPECT_TRUE(q.intake_empty());
  EXPECT_FALSE(q.empty()) << "the rest of the batch is still queued";
  q.push(make(3));
  q.push(make(4));
  EXPECT_EQ(value_of(q.pop()), 1);
  q.push(make(5));
  EXPECT_EQ(pop_all(q), (std::vector<long>{2, 3, 4, 5}));
  EXPECT_TRUE(q.empty());
}

TEST(SystemQueue, EmptyTracksPushAndPop) {
  system_queue q;
  q.push(make(1));
  EXPECT_FALSE(q.empty());
  EXPECT_FALSE(q.intake_empty());
  ASSERT_NE(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.intake_empty());
  EXPECT_EQ(q.pop(), nullptr);
}

TEST(SystemQueue, PopRecyclesThePreviousEnvelope) {
  const std::uint32_t shard = take_shard();
  system_queue q;
  ctx* e1 = make(1, shard);
  ctx* e2 = make(2, shard);
  ctx* e3 = make(3, shard);
  q.push(e1);
  q.push(e2);
  ASSERT_EQ(q.pop(), e1);
  EXPECT_EQ(shard_size(shard), 0u);
  EXPECT_EQ(value_of(e1), 1);
  // e3 arrives after the batch {e1, e2} was taken: the recycling spans batches, too.
  q.push(e3);
  ASSERT_EQ(q.pop(), e2);
  EXPECT_EQ(shard_size(shard), 1u) << "the next pop did not recycle the previous envelope";
  EXPECT_EQ(value_of(e2), 2);
  ctx* back = pool().get(shard);
  EXPECT_EQ(back, e1);
  EXPECT_TRUE(back->message().empty());
  akt::recycle(back);
  ASSERT_EQ(q.pop(), e3);
  EXPECT_EQ(shard_size(shard), 2u);
  EXPECT_EQ(value_of(e3), 3);
}

TEST(SystemQueue, FlushRecyclesTheLastPoppedEnvelope) {
  const std::uint32_t shard = take_shard();
  system_queue q;
  ctx* e1 = make(1, shard);
  q.push(e1);
  ASSERT_EQ(q.pop(), e1);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_EQ(value_of(e1), 1) << "an empty pop is the idle check: it writes nothing";
  q.flush();
  EXPECT_EQ(shard_size(shard), 1u);
  q.flush();  // idempotent
  EXPECT_EQ(shard_size(shard), 1u);
}

TEST(SystemQueue, DestructorRecyclesWhatIsLeft) {
  const std::uint32_t shard = take_shard();
  {
    system_queue q;
    for (long i = 0; i < 4; ++i) q.push(make(i, shard));
    ASSERT_EQ(value_of(q.pop()), 0);
    q.push(make(4, shard));
  }
  EXPECT_EQ(shard_size(shard), 5u);
}

// Several threads push while the consumer pops: nothing lost, nothing duplicated, and each
// thread's messages come out in the order it pushed them.
TEST(SystemQueue, ConcurrentPushesKeepPerThreadOrder) {
  constexpr int k_threads = 4;
  constexpr int k_per_thread = 4000;
  system_queue q;
  std::atomic<bool> go{false};
  std::atomic<int> done{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < k_threads; ++p) {
    producers.emplace_back([&, p] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (int s = 0; s < k_per_thread; ++s) {
        q.push(make_tagged(p, s, 0, static_cast<std::uint32_t>(p)));
        if (s % 64 == 63) std::this_thread::yield();
      }
      done.fetch_add(1, std::memory_order_seq_cst);
    });
  }
  std::vector<int> last(k_threads, -1);
  long received = 0;
  long problems = 0;
  bool timed_out = false;
  std::thread consumer([&] {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (received < static_cast<long>(k_threads) * k_per_thread) {
      envelope* e = q.pop();
      if (e == nullptr) {
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out = true;
          return;
        }
        std::this_thread::yield();
        continue;
      }
      tagged* t = as_ctx(e)->message().get_if<tagged>();
      if (t == nullptr || t->producer < 0 || t->producer >= k_threads ||
          t->seq != last[static_cast<std::size_t>(t->producer)] + 1) {
        ++problems;
      } else {
        last[static_cast<std::size_t>(t->producer)] = t->seq;
        t->seq = -1;  // touch
      }
      ++received;
    }
  });
  go.store(true, std::memory_order_release);
  for (auto& t : producers) t.join();
  consumer.join();
  EXPECT_FALSE(timed_out) << "received " << received;
  EXPECT_EQ(problems, 0) << "lost, duplicated or reordered messages";
  for (int p = 0; p < k_threads; ++p)
    EXPECT_EQ(last[static_cast<std::size_t>(p)], k_per_thread - 1);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace akt::mbtest
