// Intrusive MPSC queues: mpsc::push/pop (sentinel algorithm over separate ends), mpsc_queue
// (sentinel-style), mpsc_node_queue (detaching: a popped node may be pushed again) and
// intake_stack (LIFO intake taken whole and reversed). Nodes are plain mpsc_node objects.
// GoAkt: TestPriorityIntake; the link-pending window of TestGrainMailboxDequeue_WaitsForLink...

#include <akt/mailbox/mpsc_queue.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "mailbox/mailbox_test_support.hpp"

namespace akt {
namespace {

using namespace std::chrono_literals;

struct item : mpsc_node {
  int producer = 0;
  int seq = 0;
};

std::vector<item> make_items(int n) {
  std::vector<item> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)].seq = i;
  return v;
}

int seq_of(const mpsc_node* n) { return static_cast<const item*>(n)->seq; }

// ---- mpsc::push / mpsc::pop ----

struct split_queue {
  mpsc_node stub;
  std::atomic<mpsc_node*> head{&stub};
  mpsc_node* tail = &stub;
  mpsc_node* pop() {
    mpsc_node* retired = nullptr;
    return mpsc::pop(tail, &stub, retired);
  }
};

TEST(MpscFunctions, FifoAndRetiredIsThePreviousSentinel) {
  split_queue q;
  auto items = make_items(3);
  for (auto& i : items) mpsc::push(q.head, &i);
  mpsc_node* retired = &items[2];  // must be overwritten
  ASSERT_EQ(mpsc::pop(q.tail, &q.stub, retired), &items[0]);
  EXPECT_EQ(retired, nullptr) << "the stub is never handed back";
  ASSERT_EQ(mpsc::pop(q.tail, &q.stub, retired), &items[1]);
  EXPECT_EQ(retired, &items[0]);
  ASSERT_EQ(mpsc::pop(q.tail, &q.stub, retired), &items[2]);
  EXPECT_EQ(retired, &items[1]);
  retired = nullptr;
  EXPECT_EQ(mpsc::pop(q.tail, &q.stub, retired), nullptr);
  EXPECT_EQ(retired, nullptr) << "an empty pop retires nothing";
}

// A push whose exchange took effect but whose link is not stored yet: the queue is not empty
// (head moved) but pop returns null; once the link lands, pop returns the node.
TEST(MpscFunctions, PopReturnsNullWhileALinkIsPending) {
  split_queue q;
  item a;
  item b;
  mpsc::push(q.head, &a);
  // First half of a push of b: the exchange only.
  b.next.store(nullptr, std::memory_order_relaxed);
  mpsc_node* prev = q.head.exchange(&b, std::memory_order_seq_cst);
  EXPECT_EQ(prev, &a);
  EXPECT_EQ(q.pop(), &a);
  EXPECT_NE(q.head.load(), q.tail) << "not empty: b's exchange took effect";
  EXPECT_EQ(q.pop(), nullptr) << "b's link is pending";
  EXPECT_EQ(q.pop(), nullptr);
  prev->next.store(&b, std::memory_order_release);  // second half
  EXPECT_EQ(q.pop(), &b);
  EXPECT_EQ(q.head.load(), q.tail);
}

// ---- mpsc_queue ----

TEST(MpscQueue, EmptyPopReturnsNull) {
  mpsc_queue q;
  mpsc_node* retired = nullptr;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop(retired), nullptr);
  EXPECT_EQ(q.take_sentinel(), nullptr) << "the stub is never handed out";
}

TEST(MpscQueue, KeepsFifoOrderAndRetiresOneLater) {
  mpsc_queue q;
  auto items = make_items(100);
  for (auto& i : items) q.push(&i);
  EXPECT_FALSE(q.empty());
  mpsc_node* prev = nullptr;
  for (int i = 0; i < 100; ++i) {
    mpsc_node* retired = nullptr;
    mpsc_node* n = q.pop(retired);
    ASSERT_NE(n, nullptr);
    ASSERT_EQ(seq_of(n), i);
    EXPECT_EQ(retired, prev);
    EXPECT_EQ(q.sentinel(), n) << "the popped node is the sentinel";
    prev = n;
  }
  EXPECT_TRUE(q.empty());
  mpsc_node* retired = nullptr;
  EXPECT_EQ(q.pop(retired), nullptr);
}

TEST(MpscQueue, EmptySinceSeesLaterPushes) {
  mpsc_queue q;
  item a;
  item b;
  q.push(&a);
  mpsc_node* retired = nullptr;
  ASSERT_EQ(q.pop(retired), &a);
  const mpsc_node* s = q.sentinel();
  EXPECT_TRUE(q.empty_since(s));
  q.push(&b);
  EXPECT_FALSE(q.empty_since(s));
  EXPECT_FALSE(q.empty());
  ASSERT_EQ(q.pop(retired), &b);
  EXPECT_EQ(retired, &a);
}

TEST(MpscQueue, TakeSentinelResetsTheQueue) {
  mpsc_queue q;
  item a;
  item b;
  q.push(&a);
  mpsc_node* retired = nullptr;
  ASSERT_EQ(q.pop(retired), &a);
  EXPECT_EQ(q.take_sentinel(), &a);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.take_sentinel(), nullptr);
  // Usable again from its initial state; a is no longer part of it.
  q.push(&b);
  ASSERT_EQ(q.pop(retired), &b);
  EXPECT_EQ(retired, nullptr);
}

// `items` holds the nodes; it must outlive the queue's last use (a sentinel-style queue keeps
// pointing at its last node).
// With `preempt`, producers are interrupted at random instructions (see mbtest::preempter), so
// that the consumer often meets a push whose link is pending, several pops in a row.
template <class Pop, class Push, class Empty>
bool mpsc_stress(std::vector<std::vector<item>>& items, Push push, Pop pop, Empty empty,
                 int producers, int per_producer, bool preempt = false) {
  std::unique_ptr<mbtest::preempter> interrupts;
  if (preempt) interrupts = std::make_unique<mbtest::preempter>();
  for (int p = 0; p < producers; ++p) {
    items.emplace_back(make_items(per_producer));
    for (auto& i : items.back()) i.producer = p;
  }
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      if (interrupts) interrupts->enter();
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (auto& i : items[static_cast<std::size_t>(p)]) {
        push(&i);
        if (i.seq % 64 == 63) std::this_thread::yield();
      }
      if (interrupts) interrupts->leave();
    });
  }
  std::vector<int> last(static_cast<std::size_t>(producers), -1);
  long received = 0;
  long problems = 0;
  long null_while_not_empty = 0;
  const long total = static_cast<long>(producers) * per_producer;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  if (interrupts) interrupts->start();
  go.store(true, std::memory_order_release);
  while (received < total && std::chrono::steady_clock::now() < deadline) {
    mpsc_node* n = pop();
    if (n == nullptr) {
      if (!empty()) ++null_while_not_empty;  // allowed: a link is pending
      std::this_thread::yield();
      continue;
    }
    auto* it = static_cast<item*>(n);
    const auto p = static_cast<std::size_t>(it->producer);
    if (p >= last.size() || it->seq != last[p] + 1) {
      ++problems;
    } else {
      last[p] = it->seq;
    }
    ++received;
  }
  for (auto& t : threads) t.join();
  if (interrupts) interrupts->stop();
  EXPECT_EQ(received, total) << "lost messages (deadline)";
  EXPECT_EQ(problems, 0) << "duplicated or reordered messages";
  ::testing::Test::RecordProperty("null_while_not_empty", static_cast<int>(null_while_not_empty));
  return received == total && problems == 0;
}

// Repeats a preempted stress on fresh queues until one fails or `budget` passes (narrow windows
// need many tries). make_and_run(items) builds a queue, runs mpsc_stress on it with preemption
// and returns its verdict.
template <class Run>
void repeat_preempted(Run make_and_run, std::chrono::milliseconds budget = 1500ms) {
  const auto until = std::chrono::steady_clock::now() + budget;
  do {
    std::vector<std::vector<item>> items;
    if (!make_and_run(items)) return;
  } while (std::chrono::steady_clock::now() < until);
}

TEST(MpscQueue, ConcurrentProducersLoseNothingAndKeepPerProducerOrder) {
  std::vector<std::vector<item>> items;
  mpsc_queue q;
  (void)mpsc_stress(
      items, [&](mpsc_node* n) { q.push(n); },
      [&] {
        mpsc_node* retired = nullptr;
        return q.pop(retired);
      },
      [&] { return q.empty(); }, 4, 10000);
  EXPECT_TRUE(q.empty());
}

TEST(MpscQueue, ConcurrentProducersUnderPreemptionLoseNothing) {
  repeat_preempted([](std::vector<std::vector<item>>& items) {
    mpsc_queue q;
    const bool ok = mpsc_stress(
        items, [&](mpsc_node* n) { q.push(n); },
        [&] {
          mpsc_node* retired = nullptr;
          return q.pop(retired);
        },
        [&] { return q.empty(); }, 4, 5000, /*preempt=*/true);
    EXPECT_TRUE(q.empty());
    return ok;
  });
}

// ---- mpsc_node_queue ----

TEST(MpscNodeQueue, EmptyPopReturnsNull) {
  mpsc_node_queue q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

TEST(MpscNodeQueue, KeepsFifoOrderAndDetachesEveryNode) {
  mpsc_node_queue q;
  auto items = make_items(50);
  for (auto& i : items) q.push(&i);
  EXPECT_FALSE(q.empty());
  for (int i = 0; i < 50; ++i) {
    mpsc_node* n = q.pop();
    ASSERT_NE(n, nullptr) << "node " << i;
    ASSERT_EQ(seq_of(n), i);
  }
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty()) << "the last node is detached too (the stub is back)";
}

TEST(MpscNodeQueue, SingleNodeIsDetached) {
  mpsc_node_queue q;
  item a;
  q.push(&a);
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(q.pop(), &a);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop(), nullptr);
}

TEST(MpscNodeQueue, PoppedNodeCanBePushedAgain) {
  mpsc_node_queue q;
  item a;
  item b;
  a.seq = 1;
  b.seq = 2;
  q.push(&a);
  q.push(&b);
  ASSERT_EQ(q.pop(), &a);
  q.push(&a);  // re-armed while b is queued: goes behind b
  ASSERT_EQ(q.pop(), &b);
  ASSERT_EQ(q.pop(), &a);
  EXPECT_EQ(q.pop(), nullptr);
  // The same node over and over, on an otherwise empty queue.
  for (int i = 0; i < 100; ++i) {
    q.push(&a);
    ASSERT_FALSE(q.empty());
    ASSERT_EQ(q.pop(), &a) << "round " << i;
    ASSERT_TRUE(q.empty());
    ASSERT_EQ(q.pop(), nullptr);
  }
}

// Round-robin: two nodes re-pushed after every pop alternate forever (the fair mailbox's active
// ring works this way).
TEST(MpscNodeQueue, RepushingAfterEveryPopRoundRobins) {
  mpsc_node_queue q;
  auto items = make_items(3);
  for (auto& i : items) q.push(&i);
  for (int i = 0; i < 30; ++i) {
    mpsc_node* n = q.pop();
    ASSERT_NE(n, nullptr);
    ASSERT_EQ(seq_of(n), i % 3);
    q.push(n);
  }
}

TEST(MpscNodeQueue, ConcurrentProducersLoseNothingAndKeepPerProducerOrder) {
  std::vector<std::vector<item>> items;
  mpsc_node_queue q;
  (void)mpsc_stress(
      items, [&](mpsc_node* n) { q.push(n); }, [&] { return q.pop(); }, [&] { return q.empty(); },
      4, 10000);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

// A push whose link is pending when the consumer reaches the end of the queue: pop must neither
// report the queue drained nor re-insert its stub node twice (a cycle), however often it is
// called before the link lands.
TEST(MpscNodeQueue, ConcurrentProducersUnderPreemptionLoseNothing) {
  repeat_preempted([](std::vector<std::vector<item>>& items) {
    mpsc_node_queue q;
    const bool ok = mpsc_stress(
        items, [&](mpsc_node* n) { q.push(n); }, [&] { return q.pop(); }, [&] { return q.empty(); },
        4, 5000, /*preempt=*/true);
    EXPECT_EQ(q.pop(), nullptr);
    EXPECT_TRUE(q.empty());
    return ok && q.empty();
  });
}

// Producers re-push nodes the consumer hands back (each node is in the queue at most once at a
// time): every node keeps circulating, and none is lost or doubled.
TEST(MpscNodeQueue, NodesCirculatingBetweenConsumerAndProducersAreNeverLost) {
  constexpr int k_nodes = 64;
  constexpr int k_pops = 40000;
  mpsc_node_queue q;
  auto items = make_items(k_nodes);
  for (auto& i : items) q.push(&i);
  // The consumer hands popped nodes to two producer threads through per-producer rings
  // (single writer, single reader); they push them back.
  struct handoff {
    std::vector<std::atomic<item*>> slots;
    std::atomic<std::uint64_t> written{0};
    std::atomic<std::uint64_t> read{0};
    handoff() : slots(k_nodes) {}
  };
  handoff h[2];
  std::vector<std::atomic<int>> in_queue(k_nodes);
  for (auto& c : in_queue) c.store(1);
  std::atomic<bool> stop{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < 2; ++p) {
    producers.emplace_back([&, p] {
      handoff& mine = h[p];
      while (!stop.load(std::memory_order_acquire)) {
        const std::uint64_t r = mine.read.load(std::memory_order_relaxed);
        if (r == mine.written.load(std::memory_order_acquire)) {
          std::this_thread::yield();
          continue;
        }
        item* it = mine.slots[r % k_nodes].load(std::memory_order_relaxed);
        mine.read.store(r + 1, std::memory_order_release);
        in_queue[static_cast<std::size_t>(it->seq)].fetch_add(1);
        q.push(it);
      }
    });
  }
  long popped = 0;
  long doubled = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (popped < k_pops && std::chrono::steady_clock::now() < deadline) {
    mpsc_node* n = q.pop();
    if (n == nullptr) {
      std::this_thread::yield();
      continue;
    }
    auto* it = static_cast<item*>(n);
    if (in_queue[static_cast<std::size_t>(it->seq)].fetch_sub(1) != 1) ++doubled;
    handoff& to = h[popped % 2];
    const std::uint64_t w = to.written.load(std::memory_order_relaxed);
    while (w - to.read.load(std::memory_order_acquire) >= k_nodes) std::this_thread::yield();
    to.slots[w % k_nodes].store(it, std::memory_order_relaxed);
    to.written.store(w + 1, std::memory_order_release);
    ++popped;
  }
  // Let the producers push back everything handed to them, then stop them.
  for (auto& x : h) {
    while (x.read.load(std::memory_order_acquire) != x.written.load(std::memory_order_relaxed) &&
           std::chrono::steady_clock::now() < deadline + 5s) {
      std::this_thread::yield();
    }
  }
  stop.store(true, std::memory_order_release);
  for (auto& t : producers) t.join();
  EXPECT_EQ(popped, k_pops);
  EXPECT_EQ(doubled, 0) << "a node came out while it was in the queue twice";
  int left = 0;
  while (q.pop() != nullptr) ++left;
  EXPECT_EQ(left, k_nodes) << "nodes were lost or duplicated";
  for (int i = 0; i < k_nodes; ++i) EXPECT_EQ(in_queue[static_cast<std::size_t>(i)].load(), 1);
}

// ---- intake_stack ----

TEST(IntakeStack, EmptyTakeAllReturnsNull) {
  intake_stack s;
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(s.empty_relaxed());
  EXPECT_EQ(s.take_all(), nullptr);
}

TEST(IntakeStack, TakeAllReturnsArrivalOrder) {
  intake_stack s;
  auto items = make_items(10);
  for (auto& i : items) s.push(&i);
  EXPECT_FALSE(s.empty());
  EXPECT_FALSE(s.empty_relaxed());
  mpsc_node* n = s.take_all();
  EXPECT_TRUE(s.empty()) << "take_all empties the intake";
  for (int i = 0; i < 10; ++i) {
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(seq_of(n), i);
    n = n->next.load(std::memory_order_relaxed);
  }
  EXPECT_EQ(n, nullptr) << "the batch is null-terminated";
  EXPECT_EQ(s.take_all(), nullptr);
}

TEST(IntakeStack, PushesAfterATakeFormTheNextBatch) {
  intake_stack s;
  auto items = make_items(4);
  s.push(&items[0]);
  s.push(&items[1]);
  mpsc_node* first = s.take_all();
  s.push(&items[2]);
  s.push(&items[3]);
  ASSERT_EQ(first, &items[0]);
  EXPECT_EQ(first->next.load(), &items[1]);
  EXPECT_EQ(items[1].next.load(), nullptr);
  mpsc_node* second = s.take_all();
  ASSERT_EQ(second, &items[2]);
  EXPECT_EQ(second->next.load(), &items[3]);
  EXPECT_EQ(items[3].next.load(), nullptr);
}

TEST(IntakeStack, ConcurrentProducersLoseNothingAndKeepPerProducerOrder) {
  std::vector<std::vector<item>> items;
  intake_stack s;
  mpsc_node* batch = nullptr;
  auto pop = [&]() -> mpsc_node* {
    if (batch == nullptr) batch = s.take_all();
    if (batch == nullptr) return nullptr;
    mpsc_node* n = batch;
    batch = n->next.load(std::memory_order_relaxed);
    return n;
  };
  (void)mpsc_stress(
      items, [&](mpsc_node* n) { s.push(n); }, pop, [&] { return batch == nullptr && s.empty(); },
      4, 10000);
  EXPECT_TRUE(s.empty());
}

}  // namespace
}  // namespace akt
