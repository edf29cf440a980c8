// Identities the placement has no owner for ("claim"): their activation may wait on the store
// behind the activation gate, so it never runs on a dispatcher worker. Sends from a grain's or an
// actor's turn reach such a grain through the delivery queue, activated on the runtime's blocking
// pool; a thread outside the system activates on its own thread.
#include <gtest/gtest.h>

#include <akt/akt.hpp>
#include <akt/grain/grain_coroutine.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actor/system_core.hpp"
#include "akt/core/thread.hpp"
#include "grain/grain_seams.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::errc;
using akt::test::eventually;

struct claim_probe {
  std::mutex mutex;
  std::vector<int> values;  // what the claimed grains received, in order
  std::atomic<int> admitted{0};
  std::atomic<int> admitted_on_worker{0};
  std::atomic<int> received{0};
};

// Every identity of kind "test.claimed" is unowned: this node must claim it.
struct claim_everything final : akt::detail::grain_placement {
  akt::detail::grain_place place(const akt::grain_identity& id) override {
    akt::detail::grain_place at;
    if (id.kind == "test.claimed") at.at = akt::detail::grain_place::where::claim;
    return at;
  }
};

// Records where each admission ran; waits a little, as a claim's store round would.
struct recording_gate final : akt::detail::grain_activation_gate {
  std::shared_ptr<claim_probe> p;
  explicit recording_gate(std::shared_ptr<claim_probe> g) : p(std::move(g)) {}
  akt::result<std::int64_t> admit(const akt::grain_identity& id) override {
    if (id.kind != "test.claimed") return std::int64_t{0};
    if (akt::detail::on_worker_thread()) p->admitted_on_worker++;
    p->admitted++;
    std::this_thread::sleep_for(2ms);  // the store's round; never on a worker
    return std::int64_t{0};
  }
  void released(const akt::grain_identity&) noexcept override {}
};

std::shared_ptr<claim_probe> g_probe;

struct claimed final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.claimed";
  void on_receive(akt::grain_context& ctx) override {
    if (const int* v = ctx.get_if<int>()) {
      std::lock_guard<std::mutex> lock(g_probe->mutex);
      g_probe->values.push_back(*v);
    }
    const int n = ++g_probe->received;
    ctx.reply(n);
  }
};

// Reaches the claimed grain g by the path its command names, from its own turn.
struct caller final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.claim-caller";
  void on_receive(akt::grain_context& ctx) override {
    ctx.enable_reentrancy();
    const auto* cmd = ctx.get_if<std::string>();
    if (cmd == nullptr) return ctx.unhandled();
    const akt::grain_identity g{"test.claimed", *cmd + "-target"};
    if (*cmd == "tell") {
      ctx.reply(ctx.tell_grain(g, 1) ? -1 : 0);
    } else if (*cmd == "ask") {
      auto r = ctx.ask_grain<int>(g, 1, 5s);
      ctx.reply(r ? *r : -1);
    } else if (*cmd == "request") {
      auto h = std::make_shared<akt::reply_handle>(ctx.defer_reply());
      (void)ctx.request_grain<int>(
          g, 1, [h](akt::grain_context&, akt::result<int> r) { h->reply(r ? *r : -1); });
    } else if (*cmd == "co_await") {
      akt::run(co_ask(akt::grain_async_context(ctx), g));
    } else if (*cmd == "activate") {
      auto r = akt::activate_grain<claimed>(ctx.system(), g.name);
      ctx.reply(r ? 0 : static_cast<int>(r.code()));
    } else {
      ctx.unhandled();
    }
  }
  akt::task<> co_ask(akt::grain_async_context ctx, akt::grain_identity g) {
    akt::result<int> r = co_await ctx.ask_grain<int>(g, 1);
    ctx.reply(r ? *r : -1);
  }
};

struct requesting_actor final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<std::string>()) return;
    auto ref = akt::get_grain<claimed>(ctx.system(), "from-actor");
    auto h = std::make_shared<akt::reply_handle>(ctx.defer_reply());
    (void)ref->request<int>(
        ctx, 1, 5s, [h](akt::receive_context&, akt::result<int> r) { h->reply(r ? *r : -1); });
  }
};

struct claim_system {
  akt::actor_system sys{"claims"};
  claim_system() {
    g_probe = std::make_shared<claim_probe>();
    EXPECT_TRUE(sys.start());
    EXPECT_FALSE(akt::register_grain_kind<claimed>(sys));
    EXPECT_FALSE(akt::register_grain_kind<caller>(sys));
    auto* core = akt::detail::core_of(sys);
    EXPECT_TRUE(akt::detail::install_grain_placement(core, std::make_unique<claim_everything>()));
    EXPECT_TRUE(akt::detail::install_grain_gate(core, std::make_unique<recording_gate>(g_probe)));
  }
  akt::result<int> from_grain(const std::string& path) {
    return akt::ask_grain<int>(sys, {"test.claim-caller", path}, path, 10s);
  }
};

TEST(Grain_Claim, EveryPathFromAWorkerActivatesOffTheWorkers) {
  claim_system s;
  for (const char* path : {"ask", "request", "co_await"}) {
    auto r = s.from_grain(path);
    ASSERT_TRUE(r) << path << ": " << r.error().message();
    EXPECT_GE(*r, 1) << path;
  }
  ASSERT_TRUE(s.from_grain("tell"));
  EXPECT_TRUE(eventually([&] { return g_probe->received.load() == 4; }));
  auto actor = s.sys.spawn<requesting_actor>("requester");
  ASSERT_TRUE(actor);
  auto r = actor->ask<int>(std::string("go"), 10s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(g_probe->admitted.load(), 5) << "one claimed activation per target";
  EXPECT_EQ(g_probe->admitted_on_worker.load(), 0) << "no activation waited on a worker";
}

// An actor's turn sends a burst through a grain_ref while the activation waits on the gate:
// every message goes through the delivery queue and arrives in the order sent.
struct bursting_actor final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<std::string>()) return;
    auto ref = akt::get_grain<claimed>(ctx.system(), "burst");
    for (int i = 0; i < 50; ++i) (void)ref->tell_one_way(i);
    ctx.reply(std::string("sent"));
  }
};

TEST(Grain_Claim, MessagesSentWhileTheActivationWaitsArriveInOrder) {
  claim_system s;
  auto actor = s.sys.spawn<bursting_actor>("burst");
  ASSERT_TRUE(actor);
  ASSERT_TRUE(actor->ask<std::string>(std::string("go"), 10s));
  ASSERT_TRUE(eventually([&] { return g_probe->received.load() == 50; }));
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[i] = i;
  std::lock_guard<std::mutex> lock(g_probe->mutex);
  EXPECT_EQ(g_probe->values, expected);
  EXPECT_EQ(g_probe->admitted.load(), 1);
  EXPECT_EQ(g_probe->admitted_on_worker.load(), 0);
}

TEST(Grain_Claim, ActivateGrainFromAWorkerIsRefusedAndFromOutsideActivatesInPlace) {
  claim_system s;
  auto r = s.from_grain("activate");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, static_cast<int>(errc::blocking_on_worker));
  auto outside = akt::activate_grain<claimed>(s.sys, "outside");
  ASSERT_TRUE(outside) << outside.error().message();
  EXPECT_EQ(g_probe->admitted.load(), 1);
  EXPECT_EQ(g_probe->admitted_on_worker.load(), 0);
  auto ask = akt::ask_grain<int>(s.sys, {"test.claimed", "outside"}, 1, 5s);  // not a worker
  ASSERT_TRUE(ask) << ask.error().message();
}

}  // namespace
