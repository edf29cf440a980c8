#pragma once
// mpsc_ring<T>: bounded multi-producer single-consumer array queue with per-cell sequence numbers
// (Vyukov's bounded queue, consumer side simplified because it has one owner).
//
// Contract
// - try_push: any thread, lock-free; false only when the ring is full.
// - try_pop: one consumer at a time; false when empty or when the next claimed cell is not
//   published yet (its producer is between claim and publish).
// - FIFO in claim order. Capacity is a power of two fixed at construction; no allocation after.
// - Ordering: producers claim with a seq_cst CAS on enqueue_pos_ (so claimed() is ordered with
//   the dispatcher's seq_cst state operations), write the value, then publish seq (release); the
//   consumer loads seq (acquire) before the value.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "akt/core/assert.hpp"
#include "akt/pool/mpmc_ring.hpp"

namespace akt {

constexpr std::size_t next_power_of_two(std::size_t n) noexcept {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

template <class T>
class mpsc_ring {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  explicit mpsc_ring(std::size_t capacity) : mask_(capacity - 1), cells_(new cell[capacity]) {
    AKT_ASSERT(capacity >= 2 && (capacity & (capacity - 1)) == 0);
    for (std::size_t i = 0; i < capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }

  std::size_t capacity() const noexcept { return mask_ + 1; }

  bool try_push(T value) noexcept {
    std::uint64_t pos = enqueue_pos_.load(std::memory_order_relaxed);
    for (;;) {
      cell& c = cells_[pos & mask_];
      const std::uint64_t seq = c.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::int64_t>(seq - pos);
      if (diff == 0) {
        if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst,
                                               std::memory_order_relaxed)) {
          c.value = value;
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;
      } else {
        pos = enqueue_pos_.load(std::memory_order_relaxed);
      }
    }
  }

  bool try_pop(T& out) noexcept {
    const std::uint64_t pos = dequeue_pos_.load(std::memory_order_relaxed);
    cell& c = cells_[pos & mask_];
    if (c.seq.load(std::memory_order_acquire) != pos + 1) return false;
    out = c.value;
    c.value = T{};
    c.seq.store(pos + mask_ + 1, std::memory_order_release);
    dequeue_pos_.store(pos + 1, std::memory_order_release);
    return true;
  }

  // Positions claimed by producers and not yet popped (published or about to be).
  std::size_t claimed() const noexcept {
    const std::uint64_t e = enqueue_pos_.load(std::memory_order_seq_cst);
    const std::uint64_t d = dequeue_pos_.load(std::memory_order_acquire);
    return e > d ? static_cast<std::size_t>(e - d) : 0;
  }

 private:
  struct cell {
    std::atomic<std::uint64_t> seq;  // writer: the position's claimant / the consumer (release)
    T value{};                       // published by seq
  };
  const std::size_t mask_;
  std::unique_ptr<cell[]> cells_;
  // Writers: producers (CAS). Readers: producers, claimed().
  alignas(cache_line) std::atomic<std::uint64_t> enqueue_pos_{0};
  // Writer: the consumer (release store). Readers: the consumer, claimed() (acquire).
  alignas(cache_line) std::atomic<std::uint64_t> dequeue_pos_{0};
};

}  // namespace akt
