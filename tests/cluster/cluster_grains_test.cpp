// Grains across the nodes of a cluster on the in-process store (the rules are in
// cluster_grains_rules.hpp, shared with the etcd tests), and the rules that need the in-process
// store's fault injection or a configuration of their own.
#include "cluster/cluster_grains_rules.hpp"

#include "actor/system_core.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

namespace {

using namespace akt::grain_rules;
using akt::errc;
using akt::grain_identity;
using akt::test::eventually;

const grain_backend k_inproc;  // the local_cluster's own in-process store

TEST(Cluster_Grains, AGrainIsClaimedInTheRegistryBeforeItActivatesAndItsTokenIsTheClaimRevision) {
  AGrainIsClaimedInTheRegistryBeforeItActivatesAndItsTokenIsTheClaimRevision(k_inproc);
}
TEST(Cluster_Grains, AMessageFromAnyNodeReachesTheOneActivationOfItsIdentity) {
  AMessageFromAnyNodeReachesTheOneActivationOfItsIdentity(k_inproc);
}
TEST(Cluster_Grains, AKnownOwnerIsReachedWithoutWritingToTheRegistry) {
  AKnownOwnerIsReachedWithoutWritingToTheRegistry(k_inproc);
}
TEST(Cluster_Grains, AnActivationThatFailsRollsBackItsClaimAndTheCallerGetsTheError) {
  AnActivationThatFailsRollsBackItsClaimAndTheCallerGetsTheError(k_inproc);
}
TEST(Cluster_Grains, PassivationReleasesTheClaimAndTheNextActivationHasAGreaterToken) {
  PassivationReleasesTheClaimAndTheNextActivationHasAGreaterToken(k_inproc);
}
TEST(Cluster_Grains, ACleanStopReleasesItsGrainsAndTheNextCallActivatesThemOnTheCaller) {
  ACleanStopReleasesItsGrainsAndTheNextCallActivatesThemOnTheCaller(k_inproc);
}
TEST(Cluster_Grains, DuringARollingRestartCallersSeeNoError) {
  DuringARollingRestartCallersSeeNoError(k_inproc);
}
TEST(Cluster_Grains, ACrashedOwnersGrainsActivateElsewhereOnceMembershipDroppedIt) {
  ACrashedOwnersGrainsActivateElsewhereOnceMembershipDroppedIt(k_inproc);
}
TEST(Cluster_Grains, AClaimRecordThatDoesNotDecodeIsTreatedAsAForeignClaim) {
  AClaimRecordThatDoesNotDecodeIsTreatedAsAForeignClaim(k_inproc);
}
TEST(Cluster_Grains, ANodeThatDoesNotHostTheKindRoutesToItsOwnerAndNeverHostsIt) {
  ANodeThatDoesNotHostTheKindRoutesToItsOwnerAndNeverHostsIt(k_inproc);
}
TEST(Cluster_Grains, ANodeThatIsShuttingDownTakesNoNewGrainsAndReleasesWhatItRan) {
  ANodeThatIsShuttingDownTakesNoNewGrainsAndReleasesWhatItRan(k_inproc);
}
TEST(Cluster_Grains, AGrainStillActiveOnAStoppingNodeIsNotActivatedElsewhereBeforeItDeactivated) {
  AGrainStillActiveOnAStoppingNodeIsNotActivatedElsewhereBeforeItDeactivated(k_inproc);
}
TEST(Cluster_GrainPlacement, RoundRobinSpreadsNewGrainsOverTheNodesThatHostTheKind) {
  RoundRobinSpreadsNewGrainsOverTheNodesThatHostTheKind(k_inproc);
}
TEST(Cluster_GrainPlacement, ARoleLimitsWhichNodesHostAKind) {
  ARoleLimitsWhichNodesHostAKind(k_inproc);
}

// A node that routed to another node's grain holds that grain's proxy in its registry's cache
// and in its association; each proxy's cell holds the node's system core. Stopping and
// destroying the nodes (the caller first, while the owner still runs) frees every core: no
// cache outlives its system through the cells it holds.
TEST(Cluster_Grains, NodesThatRoutedToEachOthersGrainsAreFreedWhenDestroyed) {
  const auto alive = [] {
    return akt::detail::g_system_cores_alive.load(std::memory_order_acquire);
  };
  const int before = alive();
  {
    g_ledger.reset();
    akt::testkit::local_cluster c(2, options());
    ASSERT_TRUE(c.start());
    for (int g = 0; g < 8; ++g) {
      const grain_identity id = tally_id("freed" + std::to_string(g));
      ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(g % 2), id, std::int32_t{1}, 5s));
      ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(1 - g % 2), id, std::int32_t{1}, 5s));
    }
    EXPECT_EQ(alive() - before, 2);
  }
  EXPECT_TRUE(eventually([&] { return alive() == before; }, 10s))
      << "system cores still alive: " << alive() - before;
}

TEST(Cluster_Grains, WithTheRegistryUnreachableActivationsFailButActiveGrainsKeepWorking) {
  g_ledger.reset();
  akt::testkit::local_cluster c(1, options(10min, 30s));  // no fence within the test
  ASSERT_TRUE(c.start());
  const grain_identity active = tally_id("active");
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), active, std::int32_t{1}, 5s));
  c.cut_off(0, true);
  const auto start = std::chrono::steady_clock::now();
  auto r = akt::ask_grain<std::int64_t>(c.node(0), tally_id("new"), std::int32_t{1}, 8s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::cluster_registry_timeout) << r.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s) << "within the call's timeout";
  auto still = akt::ask_grain<std::int64_t>(c.node(0), active, std::int32_t{1}, 5s);
  ASSERT_TRUE(still) << still.error().message();
  EXPECT_EQ(*still, 2);
  c.cut_off(0, false);
  EXPECT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), tally_id("new"), std::int32_t{1}, 5s))
      << "and activations work again once the store answers";
}

TEST(Cluster_GrainPlacement, LeastLoadPicksTheMemberWithTheFewestActiveGrains) {
  g_ledger.reset();
  akt::testkit::local_cluster_options o = placed(akt::grain_placement_strategy::least_load);
  o.lease_ttl = 2s;  // member records (and their load) are written every TTL / 3
  akt::testkit::local_cluster c(2, o);
  ASSERT_TRUE(c.start());
  // Node 0 carries many grains (placed on itself by claiming them with the local strategy's
  // equivalent: asked before node 1's load is known, least-load may go either way, so the
  // grains are made on node 0 by a kind that node 0 alone would pick: ask from node 0 and count).
  for (int g = 0; g < 20; ++g)
    ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), tally_id("l" + std::to_string(g)),
                                             std::int32_t{1}, 5s));
  std::map<std::string, int> per_node;
  for (int g = 0; g < 20; ++g)
    ++per_node[g_ledger.node_of(tally_id("l" + std::to_string(g)).str())];
  const std::string heavy = per_node["node-0"] >= per_node["node-1"] ? "node-0" : "node-1";
  const std::string light = heavy == "node-0" ? "node-1" : "node-0";
  // Wait until node 0 sees both loads as they are now, then place one more.
  ASSERT_TRUE(eventually(
      [&] {
        std::map<std::string, std::uint64_t> load;
        for (const auto& m : akt::cluster::members(c.node(0))) load[m.name] = m.load;
        return load[heavy] == static_cast<std::uint64_t>(per_node[heavy]) &&
               load[light] == static_cast<std::uint64_t>(per_node[light]);
      },
      10s));
  if (per_node[heavy] == per_node[light]) GTEST_SKIP() << "the first grains split evenly";
  const grain_identity id = tally_id("next");
  ASSERT_TRUE(akt::ask_grain<std::int64_t>(c.node(0), id, std::int32_t{1}, 5s));
  EXPECT_EQ(g_ledger.node_of(id.str()), light);
}

TEST(Cluster_Grains, ACallNoMemberCanPlaceIsRefusedBeforeDelivery) {
  // Neither node hosts the kind: the caller's placement finds nobody to route to, and the call
  // ends with grain_kind_unknown, marked refused (nothing ran, nothing left the node), so that
  // a caller may count it as not delivered. Found by the partition fault (issue 20): a driver
  // whose placement could not claim for a node whose lease had just ended counted such calls
  // as possibly delivered.
  akt::testkit::local_cluster_options o = k_inproc.apply(options());
  o.prepare = [](akt::actor_system&, std::size_t) {};
  akt::testkit::local_cluster c(2, o);
  ASSERT_TRUE(c.start());
  const grain_identity id = tally_id("nowhere");
  auto asked = akt::ask_grain<std::int64_t>(c.node(1), id, std::int32_t{1}, 5s);
  ASSERT_FALSE(asked);
  EXPECT_EQ(asked.code(), errc::grain_kind_unknown) << asked.error().message();
  EXPECT_TRUE(akt::detail::error_access::refused(asked.error())) << asked.error().message();
  const akt::error told = akt::tell_grain(c.node(0), id, std::int32_t{1}, {.timeout = 5s});
  EXPECT_EQ(told.code(), errc::grain_kind_unknown) << told.message();
  EXPECT_TRUE(akt::detail::error_access::refused(told)) << told.message();
}

TEST(Cluster_GrainPlacement, AClaimForAPeerThatCannotHostTheKindIsRolledBack) {
  // Node 1 lists the kind in its record but never registered it: the claim made for it is
  // refused there and deleted, and the grain lands on a node that hosts it.
  g_ledger.reset();
  akt::testkit::local_cluster c(2, placed(akt::grain_placement_strategy::round_robin, "",
                                          [](std::size_t i) { return i == 0; }));
  ASSERT_TRUE(c.start());
  for (int g = 0; g < 4; ++g) {
    const grain_identity id = tally_id("p" + std::to_string(g));
    auto r = akt::ask_grain<std::int64_t>(c.node(0), id, std::int32_t{1}, 5s);
    if (r) {
      EXPECT_EQ(g_ledger.node_of(id.str()), "node-0");
      EXPECT_TRUE(owner_is(claim_of(k_inproc, c, id), "node-0"));
    } else {
      EXPECT_EQ(claim_of(k_inproc, c, id).create_revision, 0)
          << "no claim left for node 1: " << r.error().message();
    }
  }
  EXPECT_GT(g_ledger.count(tally_id("p0").str()) + g_ledger.count(tally_id("p1").str()) +
                g_ledger.count(tally_id("p2").str()) + g_ledger.count(tally_id("p3").str()),
            0);
}

TEST(Cluster_GrainBarrier, ActivationsFailPastTheBarrierTimeoutWithoutTheMinimumPeers) {
  g_ledger.reset();
  akt::testkit::local_cluster_options o = options();
  o.configure = [](akt::cluster_config& cc, std::size_t) {
    cc.min_peers = 3;
    cc.barrier_timeout = 300ms;
  };
  akt::testkit::local_cluster c(2, o);
  ASSERT_TRUE(c.start());
  auto r = akt::ask_grain<std::int64_t>(c.node(0), tally_id("b"), std::int32_t{1}, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.code(), errc::cluster_quorum_timeout) << r.error().message();
  EXPECT_EQ(g_ledger.count(tally_id("b").str()), 0);
}

// A loopback port that was free a moment ago (bound to port 0, read back, closed).
int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// A node started again under its name and address while the old process's lease still holds
// the name waits in its join (start_wait), and its remoting already listens there: peers that
// still route to that address reach it. Until it has joined it holds no lease, so it must
// refuse every grain (no claim can be proven); it used to activate them with fencing token 0,
// outside the registry (issue 20, restart under the same name).
TEST(Cluster_Grains, ANodeStillWaitingInItsJoinActivatesNoGrain) {
  g_ledger.reset();
  auto store = std::make_shared<akt::cluster::inproc_store>();
  akt::actor_system holder("holder", cluster_node_config(store, "same", "joinwait"));
  ASSERT_FALSE(akt::register_grain_kind<tally>(holder));
  ASSERT_TRUE(holder.start());  // holds the name "same" on a live lease
  akt::system_config cfg = cluster_node_config(store, "same", "joinwait");
  cfg.cluster->start_wait = 4s;
  const int port = free_loopback_port();
  ASSERT_NE(port, 0);
  cfg.remote->port = static_cast<std::uint16_t>(port);
  akt::actor_system waiting("waiting", cfg);
  ASSERT_FALSE(akt::register_grain_kind<tally>(waiting));
  std::promise<akt::result<void>> started;
  auto start_done = started.get_future();
  std::thread starter([&] { started.set_value(waiting.start()); });

  akt::system_config pc;
  pc.workers = 1;
  pc.remote = akt::remote_config{};
  akt::actor_system client("client", pc);
  ASSERT_TRUE(client.start());
  const std::string node = "127.0.0.1:" + std::to_string(port);
  // Sent until the waiting node's remoting answers (it listens before the join ends).
  akt::result<std::int64_t> r = akt::error(errc::unreachable);
  (void)eventually(
      [&] {
        r = akt::remote::ask_grain_on<std::int64_t>(client, node, tally_id("early"),
                                                    std::int32_t{1}, 500ms);
        return r || r.code() != errc::unreachable;
      },
      3s);
  EXPECT_EQ(start_done.wait_for(0s), std::future_status::timeout)
      << "the join was still waiting when the grain message came";
  EXPECT_FALSE(r) << "a node without a lease activated a grain (token "
                  << g_ledger.token["test.tally/early"] << ")";
  if (!r) {
    EXPECT_EQ(r.code(), errc::not_owner) << r.error().message();
  }
  EXPECT_EQ(g_ledger.count("test.tally/early"), 0);
  starter.join();
  const akt::result<void> joined = start_done.get();
  EXPECT_FALSE(joined) << "the name stays held by the live holder";
}

// The in-process store, whose open_store waits until the test lets it go (bounded): holds a
// node's cluster start before it has anything of the cluster installed.
class held_store final : public akt::cluster::store_provider {
 public:
  explicit held_store(std::shared_ptr<akt::cluster::inproc_store> s) : store_(std::move(s)) {}
  akt::result<std::unique_ptr<akt::cluster::store>> open_store(std::string_view node) override {
    opening = true;
    (void)eventually([&] { return released.load(); }, 10s);
    return store_->open_store(node);
  }
  std::atomic<bool> opening{false}, released{false};

 private:
  std::shared_ptr<akt::cluster::inproc_store> store_;
};

// The same, earlier in the start: remoting listens before the cluster has even opened its store
// connection (an etcd connect may take seconds). No grain activates there either.
TEST(Cluster_Grains, ANodeWhoseClusterIsStillStartingActivatesNoGrain) {
  g_ledger.reset();
  auto held = std::make_shared<held_store>(std::make_shared<akt::cluster::inproc_store>());
  akt::system_config cfg = cluster_node_config(held, "early", "starting");
  const int port = free_loopback_port();
  ASSERT_NE(port, 0);
  cfg.remote->port = static_cast<std::uint16_t>(port);
  akt::actor_system node("early", cfg);
  ASSERT_FALSE(akt::register_grain_kind<tally>(node));
  std::promise<akt::result<void>> started;
  auto start_done = started.get_future();
  std::thread starter([&] { started.set_value(node.start()); });
  akt::system_config pc;
  pc.workers = 1;
  pc.remote = akt::remote_config{};
  akt::actor_system client("client", pc);
  EXPECT_TRUE(client.start());
  EXPECT_TRUE(eventually([&] { return held->opening.load(); }, 10s));
  const std::string at = "127.0.0.1:" + std::to_string(port);
  akt::result<std::int64_t> r = akt::error(errc::unreachable);
  (void)eventually(
      [&] {
        r = akt::remote::ask_grain_on<std::int64_t>(client, at, tally_id("early"), std::int32_t{1},
                                                    500ms);
        return r || r.code() != errc::unreachable;
      },
      5s);
  EXPECT_FALSE(r) << "a node whose cluster is still starting activated a grain (token "
                  << g_ledger.token["test.tally/early"] << ")";
  if (!r) {
    EXPECT_EQ(r.code(), errc::not_owner) << r.error().message();
  }
  EXPECT_EQ(g_ledger.count("test.tally/early"), 0);
  held->released = true;
  starter.join();
  const akt::result<void> joined = start_done.get();
  ASSERT_TRUE(joined) << joined.error().message();
  // Once started, it hosts the grain under a claim.
  auto after =
      akt::remote::ask_grain_on<std::int64_t>(client, at, tally_id("early"), std::int32_t{1}, 5s);
  ASSERT_TRUE(after) << after.error().message();
  EXPECT_EQ(g_ledger.count("test.tally/early"), 1);
  EXPECT_GT(g_ledger.token["test.tally/early"], 0);
}

TEST(Cluster_GrainBarrier, ActivationsWaitUntilMembershipReachesTheMinimumPeers) {
  g_ledger.reset();
  auto store = std::make_shared<akt::cluster::inproc_store>();
  akt::system_config cfg = cluster_node_config(store, "a", "barrier");
  cfg.cluster->min_peers = 2;
  cfg.cluster->barrier_timeout = 20s;
  akt::actor_system a("a", cfg);
  ASSERT_FALSE(akt::register_grain_kind<tally>(a));
  ASSERT_TRUE(a.start());
  std::promise<akt::result<std::int64_t>> answer;
  auto f = answer.get_future();
  std::thread caller([&] {
    answer.set_value(akt::ask_grain<std::int64_t>(a, tally_id("w"), std::int32_t{1}, 30s));
  });
  EXPECT_EQ(f.wait_for(300ms), std::future_status::timeout) << "one member of two: it waits";
  akt::actor_system b("b", cluster_node_config(store, "b", "barrier"));
  ASSERT_TRUE(b.start());
  ASSERT_EQ(f.wait_for(20s), std::future_status::ready) << "the second member opened it";
  caller.join();
  auto r = f.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 1);
}

}  // namespace
