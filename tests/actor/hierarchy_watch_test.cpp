// Children, paths, stop order, watching.

#include <gtest/gtest.h>

#include <akt/testkit/manual_time.hpp>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

struct make_children {
  int n;
};
struct list_children {};

// Records post_stop order in a shared log, spawns children on request.
class node : public akt::actor {
 public:
  node(std::string tag, std::vector<std::string>* log, std::mutex* mu)
      : tag_(std::move(tag)), log_(log), mu_(mu) {}
  void post_stop(akt::actor_context&) override {
    std::lock_guard<std::mutex> lock(*mu_);
    log_->push_back(tag_);
  }
  void receive(akt::receive_context& ctx) override {
    if (auto* m = ctx.get_if<make_children>()) {
      for (int i = 0; i < m->n; ++i) {
        auto c =
            ctx.spawn<node>("c" + std::to_string(i), tag_ + "/c" + std::to_string(i), log_, mu_);
        if (!c) {
          ctx.reply_error(c.error());
          return;
        }
        if (m->n > 1 && i == 0) (void)c->tell(make_children{1});  // a grandchild under c0
      }
      ctx.reply(static_cast<int>(ctx.children().size()));
    } else if (ctx.is<list_children>()) {
      std::vector<std::string> names;
      for (const pid& p : ctx.children()) names.emplace_back(p.name());
      ctx.reply(names);
    }
  }

 private:
  std::string tag_;
  std::vector<std::string>* log_;
  std::mutex* mu_;
};

TEST(Hierarchy_Spawn, ChildrenHavePathsAndCanBeFound) {
  std::vector<std::string> log;
  std::mutex mu;
  actor_system sys("tree", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto root = sys.spawn<node>("root", "root", &log, &mu);
  ASSERT_TRUE(root);
  auto n = root->ask<int>(make_children{2}, std::chrono::seconds(5));
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, 2);
  auto c1 = sys.find("root/c1");
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->name(), "c1");
  EXPECT_EQ(c1->path(), "akt://tree/user/root/c1");
  ASSERT_TRUE(eventually([&] { return sys.find("root/c0/c0").has_value(); }));
  auto full = sys.find("akt://tree/user/root/c0/c0");
  ASSERT_TRUE(full);
  auto names = root->ask<std::vector<std::string>>(list_children{}, std::chrono::seconds(5));
  ASSERT_TRUE(names);
  EXPECT_EQ(names->size(), 2u);
  // Names are unique among siblings only: another parent may have a child c1.
  auto other = sys.spawn<node>("other", "other", &log, &mu);
  ASSERT_TRUE(other);
  ASSERT_TRUE(other->ask<int>(make_children{2}, std::chrono::seconds(5)));
  EXPECT_TRUE(sys.find("other/c1"));
}

TEST(Hierarchy_Stop, ChildrenStopBeforeTheirParentBottomUp) {
  std::vector<std::string> log;
  std::mutex mu;
  actor_system sys("stop-order", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto root = sys.spawn<node>("root", "root", &log, &mu);
  ASSERT_TRUE(root);
  ASSERT_TRUE(root->ask<int>(make_children{2}, std::chrono::seconds(5)));
  ASSERT_TRUE(eventually([&] { return sys.find("root/c0/c0").has_value(); }));
  ASSERT_TRUE(sys.stop_actor(*root));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log.back(), "root") << "the parent's post_stop runs last";
  auto pos = [&](const std::string& tag) {
    return std::find(log.begin(), log.end(), tag) - log.begin();
  };
  EXPECT_LT(pos("root/c0/c0"), pos("root/c0")) << "grandchild before child";
  EXPECT_FALSE(sys.find("root/c0").has_value());
}

TEST(Hierarchy_Stop, SystemStopStopsTheWholeTree) {
  std::vector<std::string> log;
  std::mutex mu;
  {
    actor_system sys("tree-stop", {.workers = 2});
    ASSERT_TRUE(sys.start());
    auto root = sys.spawn<node>("root", "root", &log, &mu);
    ASSERT_TRUE(root);
    ASSERT_TRUE(root->ask<int>(make_children{3}, std::chrono::seconds(5)));
    ASSERT_TRUE(eventually([&] { return sys.find("root/c0/c0").has_value(); }));
    ASSERT_TRUE(sys.stop());
  }
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(log.size(), 5u);
  EXPECT_EQ(log.back(), "root");
}

TEST(Hierarchy_Spawn, ParentPidAndChildLookup) {
  actor_system sys("parent-pid", {.workers = 1});
  ASSERT_TRUE(sys.start());
  struct kid : akt::actor {
    void receive(akt::receive_context& ctx) override { ctx.reply(ctx.parent()); }
  };
  struct mom : akt::actor {
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<int>()) {
        auto k = ctx.spawn<kid>("kid");
        ctx.reply(k ? *k : pid());
      } else {
        auto k = ctx.child("kid");
        ctx.reply(k ? *k : pid());
      }
    }
  };
  auto m = sys.spawn<mom>("mom");
  ASSERT_TRUE(m);
  auto k = m->ask<pid>(1, std::chrono::seconds(5));
  ASSERT_TRUE(k);
  auto looked_up = m->ask<pid>(std::string("find"), std::chrono::seconds(5));
  ASSERT_TRUE(looked_up);
  EXPECT_EQ(*looked_up, *k);
  auto parent_of_kid = k->ask<pid>(1, std::chrono::seconds(5));
  ASSERT_TRUE(parent_of_kid);
  EXPECT_EQ(*parent_of_kid, *m);
}

// Watches whatever pid it is sent; reports terminated notices.
class watcher : public akt::actor {
 public:
  explicit watcher(std::vector<std::string>* seen, std::mutex* mu) : seen_(seen), mu_(mu) {}
  void receive(akt::receive_context& ctx) override {
    if (auto* p = ctx.get_if<pid>()) {
      ctx.watch(*p);
    } else if (auto* t = ctx.get_if<terminated>()) {
      std::lock_guard<std::mutex> lock(*mu_);
      seen_->emplace_back(t->actor.name());
    } else if (auto* u = ctx.get_if<std::string>()) {
      auto p = ctx.system().find(*u);
      if (p) ctx.unwatch(*p);
    }
  }

 private:
  std::vector<std::string>* seen_;
  std::mutex* mu_;
};

TEST(Watch_Terminated, EveryWatcherIsToldWhenTheWatchedActorStops) {
  std::vector<std::string> seen;
  std::mutex mu;
  recorder::shared s;
  actor_system sys("watch", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto target = sys.spawn<recorder>("target", &s);
  auto w1 = sys.spawn<watcher>("w1", &seen, &mu);
  auto w2 = sys.spawn<watcher>("w2", &seen, &mu);
  ASSERT_TRUE(target && w1 && w2);
  ASSERT_FALSE(w1->tell(*target));
  ASSERT_FALSE(w2->tell(*target));
  // The watchers have sent their watch requests once they answered an ask queued behind the
  // pids; the target has handled them once it answered (system messages come first).
  (void)w1->ask(0, std::chrono::seconds(5));
  (void)w2->ask(0, std::chrono::seconds(5));
  ASSERT_TRUE(target->ask<long>(echo{0}, std::chrono::seconds(5)));
  ASSERT_FALSE(target->tell(boom{"crash"}));  // stopped by a failure: still a termination
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return seen.size() == 2;
  }));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen[0], "target");
  EXPECT_EQ(seen[1], "target");
}

TEST(Watch_Terminated, WatchingAStoppedActorNotifiesAtOnce) {
  std::vector<std::string> seen;
  std::mutex mu;
  recorder::shared s;
  actor_system sys("watch-dead", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto target = sys.spawn<recorder>("gone", &s);
  auto w = sys.spawn<watcher>("w", &seen, &mu);
  ASSERT_TRUE(target && w);
  ASSERT_TRUE(sys.stop_actor(*target));
  ASSERT_FALSE(w->tell(*target));
  EXPECT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return seen.size() == 1;
  }));
}

TEST(Watch_Unwatch, NoNoticeAfterUnwatch) {
  std::vector<std::string> seen;
  std::mutex mu;
  recorder::shared s;
  // Manual time only for testkit::settle: it waits until nothing is ready or running.
  actor_system sys("unwatch", {.workers = 1, .manual_time = true});
  ASSERT_TRUE(sys.start());
  auto target = sys.spawn<recorder>("t", &s);
  auto w = sys.spawn<watcher>("w", &seen, &mu);
  ASSERT_TRUE(target && w);
  ASSERT_FALSE(w->tell(*target));
  ASSERT_FALSE(w->tell(std::string("t")));  // unwatch
  (void)w->ask(0, std::chrono::seconds(5));
  ASSERT_TRUE(target->ask<long>(echo{0}, std::chrono::seconds(5)));
  ASSERT_TRUE(sys.stop_actor(*target));
  // A notice would be queued by the stop; once the system is quiescent it would have been
  // handled, and nothing is left to send one later.
  ASSERT_TRUE(testkit::settle(sys));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(seen.empty());
}

}  // namespace
}  // namespace akt::test
