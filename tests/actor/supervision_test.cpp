// Supervision: directives per failure type, retry limits, back-off, one-for-all, escalation.

#include <gtest/gtest.h>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

struct transient_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct fatal_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct crash {
  int kind;  // 0 transient, 1 fatal, 2 reported error (timeout), 3 logic_error
};
struct get_state {};
struct bump {};

// Keeps in-memory state (lost on restart) and counts lifecycle calls in shared counters.
class fragile : public akt::actor {
 public:
  struct counters {
    std::atomic<int> constructed{0};
    std::atomic<int> pre_starts{0};
    std::atomic<int> post_stops{0};
    std::atomic<int> handled{0};
  };
  explicit fragile(counters* c) : c_(c) { c_->constructed.fetch_add(1); }
  akt::error pre_start(akt::actor_context&) override {
    c_->pre_starts.fetch_add(1);
    return {};
  }
  void post_stop(akt::actor_context&) override { c_->post_stops.fetch_add(1); }
  void receive(akt::receive_context& ctx) override {
    if (auto* c = ctx.get_if<crash>()) {
      switch (c->kind) {
        case 0:
          throw transient_error("flaky");
        case 1:
          throw fatal_error("broken");
        case 2:
          ctx.fail(akt::error(errc::request_timeout, "backend slow"));
          return;
        default:
          throw std::logic_error("bug");
      }
    }
    if (ctx.is<bump>()) {
      ++state_;
      c_->handled.fetch_add(1);
    }
    if (ctx.is<get_state>()) ctx.reply(state_);
  }

 private:
  counters* c_;
  int state_ = 0;
};

akt::supervisor by_type() {
  return akt::supervisor()
      .on<transient_error>(directive::restart)
      .on<fatal_error>(directive::stop)
      .on(errc::request_timeout, directive::resume)
      .otherwise(directive::stop);
}

TEST(Supervision_Directive, RestartGivesAFreshInstanceAndKeepsTheMailbox) {
  fragile::counters c;
  actor_system sys("sup-restart", {.workers = 1});
  ASSERT_TRUE(sys.start());
  collector<actor_restarted, unsigned> restarts(
      sys, [](const actor_restarted& e) { return e.restarts; });
  auto p = sys.spawn<fragile>("f", {.supervisor = by_type()}, &c);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(bump{}));
  ASSERT_FALSE(p->tell(bump{}));
  ASSERT_FALSE(p->tell(crash{0}));
  ASSERT_FALSE(p->tell(bump{}));  // queued behind the failure: kept across the restart
  auto st = p->ask<int>(get_state{}, std::chrono::seconds(5));
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_EQ(*st, 1) << "state survived the restart, or the queued message was lost";
  EXPECT_EQ(c.constructed.load(), 2);
  EXPECT_EQ(c.pre_starts.load(), 2);
  EXPECT_EQ(c.post_stops.load(), 1) << "post_stop runs on the old instance";
  EXPECT_EQ(c.handled.load(), 3);
  ASSERT_EQ(restarts.wait_for(1), 1u);
  EXPECT_EQ(restarts.items()[0], 1u);
  EXPECT_EQ(sys.stats(*p).restarts, 1u);
  EXPECT_TRUE(p->alive());
}

TEST(Supervision_Directive, StopByExceptionType) {
  fragile::counters c;
  actor_system sys("sup-stop", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<fragile>("f", {.supervisor = by_type()}, &c);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(crash{1}));
  EXPECT_TRUE(eventually([&] { return c.post_stops.load() == 1 && !p->alive(); }));
  EXPECT_EQ(c.constructed.load(), 1);
}

TEST(Supervision_Directive, ResumeByReportedErrorKeepsState) {
  fragile::counters c;
  actor_system sys("sup-resume", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<fragile>("f", {.supervisor = by_type()}, &c);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(bump{}));
  auto failed = p->ask(crash{2}, std::chrono::seconds(5));
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.code(), errc::request_timeout) << "the asker gets the reported error";
  auto st = p->ask<int>(get_state{}, std::chrono::seconds(5));
  ASSERT_TRUE(st);
  EXPECT_EQ(*st, 1) << "resume keeps the instance";
  EXPECT_EQ(c.constructed.load(), 1);
}

TEST(Supervision_Directive, UnmatchedFailureGetsTheOtherwiseDirective) {
  fragile::counters c;
  actor_system sys("sup-otherwise", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<fragile>("f", {.supervisor = by_type()}, &c);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(crash{3}));
  EXPECT_TRUE(eventually([&] { return !p->alive(); }));
}

TEST(Supervision_Default, SystemDefaultSupervisorApplies) {
  fragile::counters c;
  actor_system sys(
      "sup-default",
      {.workers = 1, .default_supervisor = supervisor().otherwise(directive::restart)});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<fragile>("f", &c);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(crash{3}));
  auto st = p->ask<int>(get_state{}, std::chrono::seconds(5));
  ASSERT_TRUE(st);
  EXPECT_EQ(c.constructed.load(), 2);
}

TEST(Supervision_Retry, RestartLoopIsBoundedByTheRetryLimit) {
  fragile::counters c;
  actor_system sys("sup-retry", {.workers = 1});
  ASSERT_TRUE(sys.start());
  collector<actor_stopped, errc> stopped(sys,
                                         [](const actor_stopped& e) { return e.reason.code(); });
  auto sup = supervisor().otherwise(directive::restart).with_retry(3, std::chrono::seconds(60));
  auto p = sys.spawn<fragile>("f", {.supervisor = sup}, &c);
  ASSERT_TRUE(p);
  for (int i = 0; i < 10; ++i) (void)p->tell(crash{0});
  ASSERT_TRUE(eventually([&] { return !p->alive(); }));
  EXPECT_EQ(c.constructed.load(), 4) << "the original and 3 restarts";
  ASSERT_EQ(stopped.wait_for(1), 1u);
  EXPECT_EQ(stopped.items()[0], errc::retry_limit_exceeded) << "the reason is reported";
}

TEST(Supervision_Backoff, RestartWaitsAndHoldsMessages) {
  fragile::counters c;
  actor_system sys("sup-backoff", {.workers = 1});
  ASSERT_TRUE(sys.start());
  collector<actor_suspended, std::string> suspended(
      sys, [](const actor_suspended& e) { return e.reason; });
  auto sup = supervisor()
                 .otherwise(directive::restart)
                 .with_backoff(std::chrono::milliseconds(100), std::chrono::seconds(1));
  auto p = sys.spawn<fragile>("f", {.supervisor = sup}, &c);
  ASSERT_TRUE(p);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(p->tell(crash{0}));
  ASSERT_FALSE(p->tell(bump{}));  // held until the restart
  auto st = p->ask<int>(get_state{}, std::chrono::seconds(5));
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
  EXPECT_EQ(*st, 1);
  EXPECT_EQ(c.constructed.load(), 2);
  EXPECT_GE(suspended.wait_for(1), 1u);
}

// A parent that spawns children and supervises its own failures with `sup`.
class parent_actor : public akt::actor {
 public:
  parent_actor(int n, akt::supervisor child_sup, fragile::counters* c)
      : n_(n), child_sup_(std::move(child_sup)), c_(c) {}
  akt::error pre_start(akt::actor_context&) override { return {}; }
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<bump>()) {  // spawn the children
      for (int i = 0; i < n_; ++i) {
        auto p = ctx.spawn<fragile>("child" + std::to_string(i), {.supervisor = child_sup_}, c_);
        if (!p) throw std::runtime_error(p.error().message());
      }
      ctx.reply(static_cast<int>(ctx.children().size()));
    }
  }

 private:
  int n_;
  akt::supervisor child_sup_;
  fragile::counters* c_;
};

TEST(Supervision_OneForAll, SiblingsAreRestartedToo) {
  fragile::counters c;
  actor_system sys("sup-all", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto all = supervisor(supervision_strategy::one_for_all).otherwise(directive::restart);
  auto parent = sys.spawn<parent_actor>("p", 3, all, &c);
  ASSERT_TRUE(parent);
  auto n = parent->ask<int>(bump{}, std::chrono::seconds(5));
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 3);
  auto child1 = sys.find("p/child1");
  ASSERT_TRUE(child1);
  ASSERT_FALSE(child1->tell(crash{0}));
  EXPECT_TRUE(eventually([&] { return c.constructed.load() == 6; }))
      << "all three children restarted; constructed " << c.constructed.load();
}

TEST(Supervision_Escalate, ParentDecidesAndRestartTakesChildrenDown) {
  fragile::counters child_counts;
  actor_system sys("sup-escalate", {.workers = 2});
  ASSERT_TRUE(sys.start());
  auto escalating = supervisor().otherwise(directive::escalate);
  // The parent itself restarts on anything: restarting it stops its children first.
  auto parent =
      sys.spawn<parent_actor>("p", {.supervisor = supervisor().otherwise(directive::restart)}, 1,
                              escalating, &child_counts);
  ASSERT_TRUE(parent);
  ASSERT_TRUE(parent->ask<int>(bump{}, std::chrono::seconds(5)));
  auto child = sys.find("p/child0");
  ASSERT_TRUE(child);
  ASSERT_FALSE(child->tell(crash{0}));
  EXPECT_TRUE(eventually([&] { return child_counts.post_stops.load() == 1 && !child->alive(); }))
      << "the parent's restart stops the escalating child";
  EXPECT_TRUE(parent->alive());
  // The parent restarts once it has heard that its last child stopped.
  EXPECT_TRUE(eventually([&] { return sys.stats(*parent).restarts == 1u; }));
}

TEST(Supervision_Escalate, TopLevelEscalationStops) {
  fragile::counters c;
  actor_system sys("sup-escalate-top", {.workers = 1});
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<fragile>("f", {.supervisor = supervisor().otherwise(directive::escalate)}, &c);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(crash{0}));
  EXPECT_TRUE(eventually([&] { return !p->alive(); }));
}

TEST(Supervision_Event, FailureEventCarriesTheDecision) {
  fragile::counters c;
  actor_system sys("sup-event", {.workers = 1});
  ASSERT_TRUE(sys.start());
  collector<actor_failed, directive> failures(sys,
                                              [](const actor_failed& f) { return f.decision; });
  auto p = sys.spawn<fragile>("f", {.supervisor = by_type()}, &c);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(crash{0}));
  ASSERT_EQ(failures.wait_for(1), 1u);
  EXPECT_EQ(failures.items()[0], directive::restart);
}

}  // namespace
}  // namespace akt::test
