#include "dispatch/dispatcher.hpp"

#include <algorithm>

#include "akt/core/thread.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace akt::detail {

namespace {

// Every this many takes a worker looks at the global queue before its local one (fairness).
constexpr std::uint32_t k_global_check_interval = 61;
// Default idle polls before a worker parks. Each round is one scan of the queues plus
// k_pauses_per_round CPU pauses; together they bound an idle worker's spin to tens of
// microseconds, enough to catch the next message of a busy conversation without a sleep/wake.
constexpr unsigned k_default_spin_rounds = 64;
constexpr int k_pauses_per_round = 32;

// Parking slot values (worker::slot). Anything else is a schedulable handed over by a waker.
constexpr std::uintptr_t k_awake = 0;
constexpr std::uintptr_t k_parked = 1;
constexpr std::uintptr_t k_woken = 2;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

struct dispatcher::worker {
  dispatcher* owner = nullptr;
  unsigned id = 0;
  local_run_queue local;
  parker sleeper;
  // k_awake, k_parked, k_woken, or a hand-off. Writers: the worker (announce, cancel, reset)
  // and wakers (CAS k_parked -> k_woken / object, seq_cst).
  alignas(cache_line) std::atomic<std::uintptr_t> slot{k_awake};
  std::uint32_t ticks = 0;  // owner only
  // Figures, written by the owner only (relaxed), read by stats().
  std::atomic<std::uint64_t> turns{0};
  std::atomic<std::uint64_t> parks{0};
  std::atomic<std::uint64_t> steals{0};
  std::atomic<std::uint64_t> handoffs{0};
  std::thread thread;
  bool exited = false;  // guarded by the dispatcher's exit_mutex_
};

namespace {
void bump(std::atomic<std::uint64_t>& c) noexcept {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
}  // namespace

dispatcher::dispatcher(dispatcher_config cfg)
    : throughput_(std::max(1u, cfg.throughput)),
      spin_rounds_(cfg.spin_rounds == 0 ? k_default_spin_rounds : cfg.spin_rounds),
      manual_(cfg.manual),
      work_(cfg.work) {
  unsigned n = cfg.workers != 0 ? cfg.workers : std::thread::hardware_concurrency();
  n = cfg.manual ? 0 : std::max(1u, n);
  workers_.reserve(n);
  for (unsigned i = 0; i < n; ++i) {
    auto w = std::make_unique<worker>();
    w->owner = this;
    w->id = i;
    workers_.push_back(std::move(w));
  }
}

dispatcher::~dispatcher() { stop(); }

void dispatcher::start(std::shared_ptr<void> keep_alive) {
  if (started_) return;
  started_ = true;
  for (auto& w : workers_) {
    worker* raw = w.get();
    raw->thread = std::thread([this, raw, keep_alive] {
      worker_loop(*raw);
      {
        std::lock_guard<std::mutex> lock(exit_mutex_);
        raw->exited = true;
        ++exited_;
      }
      exited_cv_.notify_all();
      // keep_alive goes last, with the thread's closure: it may release the dispatcher's owner.
    });
  }
}

unsigned dispatcher::stop(std::chrono::steady_clock::time_point deadline) {
  if (closed_.load(std::memory_order_acquire)) return 0;
  stopping_.store(true, std::memory_order_seq_cst);
  for (auto& w : workers_) {
    std::uintptr_t expected = k_parked;
    if (w->slot.compare_exchange_strong(expected, k_woken, std::memory_order_seq_cst)) {
      parked_.fetch_sub(1, std::memory_order_relaxed);
      w->sleeper.unpark();
    }
  }
  unsigned left_behind = 0;
  if (started_) {
    std::unique_lock<std::mutex> lock(exit_mutex_);
    const auto all_out = [this] { return exited_ == workers_.size(); };
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      exited_cv_.wait(lock, all_out);
    } else {
      exited_cv_.wait_until(lock, deadline, all_out);
    }
    left_behind = static_cast<unsigned>(workers_.size()) - exited_;
  }
  for (auto& w : workers_) {
    if (!w->thread.joinable()) continue;
    bool out;
    {
      std::lock_guard<std::mutex> lock(exit_mutex_);
      out = w->exited;
    }
    if (out)
      w->thread.join();
    else
      w->thread.detach();  // stuck in a handler; it exits by itself when the handler returns
  }
  closed_.store(true, std::memory_order_seq_cst);
  drain_inline();
  return left_behind;
}

dispatcher::worker* dispatcher::this_worker() const noexcept {
  auto* w = static_cast<worker*>(current_worker);
  return (w != nullptr && w->owner == this) ? w : nullptr;
}

bool dispatcher::on_own_worker() const noexcept { return this_worker() != nullptr; }

dispatcher_stats dispatcher::stats() const noexcept {
  dispatcher_stats s;
  for (const auto& w : workers_) {
    s.turns += w->turns.load(std::memory_order_relaxed);
    s.parks += w->parks.load(std::memory_order_relaxed);
    s.steals += w->steals.load(std::memory_order_relaxed);
    s.handoffs += w->handoffs.load(std::memory_order_relaxed);
  }
  return s;
}

void dispatcher::schedule(schedulable* s) noexcept {
  if (work_ != nullptr) work_->fetch_add(1, std::memory_order_seq_cst);
  if (closed_.load(std::memory_order_acquire)) {
    run_inline(s);
    return;
  }
  if (manual_) {
    push_global(s);  // run by run_one / run_until_idle, in this order
    return;
  }
  if (worker* w = this_worker()) {
    // Published seq_cst (like push_global's count) before notify_work reads the spinner and
    // parked counts: the mirror of a parking worker's announce-then-look. With a plain release
    // store both could read the old values, and nobody would wake.
    if (!w->local.push_announced(s)) push_global(s);
    notify_work();
    return;
  }
  if (try_handoff(s)) return;
  push_global(s);
  notify_work();
  // stop() may have drained the global queue between our closed_ check and our push.
  if (closed_.load(std::memory_order_seq_cst)) drain_inline();
}

void dispatcher::push_global(schedulable* s) noexcept {
  if (!global_.try_push(s)) {
    std::lock_guard<std::mutex> lock(overflow_mutex_);
    overflow_.push_back(s);
  }
  global_count_.fetch_add(1, std::memory_order_seq_cst);
}

schedulable* dispatcher::pop_global() noexcept {
  if (global_count_.load(std::memory_order_acquire) <= 0) return nullptr;
  schedulable* s = nullptr;
  if (!global_.try_pop(s)) {
    std::lock_guard<std::mutex> lock(overflow_mutex_);
    if (overflow_.empty()) return nullptr;  // counted but not yet pushed: seen next time
    s = overflow_.front();
    overflow_.pop_front();
  }
  global_count_.fetch_sub(1, std::memory_order_relaxed);
  return s;
}

bool dispatcher::has_global_work() const noexcept {
  return global_count_.load(std::memory_order_seq_cst) > 0;
}

bool dispatcher::has_visible_work() const noexcept {
  if (has_global_work()) return true;
  for (const auto& w : workers_) {
    if (!w->local.empty()) return true;
  }
  return false;
}

dispatcher::worker* dispatcher::claim_parked(std::uintptr_t value) noexcept {
  const auto n = static_cast<unsigned>(workers_.size());
  const unsigned first = last_parked_.load(std::memory_order_relaxed);
  for (unsigned i = 0; i < n; ++i) {
    worker& w = *workers_[(first + n - i) % n];  // the hint first, then backwards
    std::uintptr_t expected = k_parked;
    if (w.slot.load(std::memory_order_relaxed) == k_parked &&
        w.slot.compare_exchange_strong(expected, value, std::memory_order_seq_cst)) {
      parked_.fetch_sub(1, std::memory_order_relaxed);
      return &w;
    }
  }
  return nullptr;
}

bool dispatcher::try_handoff(schedulable* s) noexcept {
  // A spinning worker will find it on the global queue without a wake-up system call.
  if (spinning_.load(std::memory_order_seq_cst) != 0) return false;
  if (parked_.load(std::memory_order_seq_cst) == 0) return false;
  if (worker* w = claim_parked(reinterpret_cast<std::uintptr_t>(s))) {
    w->sleeper.unpark();
    return true;
  }
  return false;
}

void dispatcher::notify_work() noexcept {
  if (spinning_.load(std::memory_order_seq_cst) != 0) return;  // a spinner will find it
  if (parked_.load(std::memory_order_seq_cst) == 0) return;
  if (worker* w = claim_parked(k_woken)) w->sleeper.unpark();
}

schedulable* dispatcher::steal(worker& w) noexcept {
  const auto n = static_cast<unsigned>(workers_.size());
  for (unsigned i = 1; i < n; ++i) {
    worker& victim = *workers_[(w.id + i) % n];
    if (victim.local.empty()) continue;
    if (schedulable* s = victim.local.steal_half(w.local)) {
      bump(w.steals);
      return s;
    }
  }
  return nullptr;
}

schedulable* dispatcher::find_work(worker& w) noexcept {
  if (++w.ticks % k_global_check_interval == 0) {
    if (schedulable* s = pop_global()) return s;
  }
  if (schedulable* s = w.local.pop()) return s;
  if (schedulable* s = pop_global()) return s;
  return steal(w);
}

schedulable* dispatcher::spin_for_work(worker& w) noexcept {
  const int n = static_cast<int>(workers_.size());
  // At most half of the workers (at least one) spin, so idle workers leave CPU to busy threads.
  int spinners = spinning_.load(std::memory_order_relaxed);
  do {
    if (spinners * 2 >= std::max(n, 2)) return nullptr;
  } while (!spinning_.compare_exchange_weak(spinners, spinners + 1, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
  schedulable* s = nullptr;
  for (unsigned round = 0; round < spin_rounds_ && s == nullptr; ++round) {
    for (int i = 0; i < k_pauses_per_round; ++i) cpu_relax();
    if (stopping_.load(std::memory_order_relaxed)) break;
    s = find_work(w);
  }
  const int left = spinning_.fetch_sub(1, std::memory_order_seq_cst) - 1;
  // Producers skip the wake-up while a worker spins, but a spinner takes one object. The last
  // spinner to leave with work passes the wake-up on when more is ready: otherwise that work
  // waits for a parked worker nobody wakes, behind a turn of ours that may block. A producer
  // that saw us spinning published (seq_cst) before our decrement, so the re-check below sees
  // its work; one that publishes after it sees no spinner and wakes a worker itself.
  if (s != nullptr && left == 0 && has_visible_work()) notify_work();
  return s;
}

schedulable* dispatcher::park_for_work(worker& w) noexcept {
  w.slot.store(k_parked, std::memory_order_seq_cst);
  last_parked_.store(w.id, std::memory_order_relaxed);
  parked_.fetch_add(1, std::memory_order_seq_cst);
  // Re-check after announcing: a producer that published before our announcement is seen here;
  // one that publishes after it sees us parked.
  if (has_visible_work() || stopping_.load(std::memory_order_seq_cst)) {
    std::uintptr_t expected = k_parked;
    if (w.slot.compare_exchange_strong(expected, k_awake, std::memory_order_seq_cst)) {
      parked_.fetch_sub(1, std::memory_order_relaxed);
      return find_work(w);
    }
    // A waker claimed us in between; its value is in the slot (its unpark leaves a permit that
    // at most causes one spurious wake later).
  } else {
    bump(w.parks);
    while (w.slot.load(std::memory_order_acquire) == k_parked) w.sleeper.park();
  }
  const std::uintptr_t v = w.slot.exchange(k_awake, std::memory_order_acquire);
  if (v != k_woken && v != k_awake && v != k_parked) {
    bump(w.handoffs);
    return reinterpret_cast<schedulable*>(v);
  }
  return find_work(w);
}

void dispatcher::run(schedulable* s, worker* w) noexcept {
  for (;;) {
    bump(w->turns);
    if (!s->run_turn(throughput_)) {
      turn_ended();
      return;
    }
    // Budget spent. When nothing else waits here or on the global queue, keep going with the
    // same actor instead of queueing it: a lone actor in a local queue is what an idle sibling
    // would steal, and bouncing a busy actor between cores every turn costs more than the turn.
    if (w->local.empty() && global_count_.load(std::memory_order_relaxed) <= 0 &&
        !stopping_.load(std::memory_order_relaxed)) {
      continue;
    }
    if (!w->local.push(s)) push_global(s);
    return;
  }
}

bool dispatcher::run_one() noexcept {
  schedulable* s = pop_global();
  if (s == nullptr) return false;
  if (s->run_turn(throughput_))
    push_global(s);
  else
    turn_ended();
  return true;
}

std::size_t dispatcher::run_until_idle(std::size_t max_turns) noexcept {
  std::size_t turns = 0;
  while (turns < max_turns && run_one()) ++turns;
  return turns;
}

void dispatcher::run_inline(schedulable* s) noexcept {
  while (s->run_turn(throughput_)) {
  }
  turn_ended();
}

void dispatcher::drain_inline() noexcept {
  for (;;) {
    schedulable* s = pop_global();
    if (s == nullptr) {
      for (auto& w : workers_) {
        if ((s = w->local.pop()) != nullptr) break;
      }
    }
    if (s == nullptr) return;
    run_inline(s);
  }
}

void dispatcher::worker_loop(worker& w) {
  current_worker = &w;
  for (;;) {
    schedulable* s = find_work(w);
    if (s == nullptr) s = spin_for_work(w);
    if (s == nullptr) {
      if (stopping_.load(std::memory_order_seq_cst) && !has_visible_work()) break;
      s = park_for_work(w);
      if (s == nullptr) continue;
    }
    run(s, &w);
  }
  current_worker = nullptr;
}

}  // namespace akt::detail
