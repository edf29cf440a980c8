// The cluster's runtime metrics on a real etcd (the rules in
// tests/cluster/cluster_metrics_rules.hpp, shared with the in-process store's tests).
#include "cluster/cluster_metrics_rules.hpp"
#include "etcd/etcd_backend.hpp"

namespace {

class ClusterMetricsOnEtcd : public akt::test::etcd_test {};

TEST_F(ClusterMetricsOnEtcd, MembersClaimsRegistryRoundTripsAndTheLeaseFollowTheCluster) {
  AKT_SKIP_WITHOUT_ETCD();
  ASSERT_NE(akt::test::shared_etcd(), nullptr) << "etcd did not start";
  const akt::grain_rules::grain_backend b = akt::test::etcd_backend("m");
  akt::cluster_metrics_rules::MembersClaimsRegistryRoundTripsAndTheLeaseFollowTheCluster(b.provider,
                                                                                         b.cluster);
}

}  // namespace
