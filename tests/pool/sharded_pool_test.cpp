// Tests for akt::sharded_pool<T> (with a small test object) and for the process-wide envelope
// pools of receive_context, the actor pool and its grain sibling (typed over both). They encode
// the invariants of goakt-context-pools.md section 5 and the context-pool test table
// (goakt-internals.md 5.1): home shards stamped at allocation and kept for life, put returns to
// the home shard only, overflow drops, get never returns null, round-robin shard assignment, and
// concurrent get/put with single ownership; and, for the sibling tag, that a tagged pool stamps
// its tag and refuses objects without it.

#include <gtest/gtest.h>

#include <akt/pool/sharded_pool.hpp>
#include "support/test_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <limits>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "actor/system_core.hpp"
#include "akt/actor/receive_context.hpp"
#include "akt/mailbox/envelope.hpp"
#include "pool/envelope_pools.hpp"

namespace {

using akt::test::drained_shard;
using akt::test::run_bounded;

using namespace std::chrono_literals;
using akt::pool_limits;
using akt::sharded_pool;

constexpr std::size_t capacity = pool_limits::shard_capacity;

// The test object the brief prescribes: stamped with its home shard, with a field to touch.
struct item {
  explicit item(std::uint32_t s) : shard(s) {}
  std::uint32_t home_shard() const { return shard; }
  std::uint32_t shard;
  long payload = 0;
};

// Counts live instances, to see what the pool deletes.
struct counted_item {
  static std::atomic<int> live;
  explicit counted_item(std::uint32_t s) : shard(s) { live.fetch_add(1); }
  ~counted_item() { live.fetch_sub(1); }
  counted_item(const counted_item&) = delete;
  counted_item& operator=(const counted_item&) = delete;
  std::uint32_t home_shard() const { return shard; }
  std::uint32_t shard;
};
std::atomic<int> counted_item::live{0};

// ---------------------------------------------------------------------------------------------
// Shard count

TEST(PoolShardCount, PowerOfTwoAtLeastTwiceCoresClamped) {
  for (unsigned cores : {0u,  1u,  2u,  3u,  4u,  5u,  7u,  8u,   9u,   12u,   16u,     17u,
                         31u, 32u, 33u, 48u, 63u, 64u, 65u, 100u, 128u, 1000u, 1u << 20}) {
    const std::uint32_t n = akt::pool_shard_count_for(cores);
    SCOPED_TRACE(cores);
    EXPECT_EQ(n & (n - 1), 0u) << n << " is not a power of two";
    EXPECT_GE(n, pool_limits::min_shards);
    EXPECT_LE(n, pool_limits::max_shards);
    if (2ull * cores <= pool_limits::max_shards) {
      EXPECT_GE(n, 2 * cores);
      // Smallest such power of two: half of it would be too small (or under the floor).
      EXPECT_TRUE(n == pool_limits::min_shards || n / 2 < 2 * cores) << n;
    } else {
      EXPECT_EQ(n, pool_limits::max_shards);
    }
  }
}

TEST(PoolShardCount, KnownValues) {
  EXPECT_EQ(akt::pool_shard_count_for(0), 8u);
  EXPECT_EQ(akt::pool_shard_count_for(1), 8u);
  EXPECT_EQ(akt::pool_shard_count_for(4), 8u);
  EXPECT_EQ(akt::pool_shard_count_for(5), 16u);
  EXPECT_EQ(akt::pool_shard_count_for(8), 16u);
  EXPECT_EQ(akt::pool_shard_count_for(9), 32u);
  EXPECT_EQ(akt::pool_shard_count_for(32), 64u);
  EXPECT_EQ(akt::pool_shard_count_for(33), 128u);
  EXPECT_EQ(akt::pool_shard_count_for(64), 128u);
  EXPECT_EQ(akt::pool_shard_count_for(65), 128u);
  EXPECT_EQ(akt::pool_shard_count_for(4096), 128u);
  static_assert(akt::pool_shard_count_for(16) == 32);
}

TEST(PoolShardCount, HugeCoreCountsClampToMax) {
  // 2 * cores must not wrap around in 32 bits: any core count above 64 gives the cap.
  EXPECT_EQ(akt::pool_shard_count_for(1u << 30), 128u);
  EXPECT_EQ(akt::pool_shard_count_for(1u << 31), 128u);
  EXPECT_EQ(akt::pool_shard_count_for((1u << 31) + 1), 128u);
  EXPECT_EQ(akt::pool_shard_count_for(std::numeric_limits<unsigned>::max()), 128u);
}

TEST(PoolLimits, CapacityIsPowerOfTwo) {
  static_assert((pool_limits::shard_capacity & (pool_limits::shard_capacity - 1)) == 0);
  static_assert((pool_limits::min_shards & (pool_limits::min_shards - 1)) == 0);
  static_assert((pool_limits::max_shards & (pool_limits::max_shards - 1)) == 0);
  EXPECT_EQ(pool_limits::shard_capacity, 512u);
  EXPECT_EQ(pool_limits::spin_limit, 4);
  EXPECT_EQ(pool_limits::min_shards, 8u);
  EXPECT_EQ(pool_limits::max_shards, 128u);
}

// ---------------------------------------------------------------------------------------------
// sharded_pool<item>

TEST(ShardedPool, ShardCountIsAsConstructed) {
  sharded_pool<item> pool(16);
  EXPECT_EQ(pool.shard_count(), 16u);
  for (std::uint32_t s = 0; s < 16; ++s) EXPECT_EQ(pool.shard_size(s), 0u);
}

TEST(ShardedPool, GetStampsHomeShard) {
  sharded_pool<item> pool(16);
  const std::uint32_t mask = pool.shard_count() - 1;
  for (std::uint32_t s = 0; s < 3 * pool.shard_count(); ++s) {
    std::unique_ptr<item> obj(pool.get(s));
    ASSERT_NE(obj, nullptr);
    EXPECT_EQ(obj->home_shard(), s & mask) << "shard " << s;
    obj->payload = s;
    EXPECT_EQ(obj->payload, static_cast<long>(s));
  }
}

TEST(ShardedPool, GetMasksOutOfRangeShard) {
  sharded_pool<item> pool(16);
  std::unique_ptr<item> a(pool.get(pool.shard_count() + 3));
  EXPECT_EQ(a->home_shard(), 3u);
  std::unique_ptr<item> b(pool.get(std::numeric_limits<std::uint32_t>::max()));
  EXPECT_EQ(b->home_shard(), 15u);

  // The masked object also goes back to (and comes out of) the masked shard.
  item* raw = a.release();
  pool.put(raw);
  EXPECT_EQ(pool.shard_size(3), 1u);
  item* again = pool.get(pool.shard_count() * 2 + 3);
  EXPECT_EQ(again, raw);
  delete again;
}

TEST(ShardedPool, GetNeverReturnsNull) {
  sharded_pool<item> pool(8);
  std::vector<std::unique_ptr<item>> held;
  // Empty shards allocate; far more gets than a shard holds still never give null.
  for (std::uint32_t i = 0; i < 2 * capacity; ++i) {
    item* obj = pool.get(i % 3);
    ASSERT_NE(obj, nullptr);
    obj->payload = i;
    held.emplace_back(obj);
  }
  std::set<item*> distinct;
  for (auto& p : held) distinct.insert(p.get());
  EXPECT_EQ(distinct.size(), held.size());  // every allocation is a different object
}

TEST(ShardedPool, PutThenGetReusesContext) {
  sharded_pool<item> pool(16);
  item* obj = pool.get(5);
  obj->payload = 42;
  pool.put(obj);
  EXPECT_EQ(pool.shard_size(5), 1u);
  item* again = pool.get(5);
  EXPECT_EQ(again, obj);
  EXPECT_EQ(again->home_shard(), 5u);
  EXPECT_EQ(pool.shard_size(5), 0u);
  delete again;
}

TEST(ShardedPool, PutReturnsToHomeShardOnly) {
  sharded_pool<item> pool(16);
  item* from2 = pool.get(2);
  ASSERT_EQ(from2->home_shard(), 2u);
  from2->payload = 2;
  pool.put(from2);
  EXPECT_EQ(pool.shard_size(2), 1u);
  EXPECT_EQ(pool.shard_size(3), 0u);

  // Not visible on shard 3: a fresh object stamped 3.
  item* from3 = pool.get(3);
  EXPECT_NE(from3, from2);
  EXPECT_EQ(from3->home_shard(), 3u);
  from3->payload = 3;

  // Returned by the next get on shard 2.
  item* again = pool.get(2);
  EXPECT_EQ(again, from2);
  EXPECT_EQ(again->home_shard(), 2u);

  // An object is returned to its own home, whichever shard's get the holder used.
  pool.put(from3);
  EXPECT_EQ(pool.shard_size(3), 1u);
  EXPECT_EQ(pool.shard_size(2), 0u);
  delete again;
}

TEST(ShardedPool, PutUsesTheObjectsStampNotTheCaller) {
  sharded_pool<item> pool(16);
  // An object allocated outside the pool carries its own stamp; put follows it.
  pool.put(new item(6));
  for (std::uint32_t s = 0; s < pool.shard_count(); ++s) {
    EXPECT_EQ(pool.shard_size(s), s == 6 ? 1u : 0u) << "shard " << s;
  }
  std::unique_ptr<item> obj(pool.get(6));
  EXPECT_EQ(obj->home_shard(), 6u);
  EXPECT_EQ(pool.shard_size(6), 0u);
}

TEST(ShardedPool, OverflowDropsForGC) {
  sharded_pool<item> pool(16);
  constexpr std::uint32_t shard = 7;
  std::vector<item*> made;
  for (std::size_t i = 0; i < capacity + 8; ++i) {
    made.push_back(new item(shard));
    made.back()->payload = static_cast<long>(i);
  }
  // Putting past capacity neither blocks nor crashes; the extra objects are deleted (LSan and
  // ASan report it if they leak or are freed twice).
  for (item* obj : made) pool.put(obj);
  EXPECT_EQ(pool.shard_size(shard), capacity);

  // The next `capacity` gets never hand out the same object twice: they are exactly the
  // objects that fit.
  std::set<item*> got;
  std::vector<std::unique_ptr<item>> owned;
  for (std::size_t i = 0; i < capacity; ++i) {
    item* obj = pool.get(shard);
    ASSERT_NE(obj, nullptr);
    EXPECT_EQ(obj->home_shard(), shard);
    obj->payload = -1;  // touch it while we hold it
    EXPECT_TRUE(got.insert(obj).second) << "object handed out twice at get " << i;
    owned.emplace_back(obj);
  }
  const std::set<item*> kept(made.begin(), made.begin() + capacity);
  EXPECT_EQ(got, kept);
  EXPECT_EQ(pool.shard_size(shard), 0u);
  // The shard still works after the overflow.
  pool.put(owned.back().release());
  EXPECT_EQ(pool.shard_size(shard), 1u);
}

TEST(ShardedPool, PutOnFullShardDeletesTheObject) {
  ASSERT_EQ(counted_item::live.load(), 0);
  {
    sharded_pool<counted_item> pool(8);
    for (std::size_t i = 0; i < capacity; ++i) pool.put(new counted_item(1));
    EXPECT_EQ(counted_item::live.load(), static_cast<int>(capacity));
    pool.put(new counted_item(1));  // full: deleted, not kept
    EXPECT_EQ(counted_item::live.load(), static_cast<int>(capacity));
    EXPECT_EQ(pool.shard_size(1), capacity);
    // Other shards are independent: shard 2 still takes one.
    pool.put(new counted_item(2));
    EXPECT_EQ(pool.shard_size(2), 1u);
    EXPECT_EQ(counted_item::live.load(), static_cast<int>(capacity) + 1);
  }
  // The pool's destructor deletes what it holds.
  EXPECT_EQ(counted_item::live.load(), 0);
}

TEST(ShardedPool, Wraparound) {
  sharded_pool<item> pool(16);
  constexpr std::uint32_t shard = 9;
  // One object cycling: every get/put advances both cursors, 3 full laps of the ring.
  item* obj = pool.get(shard);
  for (std::size_t i = 0; i < 3 * capacity; ++i) {
    obj->payload = static_cast<long>(i);
    pool.put(obj);
    ASSERT_EQ(pool.shard_size(shard), 1u) << "cycle " << i;
    item* again = pool.get(shard);
    ASSERT_EQ(again, obj) << "cycle " << i;
    ASSERT_EQ(again->home_shard(), shard);
    ASSERT_EQ(again->payload, static_cast<long>(i));
  }
  delete obj;
}

TEST(ShardedPool, WraparoundWithManyObjects) {
  sharded_pool<item> pool(16);
  constexpr std::uint32_t shard = 4;
  // capacity/2 + 1 objects in flight so the cursors wrap at odd offsets.
  std::vector<item*> seeded;
  for (std::size_t i = 0; i < capacity / 2 + 1; ++i) seeded.push_back(new item(shard));
  for (item* obj : seeded) pool.put(obj);
  const std::set<item*> universe(seeded.begin(), seeded.end());
  for (std::size_t i = 0; i < 3 * capacity; ++i) {
    item* obj = pool.get(shard);
    ASSERT_TRUE(universe.count(obj)) << "cycle " << i << " got a fresh object";
    ASSERT_EQ(obj->home_shard(), shard);
    // FIFO ring: objects come back in rotation.
    ASSERT_EQ(obj, seeded[i % seeded.size()]) << "cycle " << i;
    obj->payload = static_cast<long>(i);
    pool.put(obj);
    ASSERT_EQ(pool.shard_size(shard), seeded.size());
  }
}

TEST(NextHomeShard, CoversAllShards) {
  for (std::uint32_t count : {8u, 16u, 128u}) {
    sharded_pool<item> pool(count);
    std::vector<int> hits(count, 0);
    for (std::uint32_t i = 0; i < 2 * count; ++i) {
      const std::uint32_t s = pool.next_home_shard();
      ASSERT_LT(s, count);
      ++hits[s];
    }
    for (std::uint32_t s = 0; s < count; ++s) {
      EXPECT_GE(hits[s], 1) << "shard " << s << " of " << count << " never assigned";
      // Round-robin: 2 x count calls hit every shard exactly twice.
      EXPECT_EQ(hits[s], 2) << "shard " << s << " of " << count;
    }
  }
}

TEST(NextHomeShard, ConcurrentCallsStayInRangeAndSpread) {
  sharded_pool<item> pool(16);
  constexpr int threads = 4;
  constexpr int per_thread = 4096;
  std::vector<std::vector<int>> hits(threads, std::vector<int>(16, 0));
  std::atomic<bool> stop{false};
  std::atomic<int> out_of_range{0};
  const bool in_time = run_bounded(threads, 30s, stop, [&](int t) {
    for (int i = 0; i < per_thread && !stop.load(std::memory_order_relaxed); ++i) {
      const std::uint32_t s = pool.next_home_shard();
      if (s >= 16) {
        out_of_range.fetch_add(1);
        continue;
      }
      ++hits[static_cast<std::size_t>(t)][s];
    }
  });
  ASSERT_TRUE(in_time);
  EXPECT_EQ(out_of_range.load(), 0);
  // threads * per_thread consecutive counter values: each shard exactly total / 16 times.
  for (std::uint32_t s = 0; s < 16; ++s) {
    int sum = 0;
    for (const auto& h : hits) sum += h[s];
    EXPECT_EQ(sum, threads * per_thread / 16) << "shard " << s;
  }
}

TEST(ShardedPool, ConcurrentGetPut) {
  sharded_pool<item> pool(16);
  constexpr int threads = 8;
  constexpr int iterations = 10000;
  constexpr std::uint32_t shared_shard = 0;
  std::atomic<bool> stop{false};
  std::atomic<int> nulls{0};
  std::atomic<int> wrong_shard{0};
  std::atomic<int> double_owner{0};
  const bool in_time = run_bounded(threads, 30s, stop, [&](int t) {
    for (int i = 0; i < iterations; ++i) {
      if (stop.load(std::memory_order_relaxed)) return;
      // Half the threads hammer one shared shard, the other half spread over all of them.
      const std::uint32_t s =
          t < threads / 2 ? shared_shard : static_cast<std::uint32_t>(t * 7 + i);
      item* a = pool.get(s);
      item* b = pool.get(s);
      if (a == nullptr || b == nullptr) {
        nulls.fetch_add(1);
        return;
      }
      if (a->home_shard() != (s & 15u) || b->home_shard() != (s & 15u)) wrong_shard.fetch_add(1);
      // Touch what we hold: plain writes and reads, so TSan sees a second owner.
      const long tag = (static_cast<long>(t) << 32) | i;
      a->payload = tag;
      b->payload = ~tag;
      if (a == b || a->payload != tag || b->payload != ~tag) double_owner.fetch_add(1);
      pool.put(a);
      pool.put(b);
    }
  });
  ASSERT_TRUE(in_time) << "concurrent get/put did not finish in time";
  EXPECT_EQ(nulls.load(), 0);
  EXPECT_EQ(wrong_shard.load(), 0);
  EXPECT_EQ(double_owner.load(), 0);
  // Every pooled object still sits in its home shard and is distinct.
  std::set<item*> all;
  for (std::uint32_t s = 0; s < pool.shard_count(); ++s) {
    EXPECT_LE(pool.shard_size(s), capacity);
    const std::size_t n = std::min(pool.shard_size(s), capacity);
    std::vector<item*> out;
    for (std::size_t k = 0; k < n; ++k) {
      item* obj = pool.get(s);
      EXPECT_EQ(obj->home_shard(), s);
      EXPECT_TRUE(all.insert(obj).second);
      out.push_back(obj);
    }
    for (item* obj : out) pool.put(obj);
  }
}

// ---------------------------------------------------------------------------------------------
// The sibling tag

constexpr std::uint32_t k_tag = pool_limits::tag_bit;

TEST(ShardedPool, TagIsAboveEveryShardIndexAndFitsSixteenBits) {
  static_assert((pool_limits::tag_bit & (pool_limits::tag_bit - 1)) == 0);
  static_assert(pool_limits::tag_bit >= pool_limits::max_shards);
  static_assert(((pool_limits::max_shards - 1) | pool_limits::tag_bit) <= 0xffff);
  EXPECT_EQ(sharded_pool<item>(8).tag(), 0u);
  EXPECT_EQ(sharded_pool<item>(pool_limits::max_shards, k_tag).tag(), k_tag);
}

TEST(ShardedPool, TaggedPoolStampsItsTag) {
  sharded_pool<item> pool(16, k_tag);
  for (std::uint32_t s = 0; s < 2 * pool.shard_count(); ++s) {
    std::unique_ptr<item> obj(pool.get(s));
    EXPECT_EQ(obj->home_shard(), (s & 15u) | k_tag) << "shard " << s;
  }
  for (std::uint32_t i = 0; i < 2 * pool.shard_count(); ++i) {
    const std::uint32_t s = pool.next_home_shard();
    EXPECT_EQ(s & k_tag, k_tag);
    EXPECT_LT(s & ~k_tag, pool.shard_count());
  }
}

TEST(ShardedPool, GetIgnoresTagBits) {
  // A tagged home shard indexes the same shard in a tagged pool and in an untagged one (the
  // ack-slot pool is indexed with grain envelopes' home shards).
  sharded_pool<item> tagged(16, k_tag);
  sharded_pool<item> plain(16);
  std::unique_ptr<item> a(tagged.get(5 | k_tag));
  std::unique_ptr<item> b(plain.get(5 | k_tag));
  EXPECT_EQ(a->home_shard(), 5u | k_tag);
  EXPECT_EQ(b->home_shard(), 5u);
}

TEST(ShardedPool, TaggedPoolReturnsToHomeShardOnly) {
  sharded_pool<item> pool(16, k_tag);
  item* obj = pool.get(2);
  pool.put(obj);
  for (std::uint32_t s = 0; s < pool.shard_count(); ++s) {
    EXPECT_EQ(pool.shard_size(s), s == 2 ? 1u : 0u) << "shard " << s;
  }
  item* again = pool.get(2 | k_tag);
  EXPECT_EQ(again, obj);
  pool.put(again);
}

#if !defined(NDEBUG) || defined(AKT_ENABLE_ASSERTS)
TEST(ShardedPoolDeathTest, PutWithoutThePoolsTagAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // An object of the sibling pool must never land in this pool's rings, nor the reverse.
  EXPECT_DEATH(
      {
        sharded_pool<item> tagged(8, k_tag);
        tagged.put(new item(3));
      },
      "assertion failed");
  EXPECT_DEATH(
      {
        sharded_pool<item> plain(8);
        plain.put(new item(3 | k_tag));
      },
      "assertion failed");
}

TEST(ShardedPoolDeathTest, TagMustBeTheTagBit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Only the tag bit: anything else would overlap shard indexes or the envelope pools' routing.
  EXPECT_DEATH(sharded_pool<item> pool(8, 8), "assertion failed");
  EXPECT_DEATH(sharded_pool<item> pool(8, 1), "assertion failed");
}

TEST(ShardedPoolDeathTest, NonPowerOfTwoShardCountAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Every shard index is x & mask: a count that is not a power of two would alias shards.
  EXPECT_DEATH(sharded_pool<item> pool(12), "assertion failed");
  EXPECT_DEATH(sharded_pool<item> pool(0), "assertion failed");
}

TEST(ShardedPoolDeathTest, PutWithForeignStampAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // An object stamped for a shard this pool does not have is a caller bug, not a silent remap.
  EXPECT_DEATH(
      {
        sharded_pool<item> pool(8);
        pool.put(new item(8));
      },
      "assertion failed");
}
#endif

// ---------------------------------------------------------------------------------------------
// The process-wide envelope pools (receive_context): the actor pool and its grain sibling, every
// test typed over both. Other tests of this program also use them, so every test here tolerates
// objects already pooled: it drains the shards it needs first and puts the drained objects back
// at the end.

using akt::receive_context;

template <class P>
class EnvelopePool : public ::testing::Test {
 protected:
  static sharded_pool<receive_context>& pool() { return P::pool(); }
  // The home shard this pool stamps for index s.
  static std::uint32_t home(std::uint32_t s) { return (s & (pool().shard_count() - 1)) | P::tag; }
};
TYPED_TEST_SUITE(EnvelopePool, akt::test::envelope_pool_kinds, akt::test::envelope_pool_names);

TYPED_TEST(EnvelopePool, IsOneProcessWidePool) {
  EXPECT_EQ(&TypeParam::pool(), &TypeParam::pool());
  auto from_thread = std::async(std::launch::async, [] { return &TypeParam::pool(); });
  EXPECT_EQ(from_thread.get(), &TypeParam::pool());
  // A separate instance from its sibling, with its own tag.
  EXPECT_NE(&TypeParam::pool(), &TypeParam::sibling());
  EXPECT_EQ(TypeParam::pool().tag(), TypeParam::tag);
  EXPECT_NE(TypeParam::sibling().tag(), TypeParam::tag);
}

TYPED_TEST(EnvelopePool, ShardCountFollowsHardware) {
  const std::uint32_t n = TypeParam::pool().shard_count();
  EXPECT_EQ(n, akt::pool_shard_count_for(std::thread::hardware_concurrency()));
  EXPECT_EQ(n & (n - 1), 0u);
  EXPECT_GE(n, pool_limits::min_shards);
  EXPECT_LE(n, pool_limits::max_shards);
  EXPECT_EQ(n, TypeParam::sibling().shard_count());  // same geometry
}

TYPED_TEST(EnvelopePool, GetStampsHomeShard) {
  auto& pool = TypeParam::pool();
  std::vector<receive_context*> got;
  for (std::uint32_t s = 0; s < 2 * pool.shard_count() + 3; ++s) {
    receive_context* ctx = pool.get(s);
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(ctx->home_shard(), this->home(s)) << "shard " << s;
    // A pooled envelope is clean.
    EXPECT_TRUE(ctx->message().empty());
    EXPECT_EQ(ctx->next.load(), nullptr);
    got.push_back(ctx);
  }
  for (receive_context* ctx : got) akt::recycle(ctx);
}

TYPED_TEST(EnvelopePool, GetMasksOutOfRangeShard) {
  auto& pool = TypeParam::pool();
  receive_context* ctx = pool.get(pool.shard_count() + 3);
  EXPECT_EQ(ctx->home_shard(), 3u | TypeParam::tag);
  akt::recycle(ctx);
  // Tag bits in the index are ignored: a cell's (tagged) home shard indexes the same shard.
  receive_context* tagged = pool.get(3 | akt::detail::k_grain_pool_tag);
  EXPECT_EQ(tagged->home_shard(), 3u | TypeParam::tag);
  akt::recycle(tagged);
}

TYPED_TEST(EnvelopePool, GetNeverReturnsNull) {
  auto& pool = TypeParam::pool();
  drained_shard<receive_context> drained(pool, 1);
  std::vector<receive_context*> held;
  for (int i = 0; i < 64; ++i) {
    receive_context* ctx = pool.get(1);  // empty shard: allocates
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(ctx->home_shard(), 1u | TypeParam::tag);
    held.push_back(ctx);
  }
  for (receive_context* ctx : held) delete ctx;
}

TYPED_TEST(EnvelopePool, PutThenGetReusesContext) {
  auto& pool = TypeParam::pool();
  drained_shard<receive_context> drained(pool, 5);
  receive_context* ctx = pool.get(5);
  EXPECT_EQ(std::count(drained.held().begin(), drained.held().end(), ctx), 0);
  pool.put(ctx);
  EXPECT_EQ(pool.shard_size(5), 1u);
  receive_context* again = pool.get(5);
  EXPECT_EQ(again, ctx);
  EXPECT_EQ(again->home_shard(), this->home(5));
  pool.put(again);
}

TYPED_TEST(EnvelopePool, PutReturnsToHomeShardOnly) {
  auto& pool = TypeParam::pool();
  drained_shard<receive_context> d2(pool, 2);
  drained_shard<receive_context> d3(pool, 3);
  receive_context* from2 = pool.get(2);
  ASSERT_EQ(from2->home_shard(), 2u | TypeParam::tag);
  pool.put(from2);
  EXPECT_EQ(pool.shard_size(2), 1u);
  EXPECT_EQ(pool.shard_size(3), 0u);

  receive_context* from3 = pool.get(3);
  EXPECT_NE(from3, from2);
  EXPECT_EQ(from3->home_shard(), 3u | TypeParam::tag);

  receive_context* again = pool.get(2);
  EXPECT_EQ(again, from2);
  pool.put(from3);
  pool.put(again);
  EXPECT_EQ(pool.shard_size(2), 1u);
  EXPECT_EQ(pool.shard_size(3), 1u);
}

TYPED_TEST(EnvelopePool, OverflowDropsForGC) {
  auto& pool = TypeParam::pool();
  constexpr std::uint32_t shard = 6;
  drained_shard<receive_context> drained(pool, shard);
  std::vector<receive_context*> made;
  for (std::size_t i = 0; i < capacity + 8; ++i) made.push_back(pool.get(shard));  // all fresh
  for (receive_context* ctx : made) akt::recycle(ctx);
  EXPECT_EQ(pool.shard_size(shard), capacity);

  std::set<receive_context*> got;
  std::vector<receive_context*> owned;
  for (std::size_t i = 0; i < capacity; ++i) {
    receive_context* ctx = pool.get(shard);
    ctx->message().emplace<std::size_t>(i);  // touch it while we hold it
    EXPECT_TRUE(got.insert(ctx).second) << "envelope handed out twice at get " << i;
    owned.push_back(ctx);
  }
  EXPECT_EQ(got, std::set<receive_context*>(made.begin(), made.begin() + capacity));
  EXPECT_EQ(pool.shard_size(shard), 0u);
  for (receive_context* ctx : owned) delete ctx;
}

TYPED_TEST(EnvelopePool, Wraparound) {
  auto& pool = TypeParam::pool();
  constexpr std::uint32_t shard = 7;
  drained_shard<receive_context> drained(pool, shard);
  receive_context* ctx = pool.get(shard);
  for (std::size_t i = 0; i < 3 * capacity; ++i) {
    ctx->message().emplace<std::size_t>(i);
    akt::recycle(ctx);
    ASSERT_EQ(pool.shard_size(shard), 1u);
    receive_context* again = pool.get(shard);
    ASSERT_EQ(again, ctx) << "cycle " << i;
    ASSERT_EQ(again->home_shard(), shard | TypeParam::tag);
    ASSERT_TRUE(again->message().empty());  // recycle reset it
  }
  akt::recycle(ctx);
}

TYPED_TEST(EnvelopePool, NextHomeShardCoversAllShards) {
  auto& pool = TypeParam::pool();
  const std::uint32_t count = pool.shard_count();
  std::vector<bool> hit(count, false);
  for (std::uint32_t i = 0; i < 2 * count; ++i) {
    const std::uint32_t s = pool.next_home_shard();
    ASSERT_EQ(s & akt::detail::k_grain_pool_tag, TypeParam::tag);
    ASSERT_LT(s & ~TypeParam::tag, count);
    hit[s & ~TypeParam::tag] = true;
  }
  for (std::uint32_t s = 0; s < count; ++s) EXPECT_TRUE(hit[s]) << "shard " << s;
}

TYPED_TEST(EnvelopePool, ConcurrentGetPut) {
  auto& pool = TypeParam::pool();
  constexpr int threads = 8;
  constexpr int iterations = 10000;
  std::atomic<bool> stop{false};
  std::atomic<int> nulls{0};
  std::atomic<int> wrong_shard{0};
  std::atomic<int> double_owner{0};
  const bool in_time = run_bounded(threads, 30s, stop, [&](int t) {
    for (int i = 0; i < iterations; ++i) {
      if (stop.load(std::memory_order_relaxed)) return;
      const std::uint32_t s = t < threads / 2 ? 0u : static_cast<std::uint32_t>(t * 5 + i);
      receive_context* ctx = pool.get(s);
      if (ctx == nullptr) {
        nulls.fetch_add(1);
        return;
      }
      if (ctx->home_shard() != this->home(s)) wrong_shard.fetch_add(1);
      // Touch the envelope: its payload and its queue link, as a mailbox would.
      const long tag = (static_cast<long>(t) << 32) | i;
      if (!ctx->message().empty()) double_owner.fetch_add(1);
      ctx->message().emplace<long>(tag);
      ctx->next.store(nullptr, std::memory_order_relaxed);
      const long* seen = ctx->get_if<long>();
      if (seen == nullptr || *seen != tag) double_owner.fetch_add(1);
      akt::recycle(ctx);
    }
  });
  ASSERT_TRUE(in_time) << "concurrent get/put did not finish in time";
  EXPECT_EQ(nulls.load(), 0);
  EXPECT_EQ(wrong_shard.load(), 0);
  EXPECT_EQ(double_owner.load(), 0);
}

}  // namespace
