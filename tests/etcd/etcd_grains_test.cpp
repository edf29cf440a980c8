// The rules of grains across the nodes of a cluster (tests/cluster/cluster_grains_rules.hpp) on a
// real etcd: the same functions as on the in-process store, with the nodes on the program's
// shared etcd under a cluster name of their own.
#include <akt/etcd/etcd_store.hpp>

#include <random>

#include "cluster/cluster_grains_rules.hpp"
#include "etcd/etcd_test_support.hpp"

namespace {

using namespace akt::grain_rules;

class Cluster_GrainsOnEtcd : public akt::test::etcd_test {
 protected:
  // The backend of this test: the shared etcd, and a cluster name no earlier run used.
  grain_backend backend() {
    static std::mt19937_64 rng{std::random_device{}()};
    grain_backend b;
    auto* etcd = akt::test::shared_etcd();
    if (etcd == nullptr) return b;
    b.provider = akt::etcd::provider({{etcd->endpoint()}, 1000ms, 10000ms});
    b.cluster = "g" + std::to_string(rng() % 1'000'000'000);
    return b;
  }
};

#define AKT_GRAIN_RULE_ON_ETCD(rule)                                      \
  TEST_F(Cluster_GrainsOnEtcd, rule) {                                    \
    AKT_SKIP_WITHOUT_ETCD();                                              \
    ASSERT_NE(akt::test::shared_etcd(), nullptr) << "etcd did not start"; \
    rule(backend());                                                      \
  }

AKT_GRAIN_RULE_ON_ETCD(AGrainIsClaimedInTheRegistryBeforeItActivatesAndItsTokenIsTheClaimRevision)
AKT_GRAIN_RULE_ON_ETCD(AMessageFromAnyNodeReachesTheOneActivationOfItsIdentity)
AKT_GRAIN_RULE_ON_ETCD(AKnownOwnerIsReachedWithoutWritingToTheRegistry)
AKT_GRAIN_RULE_ON_ETCD(AnActivationThatFailsRollsBackItsClaimAndTheCallerGetsTheError)
AKT_GRAIN_RULE_ON_ETCD(PassivationReleasesTheClaimAndTheNextActivationHasAGreaterToken)
AKT_GRAIN_RULE_ON_ETCD(ACleanStopReleasesItsGrainsAndTheNextCallActivatesThemOnTheCaller)
AKT_GRAIN_RULE_ON_ETCD(DuringARollingRestartCallersSeeNoError)
AKT_GRAIN_RULE_ON_ETCD(ACrashedOwnersGrainsActivateElsewhereOnceMembershipDroppedIt)
AKT_GRAIN_RULE_ON_ETCD(AClaimRecordThatDoesNotDecodeIsTreatedAsAForeignClaim)
AKT_GRAIN_RULE_ON_ETCD(ANodeThatDoesNotHostTheKindRoutesToItsOwnerAndNeverHostsIt)
AKT_GRAIN_RULE_ON_ETCD(ANodeThatIsShuttingDownTakesNoNewGrainsAndReleasesWhatItRan)
AKT_GRAIN_RULE_ON_ETCD(AGrainStillActiveOnAStoppingNodeIsNotActivatedElsewhereBeforeItDeactivated)
AKT_GRAIN_RULE_ON_ETCD(RoundRobinSpreadsNewGrainsOverTheNodesThatHostTheKind)
AKT_GRAIN_RULE_ON_ETCD(ARoleLimitsWhichNodesHostAKind)

}  // namespace
