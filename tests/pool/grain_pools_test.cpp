// Tests for the grain siblings of the actor envelope pool (goakt-context-pools.md section 11):
// the grain envelope pool is a separate instance (own rings, objects, round robin) whose
// envelopes never reach the actor pool, nor the reverse; grain cells are stamped from it; and
// acknowledged grain tells take their reply slot from the ack-slot pool, on the shard of their
// envelope, return it after a completed wait and never after a timeout. The invariant tests the
// grain envelope pool shares with the actor pool are typed over both, in sharded_pool_test.cpp
// and receive_context_test.cpp.

#include <gtest/gtest.h>
#include <akt/akt.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "akt/actor/receive_context.hpp"
#include "akt/core/clock.hpp"
#include "pool/envelope_pools.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::errc;
using akt::pool_limits;
using akt::receive_context;
using akt::sharded_pool;
using akt::detail::ack_slot_pool;
using akt::detail::clone_for_stash;
using akt::detail::envelope_pool;
using akt::detail::grain_envelope_pool;
using akt::detail::k_grain_pool_tag;
using akt::detail::reply_slot;
using akt::test::drained_shard;
using akt::test::eventually;
using akt::test::run_bounded;

constexpr std::size_t capacity = pool_limits::shard_capacity;

// ---------------------------------------------------------------------------------------------
// The grain envelope pool next to the actor pool

TEST(GrainEnvelopePool, HasItsOwnRoundRobin) {
  auto& grains = grain_envelope_pool();
  auto& actors = envelope_pool();
  const std::uint32_t mask = grains.shard_count() - 1;
  const std::uint32_t first = grains.next_home_shard();
  // Spawning actors (the actor pool's round robin) does not move the grains' one.
  for (int i = 0; i < 3; ++i) (void)actors.next_home_shard();
  const std::uint32_t second = grains.next_home_shard();
  EXPECT_EQ(first & k_grain_pool_tag, k_grain_pool_tag);
  EXPECT_EQ(second, (((first & mask) + 1) & mask) | k_grain_pool_tag);
}

TEST(GrainEnvelopePool, EnvelopesNeverReachTheActorPool) {
  auto& grains = grain_envelope_pool();
  auto& actors = envelope_pool();
  for (std::uint32_t s = 0; s < grains.shard_count(); ++s) {
    SCOPED_TRACE(s);
    drained_shard<receive_context> dg(grains, s);
    drained_shard<receive_context> da(actors, s);

    // A grain envelope goes back to the grain pool, an actor envelope to the actor pool, each
    // to the same shard index in its own rings.
    receive_context* g = grains.get(s);
    receive_context* a = actors.get(s);
    ASSERT_NE(g, a);
    EXPECT_EQ(g->home_shard(), s | k_grain_pool_tag);
    EXPECT_EQ(a->home_shard(), s);
    akt::recycle(g);
    EXPECT_EQ(grains.shard_size(s), 1u);
    EXPECT_EQ(actors.shard_size(s), 0u);
    akt::recycle(a);
    EXPECT_EQ(grains.shard_size(s), 1u);
    EXPECT_EQ(actors.shard_size(s), 1u);

    // Neither pool hands out the other's envelope.
    EXPECT_EQ(actors.get(s), a);
    EXPECT_EQ(grains.get(s), g);

    // A clone (stash) comes from its source's pool and returns there.
    g->message().emplace<int>(1);
    a->message().emplace<int>(2);
    receive_context* gc = clone_for_stash(*g);
    receive_context* ac = clone_for_stash(*a);
    EXPECT_EQ(gc->home_shard(), s | k_grain_pool_tag);
    EXPECT_EQ(ac->home_shard(), s);
    akt::recycle(gc);
    akt::recycle(g);
    akt::recycle(ac);
    akt::recycle(a);
    EXPECT_EQ(grains.shard_size(s), 2u);
    EXPECT_EQ(actors.shard_size(s), 2u);
    for (int i = 0; i < 2; ++i) {
      receive_context* x = grains.get(s);
      receive_context* y = actors.get(s);
      EXPECT_EQ(x->home_shard(), s | k_grain_pool_tag);
      EXPECT_EQ(y->home_shard(), s);
      delete x;
      delete y;
    }
  }
}

TEST(GrainEnvelopePool, ConcurrentMixedRecycleKeepsThePoolsApart) {
  // Threads take envelopes from both pools on the same few shard indexes and recycle them in
  // whatever order; every envelope handed out must bear the tag of the pool that handed it out
  // and be clean (a second owner would also show up under TSan: each one is written).
  auto& grains = grain_envelope_pool();
  auto& actors = envelope_pool();
  constexpr int threads = 6;
  constexpr int iterations = 5000;
  std::atomic<bool> stop{false};
  std::atomic<int> crossed{0};
  std::atomic<int> dirty{0};
  const bool in_time = run_bounded(threads, 60s, stop, [&](int t) {
    for (int i = 0; i < iterations; ++i) {
      if (stop.load(std::memory_order_relaxed)) return;
      const auto s = static_cast<std::uint32_t>((t + i) % 3);
      receive_context* g = grains.get(s);
      receive_context* a = actors.get(s);
      if ((g->home_shard() & k_grain_pool_tag) == 0 || (a->home_shard() & k_grain_pool_tag) != 0)
        crossed.fetch_add(1);
      if (!g->message().empty() || !a->message().empty()) dirty.fetch_add(1);
      const long tag = (static_cast<long>(t) << 32) | i;
      g->message().emplace<long>(tag);
      a->message().emplace<long>(~tag);
      if (*g->get_if<long>() != tag || *a->get_if<long>() != ~tag) dirty.fetch_add(1);
      if ((i & 1) != 0) {
        akt::recycle(g);
        akt::recycle(a);
      } else {
        akt::recycle(a);
        akt::recycle(g);
      }
    }
  });
  ASSERT_TRUE(in_time) << "concurrent get/recycle did not finish in time";
  EXPECT_EQ(crossed.load(), 0);
  EXPECT_EQ(dirty.load(), 0);
  // At rest, every pooled envelope sits in its own pool.
  for (std::uint32_t s = 0; s < 3; ++s) {
    drained_shard<receive_context> dg(grains, s);
    drained_shard<receive_context> da(actors, s);
    for (receive_context* e : dg.held()) EXPECT_EQ(e->home_shard(), s | k_grain_pool_tag);
    for (receive_context* e : da.held()) EXPECT_EQ(e->home_shard(), s);
  }
}

#if !defined(NDEBUG) || defined(AKT_ENABLE_ASSERTS)
TEST(GrainEnvelopePoolDeathTest, PuttingAnEnvelopeInTheOtherPoolAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(envelope_pool().put(new receive_context(1 | k_grain_pool_tag)), "assertion failed");
  EXPECT_DEATH(grain_envelope_pool().put(new receive_context(1)), "assertion failed");
}
#endif

// ---------------------------------------------------------------------------------------------
// A grain and an actor on a running system

struct ping {};
struct hold {};
struct whoami {
  akt::pid to;
};
struct whoami_reply {};
struct work {
  std::chrono::microseconds for_;
};

// What the test grain reports (grains are default-constructed by the framework).
struct signals {
  std::atomic<bool> release{false};
  std::atomic<int> holding{0};
  std::atomic<int> held_done{0};  // hold{} answered (after its no_err returned)
};
signals g_signals;

struct pool_grain final : akt::grain {
  void on_receive(akt::grain_context& ctx) override {
    if (ctx.is<ping>()) {
      ctx.ack();
    } else if (auto* w = ctx.get_if<whoami>()) {
      (void)ctx.tell_actor(w->to, whoami_reply{});  // the sender is this grain's cell
      ctx.ack();
    } else if (ctx.is<hold>()) {
      g_signals.holding.fetch_add(1);
      const auto limit = std::chrono::steady_clock::now() + 20s;
      while (!g_signals.release.load() && std::chrono::steady_clock::now() < limit) {
        std::this_thread::sleep_for(100us);
      }
      ctx.ack();  // the caller gave up long ago: this completes an abandoned slot
      g_signals.held_done.fetch_add(1);
    } else if (auto* d = ctx.get_if<work>()) {
      std::this_thread::sleep_for(d->for_);
      ctx.ack();
    } else {
      ctx.unhandled();
    }
  }
};

// Records the sender of whoami_reply: the grain's pid.
struct sender_recorder final : akt::actor {
  struct box {
    std::mutex mutex;
    akt::pid sender;
    std::atomic<bool> got{false};
  };
  explicit sender_recorder(box* b) : b_(b) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<whoami_reply>()) {
      std::lock_guard<std::mutex> lock(b_->mutex);
      b_->sender = ctx.sender();
      b_->got.store(true);
    } else if (ctx.is<ping>()) {
      ctx.reply(1);
    }
  }
  box* b_;
};

struct running_system {
  akt::actor_system sys;
  sender_recorder::box box;
  akt::pid recorder;
  explicit running_system(const char* name) : sys(name) {
    EXPECT_TRUE(sys.start());
    EXPECT_FALSE(akt::register_grain_kind<pool_grain>(sys));
    auto r = sys.spawn<sender_recorder>("recorder", &box);
    EXPECT_TRUE(r);
    if (r) recorder = *r;
  }
  akt::grain_identity grain(std::string name) {
    return {std::string(akt::detail::grain_kind_name<pool_grain>()), std::move(name)};
  }
  // The grain's activation (its pid comes back as the sender of a tell from inside it).
  akt::pid activation(const akt::grain_identity& id) {
    box.got.store(false);
    EXPECT_FALSE(akt::tell_grain(sys, id, whoami{recorder}));
    EXPECT_TRUE(eventually([&] { return box.got.load(); }));
    std::lock_guard<std::mutex> lock(box.mutex);
    return box.sender;
  }
};

TEST(GrainEnvelopePool, GrainCellsAreStampedFromTheGrainPool) {
  running_system rs("grain_pools_stamp");
  akt::detail::actor_cell* actor = akt::detail::cell_of(rs.recorder);
  ASSERT_NE(actor, nullptr);
  EXPECT_FALSE(actor->is_grain());
  EXPECT_EQ(actor->home_shard() & k_grain_pool_tag, 0u);
  EXPECT_LT(actor->home_shard(), envelope_pool().shard_count());

  const akt::pid g = rs.activation(rs.grain("stamp"));
  ASSERT_TRUE(g);
  ASSERT_TRUE(akt::detail::cell_of(g)->is_grain());
  EXPECT_EQ(akt::detail::cell_of(g)->home_shard() & k_grain_pool_tag, k_grain_pool_tag);
  EXPECT_LT(akt::detail::cell_of(g)->home_shard() & ~k_grain_pool_tag,
            grain_envelope_pool().shard_count());
}

TEST(GrainEnvelopePool, MessagesToAGrainRideInGrainEnvelopes) {
  running_system rs("grain_pools_route");
  const akt::grain_identity id = rs.grain("route");
  const akt::pid g = rs.activation(id);
  ASSERT_TRUE(g);
  const std::uint32_t shard = akt::detail::cell_of(g)->home_shard() & ~k_grain_pool_tag;
  drained_shard<receive_context> dg(grain_envelope_pool(), shard);
  drained_shard<receive_context> da(envelope_pool(), shard);
  for (int i = 0; i < 16; ++i) ASSERT_FALSE(akt::tell_grain(rs.sys, id, ping{}));
  // The grain's mailbox recycles one dequeue later, into the grain pool; the actor pool's shard
  // of the same index sees nothing of it.
  EXPECT_TRUE(eventually([&] { return grain_envelope_pool().shard_size(shard) >= 1; }));
  EXPECT_EQ(envelope_pool().shard_size(shard), 0u);
}

// ---------------------------------------------------------------------------------------------
// The ack-slot pool

TEST(AckSlotPool, SameGeometryAsTheEnvelopePools) {
  EXPECT_EQ(&ack_slot_pool(), &ack_slot_pool());
  EXPECT_EQ(ack_slot_pool().shard_count(), envelope_pool().shard_count());
  EXPECT_EQ(ack_slot_pool().shard_count(), grain_envelope_pool().shard_count());
  EXPECT_EQ(ack_slot_pool().tag(), 0u);
}

TEST(AckSlotPool, IndexedByTheEnvelopesHomeShard) {
  auto& pool = ack_slot_pool();
  constexpr std::uint32_t shard = 3;
  drained_shard<reply_slot> drained(pool, shard);
  // A grain envelope's home shard (tagged) picks the same shard index.
  reply_slot* slot = akt::detail::acquire_ack_slot(shard | k_grain_pool_tag);
  EXPECT_EQ(slot->home_shard(), shard);
  EXPECT_FALSE(slot->ready());
  akt::result<akt::message> v{akt::message(5)};
  ASSERT_TRUE(slot->complete(v));
  bool abandoned = true;
  EXPECT_EQ(*slot->await(akt::detail::now_ns() + 1'000'000'000, abandoned)->get_if<int>(), 5);
  EXPECT_FALSE(abandoned);
  akt::detail::return_ack_slot(slot);
  EXPECT_EQ(pool.shard_size(shard), 1u);
  // Back rearmed: the next acknowledged tell on this shard gets it clean.
  reply_slot* again = akt::detail::acquire_ack_slot(shard);
  EXPECT_EQ(again, slot);
  EXPECT_FALSE(again->ready());
  pool.put(again);
}

TEST(AckSlotPool, CompletedAcknowledgedTellReturnsItsSlotToItsShard) {
  running_system rs("grain_pools_ack");
  const akt::grain_identity id = rs.grain("ack");
  const akt::pid g = rs.activation(id);
  ASSERT_TRUE(g);
  auto& pool = ack_slot_pool();
  const std::uint32_t shard = akt::detail::cell_of(g)->home_shard() & (pool.shard_count() - 1);
  drained_shard<reply_slot> drained(pool, shard);
  std::vector<std::size_t> others;
  for (std::uint32_t s = 0; s < pool.shard_count(); ++s) others.push_back(pool.shard_size(s));

  // The first tell finds the shard empty (allocates); its slot comes back after the ack.
  ASSERT_FALSE(akt::tell_grain(rs.sys, id, ping{}));
  EXPECT_EQ(pool.shard_size(shard), 1u);
  // The next ones reuse it: still one.
  for (int i = 0; i < 8; ++i) ASSERT_FALSE(akt::tell_grain(rs.sys, id, ping{}));
  EXPECT_EQ(pool.shard_size(shard), 1u);
  // An acknowledged tell whose handler fails (unhandled) completes too: back as well.
  EXPECT_EQ(akt::tell_grain(rs.sys, id, whoami_reply{}).code(), errc::unhandled);
  EXPECT_EQ(pool.shard_size(shard), 1u);
  for (std::uint32_t s = 0; s < pool.shard_count(); ++s) {
    if (s != shard) {
      EXPECT_EQ(pool.shard_size(s), others[s]) << "shard " << s;
    }
  }
  // One-way tells and asks take no ack slot.
  akt::grain_tell_options one_way;
  one_way.one_way = true;
  ASSERT_FALSE(akt::tell_grain(rs.sys, id, ping{}, one_way));
  ASSERT_TRUE(rs.recorder.ask<int>(ping{}, 5s));
  EXPECT_EQ(pool.shard_size(shard), 1u);
}

TEST(AckSlotPool, SlotAbandonedOnTimeoutIsNeverReturned) {
  g_signals.release.store(false);
  g_signals.holding.store(0);
  g_signals.held_done.store(0);
  running_system rs("grain_pools_abandon");
  const akt::grain_identity id = rs.grain("abandon");
  const akt::pid g = rs.activation(id);
  ASSERT_TRUE(g);
  auto& pool = ack_slot_pool();
  const std::uint32_t shard = akt::detail::cell_of(g)->home_shard() & (pool.shard_count() - 1);
  drained_shard<reply_slot> drained(pool, shard);
  ASSERT_FALSE(akt::tell_grain(rs.sys, id, ping{}));
  ASSERT_EQ(pool.shard_size(shard), 1u);  // one rearmed slot at rest

  // The tell takes that slot, gives up after 50 ms while the grain still holds the message.
  akt::grain_tell_options opts;
  opts.timeout = 50ms;
  EXPECT_EQ(akt::tell_grain(rs.sys, id, hold{}, opts).code(), errc::request_timeout);
  EXPECT_EQ(pool.shard_size(shard), 0u) << "a timed-out tell returned its slot";
  ASSERT_TRUE(eventually([] { return g_signals.holding.load() == 1; }));

  // The grain answers late: the completer deletes the abandoned slot (LSan reports it if it
  // leaks, ASan if it is freed twice); it does not reach the pool either.
  g_signals.release.store(true);
  ASSERT_TRUE(eventually([] { return g_signals.held_done.load() == 1; }));
  EXPECT_EQ(pool.shard_size(shard), 0u) << "the late completer returned the abandoned slot";

  // The next tell on the shard gets a fresh slot, which comes back as usual.
  ASSERT_FALSE(akt::tell_grain(rs.sys, id, ping{}));
  EXPECT_EQ(pool.shard_size(shard), 1u);
  reply_slot* rested = pool.get(shard);
  EXPECT_FALSE(rested->ready());
  pool.put(rested);
}

TEST(AckSlotPool, ConcurrentGetPut) {
  // Half the threads on one shared shard, half spread over all: each holds a slot, completes
  // it and takes the value back as an acknowledged tell would, then returns it. A slot handed
  // out twice would show up as a wrong value, a slot not rearmed, or a TSan report.
  auto& pool = ack_slot_pool();
  const std::uint32_t mask = pool.shard_count() - 1;
  constexpr int threads = 8;
  constexpr int iterations = 5000;
  std::atomic<bool> stop{false};
  std::atomic<int> wrong_shard{0};
  std::atomic<int> not_rearmed{0};
  std::atomic<int> wrong_value{0};
  const bool in_time = run_bounded(threads, 60s, stop, [&](int t) {
    for (int i = 0; i < iterations; ++i) {
      if (stop.load(std::memory_order_relaxed)) return;
      const std::uint32_t s =
          t < threads / 2 ? k_grain_pool_tag : static_cast<std::uint32_t>(t * 5 + i);
      reply_slot* slot = akt::detail::acquire_ack_slot(s);
      if (slot->home_shard() != (s & mask)) wrong_shard.fetch_add(1);
      if (slot->ready()) not_rearmed.fetch_add(1);
      const long tag = (static_cast<long>(t) << 32) | i;
      akt::result<akt::message> v{akt::message(tag)};
      if (!slot->complete(v)) wrong_value.fetch_add(1);
      bool abandoned = true;
      akt::result<akt::message> r = slot->await(akt::detail::now_ns() + 10'000'000'000, abandoned);
      if (abandoned || !r || r->get_if<long>() == nullptr || *r->get_if<long>() != tag) {
        wrong_value.fetch_add(1);
      }
      if (!abandoned) akt::detail::return_ack_slot(slot);
    }
  });
  ASSERT_TRUE(in_time) << "concurrent get/put did not finish in time";
  EXPECT_EQ(wrong_shard.load(), 0);
  EXPECT_EQ(not_rearmed.load(), 0);
  EXPECT_EQ(wrong_value.load(), 0);
  for (std::uint32_t s = 0; s < pool.shard_count(); ++s) {
    drained_shard<reply_slot> d(pool, s);
    for (reply_slot* slot : d.held()) {
      EXPECT_EQ(slot->home_shard(), s);
      EXPECT_FALSE(slot->ready());
    }
  }
}

TEST(AckSlotPool, ConcurrentAcknowledgedTellsWithTimeouts) {
  // Several threads tell a few grains, with timeouts about as long as the work: many tells
  // complete (their slots go back and are reused at once), many time out (their slots are
  // completed late, on a worker, while other tells take slots from the same shard). Every tell
  // must end ok or request_timeout; TSan reports a slot with two owners; at rest every pooled
  // slot is rearmed.
  running_system rs("grain_pools_stress");
  constexpr int threads = 4;
  constexpr int iterations = 150;
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::atomic<int> timed_out{0};
  std::atomic<int> other{0};
  const bool in_time = run_bounded(threads, 90s, stop, [&](int t) {
    const akt::grain_identity id = rs.grain("stress" + std::to_string(t % 2));
    for (int i = 0; i < iterations; ++i) {
      if (stop.load(std::memory_order_relaxed)) return;
      akt::grain_tell_options opts;
      // Every third tell waits long enough to drain the backlog of late ones; the others
      // mostly time out.
      opts.timeout =
          i % 3 == 0 ? std::chrono::microseconds(50'000) : std::chrono::microseconds(200 * (i % 3));
      const akt::error e = akt::tell_grain(
          rs.sys, id, work{std::chrono::microseconds(50 * ((i * 7 + t) % 9))}, opts);
      if (!e)
        ok.fetch_add(1);
      else if (e.code() == errc::request_timeout)
        timed_out.fetch_add(1);
      else
        other.fetch_add(1);
    }
  });
  ASSERT_TRUE(in_time) << "the tells did not finish in time";
  RecordProperty("completed", ok.load());
  RecordProperty("timed_out", timed_out.load());
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ok.load() + timed_out.load() + other.load(), threads * iterations);
  // Drain both grains (their mailboxes are FIFO: the last acknowledged tell comes after every
  // late one), so no late completion is still running.
  for (int k = 0; k < 2; ++k) {
    ASSERT_FALSE(akt::tell_grain(rs.sys, rs.grain("stress" + std::to_string(k)), ping{}));
  }
  auto& pool = ack_slot_pool();
  for (std::uint32_t s = 0; s < pool.shard_count(); ++s) {
    EXPECT_LE(pool.shard_size(s), capacity);
    drained_shard<reply_slot> d(pool, s);
    for (reply_slot* slot : d.held()) {
      EXPECT_EQ(slot->home_shard(), s);
      EXPECT_FALSE(slot->ready());
    }
  }
}

}  // namespace
