// The activation gate (src/grain/grain_seams.hpp): every activation of a node passes it before a
// handler runs, on both activation paths (a new cell, and the fresh instance in place after an
// idle deactivation that a send raced), and it hears of every admitted activation's end once.
#include <gtest/gtest.h>

#include <akt/akt.hpp>

#include <atomic>
#include <memory>

#include "actor/system_core.hpp"
#include "grain/grain_seams.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::errc;
using akt::test::eventually;

struct gate_probe {
  std::atomic<int> admitted{0};
  std::atomic<int> released{0};
  std::atomic<bool> refuse{false};
  std::atomic<int> activations{0};  // on_activate calls
  std::atomic<int> received{0};
  std::atomic<bool> hold_deactivate{false};
  std::atomic<bool> deactivating{false};
  std::atomic<bool> release_deactivate{false};
  std::atomic<std::int64_t> token_at_activate{-1};  // props.fencing_token() in on_activate
  std::atomic<std::int64_t> token_in_receive{-1};   // ctx.fencing_token() in on_receive
};

struct counting_gate final : akt::detail::grain_activation_gate {
  std::shared_ptr<gate_probe> p;
  explicit counting_gate(std::shared_ptr<gate_probe> g) : p(std::move(g)) {}
  akt::result<std::int64_t> admit(const akt::grain_identity&) override {
    if (p->refuse.load()) return akt::error(errc::not_owner, "the test's gate refuses");
    return std::int64_t{++p->admitted};  // each activation's own token
  }
  void released(const akt::grain_identity&) noexcept override { p->released++; }
};

struct gated final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.gated";
  std::shared_ptr<gate_probe> p;
  akt::error on_activate(akt::grain_props& props) override {
    p = props.dependency<gate_probe>("probe");
    p->activations++;
    p->token_at_activate = props.fencing_token();
    return {};
  }
  akt::error on_deactivate(akt::grain_props&) override {
    if (p->hold_deactivate.load()) {
      p->deactivating = true;
      (void)eventually([&] { return p->release_deactivate.load(); });  // bounded gate
    }
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    p->received++;
    p->token_in_receive = ctx.fencing_token();
    ctx.reply(p->received.load());
  }
};

struct gated_system {
  std::shared_ptr<gate_probe> p = std::make_shared<gate_probe>();
  akt::actor_system sys{"gate"};
  explicit gated_system(akt::grain_options opts = {}) {
    EXPECT_TRUE(sys.start());
    auto deps = std::make_shared<akt::grain_dependencies>();
    deps->add("probe", p);
    opts.dependencies = deps;
    EXPECT_FALSE(akt::with_grain_default_options<gated>(sys, opts));
    EXPECT_TRUE(akt::detail::install_grain_gate(akt::detail::core_of(sys),
                                                std::make_unique<counting_gate>(p)));
  }
};

TEST(Grain_Gate, EveryActivationPassesTheGateAndItsEndIsReportedOnce) {
  gated_system g({.deactivate_after = 30ms});
  const akt::grain_identity id{"test.gated", "a"};
  auto r = akt::ask_grain<int>(g.sys, id, 0, 5s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(g.p->admitted.load(), 1);
  EXPECT_EQ(g.p->released.load(), 0);
  ASSERT_TRUE(eventually([&] { return g.p->released.load() == 1; }))
      << "the idle deactivation reported the end";
  EXPECT_EQ(g.p->admitted.load(), 1);
  EXPECT_FALSE(akt::detail::install_grain_gate(akt::detail::core_of(g.sys),
                                               std::make_unique<counting_gate>(g.p)))
      << "one gate per system";
}

TEST(Grain_Gate, ARefusalReachesTheSenderMarkedAndNoHandlerRuns) {
  gated_system g;
  g.p->refuse = true;
  const akt::grain_identity id{"test.gated", "r"};
  auto r = akt::ask_grain<int>(g.sys, id, 0, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::not_owner) << r.error().message();
  EXPECT_TRUE(akt::detail::error_access::refused(r.error())) << "refused before any handler ran";
  EXPECT_EQ(g.p->activations.load(), 0);
  EXPECT_EQ(g.p->received.load(), 0);
  EXPECT_EQ(g.p->released.load(), 0) << "nothing was admitted, nothing to release";
  EXPECT_TRUE(akt::active_grains(g.sys).empty());
  g.p->refuse = false;
  auto again = akt::ask_grain<int>(g.sys, id, 0, 5s);
  ASSERT_TRUE(again) << "the next message tries again: " << again.error().message();
  EXPECT_EQ(g.p->admitted.load(), 1);
}

TEST(Grain_Gate, TheFreshActivationInPlaceKeepsTheAdmissionAndTokenOfTheOneBefore) {
  // An idle deactivation that a send raced leaves the cell in the directory: the identity was
  // never free, so the fresh instance runs under the same admission (a cluster's claim), and
  // the gate is not asked on the grain's worker, where it could not wait for the store.
  gated_system g({.deactivate_after = 20ms});
  g.p->hold_deactivate = true;
  const akt::grain_identity id{"test.gated", "p"};
  ASSERT_TRUE(akt::ask_grain<int>(g.sys, id, 0, 5s));
  EXPECT_EQ(g.p->token_at_activate.load(), 1) << "on_activate's props carry the gate's token";
  EXPECT_EQ(g.p->token_in_receive.load(), 1) << "and so does the grain context";
  ASSERT_TRUE(eventually([&] { return g.p->deactivating.load(); }));
  // Sent during on_deactivate: it stays in the same cell and activates a fresh instance there.
  ASSERT_FALSE(akt::tell_grain(g.sys, id, 0, {.one_way = true}));
  g.p->hold_deactivate = false;
  g.p->release_deactivate = true;
  ASSERT_TRUE(eventually([&] { return g.p->activations.load() == 2; }));
  EXPECT_EQ(g.p->admitted.load(), 1) << "the fresh instance kept the first admission";
  EXPECT_EQ(g.p->token_at_activate.load(), 1) << "and its token";
  ASSERT_TRUE(eventually([&] { return g.p->released.load() == 1; }))
      << "released once, when the cell left the directory at its own idle deactivation";
  // A new cell for the identity is a new admission with a new token.
  ASSERT_TRUE(akt::ask_grain<int>(g.sys, id, 0, 5s));
  EXPECT_EQ(g.p->admitted.load(), 2);
  EXPECT_EQ(g.p->token_in_receive.load(), 2);
}

}  // namespace
