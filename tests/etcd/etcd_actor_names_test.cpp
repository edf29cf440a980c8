// Cluster-wide actor names (tests/cluster/cluster_actor_names_rules.hpp) on a real etcd: the
// same functions as on the in-process store, the nodes on the program's shared etcd under a
// cluster name of their own.
#include "cluster/cluster_actor_names_rules.hpp"
#include "etcd/etcd_backend.hpp"

namespace {

using namespace akt::name_rules;

class Cluster_ActorNamesOnEtcd : public akt::test::etcd_test {};

#define AKT_NAME_RULE_ON_ETCD(rule) AKT_CLUSTER_RULE_ON_ETCD(Cluster_ActorNamesOnEtcd, "n", rule)

AKT_NAME_RULE_ON_ETCD(ASecondSpawnOfANameFailsOnEveryNodeWhileTheFirstLives)
AKT_NAME_RULE_ON_ETCD(FindActorFindsItFromEveryNodeAndMessagesReachIt)
AKT_NAME_RULE_ON_ETCD(WhenTheActorStopsItsNameIsFreeAgainOnAnyNode)
AKT_NAME_RULE_ON_ETCD(ACrashedNodesNamesAreFreeOnceItsLeaseExpired)
AKT_NAME_RULE_ON_ETCD(ARecordThatDoesNotDecodeIsRefusedCleanly)
AKT_NAME_RULE_ON_ETCD(ChildrenAndTheFrameworksOwnNamesAreNotClaimed)
AKT_NAME_RULE_ON_ETCD(ASpawnFromADispatcherWorkerIsRefusedInsteadOfBlocking)
AKT_NAME_RULE_ON_ETCD(SpawnOnPlacesARegisteredKindRoundRobinAndTheNameIsClaimed)
AKT_NAME_RULE_ON_ETCD(SpawnOnSkipsAMemberThatIsLeaving)

}  // namespace
