// Stash and behaviours.

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

struct open_gate {};
struct item {
  int n;
};
struct report {};

// Stashes items until the gate opens, then processes them in order.
class gated : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<open_gate>()) {
      open_ = true;
      ctx.unstash_all();
    } else if (auto* i = ctx.get_if<item>()) {
      if (!open_)
        ctx.stash();
      else
        seen_.push_back(i->n);
    } else if (ctx.is<report>()) {
      ctx.reply(seen_);
    } else if (ctx.is<int>()) {
      ctx.reply(static_cast<long>(ctx.stash_size()));
    }
  }

 private:
  bool open_ = false;
  std::vector<int> seen_;
};

TEST(Stash_UnstashAll, StashedMessagesComeBackFirstInOrder) {
  actor_system sys("stash", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto g = sys.spawn<gated>("g");
  ASSERT_TRUE(g);
  for (int i = 0; i < 5; ++i) ASSERT_FALSE(g->tell(item{i}));
  auto size = g->ask<long>(0, std::chrono::seconds(5));
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, 5);
  ASSERT_FALSE(g->tell(open_gate{}));
  ASSERT_FALSE(g->tell(item{5}));  // after the gate: after the unstashed ones
  auto seen = g->ask<std::vector<int>>(report{}, std::chrono::seconds(5));
  ASSERT_TRUE(seen);
  EXPECT_EQ(*seen, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(Stash_Ask, AStashedAskIsStillAnsweredAfterUnstash) {
  // The clone carries the reply route with a cleared late-reply guard (goakt #1312).
  actor_system sys("stash-ask", {.workers = 1});
  ASSERT_TRUE(sys.start());
  struct delayed : akt::actor {
    std::atomic<int>* stashed;
    explicit delayed(std::atomic<int>* s) : stashed(s) {}
    bool ready = false;
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<open_gate>()) {
        ready = true;
        ctx.unstash();
      } else if (auto* e = ctx.get_if<echo>()) {
        if (!ready) {
          ctx.stash();
          stashed->fetch_add(1);
        } else {
          ctx.reply(e->n * 2);
        }
      }
    }
  };
  std::atomic<int> stashed{0};
  auto d = sys.spawn<delayed>("d", &stashed);
  ASSERT_TRUE(d);
  auto asked = std::async(std::launch::async,
                          [&] { return d->ask<long>(echo{21}, std::chrono::seconds(5)); });
  // The gate opens only once the ask has been stashed, so it is the stashed clone that answers.
  ASSERT_TRUE(eventually([&] { return stashed.load() == 1; }));
  ASSERT_FALSE(d->tell(open_gate{}));
  auto r = asked.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 42);
}

TEST(Stash_Stop, StashedMessagesBecomeDeadLettersWhenTheActorStops) {
  actor_system sys("stash-stop", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto dls = dead_letters(sys);
  auto g = sys.spawn<gated>("g");
  ASSERT_TRUE(g);
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(g->tell(item{i}));
  ASSERT_TRUE(g->ask<long>(0, std::chrono::seconds(5)));
  ASSERT_TRUE(sys.stop_actor(*g));
  EXPECT_EQ(dls.wait_for(3), 3u);
}

struct flip {};
struct who {};

class moody : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<flip>()) {
      ctx.become([](akt::receive_context& c) {
        if (c.is<who>())
          c.reply(std::string("grumpy"));
        else if (c.is<flip>())
          c.unbecome();
        else if (c.is<int>())
          c.become_stacked([](akt::receive_context& cc) {
            if (cc.is<who>())
              cc.reply(std::string("sleepy"));
            else
              cc.unbecome();
          });
      });
    } else if (ctx.is<who>()) {
      ctx.reply(std::string("happy"));
    }
  }
};

TEST(Behavior_Become, SwitchesFromTheNextMessageAndUnbecomeReturns) {
  actor_system sys("become", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto m = sys.spawn<moody>("m");
  ASSERT_TRUE(m);
  auto ask = [&] { return m->ask<std::string>(who{}, std::chrono::seconds(5)).value_or("?"); };
  EXPECT_EQ(ask(), "happy");
  ASSERT_FALSE(m->tell(flip{}));
  EXPECT_EQ(ask(), "grumpy");
  ASSERT_FALSE(m->tell(1));  // stacked on top of grumpy
  EXPECT_EQ(ask(), "sleepy");
  ASSERT_FALSE(m->tell(2));  // unbecome: back to grumpy
  EXPECT_EQ(ask(), "grumpy");
  ASSERT_FALSE(m->tell(flip{}));  // unbecome: back to receive
  EXPECT_EQ(ask(), "happy");
}

TEST(Behavior_Restart, ARestartReturnsToReceive) {
  actor_system sys(
      "become-restart",
      {.workers = 1, .default_supervisor = supervisor().otherwise(directive::restart)});
  ASSERT_TRUE(sys.start());
  struct switcher : akt::actor {
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<flip>()) {
        ctx.become([](akt::receive_context& c) {
          if (c.is<who>()) c.reply(std::string("other"));
          if (c.is<boom>()) throw std::runtime_error("x");
        });
      } else if (ctx.is<who>()) {
        ctx.reply(std::string("base"));
      }
    }
  };
  auto s = sys.spawn<switcher>("s");
  ASSERT_TRUE(s);
  ASSERT_FALSE(s->tell(flip{}));
  EXPECT_EQ(s->ask<std::string>(who{}, std::chrono::seconds(5)).value_or("?"), "other");
  ASSERT_FALSE(s->tell(boom{"x"}));
  EXPECT_EQ(s->ask<std::string>(who{}, std::chrono::seconds(5)).value_or("?"), "base");
}

// A behaviour that counts its copies; it replaces itself with a fresh one on `flip` (so the
// running behaviour is replaced while it runs) and holds a large capture, so that std::function
// stores it on the heap and a copy per message would also allocate.
struct counted_behavior {
  std::shared_ptr<std::atomic<int>> copies;
  std::shared_ptr<std::atomic<int>> handled;
  char ballast[64] = {};
  counted_behavior(std::shared_ptr<std::atomic<int>> c, std::shared_ptr<std::atomic<int>> h)
      : copies(std::move(c)), handled(std::move(h)) {}
  counted_behavior(const counted_behavior& o) : copies(o.copies), handled(o.handled) { ++*copies; }
  counted_behavior(counted_behavior&&) noexcept = default;
  void operator()(akt::receive_context& c) {
    ++*handled;
    if (c.is<flip>()) c.become(counted_behavior(copies, handled));  // replaces itself, running
    if (c.is<who>()) c.reply(std::string("counted"));
  }
};

TEST(Behavior_Become, TheCurrentBehaviourRunsInPlaceWithoutACopyPerMessage) {
  actor_system sys("become-no-copy", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto copies = std::make_shared<std::atomic<int>>(0);
  auto handled = std::make_shared<std::atomic<int>>(0);
  struct host : akt::actor {
    std::shared_ptr<std::atomic<int>> copies, handled;
    host(std::shared_ptr<std::atomic<int>> c, std::shared_ptr<std::atomic<int>> h)
        : copies(std::move(c)), handled(std::move(h)) {}
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<flip>()) ctx.become(counted_behavior(copies, handled));
    }
  };
  auto a = sys.spawn<host>("h", copies, handled);
  ASSERT_TRUE(a);
  ASSERT_FALSE(a->tell(flip{}));
  ASSERT_EQ(a->ask<std::string>(who{}, std::chrono::seconds(5)).value_or("?"), "counted");
  const int before = copies->load();
  for (int i = 0; i < 200; ++i) ASSERT_FALSE(a->tell(i));
  ASSERT_FALSE(a->tell(flip{}));  // the running behaviour replaces itself
  for (int i = 0; i < 200; ++i) ASSERT_FALSE(a->tell(i));
  ASSERT_EQ(a->ask<std::string>(who{}, std::chrono::seconds(5)).value_or("?"), "counted");
  EXPECT_EQ(handled->load(), 1 + 200 + 1 + 200 + 1);
  EXPECT_EQ(copies->load(), before) << "no copy of the behaviour per message";
}

}  // namespace
}  // namespace akt::test
