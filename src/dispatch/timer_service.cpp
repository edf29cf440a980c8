// timer_service: a hashed timing wheel of 1 ms ticks with a min-heap for far deadlines, fed by
// a lock-free intake stack and a slab of nodes addressed by generation-tagged handles.

#include "dispatch/timer_service.hpp"

#include <algorithm>
#include <bit>
#include <limits>

#include "akt/core/assert.hpp"
#include "akt/core/thread.hpp"
#include "core/futex.hpp"

namespace akt::detail {

namespace {

// Phases of a node's state word (low 32 bits; the generation is the high 32 bits).
constexpr std::uint64_t k_free = 0;
constexpr std::uint64_t k_pending = 1;    // scheduled, will run unless cancelled
constexpr std::uint64_t k_firing = 2;     // claimed by the timer thread: runs (or ran)
constexpr std::uint64_t k_cancelled = 3;  // claimed by cancel(): never runs

constexpr std::uint64_t k_low = 0xffffffffu;
// sleep_target_ while the timer thread is awake: no scheduler needs to wake it.
constexpr std::int64_t k_awake = std::numeric_limits<std::int64_t>::min();
// Deadlines are clamped here so that tick arithmetic cannot overflow.
constexpr std::int64_t k_max_deadline_ns = std::numeric_limits<std::int64_t>::max() / 4;
// The longest single sleep: keeps the futex timeout arithmetic far from overflow. Costs one
// wake-up an hour when idle.
constexpr std::int64_t k_max_sleep_ns = 3600LL * 1'000'000'000;
// The heap is compacted when the cancels since the last compaction reach max(this, half the
// heap): bounds the scans of small heaps and keeps compaction amortised O(1) per cancel.
constexpr std::uint64_t k_min_compaction = 1024;

constexpr std::uint64_t state_word(std::uint64_t gen, std::uint64_t phase) {
  return (gen << 32) | phase;
}

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             timer_service::clock::now().time_since_epoch())
      .count();
}

// The tick at which a deadline is due: the first tick boundary at or after it, so a callback
// never runs early.
std::int64_t tick_of(std::int64_t deadline_ns) noexcept {
  return (deadline_ns + timer_service::k_tick_ns - 1) / timer_service::k_tick_ns;
}

}  // namespace

struct timer_service::node {
  // Generation (high 32) | phase (low 32). Writers: the scheduler (pending, before publishing
  // the node through intake_), cancel() (pending -> cancelled, CAS), the timer thread (pending
  // -> firing, CAS; then a new generation, free). Stale handles fail the CAS on the generation.
  std::atomic<std::uint64_t> state{state_word(1, k_free)};
  // Written by the scheduler before the intake push (release), read by the timer thread.
  std::int64_t deadline_ns = 0;
  // Link in exactly one list at a time: the free list, the intake stack or a wheel slot.
  // Atomic because a failed Treiber pop may read it while the node's new owner writes it.
  std::atomic<std::uint32_t> next{0};
  callback fn;
};

timer_service::timer_service(bool manual_time)
    : chunks_(std::make_unique<std::atomic<node*>[]>(k_max_chunks)),
      sleep_target_(k_awake),
      manual_(manual_time),
      // On a tick boundary, so that advancing by whole ticks reaches deadlines exactly.
      virtual_start_ns_(steady_ns() / k_tick_ns * k_tick_ns),
      wall_start_(std::chrono::system_clock::now()),
      slot_head_(k_wheel_slots, 0),
      slot_bits_(k_wheel_slots / 64, 0) {
  static_assert(k_wheel_slots % 64 == 0 && std::has_single_bit(k_wheel_slots));
  virtual_ns_.store(virtual_start_ns_, std::memory_order_relaxed);
  if (manual_) processed_tick_ = virtual_start_ns_ / k_tick_ns;
}

std::chrono::system_clock::time_point timer_service::wall_now() const noexcept {
  if (!manual_) return std::chrono::system_clock::now();
  return wall_start_ + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           std::chrono::nanoseconds(now_ns() - virtual_start_ns_));
}

timer_service::~timer_service() {
  stop();
  const std::uint32_t n = chunk_count_.load(std::memory_order_acquire);
  for (std::uint32_t c = 0; c < n; ++c) delete[] chunks_[c].load(std::memory_order_relaxed);
}

std::size_t timer_service::node_bytes() noexcept {
  static_assert(sizeof(node) <= 64, "the contract states 56 bytes per timer");
  return sizeof(node);
}

std::size_t timer_service::slab_bytes() const noexcept {
  return std::size_t{chunk_count_.load(std::memory_order_relaxed)} * k_chunk_nodes * sizeof(node);
}

std::size_t timer_service::pending() const noexcept {
  const auto n = pending_.load(std::memory_order_relaxed);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

std::size_t timer_service::retained() const noexcept {
  const auto n = retained_.load(std::memory_order_relaxed);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

timer_service::node& timer_service::at(std::uint32_t id) const noexcept {
  const std::uint32_t i = id - 1;
  return chunks_[i / k_chunk_nodes].load(std::memory_order_acquire)[i % k_chunk_nodes];
}

// ---- the slab and its free list ----

std::uint32_t timer_service::allocate() {
  for (;;) {
    std::uint64_t head = free_head_.load(std::memory_order_acquire);
    while (const auto id = static_cast<std::uint32_t>(head & k_low)) {
      const std::uint64_t next = at(id).next.load(std::memory_order_relaxed);
      const std::uint64_t tagged = (((head >> 32) + 1) << 32) | next;
      if (free_head_.compare_exchange_weak(head, tagged, std::memory_order_acquire,
                                           std::memory_order_acquire)) {
        retained_.fetch_add(1, std::memory_order_relaxed);
        return id;
      }
    }
    std::lock_guard<std::mutex> lock(grow_mutex_);
    if (free_head_.load(std::memory_order_acquire) & k_low) continue;  // refilled meanwhile
    const std::uint32_t c = chunk_count_.load(std::memory_order_relaxed);
    if (c == k_max_chunks) return 0;
    node* chunk = new node[k_chunk_nodes];
    chunks_[c].store(chunk, std::memory_order_release);
    chunk_count_.store(c + 1, std::memory_order_release);
    // The caller takes the first node; the rest go to the free list as one chain. The chunk is
    // published above, before any of its ids can be popped (the push below releases it).
    const std::uint32_t base = c * k_chunk_nodes + 1;
    for (std::uint32_t i = 1; i + 1 < k_chunk_nodes; ++i) {
      chunk[i].next.store(base + i + 1, std::memory_order_relaxed);
    }
    push_free_chain(base + 1, base + k_chunk_nodes - 1);
    retained_.fetch_add(1, std::memory_order_relaxed);
    return base;
  }
}

void timer_service::push_free_chain(std::uint32_t first, std::uint32_t last) noexcept {
  node& tail = at(last);
  std::uint64_t head = free_head_.load(std::memory_order_relaxed);
  for (;;) {
    tail.next.store(static_cast<std::uint32_t>(head & k_low), std::memory_order_relaxed);
    const std::uint64_t tagged = (((head >> 32) + 1) << 32) | first;
    if (free_head_.compare_exchange_weak(head, tagged, std::memory_order_release,
                                         std::memory_order_relaxed)) {
      return;
    }
  }
}

void timer_service::release(std::uint32_t id) noexcept {
  node& n = at(id);
  n.fn = nullptr;  // the captures die here, on the timer thread (or in stop)
  const std::uint64_t gen = n.state.load(std::memory_order_relaxed) >> 32;
  // Skip generation 0 on wrap-around so that no handle id is ever 0.
  const std::uint64_t next_gen = (gen + 1) & k_low;
  n.state.store(state_word(next_gen == 0 ? 1 : next_gen, k_free), std::memory_order_relaxed);
  retained_.fetch_sub(1, std::memory_order_relaxed);
  push_free_chain(id, id);
}

// ---- any thread ----

timer_service::handle timer_service::schedule_after(clock::duration d, callback fn) {
  const auto now = this->now();
  const auto max_d = clock::time_point::max() - now;
  return schedule_at(d > max_d ? clock::time_point::max() : now + d, std::move(fn));
}

timer_service::handle timer_service::schedule_at(clock::time_point when, callback fn) {
  if (stopped_.load(std::memory_order_acquire)) return {};
  const std::uint32_t id = allocate();
  if (id == 0) return {};  // capacity exhausted: k_max_chunks * k_chunk_nodes held at once
  node& n = at(id);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch());
  n.deadline_ns = std::clamp<std::int64_t>(ns.count(), 0, k_max_deadline_ns);
  n.fn = std::move(fn);
  const std::uint64_t gen = n.state.load(std::memory_order_relaxed) >> 32;
  n.state.store(state_word(gen, k_pending), std::memory_order_relaxed);
  pending_.fetch_add(1, std::memory_order_relaxed);
  const std::int64_t deadline = n.deadline_ns;  // n belongs to the timer thread after the push

  std::uint32_t head = intake_.load(std::memory_order_relaxed);
  do {
    n.next.store(head, std::memory_order_relaxed);
  } while (!intake_.compare_exchange_weak(head, id, std::memory_order_seq_cst,
                                          std::memory_order_relaxed));
  // Wake protocol (Dekker with the timer thread): push (seq_cst), then read sleep_target_
  // (seq_cst); the timer thread stores sleep_target_ (seq_cst), then reads intake_. One of us
  // sees the other. Only the scheduler that swaps the target to k_awake pays the system call.
  if (manual_) return handle{state_word(gen, id)};  // no thread to wake: advance_time drains
  std::int64_t target = sleep_target_.load(std::memory_order_seq_cst);
  if (tick_of(deadline) * k_tick_ns < target &&
      sleep_target_.compare_exchange_strong(target, k_awake, std::memory_order_seq_cst)) {
    wake();
  }
  return handle{state_word(gen, id)};
}

bool timer_service::cancel(handle h) {
  const auto id = static_cast<std::uint32_t>(h.id & k_low);
  if (id == 0) return false;
  const std::uint32_t c = (id - 1) / k_chunk_nodes;
  if (c >= k_max_chunks || chunks_[c].load(std::memory_order_acquire) == nullptr) return false;
  const std::uint64_t gen = h.id >> 32;
  std::uint64_t expected = state_word(gen, k_pending);
  if (!at(id).state.compare_exchange_strong(expected, state_word(gen, k_cancelled),
                                            std::memory_order_acq_rel, std::memory_order_relaxed)) {
    return false;  // fired, firing, already cancelled, dropped, or a stale handle
  }
  pending_.fetch_sub(1, std::memory_order_relaxed);
  // Enough cancelled nodes may now sit in the heap to be worth a compaction: wake a sleeping
  // timer thread (Dekker with its pre-sleep check of cancels_; one waker per sleep).
  const std::uint64_t n = cancels_.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (!manual_ && n >= compact_at_.load(std::memory_order_seq_cst)) {
    std::int64_t target = sleep_target_.load(std::memory_order_seq_cst);
    if (target != k_awake &&
        sleep_target_.compare_exchange_strong(target, k_awake, std::memory_order_seq_cst)) {
      wake();
    }
  }
  return true;
}

void timer_service::wake() noexcept {
  wake_seq_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&wake_seq_);
}

// ---- lifecycle ----

void timer_service::start() {
  std::lock_guard<std::mutex> lock(lifecycle_mutex_);
  if (manual_ || stopped_.load(std::memory_order_relaxed) || thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

void timer_service::stop() {
  std::lock_guard<std::mutex> lock(lifecycle_mutex_);
  if (stopped_.load(std::memory_order_relaxed)) return;
  AKT_ASSERT(!thread_.joinable() || thread_.get_id() != std::this_thread::get_id());
  stopped_.store(true, std::memory_order_release);
  stopping_.store(true, std::memory_order_release);
  wake();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> owner(advance_mutex_);  // manual time: no advance in progress
  drop_all();  // after the join: the timer thread's state is ours now
}

// ---- manual time ----

std::size_t timer_service::advance_time(clock::duration d, const std::function<void()>& settle) {
  if (!manual_ || d < clock::duration::zero()) return 0;
  std::lock_guard<std::mutex> owner(advance_mutex_);
  if (stopped_.load(std::memory_order_acquire)) return 0;
  const std::int64_t from = virtual_ns_.load(std::memory_order_relaxed);
  const std::int64_t target = std::min<std::int64_t>(
      k_max_deadline_ns, from + std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  const std::int64_t target_tick = target / k_tick_ns;
  const std::uint64_t fired_before = fired_;
  std::vector<std::uint32_t> due;
  const auto run_batch = [&](std::vector<std::uint32_t>& batch) {
    fire(batch);
    if (settle) settle();
  };
  for (;;) {
    // Timers scheduled since the last look (by the test, by callbacks, by what settle let
    // run): those already due run now, at the current virtual time, before it moves on.
    due.clear();
    drain_intake(due);
    if (!due.empty()) {
      run_batch(due);
      continue;
    }
    maybe_compact_heap();
    const std::int64_t next = next_deadline_tick();
    if (next > target_tick) break;  // also: nothing pending (max)
    virtual_ns_.store(std::max(from, next * k_tick_ns), std::memory_order_release);
    advance(next, due);  // fires the slot of tick `next` (after migrating heap entries)
    if (settle) settle();
  }
  if (processed_tick_ < target_tick) processed_tick_ = target_tick;
  virtual_ns_.store(target, std::memory_order_release);
  return static_cast<std::size_t>(fired_ - fired_before);
}

// ---- the timer thread ----

void timer_service::run() {
  std::vector<std::uint32_t> due;
  processed_tick_ = steady_ns() / k_tick_ns;
  while (!stopping_.load(std::memory_order_acquire)) {
    due.clear();
    drain_intake(due);
    fire(due);  // deadlines already past: they precede every slot still to come
    maybe_compact_heap();
    advance(steady_ns() / k_tick_ns, due);

    const std::uint32_t seq = wake_seq_.load(std::memory_order_acquire);
    const std::int64_t next = next_deadline_tick();
    const std::int64_t now = steady_ns();
    const std::int64_t target = next == std::numeric_limits<std::int64_t>::max()
                                    ? now + k_max_sleep_ns
                                    : std::min(next * k_tick_ns, now + k_max_sleep_ns);
    compact_at_.store(compaction_threshold(), std::memory_order_seq_cst);
    sleep_target_.store(target, std::memory_order_seq_cst);
    if (intake_.load(std::memory_order_seq_cst) == 0 &&
        cancels_.load(std::memory_order_seq_cst) < compact_at_.load(std::memory_order_relaxed) &&
        !stopping_.load(std::memory_order_acquire) && now < target) {
      futex_wait_until(&wake_seq_, seq, target);
    }
    sleep_target_.store(k_awake, std::memory_order_seq_cst);
  }
}

void timer_service::drain_intake(std::vector<std::uint32_t>& due) {
  std::uint32_t id = intake_.exchange(0, std::memory_order_acq_rel);
  while (id != 0) {
    const std::uint32_t next = at(id).next.load(std::memory_order_relaxed);
    insert(id, due);
    id = next;
  }
}

void timer_service::insert(std::uint32_t id, std::vector<std::uint32_t>& due) {
  node& n = at(id);
  if ((n.state.load(std::memory_order_acquire) & k_low) == k_cancelled) {
    release(id);
    return;
  }
  const std::int64_t tick = tick_of(n.deadline_ns);
  if (tick <= processed_tick_) {
    due.push_back(id);
  } else if (tick <= processed_tick_ + k_wheel_slots) {
    // Wheel entries satisfy processed < tick <= processed + slots, so a slot holds one tick.
    const auto slot = static_cast<std::uint32_t>(tick) & (k_wheel_slots - 1);
    n.next.store(slot_head_[slot], std::memory_order_relaxed);
    slot_head_[slot] = id;
    slot_bits_[slot / 64] |= std::uint64_t{1} << (slot % 64);
    ++wheel_count_;
  } else {
    heap_.push_back({n.deadline_ns, id});
    std::push_heap(heap_.begin(), heap_.end(), [](const heap_entry& a, const heap_entry& b) {
      return a.deadline_ns > b.deadline_ns;
    });
  }
}

void timer_service::migrate_from_heap(std::vector<std::uint32_t>& due) {
  const auto later = [](const heap_entry& a, const heap_entry& b) {
    return a.deadline_ns > b.deadline_ns;
  };
  while (!heap_.empty() && tick_of(heap_.front().deadline_ns) <= processed_tick_ + k_wheel_slots) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const std::uint32_t id = heap_.back().id;
    heap_.pop_back();
    insert(id, due);
  }
}

std::int64_t timer_service::next_deadline_tick() const noexcept {
  if (wheel_count_ > 0) {
    const auto start = static_cast<std::uint32_t>(processed_tick_ + 1) & (k_wheel_slots - 1);
    for (std::uint32_t off = 0; off < k_wheel_slots;) {
      const std::uint32_t s = (start + off) & (k_wheel_slots - 1);
      const std::uint64_t bits = slot_bits_[s / 64] >> (s % 64);
      if (bits != 0) return processed_tick_ + 1 + off + std::countr_zero(bits);
      off += 64 - s % 64;
    }
  }
  if (!heap_.empty()) return tick_of(heap_.front().deadline_ns);
  return std::numeric_limits<std::int64_t>::max();
}

void timer_service::advance(std::int64_t now_tick, std::vector<std::uint32_t>& due) {
  while (processed_tick_ < now_tick) {
    due.clear();
    migrate_from_heap(due);  // nothing is due here: heap ticks exceed processed + slots
    fire(due);
    const std::int64_t next = next_deadline_tick();
    if (next > now_tick) {
      processed_tick_ = now_tick;
      return;
    }
    if (wheel_count_ == 0) {
      processed_tick_ = next - 1;  // jump to just before the heap's first: it migrates next pass
      continue;
    }
    // Fire the slot of tick `next`, in deadline order.
    processed_tick_ = next;
    const auto slot = static_cast<std::uint32_t>(next) & (k_wheel_slots - 1);
    batch_.clear();
    for (std::uint32_t id = slot_head_[slot]; id != 0;
         id = at(id).next.load(std::memory_order_relaxed)) {
      batch_.push_back(id);
    }
    slot_head_[slot] = 0;
    slot_bits_[slot / 64] &= ~(std::uint64_t{1} << (slot % 64));
    wheel_count_ -= batch_.size();
    fire(batch_);
  }
}

void timer_service::fire(std::vector<std::uint32_t>& ids) {
  if (ids.size() > 1) {
    std::sort(ids.begin(), ids.end(), [this](std::uint32_t a, std::uint32_t b) {
      return at(a).deadline_ns < at(b).deadline_ns;
    });
  }
  for (const std::uint32_t id : ids) {
    node& n = at(id);
    const std::uint64_t gen = n.state.load(std::memory_order_relaxed) >> 32;
    std::uint64_t expected = state_word(gen, k_pending);
    if (n.state.compare_exchange_strong(expected, state_word(gen, k_firing),
                                        std::memory_order_acq_rel, std::memory_order_relaxed)) {
      pending_.fetch_sub(1, std::memory_order_relaxed);
      ++fired_;
      // Callbacks may set the thread's never_block; under manual time this is the test's
      // thread, which must get its own back (a blocking ask after an advance is allowed).
      const bool never_block_was = never_block;
      try {
        n.fn();
      } catch (...) {
        // A throwing callback is a bug in the runtime; the timer thread must outlive it.
      }
      never_block = never_block_was;
    }
    release(id);
  }
  ids.clear();
}

std::uint64_t timer_service::compaction_threshold() const noexcept {
  if (heap_.empty()) return std::numeric_limits<std::uint64_t>::max();
  return cancels_at_compaction_ + std::max<std::uint64_t>(k_min_compaction, heap_.size() / 2);
}

void timer_service::maybe_compact_heap() {
  const std::uint64_t c = cancels_.load(std::memory_order_relaxed);
  if (c < compaction_threshold()) return;
  cancels_at_compaction_ = c;
  const auto kept = std::remove_if(heap_.begin(), heap_.end(), [this](const heap_entry& e) {
    if ((at(e.id).state.load(std::memory_order_acquire) & k_low) != k_cancelled) return false;
    release(e.id);
    return true;
  });
  heap_.erase(kept, heap_.end());
  std::make_heap(heap_.begin(), heap_.end(), [](const heap_entry& a, const heap_entry& b) {
    return a.deadline_ns > b.deadline_ns;
  });
}

void timer_service::drop_all() noexcept {
  std::vector<std::uint32_t> ids;
  for (std::uint32_t id = intake_.exchange(0, std::memory_order_acq_rel); id != 0;
       id = at(id).next.load(std::memory_order_relaxed)) {
    ids.push_back(id);
  }
  for (std::uint32_t s = 0; s < k_wheel_slots; ++s) {
    for (std::uint32_t id = slot_head_[s]; id != 0;
         id = at(id).next.load(std::memory_order_relaxed)) {
      ids.push_back(id);
    }
    slot_head_[s] = 0;
  }
  std::fill(slot_bits_.begin(), slot_bits_.end(), 0);
  wheel_count_ = 0;
  for (const auto& e : heap_) ids.push_back(e.id);
  heap_.clear();
  for (const std::uint32_t id : ids) {
    node& n = at(id);
    const std::uint64_t gen = n.state.load(std::memory_order_relaxed) >> 32;
    std::uint64_t expected = state_word(gen, k_pending);
    if (n.state.compare_exchange_strong(expected, state_word(gen, k_cancelled),
                                        std::memory_order_acq_rel, std::memory_order_relaxed)) {
      pending_.fetch_sub(1, std::memory_order_relaxed);
    }
    release(id);
  }
}

}  // namespace akt::detail
