// The cluster's runtime metrics (cluster_node's collector, the grain registry's counters and
// store timings) on the in-process store: members by state, claims made and released, the
// registry's round trips, fencing events and the lease's time left.

#include <gtest/gtest.h>

#include "cluster/cluster_metrics_rules.hpp"

namespace {

using namespace akt::cluster_metrics_rules;

TEST(ClusterMetrics, MembersClaimsRegistryRoundTripsAndTheLeaseFollowTheCluster) {
  MembersClaimsRegistryRoundTripsAndTheLeaseFollowTheCluster(std::make_shared<test_store>(),
                                                             "metrics");
}

TEST(ClusterMetrics, FencesAreCountedAndTheLeaseTimeLeftIsZeroWhileFenced) {
  auto store = std::make_shared<test_store>();
  auto a = metrics_node(store, "node-a", 10min);
  cluster_events events(*a);
  ASSERT_TRUE(a->start());
  ASSERT_TRUE(eventually([&] { return value(*a, "akt_cluster_lease_seconds_left") > 0; }));
  EXPECT_EQ(value(*a, "akt_cluster_fencing_events_total"), 0);
  store->client("node-a")->drop_keep_alives(true);  // the lease is no longer renewed
  ASSERT_TRUE(eventually([&] { return value(*a, "akt_cluster_fencing_events_total") >= 1; }))
      << value(*a, "akt_cluster_fencing_events_total");
  // Until it rejoins (and, keep-alives still lost, each time it is fenced again).
  EXPECT_TRUE(eventually([&] { return value(*a, "akt_cluster_lease_seconds_left") == 0; }));
  store->client("node-a")->drop_keep_alives(false);
  EXPECT_TRUE(eventually([&] { return value(*a, "akt_cluster_lease_seconds_left") > 0; }, 15s))
      << "rejoined under a new lease";
  // One count per fence membership reported, as the event stream saw them.
  EXPECT_TRUE(eventually([&] {
    return value(*a, "akt_cluster_fencing_events_total") == events.fenced.load();
  })) << value(*a, "akt_cluster_fencing_events_total")
      << " vs " << events.fenced.load();
  EXPECT_GE(events.fenced.load(), 1);
}

TEST(ClusterMetrics, OffTheClusterRegistersNothing) {
  auto store = std::make_shared<test_store>();
  akt::actor_system a("node-a", cluster_node_config(store, "node-a", "metrics-off"));
  ASSERT_TRUE(a.start());
  EXPECT_FALSE(akt::test::has_family(a, "akt_cluster_members"));
  EXPECT_FALSE(akt::test::has_family(a, "akt_cluster_claims_made_total"));
  EXPECT_FALSE(akt::test::has_family(a, "akt_cluster_registry_seconds"));
}

}  // namespace
