// The actor object's place in its cell: an ordinary actor sits right after the cell header; an
// over-aligned one, or one whose actor base is not its first base, is found another way. Each
// must receive, answer, survive a restart (a fresh instance in the same storage) and stop.

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

struct bump_once {};
struct read_state {};
struct break_it {};

struct layout_counters {
  std::atomic<int> constructed{0};
  std::atomic<int> post_stops{0};
  std::atomic<int> misaligned{0};
};

// Shared behaviour: in-memory state (lost on restart), answers read_state, throws on break_it.
// `self` is the most-derived object, checked for its alignment on every message.
template <class Self>
void handle(Self& self, akt::receive_context& ctx) {
  if (reinterpret_cast<std::uintptr_t>(&self) % alignof(Self) != 0) self.c->misaligned++;
  if (ctx.is<bump_once>()) {
    ++self.state;
  } else if (ctx.is<read_state>()) {
    ctx.reply(self.state);
  } else if (ctx.is<break_it>()) {
    throw std::runtime_error("broken on purpose");
  }
}

struct alignas(256) over_aligned final : akt::actor {
  explicit over_aligned(layout_counters* counters) : c(counters) { c->constructed++; }
  void receive(akt::receive_context& ctx) override { handle(*this, ctx); }
  void post_stop(akt::actor_context&) override { c->post_stops++; }
  layout_counters* c;
  int state = 0;
  char padding[300] = {};
};

struct unrelated_base {
  virtual ~unrelated_base() = default;
  virtual int id() const { return 7; }
  long filler = 42;
};
struct second_base final : unrelated_base, akt::actor {
  explicit second_base(layout_counters* counters) : c(counters) { c->constructed++; }
  void receive(akt::receive_context& ctx) override { handle(*this, ctx); }
  void post_stop(akt::actor_context&) override { c->post_stops++; }
  layout_counters* c;
  int state = 0;
};

struct plain final : akt::actor {
  explicit plain(layout_counters* counters) : c(counters) { c->constructed++; }
  void receive(akt::receive_context& ctx) override { handle(*this, ctx); }
  void post_stop(akt::actor_context&) override { c->post_stops++; }
  layout_counters* c;
  int state = 0;
};

template <class A>
void exercise(const char* name) {
  layout_counters c;
  {
    actor_system sys(name, {.workers = 2});
    ASSERT_TRUE(sys.start());
    auto p = sys.spawn<A>("a", {.supervisor = supervisor().otherwise(directive::restart)}, &c);
    ASSERT_TRUE(p);
    ASSERT_FALSE(p->tell(bump_once{}));
    ASSERT_FALSE(p->tell(bump_once{}));
    auto st = p->template ask<int>(read_state{}, std::chrono::seconds(5));
    ASSERT_TRUE(st) << st.error().message();
    EXPECT_EQ(*st, 2);
    ASSERT_FALSE(p->tell(break_it{}));
    ASSERT_FALSE(p->tell(bump_once{}));
    st = p->template ask<int>(read_state{}, std::chrono::seconds(5));
    ASSERT_TRUE(st) << st.error().message();
    EXPECT_EQ(*st, 1) << "the restarted instance starts from fresh state";
    EXPECT_EQ(c.constructed.load(), 2);
    EXPECT_EQ(sys.stats(*p).restarts, 1u);
    ASSERT_TRUE(sys.stop());
  }
  EXPECT_EQ(c.post_stops.load(), 2) << "post_stop on the failed instance and at the end";
  EXPECT_EQ(c.misaligned.load(), 0);
}

TEST(Cell_Layout, OrdinaryActorSitsAfterTheHeader) { exercise<plain>("layout-plain"); }
TEST(Cell_Layout, OverAlignedActorIsFoundAndAligned) { exercise<over_aligned>("layout-aligned"); }
TEST(Cell_Layout, ActorAsSecondBaseIsFound) { exercise<second_base>("layout-second"); }

}  // namespace
}  // namespace akt::test
