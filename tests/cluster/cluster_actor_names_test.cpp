// Cluster-wide actor names (akt/cluster/cluster.hpp, "Actor names in a cluster") on the
// in-process store: the rules of tests/cluster/cluster_actor_names_rules.hpp (the same functions
// run on a real etcd in tests/etcd/etcd_actor_names_test.cpp), and the rejoin, which needs the
// in-process store's cut-off. Every test is named after the rule it checks and bounds its own
// time.
#include "cluster/cluster_actor_names_rules.hpp"

namespace {

using namespace akt::name_rules;

#define AKT_NAME_RULE(rule) \
  TEST(Cluster_ActorNames, rule) { rule(grain_backend{}); }

AKT_NAME_RULE(ASecondSpawnOfANameFailsOnEveryNodeWhileTheFirstLives)
AKT_NAME_RULE(FindActorFindsItFromEveryNodeAndMessagesReachIt)
AKT_NAME_RULE(WhenTheActorStopsItsNameIsFreeAgainOnAnyNode)
AKT_NAME_RULE(ACrashedNodesNamesAreFreeOnceItsLeaseExpired)
AKT_NAME_RULE(ARecordThatDoesNotDecodeIsRefusedCleanly)
AKT_NAME_RULE(ChildrenAndTheFrameworksOwnNamesAreNotClaimed)
AKT_NAME_RULE(ASpawnFromADispatcherWorkerIsRefusedInsteadOfBlocking)
AKT_NAME_RULE(SpawnOnPlacesARegisteredKindRoundRobinAndTheNameIsClaimed)
AKT_NAME_RULE(SpawnOnSkipsAMemberThatIsLeaving)

// A node cut off from the store long enough that its lease expired rejoins under a new lease and
// puts its names on it again; a name another node claimed meanwhile stays that node's (the local
// actor of that name runs on, no longer found by name elsewhere).
TEST(Cluster_ActorNames, AfterARejoinANodeClaimsItsNamesAgainExceptThoseTakenMeanwhile) {
  const grain_backend b;
  akt::testkit::local_cluster c(2, options(b));
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.node(0).spawn<echo>("kept"));
  auto lost = c.node(0).spawn<echo>("lost");
  ASSERT_TRUE(lost);
  const std::int64_t first_lease = name_key(b, c, "kept").lease;
  ASSERT_NE(first_lease, 0);
  c.cut_off(0, true);
  // Node 0's lease expires (TTL 2 s) and its keys with it; node 1 then takes "lost".
  akt::result<akt::pid> taken = errc::actor_already_exists;
  ASSERT_TRUE(eventually(
      [&] {
        taken = c.node(1).spawn<echo>("lost");
        return taken.has_value();
      },
      20s))
      << taken.error().message();
  EXPECT_EQ(name_key(b, c, "kept").create_revision, 0) << "gone with the old lease";
  c.cut_off(0, false);
  // Node 0 rejoins: "kept" is claimed again, on its new lease, and found from node 1.
  ASSERT_TRUE(eventually(
      [&] {
        const akt::cluster::key_value kv = name_key(b, c, "kept");
        return kv.create_revision != 0 && kv.lease != first_lease &&
               kv.value.find("owner=node-0\n") != std::string::npos;
      },
      20s));
  // Found from node 1 once it sees node 0 as a member again (until then the record names an
  // address membership says has left: unreachable).
  akt::result<akt::pid> kept = errc::actor_not_found;
  ASSERT_TRUE(eventually(
      [&] {
        kept = akt::cluster::find_actor(c.node(1), "kept", 5s);
        return kept.has_value();
      },
      20s))
      << kept.error().message();
  EXPECT_EQ(where(*kept), "node-0");
  // "lost" stays node 1's: found there by name; node 0's actor runs on, found by name only on
  // node 0 itself (find_actor looks locally first).
  EXPECT_NE(name_key(b, c, "lost").value.find("owner=node-1\n"), std::string::npos);
  auto from_1 = akt::cluster::find_actor(c.node(1), "lost", 5s);
  ASSERT_TRUE(from_1) << from_1.error().message();
  EXPECT_EQ(where(*from_1), "node-1");
  auto from_0 = akt::cluster::find_actor(c.node(0), "lost", 5s);
  ASSERT_TRUE(from_0) << from_0.error().message();
  EXPECT_EQ(where(*from_0), "node-0");
  EXPECT_EQ(where(*lost), "node-0") << "the local actor was not stopped";
  auto again = c.node(0).spawn<echo>("lost");
  ASSERT_FALSE(again) << "still held here while its actor lives";
  EXPECT_EQ(again.code(), errc::actor_already_exists);
}

}  // namespace
