// One routing seam: every way into a grain consults the placement, so an identity that another
// node owns is reached there and never activated here (grain_seams.hpp, route_grain). Each test
// takes one entry point from node a towards a grain that the placement puts on node b.
#include <gtest/gtest.h>

#include <akt/grain/grain_coroutine.hpp>

#include "remote/remote_support.hpp"

namespace {

using namespace akt::remote_test;
using akt::errc;
using akt::test::eventually;

// What every path tries to reach (on b): adds what it gets, answers the total.
struct target_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "route.target";
  std::int64_t total = 0;
  void on_receive(akt::grain_context& ctx) override {
    akt::match(ctx, [&](const ping& p, auto& c) {
      total += p.n;
      c.reply(ping{total});
    });
  }
};

// The paths from inside a grain on a, chosen by the command string; answers the outcome as a
// ping (the total the target answered; 0 for the one-way paths) or the error.
struct caller_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "route.caller";
  void on_receive(akt::grain_context& ctx) override {
    ctx.enable_reentrancy();
    const auto* cmd = ctx.get_if<std::string>();
    if (cmd == nullptr) {
      ctx.unhandled();
      return;
    }
    const akt::grain_identity t{"route.target", "t1"};
    if (*cmd == "ask") {
      auto r = ctx.ask_grain<ping>(t, ping{1}, 5s);
      answer(ctx, r);
    } else if (*cmd == "request") {
      auto reply = std::make_shared<akt::reply_handle>(ctx.defer_reply());
      (void)ctx.request_grain<ping>(
          t, ping{1}, [reply](akt::grain_context&, akt::result<ping> r) { pass(*reply, r); });
    } else if (*cmd == "co_await") {
      akt::run(co_ask(akt::grain_async_context(ctx), t));
    } else if (*cmd == "ref-request") {
      auto ref = akt::get_grain<target_grain>(ctx.system(), "t1");
      auto reply = std::make_shared<akt::reply_handle>(ctx.defer_reply());
      (void)ref->request<ping>(
          ctx, ping{1}, [reply](akt::grain_context&, akt::result<ping> r) { pass(*reply, r); });
    } else if (*cmd == "pipe") {
      akt::error e = ctx.pipe_to_grain(t, [] { return ping{1}; });
      answer(ctx, e ? akt::result<ping>(e) : akt::result<ping>(ping{0}));
    } else if (*cmd == "schedule") {
      auto s = akt::schedule_grain_once(ctx.system(), t, ping{1}, 1ms);
      answer(ctx, s ? akt::result<ping>(ping{0}) : akt::result<ping>(s.error()));
    } else {
      ctx.unhandled();
    }
  }
  static void answer(akt::grain_context& ctx, const akt::result<ping>& r) {
    if (r)
      ctx.reply(*r);
    else
      ctx.reply_error(r.error());
  }
  static void pass(akt::reply_handle& h, const akt::result<ping>& r) {
    if (r)
      h.reply(*r);
    else
      h.reply_error(r.error());
  }
  akt::task<> co_ask(akt::grain_async_context ctx, akt::grain_identity t) {
    akt::result<ping> r = co_await ctx.ask_grain<ping>(t, ping{1});
    if (r)
      ctx.reply(*r);
    else
      ctx.reply_error(r.error());
  }
};

// grain_ref::request from an actor's turn.
struct requesting_actor final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<std::string>()) return;
    auto ref = akt::get_grain<target_grain>(ctx.system(), "t1");
    auto reply = std::make_shared<akt::reply_handle>(ctx.defer_reply());
    (void)ref->request<ping>(ctx, ping{1}, 5s, [reply](akt::receive_context&, akt::result<ping> r) {
      if (r)
        reply->reply(*r);
      else
        reply->reply_error(r.error());
    });
  }
};

// Two nodes that agree that every route.target identity lives on b; a records every
// activation of that kind it makes.
struct routed_pair {
  node a{"alpha"}, b{"beta"};
  std::atomic<int> targets_activated_on_a{0};
  akt::subscription sub;
  const akt::grain_identity t1{"route.target", "t1"};

  routed_pair() {
    EXPECT_TRUE(a.started && b.started);
    for (akt::actor_system* s : {&a.sys, &b.sys}) {
      EXPECT_FALSE(akt::register_grain_kind<target_grain>(*s));
      EXPECT_FALSE(akt::register_grain_kind<caller_grain>(*s));
    }
    const std::string owner = b.where();
    auto placement = [owner](const akt::grain_identity& id) {
      return id.kind == "route.target" ? owner : std::string();
    };
    EXPECT_FALSE(akt::remote::set_grain_placement(a.sys, placement));
    EXPECT_FALSE(akt::remote::set_grain_placement(b.sys, placement));  // itself: local there
    sub = a.sys.events().subscribe<akt::grain_activated>([this](const akt::grain_activated& e) {
      if (e.grain.kind == "route.target") targets_activated_on_a++;
    });
  }

  // t1's total, read on b itself.
  std::int64_t total_on_b() {
    auto r = akt::ask_grain<ping>(b.sys, t1, ping{0}, 5s);
    return r ? r->n : -1;
  }
  bool active_on(akt::actor_system& s) {
    for (const auto& id : akt::active_grains(s))
      if (id == t1) return true;
    return false;
  }
  // What a caller grain on a answers for one path.
  akt::result<ping> from_grain(const std::string& path) {
    return akt::ask_grain<ping>(a.sys, {"route.caller", "c1"}, path, 10s);
  }
  void expect_reached_b_only(std::int64_t total) {
    EXPECT_TRUE(eventually([&] { return total_on_b() == total; }, 10s)) << total_on_b();
    EXPECT_FALSE(active_on(a.sys));
    EXPECT_TRUE(active_on(b.sys));
    EXPECT_EQ(targets_activated_on_a.load(), 0);
  }
};

TEST(Grain_Routing, ABlockingAskFromAGrainReachesTheOwnerNode) {
  routed_pair p;
  auto r = p.from_grain("ask");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 1);
  p.expect_reached_b_only(1);
}

TEST(Grain_Routing, ARequestWithAContinuationReachesTheOwnerNode) {
  routed_pair p;
  auto r = p.from_grain("request");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 1);
  p.expect_reached_b_only(1);
}

TEST(Grain_Routing, ACoroutinesAwaitedGrainAskReachesTheOwnerNode) {
  routed_pair p;
  auto r = p.from_grain("co_await");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 1);
  p.expect_reached_b_only(1);
}

TEST(Grain_Routing, AGrainRefRequestFromAGrainReachesTheOwnerNode) {
  routed_pair p;
  auto r = p.from_grain("ref-request");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 1);
  p.expect_reached_b_only(1);
}

TEST(Grain_Routing, AGrainRefRequestFromAnActorReachesTheOwnerNode) {
  routed_pair p;
  auto actor = p.a.sys.spawn<requesting_actor>("requester");
  ASSERT_TRUE(actor);
  auto r = actor->ask<ping>(std::string("go"), 10s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 1);
  p.expect_reached_b_only(1);
}

TEST(Grain_Routing, APipeToAGrainReachesTheOwnerNode) {
  routed_pair p;
  auto r = p.from_grain("pipe");
  ASSERT_TRUE(r) << r.error().message();
  p.expect_reached_b_only(1);
}

TEST(Grain_Routing, AScheduleFromAGrainReachesTheOwnerNode) {
  routed_pair p;
  auto r = p.from_grain("schedule");
  ASSERT_TRUE(r) << r.error().message();
  p.expect_reached_b_only(1);
}

TEST(Grain_Routing, AScheduleFromOutsideReachesTheOwnerNode) {
  routed_pair p;
  auto s = akt::schedule_grain_once(p.a.sys, p.t1, ping{1}, 1ms);
  ASSERT_TRUE(s) << s.error().message();
  p.expect_reached_b_only(1);
}

TEST(Grain_Routing, ActivateGrainActivatesOnTheOwnerNodeOnly) {
  routed_pair p;
  auto id = akt::activate_grain<target_grain>(p.a.sys, "t1");
  ASSERT_TRUE(id) << id.error().message();
  EXPECT_EQ(*id, p.t1);
  EXPECT_TRUE(p.active_on(p.b.sys));  // active before any message: the probe activated it
  p.expect_reached_b_only(0);
}

TEST(Grain_Routing, PlainTellsAsksAndGrainRefSendsStillReachTheOwnerNode) {
  routed_pair p;
  ASSERT_FALSE(akt::tell_grain(p.a.sys, p.t1, ping{1}));  // acknowledged
  akt::grain_tell_options one_way;
  one_way.one_way = true;
  ASSERT_FALSE(akt::tell_grain(p.a.sys, p.t1, ping{1}, one_way));
  auto ref = akt::get_grain<target_grain>(p.a.sys, "t1");
  ASSERT_TRUE(ref);
  ASSERT_FALSE(ref->tell_one_way(ping{1}));
  auto r = ref->ask<ping>(ping{1}, 5s);
  ASSERT_TRUE(r) << r.error().message();
  p.expect_reached_b_only(4);
}

// A blocking ask from an actor's turn stays refused with blocking_on_worker when the grain lives
// on another node: routing does not turn it into a wait on a worker.
struct blocking_asker final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<std::string>()) return;
    auto r = akt::ask_grain<ping>(ctx.system(), {"route.target", "t1"}, ping{1}, 1s);
    ctx.reply(r ? std::string("answered") : std::string(akt::to_string(r.code())));
  }
};

TEST(Grain_Routing, ABlockingAskFromAWorkerIsStillRefusedWhenTheGrainLivesElsewhere) {
  routed_pair p;
  auto actor = p.a.sys.spawn<blocking_asker>("asker");
  ASSERT_TRUE(actor);
  auto r = actor->ask<std::string>(std::string("go"), 10s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, "blocking_on_worker");
  EXPECT_FALSE(p.active_on(p.a.sys));
  EXPECT_FALSE(p.active_on(p.b.sys)) << "nothing was sent";
}

}  // namespace
