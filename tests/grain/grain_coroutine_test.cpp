// Coroutine handlers in grains (akt/grain/grain_coroutine.hpp): requests to grains and actors
// under each reentrancy mode, answers after a co_await, failures, and cancellation at shutdown.

#include <gtest/gtest.h>
#include <akt/akt.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::errc;
using akt::grain_identity;
using akt::test::eventually;

struct journal {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::atomic<bool> release{false};  // wait_for_release and the held actor spin until set
  std::atomic<int> waiting{0};
  std::atomic<int> deactivations{0};
  std::atomic<int> destroyed{0};  // frame locals
  void add(std::string s) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.push_back(std::move(s));
  }
  std::vector<std::string> snapshot() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
  bool has(const std::string& s) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& l : lines)
      if (l == s) return true;
    return false;
  }
};

struct echo {};
struct wait_for_release {};
struct note {
  std::string text;
};
struct co_ask {  // asks peer's echo, answers "got <reply>"
  grain_identity peer;
};
struct co_wait {  // asks peer's wait_for_release, notes the reply
  grain_identity peer;
};
struct co_throw {  // throws after a co_await
  grain_identity peer;
};
struct co_actor {  // asks an actor's echo, answers with it
  akt::pid actor;
};
struct co_park {  // asks an actor that holds its answer; notes if it ever resumes
  akt::pid actor;
};

struct counted {
  std::atomic<int>* destroyed;
  explicit counted(std::atomic<int>* d) : destroyed(d) {}
  counted(const counted&) = delete;
  ~counted() { destroyed->fetch_add(1); }
};

struct worker final : akt::grain {
  std::shared_ptr<journal> j;
  std::string me;

  akt::error on_activate(akt::grain_props& props) override {
    j = props.dependency<journal>("journal");
    me = props.identity().name;
    return {};
  }
  akt::error on_deactivate(akt::grain_props&) override {
    j->deactivations++;
    return {};
  }

  void on_receive(akt::grain_context& ctx) override {
    if (ctx.is<echo>()) {
      ctx.reply(std::string("echo from ") + me);
    } else if (ctx.is<wait_for_release>()) {
      j->waiting++;
      while (!j->release.load()) std::this_thread::sleep_for(100us);
      ctx.reply(std::string("released"));
    } else if (auto* n = ctx.get_if<note>()) {
      j->add(me + ":" + n->text);
      ctx.ack();
    } else if (auto* a = ctx.get_if<co_ask>()) {
      akt::run(ask(akt::grain_async_context(ctx), a->peer));
    } else if (auto* w = ctx.get_if<co_wait>()) {
      akt::run(wait(akt::grain_async_context(ctx), w->peer));
    } else if (auto* t = ctx.get_if<co_throw>()) {
      akt::run(thrower(akt::grain_async_context(ctx), t->peer));
    } else if (auto* c = ctx.get_if<co_actor>()) {
      akt::run(ask_actor(akt::grain_async_context(ctx), c->actor));
    } else if (auto* p = ctx.get_if<co_park>()) {
      akt::run(park(akt::grain_async_context(ctx), p->actor));
    } else {
      ctx.unhandled();
    }
  }

  akt::task<> ask(akt::grain_async_context ctx, grain_identity peer) {
    akt::result<std::string> r = co_await ctx.ask_grain<std::string>(peer, echo{});
    if (r)
      ctx.reply("got " + *r);
    else
      ctx.reply_error(r.error());
  }
  akt::task<> wait(akt::grain_async_context ctx, grain_identity peer) {
    akt::result<std::string> r = co_await ctx.ask_grain<std::string>(peer, wait_for_release{});
    j->add(me + ":reply " + (r ? *r : std::string(akt::to_string(r.error().code()))));
    if (ctx.self().name != me) j->add("wrong self after a co_await");
  }
  akt::task<> thrower(akt::grain_async_context ctx, grain_identity peer) {
    counted c(&j->destroyed);
    (void)co_await ctx.ask_grain<std::string>(peer, echo{});
    throw std::runtime_error("after a co_await");
  }
  akt::task<> ask_actor(akt::grain_async_context ctx, akt::pid actor) {
    akt::result<std::string> r = co_await ctx.ask_actor<std::string>(actor, echo{});
    if (r)
      ctx.reply(*r);
    else
      ctx.reply_error(r.error());
  }
  akt::task<> park(akt::grain_async_context ctx, akt::pid actor) {
    counted c(&j->destroyed);
    akt::grain_request_options o;
    o.timeout = std::chrono::nanoseconds::zero();  // none: only the shutdown ends the wait
    (void)co_await ctx.ask_actor<std::string>(actor, echo{}, o);
    j->add(me + ":resumed");
  }
};

// Answers echo once journal::release is set.
struct held_echo final : akt::actor {
  std::shared_ptr<journal> j;
  explicit held_echo(std::shared_ptr<journal> jj) : j(std::move(jj)) {}
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<echo>()) return;
    j->waiting++;
    while (!j->release.load()) std::this_thread::sleep_for(100us);
    ctx.reply(std::string("actor echo"));
  }
};

akt::grain_options with_mode(akt::reentrancy_mode m) {
  akt::grain_options o;
  if (m != akt::reentrancy_mode::off) o.reentrancy = akt::grain_reentrancy{m, 0};
  return o;
}

struct fixture {
  std::shared_ptr<journal> j = std::make_shared<journal>();
  akt::actor_system sys;
  explicit fixture(const char* name, akt::grain_options opts = {}) : sys(name) {
    EXPECT_TRUE(sys.start());
    auto deps = std::make_shared<akt::grain_dependencies>();
    deps->add("journal", j);
    opts.dependencies = deps;
    EXPECT_FALSE(akt::with_grain_default_options<worker>(sys, opts));
  }
  ~fixture() { j->release = true; }
  grain_identity id(std::string name) {
    return {std::string(akt::detail::grain_kind_name<worker>()), std::move(name)};
  }
};

akt::grain_tell_options one_way() {
  akt::grain_tell_options o;
  o.one_way = true;
  return o;
}

TEST(GrainCoroutine_Reentrancy, OffRefusesTheRequestWithoutSuspending) {
  fixture f("gco-off");
  auto r = akt::ask_grain<std::string>(f.sys, f.id("a"), co_ask{f.id("b")}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::reentrancy_disabled);
}

TEST(GrainCoroutine_Reply, AnswersTheCallerAfterACoAwait) {
  fixture f("gco-reply", with_mode(akt::reentrancy_mode::allow_all));
  auto r = akt::ask_grain<std::string>(f.sys, f.id("a"), co_ask{f.id("b")}, 5s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, "got echo from b");
}

TEST(GrainCoroutine_Reentrancy, AllowAllKeepsServingWhileTheCoroutineWaits) {
  fixture f("gco-allow", with_mode(akt::reentrancy_mode::allow_all));
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), co_wait{f.id("slow")}, one_way()));
  ASSERT_TRUE(eventually([&] { return f.j->waiting.load() == 1; }));
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), note{"during"}));  // acknowledged: handled now
  EXPECT_TRUE(f.j->has("a:during"));
  f.j->release = true;
  ASSERT_TRUE(eventually([&] { return f.j->has("a:reply released"); }));
  const std::vector<std::string> want = {"a:during", "a:reply released"};
  EXPECT_EQ(f.j->snapshot(), want);
}

TEST(GrainCoroutine_Reentrancy, StashNonReentrantKeepsOtherMessagesQueuedInOrder) {
  fixture f("gco-stash", with_mode(akt::reentrancy_mode::stash_non_reentrant));
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), co_wait{f.id("slow")}, one_way()));
  ASSERT_TRUE(eventually([&] { return f.j->waiting.load() == 1; }));
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), note{"first"}, one_way()));
  ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), note{"second"}, one_way()));
  f.j->release = true;
  ASSERT_TRUE(eventually([&] { return f.j->has("a:second"); }));
  const std::vector<std::string> want = {"a:reply released", "a:first", "a:second"};
  EXPECT_EQ(f.j->snapshot(), want);
}

TEST(GrainCoroutine_Failure, AnExceptionAfterACoAwaitAnswersHandlerFailed) {
  fixture f("gco-throw", with_mode(akt::reentrancy_mode::allow_all));
  auto r = akt::ask_grain<std::string>(f.sys, f.id("a"), co_throw{f.id("b")}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::handler_failed);
  EXPECT_TRUE(eventually([&] { return f.j->destroyed.load() == 1; }));
  // The grain keeps serving.
  auto again = akt::ask_grain<std::string>(f.sys, f.id("a"), co_ask{f.id("b")}, 5s);
  EXPECT_TRUE(again);
}

TEST(GrainCoroutine_Actor, AskActorReachesAnActor) {
  fixture f("gco-actor", with_mode(akt::reentrancy_mode::stash_non_reentrant));
  f.j->release = true;
  auto p = f.sys.spawn<held_echo>("echo", akt::spawn_options{}, f.j);
  ASSERT_TRUE(p);
  auto r = akt::ask_grain<std::string>(f.sys, f.id("a"), co_actor{*p}, 5s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, "actor echo");
}

TEST(GrainCoroutine_Cancel, AWaitingCoroutineOfAnEndedActivationIsDestroyedNotResumed) {
  std::shared_ptr<journal> j;
  {
    fixture f("gco-cancel", with_mode(akt::reentrancy_mode::allow_all));
    j = f.j;
    auto p = f.sys.spawn<held_echo>("held", akt::spawn_options{}, f.j);
    ASSERT_TRUE(p);
    ASSERT_FALSE(akt::tell_grain(f.sys, f.id("a"), co_park{*p}, one_way()));
    ASSERT_TRUE(eventually([&] { return f.j->waiting.load() == 1; }));
    std::thread stopper([&] { (void)f.sys.stop(); });
    // The activation ends while its coroutine waits; then the actor answers, too late.
    EXPECT_TRUE(eventually([&] { return f.j->deactivations.load() == 1; }));
    f.j->release = true;
    stopper.join();
  }
  EXPECT_EQ(j->destroyed.load(), 1);
  EXPECT_FALSE(j->has("a:resumed"));
}

}  // namespace
