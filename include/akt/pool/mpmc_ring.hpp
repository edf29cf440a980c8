#pragma once
// mpmc_ring<T, Capacity>: Dmitry Vyukov's bounded multi-producer multi-consumer array queue.
//
// Contract
// - Any thread may call try_push and try_pop concurrently. Lock-free; with a spin limit, each
//   call finishes in at most that many loop iterations (then reports failure instead of waiting).
// - FIFO per cursor: values are popped in the order their pushes claimed positions.
// - Memory: Capacity cells, fixed at construction; nothing is allocated afterwards.
// - T must be trivially copyable (pointers in practice): the cell value is a plain field published
//   by the cell's sequence number.
//
// Cell protocol (the part people get wrong). Cell i starts with seq = i. A cell is ready to fill
// at position pos when seq == pos and ready to take when seq == pos + 1. A push at pos publishes
// seq = pos + 1; a pop at pos releases seq = pos + Capacity, which is what the next lap's push
// expects. Cursors are 64-bit and only grow; the index is pos & (Capacity - 1). A stalled thread
// that resumes after the ring wrapped sees a seq from another lap and fails its claim, so the
// ring is ABA-safe without tagged pointers.
//
// Ordering: the writer stores value then seq (release); the reader loads seq (acquire) then
// value. The cursor CAS only claims the position; it publishes nothing.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace akt {

inline constexpr std::size_t cache_line = 64;

template <class T, std::size_t Capacity>
class mpmc_ring {
  static_assert(Capacity >= 2 && (Capacity & (Capacity - 1)) == 0,
                "capacity must be a power of two: indexing is pos & (Capacity - 1)");
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  static constexpr std::size_t capacity = Capacity;
  // Passed as spin_limit: keep retrying while the outcome is undecided (lost races).
  static constexpr int unlimited = 0;

  mpmc_ring() noexcept {
    for (std::size_t i = 0; i < Capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  mpmc_ring(const mpmc_ring&) = delete;
  mpmc_ring& operator=(const mpmc_ring&) = delete;

  // False when the ring is full or spin_limit iterations passed without winning a position.
  bool try_push(T value, int spin_limit = unlimited) noexcept {
    std::uint64_t pos = enqueue_pos_.load(std::memory_order_relaxed);
    for (int i = 0; spin_limit == unlimited || i < spin_limit; ++i) {
      cell& c = cells_[pos & (Capacity - 1)];
      const std::uint64_t seq = c.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::int64_t>(seq - pos);
      if (diff == 0) {
        if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.value = value;
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
        // pos was reloaded by the failed CAS
      } else if (diff < 0) {
        return false;  // full: the cell still holds last lap's value
      } else {
        pos = enqueue_pos_.load(std::memory_order_relaxed);  // another producer took it
      }
    }
    return false;
  }

  // False when the ring is empty or spin_limit iterations passed without winning a position.
  bool try_pop(T& out, int spin_limit = unlimited) noexcept {
    std::uint64_t pos = dequeue_pos_.load(std::memory_order_relaxed);
    for (int i = 0; spin_limit == unlimited || i < spin_limit; ++i) {
      cell& c = cells_[pos & (Capacity - 1)];
      const std::uint64_t seq = c.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::int64_t>(seq - (pos + 1));
      if (diff == 0) {
        if (dequeue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          out = c.value;
          c.value = T{};
          c.seq.store(pos + Capacity, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // empty: the cell was not published for this lap yet
      } else {
        pos = dequeue_pos_.load(std::memory_order_relaxed);
      }
    }
    return false;
  }

  // Approximate number of held values; exact when no push or pop is in progress.
  std::size_t size_approx() const noexcept {
    const std::uint64_t e = enqueue_pos_.load(std::memory_order_acquire);
    const std::uint64_t d = dequeue_pos_.load(std::memory_order_acquire);
    return e > d ? static_cast<std::size_t>(e - d) : 0;
  }

 private:
  struct cell {
    std::atomic<std::uint64_t> seq;  // written by the claimant of the position (release), read by
                                     // both cursors (acquire)
    T value{};                       // plain: published by seq
  };

  // Writers: producers (CAS). Readers: producers, size_approx. Padded so pushes and pops do not
  // false-share.
  alignas(cache_line) std::atomic<std::uint64_t> enqueue_pos_{0};
  // Writers: consumers (CAS). Readers: consumers, size_approx.
  alignas(cache_line) std::atomic<std::uint64_t> dequeue_pos_{0};
  alignas(cache_line) cell cells_[Capacity];
};

}  // namespace akt
