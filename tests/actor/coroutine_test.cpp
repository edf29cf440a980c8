// Coroutine handlers (akt/actor/coroutine.hpp): resumption on the actor's turn, reentrancy,
// cancellation by stop and restart, failures, errors, delays, nested tasks, deferred replies.

#include <gtest/gtest.h>

#include <future>

#include "actor/actor_test_support.hpp"

namespace akt::test {
namespace {

// ---- messages ----
struct run_asks {  // n asks of echo in a loop; each reply touches the actor's plain counter
  pid target;
  long n;
  bool reentrant;
};
struct poke {};  // touches the same counter
struct query {   // answered after one ask of target's echo: (reply + 1)
  pid target;
  std::chrono::milliseconds timeout{5000};
};
struct wait_on {  // asks target's echo (held by the test), noting before and after
  pid target;
  bool reentrant;
};
struct sleep_then {  // delay, then note
  std::chrono::milliseconds d;
};
struct park_forever {  // waits on a delay that never ends in the test's time
  bool reentrant = false;
};
struct throw_after {  // throws after a delay (or at once)
  bool before_await;
};
struct nested {
  pid target;
};
struct read_counter {};

// Counts destructions of frame locals.
struct counted {
  std::atomic<int>* destroyed;
  explicit counted(std::atomic<int>* d) : destroyed(d) {}
  counted(const counted&) = delete;
  ~counted() { destroyed->fetch_add(1); }
};

class coro_actor : public akt::actor {
 public:
  struct shared {
    std::mutex mu;
    std::vector<std::string> log;
    std::atomic<int> done{0};
    std::atomic<int> destroyed{0};
    std::atomic<int> pre_starts{0};
    std::atomic<bool> concurrent{false};
    std::atomic<std::int64_t> elapsed_ns{0};
    std::atomic<int> errors{0};
    std::mutex code_mu;
    std::vector<errc> codes;
    void note(std::string s) {
      std::lock_guard<std::mutex> lock(mu);
      log.push_back(std::move(s));
    }
    std::vector<std::string> snapshot() {
      std::lock_guard<std::mutex> lock(mu);
      return log;
    }
    std::size_t size() {
      std::lock_guard<std::mutex> lock(mu);
      return log.size();
    }
  };
  explicit coro_actor(shared* s) : s_(s) {}

  akt::error pre_start(akt::actor_context&) override {
    s_->pre_starts.fetch_add(1);
    return {};
  }

  void receive(akt::receive_context& ctx) override {
    turn_guard g(this);
    if (auto* r = ctx.get_if<run_asks>()) {
      akt::run(asks(akt::async_context(ctx, {.reentrant = r->reentrant}), *r));
    } else if (ctx.is<poke>()) {
      ++counter_;  // a plain field: TSan reports a coroutine resumed concurrently with this
    } else if (ctx.is<read_counter>()) {
      ctx.reply(counter_);
    } else if (auto* q = ctx.get_if<query>()) {
      akt::run(answer(akt::async_context(ctx), *q));
    } else if (auto* w = ctx.get_if<wait_on>()) {
      akt::run(wait(akt::async_context(ctx, {.reentrant = w->reentrant}), w->target));
    } else if (auto* n = ctx.get_if<int>()) {
      s_->note("other " + std::to_string(*n));
    } else if (auto* st = ctx.get_if<sleep_then>()) {
      akt::run(sleep(akt::async_context(ctx), st->d));
    } else if (auto* pf = ctx.get_if<park_forever>()) {
      akt::run(park(akt::async_context(ctx, {.reentrant = pf->reentrant})));
    } else if (auto* t = ctx.get_if<throw_after>()) {
      akt::run(thrower(akt::async_context(ctx), t->before_await));
    } else if (auto* ne = ctx.get_if<nested>()) {
      akt::run(outer(akt::async_context(ctx), ne->target));
    }
  }

 private:
  // Flags two overlapping runs on this actor (a handler and a resumed coroutine, or two parts).
  struct turn_guard {
    explicit turn_guard(coro_actor* a) : a_(a) {
      if (a_->in_turn_) a_->s_->concurrent.store(true);
      a_->in_turn_ = true;
    }
    ~turn_guard() { a_->in_turn_ = false; }
    coro_actor* a_;
  };

  akt::task<> asks(akt::async_context ctx, run_asks r) {
    for (long i = 0; i < r.n; ++i) {
      akt::result<long> v = co_await ctx.ask<long>(r.target, echo{i}, 5s);
      turn_guard g(this);
      if (v && *v == i + 1) ++counter_;
    }
    s_->done.fetch_add(1);
  }

  akt::task<> answer(akt::async_context ctx, query q) {
    akt::result<long> v = co_await ctx.ask<long>(q.target, echo{41}, q.timeout);
    if (v) {
      ctx.reply(*v + 1);
    } else {
      {
        std::lock_guard<std::mutex> lock(s_->code_mu);
        s_->codes.push_back(v.error().code());
      }
      ctx.reply_error(v.error());
    }
    s_->done.fetch_add(1);
  }

  akt::task<> wait(akt::async_context ctx, pid target) {
    s_->note("start");
    akt::result<long> v = co_await ctx.ask<long>(target, echo{1}, 5s);
    s_->note(v ? "reply " + std::to_string(*v) : std::string("error"));
    co_await ctx.delay(1ms);
    s_->note("end");
    s_->done.fetch_add(1);
  }

  akt::task<> sleep(akt::async_context ctx, std::chrono::milliseconds d) {
    const auto start = std::chrono::steady_clock::now();
    co_await ctx.delay(d);
    turn_guard g(this);
    s_->elapsed_ns.store((std::chrono::steady_clock::now() - start).count());
    s_->done.fetch_add(1);
  }

  akt::task<> park(akt::async_context ctx) {
    counted c(&s_->destroyed);
    s_->note("parked");
    co_await ctx.delay(1h);
    s_->note("resumed after the stop");
  }

  akt::task<> thrower(akt::async_context ctx, bool before_await) {
    counted c(&s_->destroyed);
    if (before_await) throw std::runtime_error("first part");
    co_await ctx.delay(1ms);
    throw std::runtime_error("after a co_await");
  }

  akt::task<long> inner(akt::async_context& ctx, pid target) {
    akt::result<long> a = co_await ctx.ask<long>(target, echo{1}, 5s);
    akt::result<long> b = co_await ctx.ask<long>(target, echo{10}, 5s);
    co_return (a ? *a : 0) + (b ? *b : 0);
  }
  akt::task<> outer(akt::async_context ctx, pid target) {
    const long sum = co_await inner(ctx, target);
    ctx.reply(sum);
  }

  shared* s_;
  long counter_ = 0;
  bool in_turn_ = false;
};

struct fixture {
  akt::actor_system sys;
  coro_actor::shared s;
  recorder::shared rs;
  explicit fixture(const char* name, akt::system_config cfg = {}) : sys(name, std::move(cfg)) {
    EXPECT_TRUE(sys.start());
  }
  pid coro(const char* name, akt::spawn_options o = {}) {
    auto p = sys.spawn<coro_actor>(name, std::move(o), &s);
    EXPECT_TRUE(p);
    return p ? *p : pid();
  }
  pid echo_actor(const char* name) {
    auto p = sys.spawn<recorder>(name, &rs);
    EXPECT_TRUE(p);
    return p ? *p : pid();
  }
};

TEST(Coroutine_Turn, ResumesOnTheActorsTurnNeverConcurrently) {
  fixture f("coro-turn", {.workers = 4});
  pid target = f.echo_actor("echo");
  pid a = f.coro("a");
  constexpr long k_asks = 2000;
  constexpr int k_pokes = 2000;
  ASSERT_FALSE(a.tell(run_asks{target, k_asks, true}));
  std::thread poker([&] {
    for (int i = 0; i < k_pokes; ++i) (void)a.tell(poke{});
  });
  poker.join();
  ASSERT_TRUE(eventually([&] { return f.s.done.load() == 1; }));
  auto total = a.ask<long>(read_counter{}, 5s);
  ASSERT_TRUE(total);
  EXPECT_EQ(*total, k_asks + k_pokes);
  EXPECT_FALSE(f.s.concurrent.load());
}

TEST(Coroutine_Reentrancy, NonReentrantDefaultKeepsOtherMessagesQueuedInOrder) {
  fixture f("coro-stash");
  pid target = f.echo_actor("echo");
  pid a = f.coro("a");
  std::atomic<bool> release{false};
  ASSERT_FALSE(target.tell(hold{&release}));
  ASSERT_TRUE(eventually([&] { return f.rs.held.load(); }));
  ASSERT_FALSE(a.tell(wait_on{target, false}));
  ASSERT_TRUE(eventually([&] { return f.s.size() == 1; }));  // "start": the coroutine waits
  for (int i = 1; i <= 3; ++i) ASSERT_FALSE(a.tell(i));
  release = true;
  ASSERT_TRUE(eventually([&] { return f.s.size() == 6; }));
  const std::vector<std::string> want = {"start",   "reply 2", "end",
                                         "other 1", "other 2", "other 3"};
  EXPECT_EQ(f.s.snapshot(), want);
}

TEST(Coroutine_Reentrancy, ReentrantOptionLetsOtherMessagesRunWhileItWaits) {
  fixture f("coro-reentrant");
  pid target = f.echo_actor("echo");
  pid a = f.coro("a");
  std::atomic<bool> release{false};
  ASSERT_FALSE(target.tell(hold{&release}));
  ASSERT_TRUE(eventually([&] { return f.rs.held.load(); }));
  ASSERT_FALSE(a.tell(wait_on{target, true}));
  ASSERT_TRUE(eventually([&] { return f.s.size() == 1; }));
  for (int i = 1; i <= 3; ++i) ASSERT_FALSE(a.tell(i));
  // They run while the reply is held back.
  ASSERT_TRUE(eventually([&] { return f.s.size() == 4; }));
  release = true;
  ASSERT_TRUE(eventually([&] { return f.s.size() == 6; }));
  const std::vector<std::string> want = {"start",   "other 1", "other 2",
                                         "other 3", "reply 2", "end"};
  EXPECT_EQ(f.s.snapshot(), want);
}

TEST(Coroutine_Cancel, StoppedActorDestroysSuspendedFrames) {
  fixture f("coro-stop");
  pid a = f.coro("a");
  ASSERT_FALSE(a.tell(park_forever{}));
  ASSERT_TRUE(eventually([&] { return f.s.size() == 1; }));
  EXPECT_EQ(f.s.destroyed.load(), 0);
  ASSERT_FALSE(a.stop());
  ASSERT_TRUE(eventually([&] { return f.s.destroyed.load() == 1; }));
  EXPECT_TRUE(eventually([&] { return !a.alive(); }));
  EXPECT_EQ(f.s.snapshot(), std::vector<std::string>{"parked"});
}

TEST(Coroutine_Cancel, StoppedActorAnswersAWaitingAskerWithNoReply) {
  fixture f("coro-stop-ask");
  pid target = f.echo_actor("echo");
  pid a = f.coro("a");
  std::atomic<bool> release{false};
  ASSERT_FALSE(target.tell(hold{&release}));
  ASSERT_TRUE(eventually([&] { return f.rs.held.load(); }));
  auto asked = std::async(std::launch::async, [&] { return a.ask<long>(query{target}, 10s); });
  ASSERT_TRUE(eventually([&] { return f.sys.stats(a).processed >= 1; }));
  ASSERT_FALSE(a.stop());
  ASSERT_EQ(asked.wait_for(10s), std::future_status::ready);
  auto r = asked.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::no_reply);
  release = true;
}

TEST(Coroutine_Cancel, RestartDestroysSuspendedFrames) {
  fixture f("coro-restart", {.default_supervisor = supervisor().otherwise(directive::restart)});
  pid a = f.coro("a");
  ASSERT_FALSE(a.tell(park_forever{true}));  // reentrant: the failing message runs meanwhile
  ASSERT_TRUE(eventually([&] { return f.s.size() == 1; }));
  ASSERT_FALSE(a.tell(throw_after{true}));  // a failure: the restart drops the parked frame
  ASSERT_TRUE(eventually([&] { return f.s.pre_starts.load() == 2; }));
  EXPECT_TRUE(eventually([&] { return f.s.destroyed.load() == 2; }));
}

TEST(Coroutine_Failure, ExceptionAfterACoAwaitReachesSupervisionRestart) {
  fixture f("coro-throw-restart",
            {.default_supervisor = supervisor().otherwise(directive::restart)});
  collector<akt::actor_failed, std::string> failures(
      f.sys, [](const akt::actor_failed& e) { return e.what; });
  pid a = f.coro("a");
  ASSERT_FALSE(a.tell(throw_after{false}));
  ASSERT_EQ(failures.wait_for(1), 1u);
  EXPECT_EQ(failures.items().front(), "after a co_await");
  ASSERT_TRUE(eventually([&] { return f.s.pre_starts.load() == 2; }));
  EXPECT_EQ(f.s.destroyed.load(), 1);
  EXPECT_TRUE(a.alive());
}

TEST(Coroutine_Failure, ExceptionReachesSupervisionStopAndAnAskerGetsHandlerFailed) {
  fixture f("coro-throw-stop", {.default_supervisor = supervisor().otherwise(directive::stop)});
  pid a = f.coro("a");
  auto r = a.ask<long>(throw_after{false}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::handler_failed);
  EXPECT_TRUE(eventually([&] { return !a.alive(); }));
  EXPECT_EQ(f.s.destroyed.load(), 1);
  pid b = f.coro("b");
  auto first = b.ask<long>(throw_after{true}, 5s);  // thrown before any co_await
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().code(), errc::handler_failed);
  EXPECT_TRUE(eventually([&] { return !b.alive(); }));
}

TEST(Coroutine_Reply, RepliesToAnAskAfterACoAwait) {
  fixture f("coro-reply");
  pid target = f.echo_actor("echo");
  pid a = f.coro("a");
  auto r = a.ask<long>(query{target}, 5s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 43);
}

TEST(Coroutine_Errors, TimeoutsAndDeadTargetsComeBackAsErrors) {
  fixture f("coro-errors");
  pid target = f.echo_actor("echo");
  pid a = f.coro("a");
  std::atomic<bool> release{false};
  ASSERT_FALSE(target.tell(hold{&release}));
  ASSERT_TRUE(eventually([&] { return f.rs.held.load(); }));
  auto timed_out = a.ask<long>(query{target, 20ms}, 5s);
  ASSERT_FALSE(timed_out);
  EXPECT_EQ(timed_out.error().code(), errc::request_timeout);
  release = true;

  pid gone = f.echo_actor("gone");
  ASSERT_FALSE(gone.stop());
  ASSERT_TRUE(eventually([&] { return !gone.alive(); }));
  auto dead = a.ask<long>(query{gone}, 5s);
  ASSERT_FALSE(dead);
  EXPECT_EQ(dead.error().code(), errc::dead) << dead.error().message();

  auto empty = a.ask<long>(query{pid()}, 5s);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code(), errc::empty_pid);
}

TEST(Coroutine_Delay, ResumesOnTheActorAfterTheDelay) {
  fixture f("coro-delay");
  pid a = f.coro("a");
  ASSERT_FALSE(a.tell(sleep_then{20ms}));
  ASSERT_TRUE(eventually([&] { return f.s.done.load() == 1; }));
  EXPECT_GE(f.s.elapsed_ns.load(), std::chrono::nanoseconds(20ms).count());
  EXPECT_FALSE(f.s.concurrent.load());
}

TEST(Coroutine_Nested, TaskReturnsItsValueToTheAwaitingCoroutine) {
  fixture f("coro-nested");
  pid target = f.echo_actor("echo");
  pid a = f.coro("a");
  auto r = a.ask<long>(nested{target}, 5s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 2 + 11);
}

}  // namespace
}  // namespace akt::test
