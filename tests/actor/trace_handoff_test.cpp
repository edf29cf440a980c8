// Work a traced handler hands on continues its trace: a request's continuation, a coroutine
// after each co_await, a pipe_to task and the delivery of its result, a one-shot timer. Each
// message they send is a child of the span of the handler that set the work up. The same work
// set up by an untraced handler starts no trace.

#include <gtest/gtest.h>

#include <akt/akt.hpp>

#include <atomic>
#include <string>
#include <vector>

#include "support/span_log.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::span_data;
using akt::test::describe;
using akt::test::eventually;
using akt::test::span_log;
using akt::test::tracing_into;

struct go {};
struct co_go {};
struct note {
  int n = 0;
};

// Counts the notes it got, by number.
struct counter final : akt::actor {
  explicit counter(std::atomic<int>* seen) : seen_(seen) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<note>()) seen_->fetch_add(1);
  }
  std::atomic<int>* seen_;
};

struct replier final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (ctx.expects_reply()) ctx.reply(1L);
  }
};

// On go: a request whose continuation tells `after`, a pipe_to whose result goes to `piped`,
// and a one-shot timer to itself. On co_go: a coroutine that tells `after` after an ask and
// after a delay.
struct origin final : akt::actor {
  origin(akt::pid replier, akt::pid after, akt::pid piped, std::atomic<int>* timers)
      : replier_(std::move(replier)),
        after_(std::move(after)),
        piped_(std::move(piped)),
        timers_(timers) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<go>()) {
      ctx.request(replier_, 1L, 5s, [this](akt::receive_context& c, akt::result<akt::message> r) {
        if (r) (void)c.tell(after_, note{1});
      });
      (void)ctx.pipe_to(piped_, [] { return note{2}; });
      (void)ctx.schedule_once(note{3}, 1ms);
    } else if (auto* n = ctx.get_if<note>(); n != nullptr && n->n == 3) {
      timers_->fetch_add(1);
    } else if (ctx.is<co_go>()) {
      akt::run(steps(akt::async_context(ctx)));
    }
  }
  akt::task<> steps(akt::async_context ctx) {
    akt::result<long> v = co_await ctx.ask<long>(replier_, 2L, 5s);
    if (v) (void)ctx.turn().tell(after_, note{4});
    co_await ctx.delay(1ms);
    (void)ctx.turn().tell(after_, note{5});
  }
  akt::pid replier_, after_, piped_;
  std::atomic<int>* timers_;
};

const span_data* by_path(const std::vector<span_data>& spans, const std::string& path,
                         std::size_t nth = 0) {
  for (const span_data& s : spans) {
    if (s.attribute("akt.actor.path") == path && nth-- == 0) return &s;
  }
  return nullptr;
}

TEST(Trace_Handoff, ContinuationsPipesCoroutinesAndOneShotTimersContinueTheHandlersTrace) {
  span_log log;
  akt::system_config cfg;
  cfg.workers = 2;
  cfg.tracing = tracing_into(log, 0.0);  // no root sampled: only trace_scope starts traces
  akt::actor_system sys("handoff", cfg);
  ASSERT_TRUE(sys.start());
  std::atomic<int> after_seen{0}, piped_seen{0}, timers{0};
  auto rep = sys.spawn<replier>("replier");
  auto after = sys.spawn<counter>("after", &after_seen);
  auto piped = sys.spawn<counter>("piped", &piped_seen);
  ASSERT_TRUE(rep && after && piped);
  auto o = sys.spawn<origin>("origin", *rep, *after, *piped, &timers);
  ASSERT_TRUE(o);

  // Untraced first: the same hand-offs start no trace.
  ASSERT_FALSE(o->tell(go{}));
  ASSERT_FALSE(o->tell(co_go{}));
  ASSERT_TRUE(eventually(
      [&] { return after_seen.load() == 3 && piped_seen.load() == 1 && timers.load() == 1; }));
  EXPECT_TRUE(log.all().empty()) << describe(log.all());

  std::string trace;
  std::uint64_t root = 0;
  {
    akt::trace_scope scope(sys, "root");
    trace = scope.context().trace_id_hex();
    root = scope.context().span_id;
    ASSERT_FALSE(o->tell(go{}));
    ASSERT_FALSE(o->tell(co_go{}));
  }
  // root; origin (go), origin (co_go), origin (the timer's note); replier twice; after three
  // times (the continuation's note, the coroutine's two); piped once.
  const std::vector<span_data> spans = log.wait_for(trace, 10);
  ASSERT_EQ(spans.size(), 10u) << describe(spans);
  const span_data* on_go = nullptr;
  const span_data* on_co_go = nullptr;
  const span_data* on_timer = nullptr;
  for (const span_data& s : spans) {
    if (s.attribute("akt.actor.path") != "origin") continue;
    const std::string type(s.attribute("akt.message.type"));
    if (type.find("co_go") != std::string::npos)
      on_co_go = &s;
    else if (type.find("go") != std::string::npos)
      on_go = &s;
    else if (type.find("note") != std::string::npos)
      on_timer = &s;
  }
  ASSERT_TRUE(on_go && on_co_go && on_timer) << describe(spans);
  EXPECT_EQ(on_go->parent_span_id, root);
  EXPECT_EQ(on_co_go->parent_span_id, root);
  EXPECT_EQ(on_timer->parent_span_id, on_go->span_id) << "the one-shot timer's message";
  const span_data* piped_span = by_path(spans, "piped");
  ASSERT_NE(piped_span, nullptr) << describe(spans);
  EXPECT_EQ(piped_span->parent_span_id, on_go->span_id) << "the pipe_to task's result";
  int after_of_go = 0, after_of_co_go = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const span_data* a = by_path(spans, "after", i);
    ASSERT_NE(a, nullptr) << describe(spans);
    if (a->parent_span_id == on_go->span_id) ++after_of_go;
    if (a->parent_span_id == on_co_go->span_id) ++after_of_co_go;
  }
  EXPECT_EQ(after_of_go, 1) << "the request's continuation" << describe(spans);
  EXPECT_EQ(after_of_co_go, 2) << "the coroutine, after its ask and after its delay"
                               << describe(spans);
  for (std::size_t i = 0; i < 2; ++i) {
    const span_data* r = by_path(spans, "replier", i);
    ASSERT_NE(r, nullptr) << describe(spans);
    EXPECT_TRUE(r->parent_span_id == on_go->span_id || r->parent_span_id == on_co_go->span_id);
  }
  ASSERT_TRUE(sys.stop());
  EXPECT_EQ(log.all().size(), 10u) << "nothing else traced" << describe(log.all());
}

// A repeating schedule made inside a trace starts no trace: its fires would otherwise join the
// trace of whoever made it, for as long as it runs.
TEST(Trace_Handoff, ARepeatingScheduleMadeInATraceStaysOutOfIt) {
  span_log log;
  akt::system_config cfg;
  cfg.workers = 1;
  cfg.tracing = tracing_into(log, 0.0);
  akt::actor_system sys("repeating", cfg);
  ASSERT_TRUE(sys.start());
  std::atomic<int> seen{0};
  auto c = sys.spawn<counter>("c", &seen);
  ASSERT_TRUE(c);
  std::string trace;
  akt::result<akt::schedule_ref> every = akt::errc::empty_pid;
  {
    akt::trace_scope scope(sys, "root");
    trace = scope.context().trace_id_hex();
    every = sys.schedule(*c, note{7}, 2ms);
    ASSERT_TRUE(every);
  }
  ASSERT_TRUE(eventually([&] { return seen.load() >= 3; }));
  (void)every->cancel();
  ASSERT_TRUE(sys.stop());
  EXPECT_EQ(log.wait_for(trace, 1).size(), 1u)
      << "the scope's own span only" << describe(log.all());
  EXPECT_EQ(log.all().size(), 1u) << describe(log.all());
}

}  // namespace
