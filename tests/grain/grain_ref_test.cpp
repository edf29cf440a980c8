// grain_ref<T>: a pid-shaped handle to a grain identity. Getting one activates nothing; one-way
// tells through it go straight to the activation it last reached while that activation lives,
// and through the directory (activating again) once it ended, without losing or reordering a
// message.

#include <gtest/gtest.h>
#include <akt/akt.hpp>

#include "support/test_support.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using akt::errc;
using akt::test::eventually;

struct log_state {
  std::atomic<int> activations{0};
  std::atomic<int> deactivations{0};
  std::atomic<long> received{0};
  std::mutex mutex;
  std::vector<long> seen;  // (sender << 32) | sequence, in handling order
};

struct item {
  long value;
};
struct count {};

struct journal final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.journal";
  std::shared_ptr<log_state> s;
  akt::error on_activate(akt::grain_props& p) override {
    s = p.dependency<log_state>("log");
    s->activations++;
    return {};
  }
  akt::error on_deactivate(akt::grain_props&) override {
    s->deactivations++;
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    akt::match(
        ctx,
        [&](const item& i, auto& c) {
          {
            std::lock_guard<std::mutex> lock(s->mutex);
            s->seen.push_back(i.value);
          }
          s->received++;
          c.ack();
        },
        [&](const count&, auto& c) { c.reply(s->received.load()); });
  }
};

struct fixture {
  std::shared_ptr<log_state> s = std::make_shared<log_state>();
  akt::actor_system sys;
  explicit fixture(const char* name, akt::grain_options o = {}, akt::system_config cfg = {})
      : sys(name, cfg) {
    EXPECT_TRUE(sys.start());
    auto deps = std::make_shared<akt::grain_dependencies>();
    deps->add("log", s);
    o.dependencies = deps;
    EXPECT_FALSE(akt::with_grain_default_options<journal>(sys, o));
  }
};

TEST(GrainRef, GettingARefActivatesNothingTheFirstMessageDoes) {
  fixture f("ref-lazy");
  auto r = akt::get_grain<journal>(f.sys, "j");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->identity().str(), "test.journal/j");
  EXPECT_TRUE(akt::active_grains(f.sys).empty());
  EXPECT_EQ(f.s->activations.load(), 0);
  EXPECT_FALSE(r->tell(item{1}));
  EXPECT_EQ(f.s->activations.load(), 1);
  EXPECT_EQ(akt::active_grains(f.sys).size(), 1u);
}

TEST(GrainRef, TellAskAndOneWayReachTheGrain) {
  fixture f("ref-shape");
  auto r = akt::get_grain<journal>(f.sys, "j");
  ASSERT_TRUE(r);
  for (long i = 0; i < 100; ++i) ASSERT_FALSE(r->tell_one_way(item{i}));
  EXPECT_FALSE(r->tell(item{100}));
  EXPECT_FALSE(r->tell(item{101}, {.one_way = true}));
  auto n = r->ask<long>(count{}, 5s);
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, 102);
  std::lock_guard<std::mutex> lock(f.s->mutex);
  for (long i = 0; i < 102; ++i) ASSERT_EQ(f.s->seen[i], i);
}

TEST(GrainRef, AnInvalidNameIsRefusedAndAnEmptyRefRefusesSends) {
  fixture f("ref-invalid");
  auto r = akt::get_grain<journal>(f.sys, "bad name/with slash");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::invalid_actor_name);
  akt::grain_ref<journal> empty;
  EXPECT_FALSE(empty);
  EXPECT_EQ(empty.tell_one_way(item{1}).code(), errc::empty_pid);
  EXPECT_EQ(empty.ask(count{}, 1s).error().code(), errc::empty_pid);
}

TEST(GrainRef, AOneWayTellAfterAnIdleDeactivationReachesAFreshActivation) {
  fixture f("ref-reactivate", {.deactivate_after = 20ms});
  auto r = akt::get_grain<journal>(f.sys, "j");
  ASSERT_TRUE(r);
  ASSERT_FALSE(r->tell_one_way(item{1}));
  ASSERT_FALSE(r->tell_one_way(item{2}));  // through the remembered activation
  ASSERT_TRUE(eventually([&] { return f.s->deactivations.load() == 1; }));
  ASSERT_FALSE(r->tell_one_way(item{3})) << "the ended activation is noticed, not told";
  ASSERT_TRUE(eventually([&] { return f.s->received.load() == 3; }));
  EXPECT_EQ(f.s->activations.load(), 2);
}

TEST(GrainRef, OneWayTellsLoseNothingAndKeepPerSenderOrderAcrossDeactivations) {
  // The grain deactivates whenever it is idle for 1 ms, so senders keep meeting activations that
  // end under them: every message must still arrive once, in each sender's order.
  fixture f("ref-stress", {.deactivate_after = 1ms}, {.workers = 2, .shutdown_timeout = 3s});
  constexpr long k_senders = 3;
  constexpr long k_each = 4000;
  auto base = akt::get_grain<journal>(f.sys, "j");
  ASSERT_TRUE(base);
  std::atomic<bool> stop{false};
  std::atomic<long> refused{0};
  ASSERT_TRUE(akt::test::run_bounded(k_senders, 60s, stop, [&](int t) {
    akt::grain_ref<journal> mine = *base;  // a copy per thread
    for (long i = 0; i < k_each && !stop.load(); ++i) {
      if (mine.tell_one_way(item{(long{t} << 32) | i})) refused++;
      // Pause now and then so that the grain goes idle while the others may still be sending
      // (this shapes the load; nothing is asserted after it).
      if (i % 500 == 499) std::this_thread::sleep_for(2ms);
    }
  }));
  EXPECT_EQ(refused.load(), 0);
  ASSERT_TRUE(eventually([&] { return f.s->received.load() == k_senders * k_each; }, 30s))
      << f.s->received.load();
  auto st = f.sys.stop();
  if (!st) ADD_FAILURE() << "stop: " << st.error().message();
  std::lock_guard<std::mutex> lock(f.s->mutex);
  std::vector<long> next(k_senders, 0);
  for (long v : f.s->seen) {
    const long t = v >> 32;
    ASSERT_EQ(v & 0xffffffff, next[t]) << "sender " << t;
    ++next[t];
  }
}

TEST(GrainRef, AfterTheSystemStoppedSendsAreRefused) {
  fixture f("ref-stopped");
  auto r = akt::get_grain<journal>(f.sys, "j");
  ASSERT_TRUE(r);
  ASSERT_FALSE(r->tell_one_way(item{1}));
  ASSERT_TRUE(f.sys.stop());
  EXPECT_EQ(f.s->deactivations.load(), 1);
  EXPECT_EQ(r->tell_one_way(item{2}).code(), errc::system_shutting_down);
  EXPECT_EQ(r->ask(count{}, 1s).error().code(), errc::system_shutting_down);
}

// An actor that asks the grain through a ref without blocking its worker.
struct asker : akt::actor {
  akt::grain_ref<journal> j;
  explicit asker(akt::grain_ref<journal> r) : j(std::move(r)) {}
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<count>()) return ctx.unhandled();
    auto reply = std::make_shared<akt::reply_handle>(ctx.defer_reply());
    j.request<long>(ctx, count{}, 5s, [reply](akt::receive_context&, akt::result<long> n) {
      if (n)
        reply->reply(*n + 1000);
      else
        reply->reply_error(n.error());
    });
  }
};

TEST(GrainRef, AnActorRequestsThroughARefWithoutBlocking) {
  fixture f("ref-actor-request");
  auto r = akt::get_grain<journal>(f.sys, "j");
  ASSERT_TRUE(r);
  ASSERT_FALSE(r->tell(item{1}));
  auto a = f.sys.spawn<asker>("asker", *r);
  ASSERT_TRUE(a);
  auto n = a->ask<long>(count{}, 5s);
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, 1001);
}

}  // namespace
