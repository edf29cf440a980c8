#pragma once
// Helpers shared by the mailbox tests: envelopes from the process-wide pool, pool-shard
// bookkeeping for the recycling contract, fake senders for the fair mailbox, one
// multi-producer / single-consumer stress harness that every mailbox runs, and preemption
// injection for races whose window is a few instructions wide.
//
// Stress harness (run_stress). Producers offer tagged{producer, seq, prio} envelopes; one
// consumer (or several taking turns, as dispatcher workers do) dequeues. It checks: nothing lost,
// nothing duplicated, the promised order, the capacity, and visibility -- before every dequeue
// the consumer notes, per producer, the last enqueue that has returned, then asks empty(); an
// answer of true while one of those messages is still queued breaks mailbox.hpp's "once enqueue
// has returned ok, empty() is false until that envelope is dequeued".
//
// Preemption injection (preempter, run_stress_under_preemption). A thread signals the producers
// one after another every few microseconds; the handler sleeps ~30 us, so a producer stops at an
// arbitrary instruction, often inside enqueue, while the others run on. Under ThreadSanitizer a
// signal is only handled at the runtime's next safe point (an intercepted call), so there the
// interruptions land at fewer places and such tests find narrow races less often.
//
// Envelopes. Mailboxes hold akt::envelope*; the real type is akt::receive_context, taken from
// akt::detail::envelope_pool(). A mailbox recycles the envelopes it handed out (one dequeue later)
// and, in its destructor, everything still queued: a test never deletes or recycles an envelope a
// mailbox accepted. An envelope a mailbox refused stays the caller's: give it back with
// akt::recycle.
//
// Pool shards. The pool is process-wide and every test of this program shares it, so a test that
// observes recycling through shard_size() first empties a shard of its own (take_shard) and is the
// only user of that shard while it runs (tests run one after another; every thread a test starts
// is joined before it ends). The stress harness takes its envelopes from other shards.
//
// Fake senders (fair mailbox). unbounded_fair_mailbox keys its sub-queues by envelope::sender_key,
// the envelope's sender field. The tests put a fake, never-dereferenced address there
// (set_fake_sender). reset() -- which akt::recycle runs -- releases a non-null sender as a real
// actor cell, so every fake sender must be cleared before the mailbox can recycle the envelope:
//   - clear it right after the envelope is dequeued (dequeue_clearing): the caller owns the
//     envelope until the next dequeue, and the mailbox only recycles it later;
//   - an envelope still queued cannot be cleared, so a fair mailbox holding fake senders must be
//     drained (dequeue until null, clearing each one) before it is destroyed: declare a
//     fair_drain_guard right after the mailbox, so the drain also runs when an ASSERT returns
//     early;
//   - an envelope the mailbox refused: clear the sender, then akt::recycle it.

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

#include <akt/actor/receive_context.hpp>
#include <akt/mailbox/mailbox.hpp>
#include <akt/mailbox/unbounded_fair_mailbox.hpp>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actor/system_core.hpp"

namespace akt::mbtest {

using namespace std::chrono_literals;

using ctx = akt::receive_context;

// ---------------------------------------------------------------------------------------------
// Pool shards. Shards 0..3 serve the stress producers; the recycling tests use k_private_shard
// (masked into the pool's range, which has at least 8 shards), one test at a time.
inline constexpr std::uint32_t k_stress_shards = 4;
inline constexpr std::uint32_t k_private_shard = 5;

inline sharded_pool<receive_context>& pool() { return detail::envelope_pool(); }

inline std::uint32_t masked(std::uint32_t shard) { return shard & (pool().shard_count() - 1); }

inline std::size_t shard_size(std::uint32_t shard) { return pool().shard_size(masked(shard)); }

// Empties `shard` (deleting what it held) so that shard_size() counts exactly what comes back
// to it from now on, and every get() from it allocates a fresh envelope stamped with it.
inline std::uint32_t take_shard(std::uint32_t shard = k_private_shard) {
  const std::uint32_t s = masked(shard);
  while (pool().shard_size(s) > 0) delete pool().get(s);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Envelopes.

inline ctx* make(long value, std::uint32_t shard = 0) {
  ctx* e = pool().get(shard);
  e->message().emplace<long>(value);
  return e;
}

inline ctx* as_ctx(envelope* e) { return static_cast<ctx*>(e); }

// The long payload of e, or -1 when it holds none (e.g. it was reset).
inline long value_of(const envelope* e) {
  const long* v = e->payload().get_if<long>();
  return v != nullptr ? *v : -1;
}

// Payload of the stress tests and of the ordering tests.
struct tagged {
  int producer = 0;
  int seq = 0;
  int prio = 0;
};

inline ctx* make_tagged(int producer, int seq, int prio = 0, std::uint32_t shard = 0) {
  ctx* e = pool().get(shard);
  e->message().emplace<tagged>(tagged{producer, seq, prio});
  return e;
}

inline const tagged* tag_of(const envelope* e) { return e->payload().get_if<tagged>(); }

// Dequeues until null (the mailbox must be quiescent: no producer running) and returns the long
// payloads in order. Bounded: gives up after `limit` envelopes.
inline std::vector<long> drain_values(mailbox& mb, std::size_t limit = 1u << 20) {
  std::vector<long> out;
  while (out.size() < limit) {
    envelope* e = mb.dequeue();
    if (e == nullptr) break;
    out.push_back(value_of(e));
  }
  return out;
}

inline std::vector<long> iota_values(long from, long count) {
  std::vector<long> v;
  for (long i = 0; i < count; ++i) v.push_back(from + i);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Fake senders (see the header comment).

inline detail::actor_cell* fake_sender(std::size_t i) {
  static std::array<std::max_align_t, 4096> addresses{};
  return reinterpret_cast<detail::actor_cell*>(&addresses.at(i));
}

inline void set_fake_sender(ctx* e, std::size_t i) {
  detail::context_access::sender(*e) = fake_sender(i);
}

inline void clear_sender(envelope* e) {
  if (e != nullptr) detail::context_access::sender(*as_ctx(e)) = nullptr;
}

inline ctx* make_from(std::size_t sender, long value, std::uint32_t shard = 0) {
  ctx* e = make(value, shard);
  set_fake_sender(e, sender);
  return e;
}

// Dequeues one envelope and clears its (fake) sender before anything can recycle it.
inline envelope* dequeue_clearing(mailbox& mb) {
  envelope* e = mb.dequeue();
  clear_sender(e);
  return e;
}

// Drains a quiescent fair mailbox, clearing fake senders, so that its destructor can recycle
// every envelope it still holds. Declare it after the mailbox it guards.
class fair_drain_guard {
 public:
  explicit fair_drain_guard(unbounded_fair_mailbox& mb) : mb_(mb) {}
  fair_drain_guard(const fair_drain_guard&) = delete;
  fair_drain_guard& operator=(const fair_drain_guard&) = delete;
  ~fair_drain_guard() {
    // No producer runs any more, so no link is pending and a null dequeue means empty; the
    // bound only keeps a broken mailbox from hanging the test.
    for (int spins = 0; spins < 1000000; ++spins) {
      if (dequeue_clearing(mb_) == nullptr && mb_.empty()) return;
    }
    ADD_FAILURE() << "fair mailbox did not drain";
  }

 private:
  unbounded_fair_mailbox& mb_;
};

// ---------------------------------------------------------------------------------------------
// Recycling contract, for mailboxes that keep FIFO order. Enqueues three envelopes from a private
// shard, then checks that each dequeued envelope stays readable until the next dequeue and is back
// in its home shard after it.
inline void check_recycling_contract(mailbox& mb) {
  const std::uint32_t shard = take_shard();
  ctx* e1 = make(1, shard);
  ctx* e2 = make(2, shard);
  ctx* e3 = make(3, shard);
  ASSERT_EQ(e1->home_shard(), shard);
  ASSERT_FALSE(mb.enqueue(e1));
  ASSERT_FALSE(mb.enqueue(e2));
  ASSERT_FALSE(mb.enqueue(e3));
  ASSERT_EQ(shard_size(shard), 0u);

  envelope* d1 = mb.dequeue();
  ASSERT_EQ(d1, e1);
  EXPECT_EQ(value_of(d1), 1);
  EXPECT_EQ(shard_size(shard), 0u) << "the envelope being handed out was recycled too early";

  envelope* d2 = mb.dequeue();
  ASSERT_EQ(d2, e2);
  // d1 is back in its home shard: the next get on that shard returns it, reset.
  ASSERT_EQ(shard_size(shard), 1u) << "the previous envelope was not recycled by the next dequeue";
  EXPECT_EQ(value_of(d2), 2) << "the current envelope must stay readable until the next dequeue";
  ctx* again = pool().get(shard);
  EXPECT_EQ(again, e1);
  EXPECT_TRUE(again->message().empty()) << "a recycled envelope must be reset";
  akt::recycle(again);
  EXPECT_EQ(shard_size(shard), 1u);

  envelope* d3 = mb.dequeue();
  ASSERT_EQ(d3, e3);
  EXPECT_EQ(value_of(d3), 3);
  EXPECT_EQ(shard_size(shard), 2u);
}

// The destructor recycles what is queued and what was handed out last.
template <class Make>
void check_destructor_recycles(Make make_mailbox) {
  const std::uint32_t shard = take_shard();
  {
    auto mb = make_mailbox();
    for (long i = 0; i < 4; ++i) ASSERT_FALSE(mb->enqueue(make(i, shard)));
    ASSERT_EQ(value_of(mb->dequeue()), 0);
    EXPECT_EQ(shard_size(shard), 0u);
  }
  EXPECT_EQ(shard_size(shard), 4u);
}

// Dispose: enqueue refuses with mailbox_disposed (the envelope stays the caller's) and what was
// queued before can still be dequeued.
inline void check_dispose(mailbox& mb) {
  ASSERT_FALSE(mb.enqueue(make(1)));
  ASSERT_FALSE(mb.enqueue(make(2)));
  mb.dispose();
  ctx* refused = make(3);
  const error err = mb.enqueue(refused);
  EXPECT_EQ(err, errc::mailbox_disposed);
  if (err) {
    EXPECT_EQ(value_of(refused), 3) << "a refused envelope must be left untouched";
    akt::recycle(refused);
  }
  EXPECT_EQ(drain_values(mb), (std::vector<long>{1, 2}));
  EXPECT_TRUE(mb.empty());
}

// empty()/size() follow enqueues and dequeues.
inline void check_size_tracking(mailbox& mb) {
  EXPECT_TRUE(mb.empty());
  EXPECT_EQ(mb.size(), 0u);
  EXPECT_EQ(mb.dequeue(), nullptr);
  for (long i = 0; i < 20; ++i) {
    ASSERT_FALSE(mb.enqueue(make(i)));
    EXPECT_FALSE(mb.empty());
    EXPECT_EQ(mb.size(), static_cast<std::size_t>(i + 1));
  }
  ASSERT_NE(mb.dequeue(), nullptr);
  EXPECT_EQ(mb.size(), 19u);
  EXPECT_FALSE(mb.empty());
  std::size_t n = 1;
  while (mb.dequeue() != nullptr) {
    ++n;
    EXPECT_EQ(mb.size(), 20u - n);
  }
  EXPECT_EQ(n, 20u);
  EXPECT_TRUE(mb.empty());
  EXPECT_EQ(mb.size(), 0u);
  EXPECT_EQ(mb.dequeue(), nullptr);
}

// ---------------------------------------------------------------------------------------------
// Stress harness: `producers` threads each offer `per_producer` envelopes carrying
// tagged{producer, seq, prio}; one consumer thread dequeues until every accepted envelope has
// come out (or the deadline passes), reading and writing each payload it holds.

enum class order_check {
  none,                   // no order promised (plain priority mailboxes)
  per_producer,           // FIFO per producer
  per_producer_and_prio,  // FIFO per producer among equal priorities (stable priority)
};

struct stress_config {
  int producers = 4;
  int per_producer = 4000;
  order_check order = order_check::per_producer;
  // On mailbox_full: true retries (yielding) until accepted, false drops the message.
  bool retry_when_full = true;
  // When > 0, the consumer checks that accepted - dequeued never exceeds it.
  std::size_t capacity = 0;
  int prio_levels = 1;  // tagged::prio = seq % prio_levels
  std::chrono::milliseconds deadline = 20s;
  // Hooks: after the payload is set (e.g. a fake sender), and right after each dequeue.
  std::function<void(ctx&, int producer, int seq)> prepare;
  std::function<void(envelope&)> on_dequeued;
  // Consumer hand-off: when > 1, this many consumer threads take turns, each dequeuing a batch
  // and then handing the consumer role to the next through an atomic (release/acquire).
  int consumers = 1;
  int batch = 37;
  // Before every dequeue, check that empty() does not hide a message whose enqueue returned.
  bool check_visibility = true;
  // Pin every producer and consumer thread to one CPU, so that they preempt each other at
  // arbitrary instructions (a producer then often stops inside an enqueue for a whole time
  // slice while the others run).
  bool one_cpu = false;
  // Interrupt producers at random instructions (a signal whose handler sleeps), see preempter.
  bool preempt_producers = false;
  // Producers yield every 64 messages. Without it they are only ever switched out by the
  // scheduler's preemption, at arbitrary instructions.
  bool producer_yields = true;
};

struct stress_result {
  long attempted = 0;
  long accepted = 0;
  long refused_full = 0;
  long refused_other = 0;
  long dequeued = 0;
  long duplicates = 0;
  long order_violations = 0;
  long foreign = 0;  // payloads that are not a tagged of a known producer
  long capacity_violations = 0;
  long visibility_violations = 0;
  bool timed_out = false;
  std::string first_problem;
};

// Preemption injection: while alive, a thread interrupts the registered threads one after
// another with a signal whose handler sleeps for a few tens of microseconds. The interrupted
// thread stops at an arbitrary instruction -- often in the middle of an enqueue -- while the
// other threads run on, which makes narrow interleavings (a producer between two steps of its
// enqueue) frequent instead of rare.
class preempter {
 public:
  preempter() {
    struct sigaction sa {};
    sa.sa_handler = [](int) {
      const int saved_errno = errno;
      const timespec pause{0, 30'000};
      nanosleep(&pause, nullptr);
      errno = saved_errno;
    };
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, &old_);
  }
  preempter(const preempter&) = delete;
  preempter& operator=(const preempter&) = delete;
  ~preempter() {
    stop();
    sigaction(SIGUSR2, &old_, nullptr);
  }
  // Called by a thread that wants to be interrupted; it must call leave() before it exits.
  void enter() {
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.push_back(pthread_self());
  }
  void leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase(threads_, pthread_self());
  }
  void start() {
    thread_ = std::thread([this] {
      std::size_t next = 0;
      while (!stop_.load(std::memory_order_acquire)) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (!threads_.empty()) pthread_kill(threads_[next++ % threads_.size()], SIGUSR2);
        }
        std::this_thread::sleep_for(5us);
      }
    });
  }
  void stop() {
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct sigaction old_ {};
  std::mutex mutex_;
  std::vector<pthread_t> threads_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Pins the calling thread to the first CPU it may run on (best effort).
inline void pin_to_one_cpu() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      (void)pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      return;
    }
  }
}

inline stress_result run_stress(mailbox& mb, const stress_config& cfg) {
  stress_result r;
  std::atomic<long> accepted{0};
  std::atomic<long> refused_full{0};
  std::atomic<long> refused_other{0};
  std::atomic<int> producers_done{0};
  std::atomic<bool> go{false};
  // returned[p]: the last seq of producer p whose enqueue has returned ok (release after it).
  std::vector<std::atomic<int>> returned(static_cast<std::size_t>(cfg.producers));
  for (auto& x : returned) x.store(-1, std::memory_order_relaxed);

  std::unique_ptr<preempter> interrupts;
  if (cfg.preempt_producers) interrupts = std::make_unique<preempter>();

  std::vector<std::thread> producers;
  producers.reserve(static_cast<std::size_t>(cfg.producers));
  for (int p = 0; p < cfg.producers; ++p) {
    producers.emplace_back([&, p] {
      if (cfg.one_cpu) pin_to_one_cpu();
      if (interrupts) interrupts->enter();
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const auto shard = static_cast<std::uint32_t>(p) % k_stress_shards;
      for (int s = 0; s < cfg.per_producer; ++s) {
        ctx* e = make_tagged(p, s, s % cfg.prio_levels, shard);
        if (cfg.prepare) cfg.prepare(*e, p, s);
        for (;;) {
          const error err = mb.enqueue(e);
          if (!err) {
            returned[static_cast<std::size_t>(p)].store(s, std::memory_order_release);
            accepted.fetch_add(1, std::memory_order_seq_cst);
            break;
          }
          if (err == errc::mailbox_full && cfg.retry_when_full) {
            std::this_thread::yield();
            continue;
          }
          (err == errc::mailbox_full ? refused_full : refused_other).fetch_add(1);
          detail::context_access::sender(*e) = nullptr;  // may be a fake sender
          akt::recycle(e);
          break;
        }
        if (cfg.producer_yields && !cfg.one_cpu && s % 64 == 63) std::this_thread::yield();
      }
      if (interrupts) interrupts->leave();
      producers_done.fetch_add(1, std::memory_order_seq_cst);
    });
  }

  // Consumer state; touched only by the thread that currently holds the consumer role.
  const auto n_prod = static_cast<std::size_t>(cfg.producers);
  const auto per = static_cast<std::size_t>(cfg.per_producer);
  std::vector<std::vector<unsigned char>> seen(n_prod, std::vector<unsigned char>(per, 0));
  const int levels = cfg.order == order_check::per_producer_and_prio ? cfg.prio_levels : 1;
  std::vector<int> last(n_prod * static_cast<std::size_t>(levels), -1);
  long dequeued = 0;
  long duplicates = 0;
  long order_violations = 0;
  long foreign = 0;
  long capacity_violations = 0;
  long visibility_violations = 0;
  bool timed_out = false;
  std::string first_problem;
  std::vector<int> snapshot(n_prod, -1);
  const auto deadline = std::chrono::steady_clock::now() + cfg.deadline;

  auto note = [&](const std::string& what) {
    if (first_problem.empty()) first_problem = what;
  };
  auto finished = [&] {
    return producers_done.load(std::memory_order_seq_cst) == cfg.producers &&
           dequeued == accepted.load(std::memory_order_seq_cst);
  };
  // Visibility (mailbox.hpp): once enqueue has returned ok, empty() is false until that envelope
  // is dequeued. Every enqueue seen in `returned` before empty() was called must therefore have
  // been dequeued already when empty() answers true.
  auto check_visibility = [&] {
    for (std::size_t p = 0; p < n_prod; ++p) {
      snapshot[p] = returned[p].load(std::memory_order_acquire);
    }
    if (!mb.empty()) return;
    for (std::size_t p = 0; p < n_prod; ++p) {
      if (snapshot[p] >= 0 && seen[p][static_cast<std::size_t>(snapshot[p])] == 0) {
        ++visibility_violations;
        note("empty() was true while message " + std::to_string(p) + "/" +
             std::to_string(snapshot[p]) + ", whose enqueue had returned, was still queued");
        return;
      }
    }
  };
  // One dequeue attempt; false when nothing came out.
  auto consume_one = [&]() -> bool {
    if (cfg.check_visibility) check_visibility();
    envelope* e = mb.dequeue();
    if (e == nullptr) return false;
    if (cfg.on_dequeued) cfg.on_dequeued(*e);
    ++dequeued;
    if (cfg.capacity > 0) {
      // accepted counts enqueues that returned (a subset of those that took effect), dequeued
      // every dequeue so far (this one included): their difference never exceeds the true
      // occupancy, which must stay within the capacity.
      const long held = accepted.load(std::memory_order_seq_cst) - dequeued;
      if (held > static_cast<long>(cfg.capacity)) {
        ++capacity_violations;
        note("capacity exceeded: " + std::to_string(held));
      }
    }
    tagged* t = as_ctx(e)->message().get_if<tagged>();
    if (t == nullptr || t->producer < 0 || t->producer >= cfg.producers || t->seq < 0 ||
        t->seq >= cfg.per_producer) {
      ++foreign;
      note("foreign payload");
      return true;
    }
    const auto p = static_cast<std::size_t>(t->producer);
    const auto s = static_cast<std::size_t>(t->seq);
    if (seen[p][s] != 0) {
      ++duplicates;
      note("duplicate " + std::to_string(p) + "/" + std::to_string(s));
    }
    seen[p][s] = 1;
    if (cfg.order != order_check::none) {
      const std::size_t key = p * static_cast<std::size_t>(levels) +
                              (levels > 1 ? static_cast<std::size_t>(t->prio) : 0u);
      if (t->seq <= last[key]) {
        ++order_violations;
        note("order: producer " + std::to_string(p) + " seq " + std::to_string(t->seq) + " after " +
             std::to_string(last[key]));
      }
      last[key] = t->seq;
    }
    t->seq = -t->seq - 1;  // touch: a write TSan can pair with any other owner's access
    return true;
  };

  std::atomic<int> turn{0};
  std::atomic<bool> stop{false};
  auto consumer = [&](int id) {
    if (cfg.one_cpu) pin_to_one_cpu();
    for (;;) {
      if (stop.load(std::memory_order_acquire)) return;
      if (turn.load(std::memory_order_acquire) != id) {
        std::this_thread::yield();
        continue;
      }
      // This thread owns the consumer role until it stores the next turn.
      int got = 0;
      int idle = 0;
      while (got < cfg.batch || cfg.consumers == 1) {
        if (consume_one()) {
          ++got;
          idle = 0;
          continue;
        }
        if (finished()) break;
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out = true;
          mb.dispose();  // wakes producers blocked on a full bounded mailbox
          break;
        }
        if (++idle > 16) std::this_thread::yield();
        if (cfg.consumers > 1 && idle > 64) break;  // hand over while idle, too
      }
      if (timed_out || finished()) {
        stop.store(true, std::memory_order_release);
        return;
      }
      turn.store((id + 1) % cfg.consumers, std::memory_order_release);
    }
  };

  std::vector<std::thread> consumers;
  for (int c = 0; c < cfg.consumers; ++c) consumers.emplace_back(consumer, c);
  if (interrupts) interrupts->start();
  go.store(true, std::memory_order_release);
  for (auto& t : consumers) t.join();
  for (auto& t : producers) t.join();
  if (interrupts) interrupts->stop();

  r.attempted = static_cast<long>(cfg.producers) * cfg.per_producer;
  r.accepted = accepted.load();
  r.refused_full = refused_full.load();
  r.refused_other = refused_other.load();
  r.dequeued = dequeued;
  r.duplicates = duplicates;
  r.order_violations = order_violations;
  r.foreign = foreign;
  r.capacity_violations = capacity_violations;
  r.visibility_violations = visibility_violations;
  r.timed_out = timed_out;
  r.first_problem = first_problem;
  return r;
}

// Whether a run showed any problem (the verdict of expect_clean, without the capacity checks that
// depend on the configuration).
inline bool has_problem(const stress_result& r) {
  return r.timed_out || r.refused_other != 0 || r.dequeued != r.accepted || r.duplicates != 0 ||
         r.order_violations != 0 || r.foreign != 0 || r.capacity_violations != 0 ||
         r.visibility_violations != 0;
}

// Narrow races need many tries: runs the stress with preemption injection again and again until a
// run shows a problem or `budget` has passed. Returns the first run with a problem, else the last.
inline stress_result run_stress_under_preemption(mailbox& mb, stress_config cfg,
                                                 std::chrono::milliseconds budget = 1500ms) {
  cfg.preempt_producers = true;
  const auto until = std::chrono::steady_clock::now() + budget;
  stress_result r;
  int runs = 0;
  do {
    r = run_stress(mb, cfg);
    ++runs;
  } while (!has_problem(r) && std::chrono::steady_clock::now() < until);
  ::testing::Test::RecordProperty("stress_runs", runs);
  return r;
}

// The usual verdict: nothing lost, nothing duplicated, order kept, in time.
inline void expect_clean(const stress_result& r, bool expect_all_accepted = true) {
  EXPECT_FALSE(r.timed_out) << "consumer missed its deadline; dequeued " << r.dequeued << " of "
                            << r.accepted;
  if (expect_all_accepted) {
    EXPECT_EQ(r.accepted, r.attempted);
    EXPECT_EQ(r.refused_full, 0);
  }
  EXPECT_EQ(r.refused_other, 0);
  EXPECT_EQ(r.accepted + r.refused_full + r.refused_other, r.attempted);
  EXPECT_EQ(r.dequeued, r.accepted) << "accepted messages were lost";
  EXPECT_EQ(r.duplicates, 0);
  EXPECT_EQ(r.order_violations, 0);
  EXPECT_EQ(r.foreign, 0);
  EXPECT_EQ(r.capacity_violations, 0);
  EXPECT_EQ(r.visibility_violations, 0) << "empty() hid a message whose enqueue had returned";
  EXPECT_TRUE(r.first_problem.empty()) << r.first_problem;
}

// Polls pred until it holds or the timeout passes; returns its last value.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(200us);
  }
  return true;
}

// Runs fn on a thread and waits up to `timeout` for it to finish. On timeout it calls `rescue`
// (which must make fn return, e.g. dispose a mailbox) before joining. Returns whether fn finished
// in time.
inline bool finishes_within(const std::function<void()>& fn, std::chrono::milliseconds timeout,
                            const std::function<void()>& rescue) {
  std::atomic<bool> done{false};
  std::thread t([&] {
    fn();
    done.store(true, std::memory_order_release);
  });
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  const bool in_time = done.load(std::memory_order_acquire);
  if (!in_time) rescue();
  t.join();
  return in_time;
}

}  // namespace akt::mbtest
