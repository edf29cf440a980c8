#pragma once
// sharded_pool<T>: a process-wide cache of spare objects (envelopes), split into shards so that
// unrelated actors do not serialise on one free list (reference: goakt-context-pools.md).
//
// Contract
// - get(shard) and put(obj) may be called from any thread. Lock-free and bounded: each touches
//   one shard ring for at most pool_limits::spin_limit loop iterations.
// - get never returns null: an empty or contended shard allocates a new object stamped with that
//   shard. put never blocks: a full or contended shard deletes the object.
// - Home shards: every object is stamped with its home shard when it is allocated and keeps it
//   for life (T::reset must not touch it); put always returns an object to its home shard,
//   whatever shard the caller used to get it.
// - Sibling pools: a pool may carry a tag, a bit above every shard index, which it ors into the
//   home shards it stamps and hands out (next_home_shard), so that an object of sibling pools of
//   the same T knows which pool it returns to (the actor and the grain envelope pools). get
//   ignores the bits above the shard index, so any sibling's home shard indexes the same shard;
//   put asserts that the object bears this pool's tag.
// - The pool is a cache, not an owner of record: an object handed out by get belongs to the
//   caller until it is put back (or deleted). Memory held at rest is bounded by
//   shard_count * shard_capacity objects.
//
// Requirements on T: constructor explicit T(std::uint32_t home_shard), accessor
// std::uint32_t home_shard() const, and destructible by delete.

#include <atomic>
#include <cstdint>
#include <memory>

#include "akt/core/assert.hpp"
#include "akt/pool/mpmc_ring.hpp"

namespace akt {

struct pool_limits {
  // Objects one shard holds at rest. Bounds pooled memory, not throughput; power of two.
  static constexpr std::size_t shard_capacity = 512;
  // Loop iterations in one push or pop before a get allocates and a put drops. Bounds the time a
  // sender or a recycling consumer spends on a contended shard.
  static constexpr int spin_limit = 4;
  // Shard count bounds: at least 2 x cores so concurrently running actors land on distinct rings,
  // at most 128 to bound the footprint (128 x 512 spare objects).
  static constexpr std::uint32_t min_shards = 8;
  static constexpr std::uint32_t max_shards = 128;
  // The sibling-pool tag bit: above every shard index, and below 16 bits so that a tagged home
  // shard still fits the 16 bits an actor cell keeps it in.
  static constexpr std::uint32_t tag_bit = 1u << 15;
  static_assert(max_shards <= tag_bit);
};

// Smallest power of two >= 2 * cores, clamped to [min_shards, max_shards].
constexpr std::uint32_t pool_shard_count_for(unsigned cores) noexcept {
  std::uint32_t n = pool_limits::min_shards;
  while (n < 2ull * cores && n < pool_limits::max_shards) n <<= 1;  // 64-bit: no wrap
  return n;
}

template <class T>
class sharded_pool {
 public:
  using ring = mpmc_ring<T*, pool_limits::shard_capacity>;

  // tag: 0, or pool_limits::tag_bit for the sibling that must tell its objects apart.
  explicit sharded_pool(std::uint32_t shard_count, std::uint32_t tag = 0)
      : count_(shard_count), mask_(shard_count - 1), tag_(tag), shards_(new shard[shard_count]) {
    AKT_ASSERT(shard_count >= 1 && (shard_count & (shard_count - 1)) == 0);
    AKT_ASSERT((tag == 0 || tag == pool_limits::tag_bit) && (tag & mask_) == 0);
  }
  sharded_pool(const sharded_pool&) = delete;
  sharded_pool& operator=(const sharded_pool&) = delete;
  ~sharded_pool() {
    for (std::uint32_t s = 0; s < count_; ++s) {
      T* obj = nullptr;
      while (shards_[s].cells.try_pop(obj)) delete obj;
    }
  }

  std::uint32_t shard_count() const noexcept { return count_; }
  std::uint32_t tag() const noexcept { return tag_; }

  // Round-robin home shard (with this pool's tag) for a new actor. Any thread; one relaxed
  // fetch_add.
  std::uint32_t next_home_shard() noexcept {
    return ((counter_.fetch_add(1, std::memory_order_relaxed) + 1) & mask_) | tag_;
  }

  // An object from `shard` (masked into range, tag bits ignored), or a new one stamped with it and
  // this pool's tag. Never null.
  T* get(std::uint32_t shard) {
    shard &= mask_;
    T* obj = nullptr;
    if (shards_[shard].cells.try_pop(obj, pool_limits::spin_limit)) return obj;
    return new T(shard | tag_);
  }

  // Returns obj to its home shard, or deletes it when that shard is full or contended.
  void put(T* obj) noexcept {
    const std::uint32_t home = obj->home_shard();
    // A foreign stamp (another pool's tag, or a shard this pool does not have) is a caller bug.
    AKT_ASSERT((home & ~mask_) == tag_);
    if (!shards_[home & mask_].cells.try_push(obj, pool_limits::spin_limit)) delete obj;
  }

  // Objects currently held by a shard; exact when nothing runs concurrently (tests).
  std::size_t shard_size(std::uint32_t shard) const noexcept {
    return shards_[shard & mask_].cells.size_approx();
  }

 private:
  struct shard {
    ring cells;
  };
  const std::uint32_t count_;
  const std::uint32_t mask_;
  const std::uint32_t tag_;  // or-ed into every home shard this pool stamps
  std::unique_ptr<shard[]> shards_;
  std::atomic<std::uint32_t> counter_{0};  // writer/reader: next_home_shard (relaxed: only spreads)
};

}  // namespace akt
