// Cluster-wide actor names (tests/cluster/cluster_actor_names_rules.hpp) on a real etcd: the
// same functions as on the in-process store, the nodes on the program's shared etcd under a
// cluster name of their own.
#include <akt/etcd/etcd_store.hpp>

#include <random>

#include "cluster/cluster_actor_names_rules.hpp"
#include "etcd/etcd_test_support.hpp"

namespace {

using namespace akt::name_rules;

class Cluster_ActorNamesOnEtcd : public akt::test::etcd_test {
 protected:
  grain_backend backend() {
    static std::mt19937_64 rng{std::random_device{}()};
    grain_backend b;
    auto* etcd = akt::test::shared_etcd();
    if (etcd == nullptr) return b;
    b.provider = akt::etcd::provider({{etcd->endpoint()}, 1000ms, 10000ms});
    b.cluster = "n" + std::to_string(rng() % 1'000'000'000);
    return b;
  }
};

#define AKT_NAME_RULE_ON_ETCD(rule)                                       \
  TEST_F(Cluster_ActorNamesOnEtcd, rule) {                                \
    AKT_SKIP_WITHOUT_ETCD();                                              \
    ASSERT_NE(akt::test::shared_etcd(), nullptr) << "etcd did not start"; \
    rule(backend());                                                      \
  }

AKT_NAME_RULE_ON_ETCD(ASecondSpawnOfANameFailsOnEveryNodeWhileTheFirstLives)
AKT_NAME_RULE_ON_ETCD(FindActorFindsItFromEveryNodeAndMessagesReachIt)
AKT_NAME_RULE_ON_ETCD(WhenTheActorStopsItsNameIsFreeAgainOnAnyNode)
AKT_NAME_RULE_ON_ETCD(ACrashedNodesNamesAreFreeOnceItsLeaseExpired)
AKT_NAME_RULE_ON_ETCD(ARecordThatDoesNotDecodeIsRefusedCleanly)
AKT_NAME_RULE_ON_ETCD(ChildrenAndTheFrameworksOwnNamesAreNotClaimed)
AKT_NAME_RULE_ON_ETCD(ASpawnFromADispatcherWorkerIsRefusedInsteadOfBlocking)
AKT_NAME_RULE_ON_ETCD(SpawnOnPlacesARegisteredKindRoundRobinAndTheNameIsClaimed)

}  // namespace
