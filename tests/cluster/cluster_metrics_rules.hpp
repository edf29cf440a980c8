#pragma once
// The cluster's runtime metrics as rules, each a function run by a test on the in-process store
// (tests/cluster/cluster_metrics_test.cpp) and on etcd (tests/etcd/etcd_metrics_test.cpp).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cluster/cluster_support.hpp"
#include "support/metrics_reading.hpp"

namespace akt::cluster_metrics_rules {

using namespace akt::cluster_test;
using akt::errc;
using akt::test::eventually;
using akt::test::histogram_count;
using akt::test::metric_value;

// Answers an int32 with the running sum of this activation.
struct summing final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.metrics.summing";
  std::int64_t sum = 0;
  void on_receive(akt::grain_context& ctx) override {
    if (const auto* v = ctx.get_if<std::int32_t>()) {
      sum += *v;
      ctx.reply(sum);
    } else {
      ctx.unhandled();
    }
  }
};

inline akt::grain_identity summing_id(std::string name) {
  return {"test.metrics.summing", std::move(name)};
}

// A cluster node with metrics on, hosting summing grains that go idle after `idle`.
inline std::unique_ptr<akt::actor_system> metrics_node(
    std::shared_ptr<akt::cluster::store_provider> store, const std::string& name,
    std::chrono::milliseconds idle, const std::string& cluster = "metrics") {
  akt::system_config cfg = cluster_node_config(store, name, cluster);
  cfg.metrics.enabled = true;
  auto sys = std::make_unique<akt::actor_system>(name, cfg);
  akt::grain_options g;
  g.deactivate_after = idle;
  EXPECT_FALSE(akt::with_grain_default_options<summing>(*sys, g));
  return sys;
}

inline double value(akt::actor_system& sys, std::string_view family,
                    const std::vector<akt::metrics::label>& labels = {}) {
  return metric_value(sys, family, labels).value_or(-1);
}

// Two nodes: members by state, the lease's time left, claims made and released by the node that
// activated the grains, and the registry's store round trips.
inline void MembersClaimsRegistryRoundTripsAndTheLeaseFollowTheCluster(
    std::shared_ptr<akt::cluster::store_provider> store, const std::string& cluster) {
  auto a = metrics_node(store, "node-a", 300ms, cluster);
  auto b = metrics_node(store, "node-b", 300ms, cluster);
  ASSERT_TRUE(a->start());
  ASSERT_TRUE(b->start());
  ASSERT_TRUE(eventually([&] {
    return value(*a, "akt_cluster_members", {{"state", "up"}}) == 2;
  })) << value(*a, "akt_cluster_members", {{"state", "up"}});
  EXPECT_EQ(value(*a, "akt_cluster_members", {{"state", "leaving"}}), 0);
  // TTL 2 s less the 300 ms margin, from the last acknowledged keep-alive.
  const double left = value(*a, "akt_cluster_lease_seconds_left");
  EXPECT_GT(left, 0);
  EXPECT_LE(left, 1.7);
  EXPECT_EQ(value(*a, "akt_cluster_fencing_events_total"), 0);

  // Three grains activated from a, placed locally (the default): three claims by a.
  for (const char* n : {"x", "y", "z"}) {
    auto r = akt::ask_grain<std::int64_t>(*a, summing_id(n), std::int32_t{1}, 5s);
    ASSERT_TRUE(r) << r.error().message();
  }
  EXPECT_EQ(value(*a, "akt_cluster_claims_made_total"), 3);
  EXPECT_EQ(value(*b, "akt_cluster_claims_made_total"), 0);
  EXPECT_GE(histogram_count(*a, "akt_cluster_registry_seconds", {{"op", "claim"}}).value_or(0), 3u);
  // Idle after 300 ms: each deactivation releases its claim.
  EXPECT_TRUE(eventually([&] { return value(*a, "akt_cluster_claims_released_total") == 3; }))
      << value(*a, "akt_cluster_claims_released_total");
  EXPECT_GE(histogram_count(*a, "akt_cluster_registry_seconds", {{"op", "release"}}).value_or(0),
            3u);
  EXPECT_EQ(value(*a, "akt_grains_active", {{"kind", "test.metrics.summing"}}), 0);

  // b leaves: a's view has one member.
  ASSERT_TRUE(b->stop());
  EXPECT_TRUE(eventually([&] {
    return value(*a, "akt_cluster_members", {{"state", "up"}}) == 1;
  })) << value(*a, "akt_cluster_members", {{"state", "up"}});
}

}  // namespace akt::cluster_metrics_rules
