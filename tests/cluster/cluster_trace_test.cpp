// A grain send that must wait for its activation's claim leaves the handler's thread (the
// delivery queue activates on the runtime's blocking pool): it takes the handler's trace along,
// so the grain's handler span is still the sender's child.

#include <gtest/gtest.h>

#include <akt/akt.hpp>

#include <string>
#include <vector>

#include "cluster/cluster_support.hpp"
#include "support/span_log.hpp"

namespace {

using namespace akt::cluster_test;
using akt::span_data;
using akt::test::describe;
using akt::test::span_log;
using akt::test::tracing_into;

struct leaf_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "trace.leaf";
  void on_receive(akt::grain_context& ctx) override {
    if (const int* v = ctx.get_if<int>(); v != nullptr && *v == 1) ctx.reply(1);  // the ask
  }
};

// Asks one new leaf (a blocking ask from a grain), tells another (one way) and requests a third
// (a non-blocking request: its continuation runs later), then answers.
struct relay_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "trace.relay";
  void on_receive(akt::grain_context& ctx) override {
    if (!ctx.is<int>()) return;
    auto r = ctx.ask_grain<int>({"trace.leaf", "asked"}, 1, 5s);
    (void)ctx.tell_grain({"trace.leaf", "told"}, 2);
    ctx.enable_reentrancy();  // requests need it
    ctx.request_grain<int>({"trace.leaf", "requested"}, 1,
                           [](akt::grain_context&, akt::result<int>) {});
    ctx.reply(r ? *r : -1);
  }
};

TEST(Cluster_Trace, AGrainSendWaitingForItsClaimKeepsTheSendersTrace) {
  auto store = std::make_shared<test_store>();
  span_log log;
  akt::system_config cfg = cluster_node_config(store, "n0");
  cfg.tracing = tracing_into(log, 0.0);  // only the scope starts a trace
  akt::actor_system sys("n0", cfg);
  ASSERT_FALSE(akt::register_grain_kind<leaf_grain>(sys));
  ASSERT_FALSE(akt::register_grain_kind<relay_grain>(sys));
  ASSERT_TRUE(sys.start());
  ASSERT_TRUE(akt::cluster::wait_ready(sys, 5s));

  std::string trace;
  std::uint64_t root = 0;
  {
    akt::trace_scope scope(sys, "root");
    trace = scope.context().trace_id_hex();
    root = scope.context().span_id;
    auto r = akt::ask_grain<int>(sys, {"trace.relay", "r"}, 0, 10s);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, 1);
  }
  // root, the relay, the asked, told and requested leaves.
  const std::vector<span_data> spans = log.wait_for(trace, 5);
  ASSERT_EQ(spans.size(), 5u) << describe(spans);
  const span_data* relay = nullptr;
  std::vector<const span_data*> leaves;
  for (const span_data& s : spans) {
    const std::string_view id = s.attribute("akt.grain.identity");
    if (id == "trace.relay/r") relay = &s;
    if (id.substr(0, 11) == "trace.leaf/") leaves.push_back(&s);
  }
  ASSERT_NE(relay, nullptr) << describe(spans);
  EXPECT_EQ(relay->parent_span_id, root);
  ASSERT_EQ(leaves.size(), 3u) << describe(spans);
  for (const span_data* l : leaves)
    EXPECT_EQ(l->parent_span_id, relay->span_id)
        << l->attribute("akt.grain.identity") << describe(spans);
  ASSERT_TRUE(sys.stop());
}

}  // namespace
