// The cluster's membership on a real etcd: nodes join and leave, a crash is seen when its lease
// expires, a node that loses etcd (through a fault proxy) fences and rejoins, and the cluster
// keeps working when one of three etcd members is killed.
#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/testkit/local_cluster.hpp>
#include <akt/testkit/tcp_proxy.hpp>

#include <atomic>
#include <random>

#include "etcd/etcd_test_support.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::test::eventually;

// A cluster name of its own per test run: the shared etcd keeps what earlier runs left.
std::string fresh_cluster_name() {
  static std::mt19937_64 rng{std::random_device{}()};
  return "c" + std::to_string(rng() % 1'000'000'000);
}

akt::testkit::local_cluster_options on_etcd(std::vector<std::string> endpoints,
                                            std::chrono::seconds ttl = 2s) {
  akt::testkit::local_cluster_options o;
  o.cluster = fresh_cluster_name();
  o.lease_ttl = ttl;
  o.store = akt::etcd::provider({std::move(endpoints), 1000ms, 10000ms});
  return o;
}

class Cluster_OnEtcd : public akt::test::etcd_test {};

TEST_F(Cluster_OnEtcd, NodesJoinACleanStopIsSeenAtOnceAndACrashWhenItsLeaseExpires) {
  AKT_SKIP_WITHOUT_ETCD();
  auto* etcd = akt::test::shared_etcd();
  ASSERT_NE(etcd, nullptr);
  akt::testkit::local_cluster c(3, on_etcd({etcd->endpoint()}));
  ASSERT_TRUE(c.start());
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(akt::cluster::members(c.node(i)).size(), 3u);

  {  // a lease of 60 s: a node seen leaving within the wait left by its revoke
    akt::testkit::local_cluster d(2, on_etcd({etcd->endpoint()}, 60s));
    ASSERT_TRUE(d.start());
    ASSERT_TRUE(d.stop(1));
    EXPECT_TRUE(d.wait_members(0, 1, 10s)) << "seen at the revoke";
  }
  ASSERT_TRUE(c.stop(1));
  EXPECT_TRUE(c.wait_members(0, 2, 10s));

  ASSERT_TRUE(c.crash(2));  // no revoke (tested on the in-process store): its lease expires
  EXPECT_TRUE(c.wait_members(0, 1, 15s)) << "gone when etcd expired its lease";
}

// Node 1 reaches etcd through a proxy; blackholing it is a partition between that node and
// etcd: the node fences itself, etcd expires its lease, the others see it leave; when the
// partition heals it joins again under a new epoch.
TEST_F(Cluster_OnEtcd, ANodeThatLosesEtcdFencesAndRejoinsWhenEtcdReturns) {
  AKT_SKIP_WITHOUT_ETCD();
  auto* etcd = akt::test::shared_etcd();
  ASSERT_NE(etcd, nullptr);
  const std::string ep = etcd->endpoint();
  akt::testkit::tcp_proxy proxy("127.0.0.1",
                                static_cast<std::uint16_t>(std::stoi(ep.substr(ep.find(':') + 1))));
  akt::testkit::local_cluster_options o = on_etcd({ep});
  auto behind_proxy = akt::etcd::provider({{proxy.address()}, 1000ms, 10000ms});
  o.store_for = [&](std::size_t i) {
    return i == 1 ? behind_proxy : std::shared_ptr<akt::cluster::store_provider>();
  };
  akt::testkit::local_cluster c(2, o);
  ASSERT_TRUE(c.start());
  akt::actor_system& b1 = c.node(1);
  std::atomic<int> fenced{0}, rejoined{0};
  auto s1 = b1.events().subscribe<akt::cluster::node_fenced>(
      [&](const akt::cluster::node_fenced&) { fenced++; });
  auto s2 = b1.events().subscribe<akt::cluster::node_rejoined>(
      [&](const akt::cluster::node_rejoined&) { rejoined++; });
  const auto epoch = akt::cluster::self(b1)->epoch;

  proxy.blackhole();
  EXPECT_TRUE(eventually([&] { return fenced.load() == 1; }, 15s));
  EXPECT_TRUE(akt::cluster::fenced(b1));
  EXPECT_TRUE(c.wait_members(0, 1, 15s)) << "etcd expired its lease";
  proxy.pass();
  EXPECT_TRUE(eventually([&] { return rejoined.load() >= 1; }, 30s));
  EXPECT_FALSE(akt::cluster::fenced(b1));
  EXPECT_NE(akt::cluster::self(b1)->epoch, epoch);
  EXPECT_TRUE(c.wait_members(0, 2, 15s));
}

TEST(Cluster_OnEtcdMembers, TheClusterKeepsWorkingWhenOneOfThreeEtcdMembersIsKilled) {
  AKT_SKIP_WITHOUT_ETCD();
  akt::test::etcd_cluster etcd(3);
  // TTL 5 s (the default): an election takes about a second, within what a lease survives.
  akt::testkit::local_cluster c(3, on_etcd(etcd.endpoints(), 5s));
  ASSERT_TRUE(c.start());
  std::atomic<int> fenced{0};
  auto sub = c.node(0).events().subscribe<akt::cluster::node_fenced>(
      [&](const akt::cluster::node_fenced&) { fenced++; });
  const int leader = etcd.leader();
  ASSERT_GE(leader, 0);
  etcd.member(static_cast<std::size_t>(leader)).kill();
  // Membership goes on through the election: a stop issued now revokes once a new leader
  // answers (the revoke is retried within the stop's deadline).
  // Membership still changes: a clean stop is seen, a restarted node joins.
  ASSERT_TRUE(c.stop(2));
  EXPECT_TRUE(c.wait_members(0, 2, 15s));
  ASSERT_TRUE(c.restart(2));
  EXPECT_TRUE(c.wait_members(0, 3, 15s));
  EXPECT_TRUE(c.wait_members(1, 3, 15s));
  EXPECT_EQ(fenced.load(), 0) << "no node lost its lease over the election";
}

}  // namespace
