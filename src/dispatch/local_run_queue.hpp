#pragma once
// local_run_queue: a worker's own ready queue (after the Go scheduler's per-P run queue).
//
// Contract
// - push: the owning worker only; wait-free; false when full (the caller spills to the global
//   queue).
// - pop: the owner; steal_half: any other worker. Lock-free (a CAS on head_).
// - FIFO for the owner; a steal takes the oldest half.
// - Memory: capacity pointers, inline; no allocation.
//
// Ordering: the owner writes a slot (relaxed) then publishes it with tail_ (release); consumers
// load tail_ (acquire) before reading slots. A consumer reads its slots before its head_ CAS
// (acq_rel), and the owner only overwrites a slot after an acquire load of head_ shows it free,
// so a slot is never overwritten while a consumer that will win may still read it.
// push_announced publishes with a seq_cst exchange instead, and size() reads tail_ seq_cst:
// the dispatcher's no-lost-wake-up protocol (a producer publishes, then reads who is parked; a
// parking worker announces itself, then looks at the queues) needs the publication and the look
// in the single total order. On x86 the exchange is one locked instruction, cheaper than a
// release store plus a full fence (an MFENCE serialises on AMD), and a seq_cst load is a plain
// load.

#include <atomic>
#include <cstdint>

#include "akt/dispatch/schedulable.hpp"
#include "akt/pool/mpmc_ring.hpp"

namespace akt::detail {

class local_run_queue {
 public:
  // Ready actors one worker keeps for itself before spilling to the global queue.
  static constexpr std::uint32_t capacity = 256;

  local_run_queue() noexcept {
    for (auto& s : slots_) s.store(nullptr, std::memory_order_relaxed);
  }

  bool push(schedulable* s) noexcept { return push_with(s, false); }
  // push, published in the total order of seq_cst operations (see above). Owner only.
  bool push_announced(schedulable* s) noexcept { return push_with(s, true); }

  schedulable* pop() noexcept {
    std::uint32_t h = head_.load(std::memory_order_acquire);
    for (;;) {
      const std::uint32_t t = tail_.load(std::memory_order_relaxed);
      if (t == h) return nullptr;
      schedulable* s = slots_[h % capacity].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        return s;
      }
    }
  }

  // Moves the oldest half of this queue into `into` (whose owner is the caller) and returns one
  // of them to run now, or null when there was nothing to take.
  schedulable* steal_half(local_run_queue& into) noexcept {
    schedulable* batch[capacity / 2];
    for (;;) {
      std::uint32_t h = head_.load(std::memory_order_acquire);
      const std::uint32_t t = tail_.load(std::memory_order_acquire);
      std::uint32_t n = t - h;
      n -= n / 2;
      if (n == 0) return nullptr;
      if (n > capacity / 2) continue;  // read head and tail at different moments: retry
      for (std::uint32_t i = 0; i < n; ++i) {
        batch[i] = slots_[(h + i) % capacity].load(std::memory_order_relaxed);
      }
      if (head_.compare_exchange_strong(h, h + n, std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
        for (std::uint32_t i = 1; i < n; ++i) {
          const bool ok = into.push(batch[i]);
          AKT_ASSERT(ok);  // the thief only steals when its own queue is empty
          (void)ok;
        }
        return batch[0];
      }
    }
  }

  std::uint32_t size() const noexcept {
    const std::uint32_t h = head_.load(std::memory_order_acquire);
    const std::uint32_t t = tail_.load(std::memory_order_seq_cst);
    return t - h;
  }
  bool empty() const noexcept { return size() == 0; }

 private:
  bool push_with(schedulable* s, bool announce) noexcept {
    const std::uint32_t h = head_.load(std::memory_order_acquire);
    const std::uint32_t t = tail_.load(std::memory_order_relaxed);
    if (t - h >= capacity) return false;
    slots_[t % capacity].store(s, std::memory_order_relaxed);
    if (announce)
      tail_.exchange(t + 1, std::memory_order_seq_cst);
    else
      tail_.store(t + 1, std::memory_order_release);
    return true;
  }

  // Writers: the owner (pop CAS) and thieves (steal CAS).
  alignas(cache_line) std::atomic<std::uint32_t> head_{0};
  // Writer: the owner (release store; seq_cst exchange in push_announced).
  alignas(cache_line) std::atomic<std::uint32_t> tail_{0};
  std::atomic<schedulable*> slots_[capacity];
};

}  // namespace akt::detail
