// Tests for the pool-facing invariants of receive_context: reset keeps the home shard and the
// reply guard, clone_for_stash clears the guard (regression of GoAkt #1312), recycle returns an
// envelope to its home shard, and the two-cache-line layout. The clone and recycle tests are
// typed over the actor envelope pool and its grain sibling: a clone comes from its source's pool
// and a recycled envelope goes back to its own. Senders and receivers stay null: these tests
// need no actor system.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "akt/actor/receive_context.hpp"
#include "akt/core/clock.hpp"
#include "akt/mailbox/envelope.hpp"
#include "pool/envelope_pools.hpp"

namespace {

using akt::envelope;
using akt::receive_context;
using akt::detail::clone_for_stash;
using akt::detail::context_access;
using akt::detail::envelope_pool;
using akt::test::drained_shard;

constexpr std::size_t capacity = akt::pool_limits::shard_capacity;

// Counts live instances, to check that reset destroys the payload exactly once.
struct payload_counter {
  explicit payload_counter(int* live, int v) : live_(live), value(v) { ++*live_; }
  payload_counter(const payload_counter& o) : live_(o.live_), value(o.value) { ++*live_; }
  payload_counter(payload_counter&& o) noexcept : live_(o.live_), value(o.value) { ++*live_; }
  payload_counter& operator=(const payload_counter&) = delete;
  ~payload_counter() { --*live_; }
  int* live_;
  int value;
};

// A stand-in queue node, only ever compared: reset must unlink the envelope.
akt::mpsc_node dummy_node;

TEST(ReceiveContext, LayoutIsTwoCacheLines) {
  static_assert(sizeof(receive_context) == 128);
  static_assert(alignof(receive_context) == 64);
  EXPECT_EQ(sizeof(receive_context), 128u);
  EXPECT_EQ(alignof(receive_context), 64u);
  // Heap envelopes honour the alignment.
  auto ctx = std::make_unique<receive_context>(0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ctx.get()) % 64, 0u);
  receive_context* pooled = envelope_pool().get(1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pooled) % 64, 0u);
  akt::recycle(pooled);
}

TEST(ReceiveContext, FreshContextIsClean) {
  receive_context ctx(4);
  EXPECT_EQ(ctx.home_shard(), 4u);
  EXPECT_TRUE(ctx.message().empty());
  EXPECT_FALSE(context_access::reply_closed(ctx));
  EXPECT_FALSE(ctx.expects_reply());
  EXPECT_FALSE(ctx.has_deadline());
  EXPECT_FALSE(ctx.deadline().has_value());
  EXPECT_FALSE(ctx.remote_origin());
  EXPECT_EQ(ctx.sender_key(), nullptr);
  EXPECT_TRUE(ctx.sender().empty());
  EXPECT_EQ(ctx.next.load(), nullptr);
}

TEST(ReceiveContext, ResetPreservesPoolShard) {
  receive_context ctx(5);
  ctx.message().emplace<std::string>("payload");
  context_access::reply_closed(ctx) = true;
  context_access::deadline(ctx) = 123456789;
  context_access::flags(ctx) = envelope::flag_has_deadline | envelope::flag_remote_origin;
  ctx.next.store(&dummy_node, std::memory_order_relaxed);
  ASSERT_TRUE(ctx.has_deadline());
  ASSERT_TRUE(ctx.remote_origin());

  context_access::reset(ctx);

  EXPECT_EQ(ctx.home_shard(), 5u);                 // stamped at allocation, kept for life
  EXPECT_TRUE(ctx.message().empty());              // payload cleared
  EXPECT_TRUE(context_access::reply_closed(ctx));  // deliberately left as it was
  EXPECT_FALSE(ctx.has_deadline());                // flags cleared
  EXPECT_FALSE(ctx.remote_origin());
  EXPECT_FALSE(ctx.deadline().has_value());
  EXPECT_FALSE(ctx.expects_reply());
  EXPECT_EQ(ctx.sender_key(), nullptr);
  EXPECT_EQ(ctx.next.load(), nullptr);  // unlinked: never pool a linked envelope
}

TEST(ReceiveContext, ResetLeavesOpenGuardOpen) {
  receive_context ctx(2);
  ctx.message().emplace<int>(1);
  context_access::reset(ctx);
  EXPECT_FALSE(context_access::reply_closed(ctx));
  EXPECT_EQ(ctx.home_shard(), 2u);
}

TEST(ReceiveContext, ResetDestroysPayloadExactlyOnce) {
  int live = 0;
  {
    receive_context ctx(0);
    ctx.message().emplace<payload_counter>(&live, 3);
    ASSERT_EQ(live, 1);
    context_access::reset(ctx);
    EXPECT_EQ(live, 0);
    context_access::reset(ctx);  // idempotent on a clean envelope
    EXPECT_EQ(live, 0);
    ctx.message().emplace<payload_counter>(&live, 4);
    EXPECT_EQ(live, 1);
  }
  EXPECT_EQ(live, 0);  // the destructor resets too
}

TEST(ReceiveContext, ResetCompletesAnOwedReply) {
  // Every path completes an ask before recycling; reset still never leaks an owed reply.
  akt::detail::reply_slot slot;
  {
    receive_context ctx(0);
    context_access::reply(ctx) = &slot;
    ASSERT_TRUE(ctx.expects_reply());
    context_access::reset(ctx);
    EXPECT_FALSE(ctx.expects_reply());
  }
  bool abandoned = true;
  const akt::result<akt::message> r = slot.await(akt::detail::now_ns() + 5'000'000'000, abandoned);
  EXPECT_FALSE(abandoned);
  EXPECT_EQ(r.code(), akt::errc::no_reply);
}

template <class P>
class CloneForStash : public ::testing::Test {};
TYPED_TEST_SUITE(CloneForStash, akt::test::envelope_pool_kinds, akt::test::envelope_pool_names);

template <class P>
class Recycle : public ::testing::Test {};
TYPED_TEST_SUITE(Recycle, akt::test::envelope_pool_kinds, akt::test::envelope_pool_names);

TYPED_TEST(CloneForStash, ClearsReplyClosed) {
  // Regression of GoAkt #1312: a recycled envelope whose late-reply guard was tripped must not
  // carry the tripped guard into a clone, or the reply to a stashed ask would be dropped.
  auto& pool = TypeParam::pool();
  constexpr std::uint32_t shard = 3;
  const std::uint32_t home = shard | TypeParam::tag;
  drained_shard<receive_context> drained(pool, shard);

  // A recycled envelope with its guard set is the only one in the shard.
  receive_context* stale = pool.get(shard);
  ASSERT_FALSE(drained.holds(stale));
  context_access::reply_closed(*stale) = true;
  akt::recycle(stale);  // reset leaves the guard set
  ASSERT_EQ(pool.shard_size(shard), 1u);
  ASSERT_TRUE(context_access::reply_closed(*stale));

  // The source: an ask-like envelope of the same home shard, its own guard set too.
  auto src = std::make_unique<receive_context>(home);
  src->message().emplace<std::string>("stashed ask");
  context_access::reply_closed(*src) = true;
  context_access::deadline(*src) = 987654321;
  context_access::flags(*src) = envelope::flag_has_deadline | envelope::flag_remote_origin;

  receive_context* clone = clone_for_stash(*src);
  ASSERT_NE(clone, nullptr);
  EXPECT_EQ(clone, stale) << "the clone must reuse the recycled envelope of the home shard";
  EXPECT_FALSE(context_access::reply_closed(*clone));
  EXPECT_TRUE(context_access::reply_closed(*src));  // the source's guard is untouched
  EXPECT_EQ(clone->home_shard(), home);

  // Payload moved, deadline and flags copied.
  ASSERT_NE(clone->get_if<std::string>(), nullptr);
  EXPECT_EQ(*clone->get_if<std::string>(), "stashed ask");
  EXPECT_TRUE(src->message().empty());
  EXPECT_EQ(context_access::deadline(*clone), 987654321);
  EXPECT_EQ(context_access::flags(*clone), context_access::flags(*src));
  EXPECT_TRUE(clone->has_deadline());
  EXPECT_TRUE(clone->remote_origin());
  ASSERT_TRUE(clone->deadline().has_value());
  EXPECT_EQ(clone->deadline(), src->deadline());
  EXPECT_EQ(clone->sender_key(), nullptr);
  EXPECT_EQ(clone->next.load(), nullptr);
  EXPECT_EQ(pool.shard_size(shard), 0u);

  akt::recycle(clone);
}

TYPED_TEST(CloneForStash, FromEmptyShardAllocatesWithSourceHomeShard) {
  auto& pool = TypeParam::pool();
  auto& sibling = TypeParam::sibling();
  const std::uint32_t count = pool.shard_count();
  for (std::uint32_t shard = 0; shard < count; ++shard) {
    drained_shard<receive_context> drained(pool, shard);
    drained_shard<receive_context> drained_sibling(sibling, shard);
    receive_context src(shard | TypeParam::tag);
    src.message().emplace<int>(static_cast<int>(shard));
    context_access::reply_closed(src) = true;
    receive_context* clone = clone_for_stash(src);
    ASSERT_NE(clone, nullptr);
    EXPECT_FALSE(drained.holds(clone));
    EXPECT_EQ(clone->home_shard(), shard | TypeParam::tag);
    EXPECT_FALSE(context_access::reply_closed(*clone));
    ASSERT_NE(clone->get_if<int>(), nullptr);
    EXPECT_EQ(*clone->get_if<int>(), static_cast<int>(shard));
    EXPECT_FALSE(clone->has_deadline());
    akt::recycle(clone);
    // The clone goes back to the source's home shard, in the source's pool.
    EXPECT_EQ(pool.shard_size(shard), 1u);
    EXPECT_EQ(sibling.shard_size(shard), 0u);
  }
}

TYPED_TEST(CloneForStash, MovesTheReplyRoute) {
  // Exactly one envelope owes the reply: the clone takes it, the source lets it go.
  akt::detail::reply_slot slot;
  receive_context src(2 | TypeParam::tag);
  src.message().emplace<int>(5);
  context_access::reply(src) = &slot;
  receive_context* clone = clone_for_stash(src);
  EXPECT_TRUE(clone->expects_reply());
  EXPECT_EQ(context_access::reply(*clone), &slot);
  EXPECT_FALSE(src.expects_reply());
  context_access::reset(src);  // completes nothing: the source no longer owes the reply
  akt::recycle(clone);         // completes the ask once, with no_reply
  bool abandoned = true;
  const akt::result<akt::message> r = slot.await(akt::detail::now_ns() + 5'000'000'000, abandoned);
  EXPECT_FALSE(abandoned);
  EXPECT_EQ(r.code(), akt::errc::no_reply);
}

TYPED_TEST(CloneForStash, CopiesPlainTell) {
  receive_context src(1 | TypeParam::tag);
  src.message().emplace<long>(77);
  receive_context* clone = clone_for_stash(src);
  EXPECT_EQ(clone->home_shard(), 1u | TypeParam::tag);
  ASSERT_NE(clone->get_if<long>(), nullptr);
  EXPECT_EQ(*clone->get_if<long>(), 77);
  EXPECT_FALSE(clone->has_deadline());
  EXPECT_FALSE(clone->remote_origin());
  EXPECT_FALSE(clone->expects_reply());
  EXPECT_FALSE(context_access::reply_closed(*clone));
  EXPECT_FALSE(context_access::reply_closed(src));
  akt::recycle(clone);
}

TYPED_TEST(Recycle, ReturnsToHomeShard) {
  auto& pool = TypeParam::pool();
  auto& sibling = TypeParam::sibling();
  constexpr std::uint32_t shard = 4;
  drained_shard<receive_context> drained(pool, shard);
  receive_context* ctx = pool.get(shard);
  ASSERT_FALSE(drained.holds(ctx));
  ctx->message().emplace<std::string>("x");
  context_access::flags(*ctx) = envelope::flag_has_deadline;
  ctx->next.store(&dummy_node, std::memory_order_relaxed);

  std::vector<std::size_t> before;
  std::vector<std::size_t> sibling_before;
  for (std::uint32_t s = 0; s < pool.shard_count(); ++s) {
    before.push_back(pool.shard_size(s));
    sibling_before.push_back(sibling.shard_size(s));
  }
  akt::recycle(ctx);
  for (std::uint32_t s = 0; s < pool.shard_count(); ++s) {
    EXPECT_EQ(pool.shard_size(s), before[s] + (s == shard ? 1 : 0)) << "shard " << s;
    EXPECT_EQ(sibling.shard_size(s), sibling_before[s]) << "sibling shard " << s;
  }

  receive_context* again = pool.get(shard);
  EXPECT_EQ(again, ctx);
  EXPECT_EQ(again->home_shard(), shard | TypeParam::tag);
  EXPECT_TRUE(again->message().empty());  // recycle resets
  EXPECT_FALSE(again->has_deadline());
  EXPECT_EQ(again->next.load(), nullptr);
  akt::recycle(again);
}

TYPED_TEST(Recycle, ReturnsToHomeShardNotToAnother) {
  auto& pool = TypeParam::pool();
  drained_shard<receive_context> d1(pool, 1);
  drained_shard<receive_context> d6(pool, 6);
  // An envelope of shard 6 fetched through an out-of-range index still returns to shard 6.
  receive_context* ctx = pool.get(6 + pool.shard_count());
  ASSERT_EQ(ctx->home_shard(), 6u | TypeParam::tag);
  akt::recycle(ctx);
  EXPECT_EQ(pool.shard_size(6), 1u);
  EXPECT_EQ(pool.shard_size(1), 0u);
  receive_context* other = pool.get(1);
  EXPECT_NE(other, ctx);  // not visible on another shard
  EXPECT_EQ(other->home_shard(), 1u | TypeParam::tag);
  akt::recycle(other);
  EXPECT_EQ(pool.get(6), ctx);
  akt::recycle(ctx);
}

TYPED_TEST(Recycle, FullShardFreesTheEnvelope) {
  auto& pool = TypeParam::pool();
  constexpr std::uint32_t shard = 2;
  drained_shard<receive_context> drained(pool, shard);
  int live = 0;
  std::vector<receive_context*> filler;
  for (std::size_t i = 0; i < capacity; ++i) filler.push_back(pool.get(shard));
  for (receive_context* ctx : filler) akt::recycle(ctx);
  ASSERT_EQ(pool.shard_size(shard), capacity);

  receive_context* extra = new receive_context(shard | TypeParam::tag);
  extra->message().emplace<payload_counter>(&live, 1);
  ASSERT_EQ(live, 1);
  akt::recycle(extra);  // full: reset (payload destroyed) and deleted; LSan reports a leak
  EXPECT_EQ(live, 0);
  EXPECT_EQ(pool.shard_size(shard), capacity);

  // Leave the shard as we found it: take the filler out again and free it.
  for (std::size_t i = 0; i < capacity; ++i) delete pool.get(shard);
  EXPECT_EQ(pool.shard_size(shard), 0u);
}

}  // namespace
