// etcd member loss (issue 20): the fault cluster (fault_cluster.hpp: five akt_fault_node
// processes with lease TTL 2 s and this process as a driver sending acknowledged tells to 50
// grains) on a 3-member etcd; every node and the driver get all three endpoints, and the store
// (src/etcd) fails over between them.
//
// EtcdMemberLossLosesNothing: under traffic, one etcd member gets SIGKILL and is started again
// a few seconds later with its data dir, in turn a follower and the leader. A follower's loss
// costs the calls in flight to it; the leader's costs an election (about a second), during which
// keep-alives are not answered and a node may fence itself (TTL 2 s, margin 0.3 s): traffic
// errors then are refusals or "possibly delivered", never a violation of (a), (b) or (d).
//
// EtcdLeaderLossFailoverIsBounded: the etcd leader and a node that hosts grains get SIGKILL at
// the same moment. etcd 3.4's new leader renews every lease when it takes over (lessor Promote:
// to TTL plus an election timeout, 1 s, from then), and it takes over only after a randomised
// election timeout of 1 to 2 s, and checks for expired leases every 500 ms: so the killed node's
// lease ends between TTL + 2 s and TTL + 3.5 s after the kill (4 to 5.5 s with TTL 2 s; the
// issue's estimate is 2 x TTL + 1 s), later under load or after a split vote (etcd alone, no
// akt: a key on a TTL-2 lease renewed at the leader's kill vanished after 5.3 and 6.6 s on
// this machine). Its grains cannot move before that: their claims live on that lease.
// So the test splits the failover (the checker's, after the K line: the kill to the end of the
// first acknowledged call to each of its grains started after it) into etcd's share, the kill
// to the driver's node_left of the killed node (its lease expired), and akt's share, the rest;
// it asserts akt's share within 1 s (as after a kill -9 on a stable etcd: TTL + 1 s), and the
// whole within a generous bound; the figures are reported (p50/p99/max) as their own row in
// docs/reliability.md against the target of 2 x TTL + 1 s.
//
// Environment (for soaks; the defaults are CI's run), besides fault_cluster.hpp's:
//   AKT_FAULTS_SECONDS  how long the member kills go on in the first test (30)
//   AKT_FAULTS_REPS     the leader-and-node kills of the second test (4)
//   AKT_FAULTS_DOWN_MS  how long a killed etcd member stays down (3000)

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "faults/fault_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using akt::faults::env_or;
using akt::faults::fault_cluster;
using akt::faults::node_slot;

constexpr int k_members = 3;

// A running member that does not lead (the leader known as `leader`); -1 when none.
int a_follower(fault_cluster& c, int leader) {
  for (int i = 0; i < k_members; ++i) {
    if (i != leader && c.etcd().member(static_cast<std::size_t>(i)).running()) return i;
  }
  return -1;
}

TEST(Faults, EtcdMemberLossLosesNothing) {
  const auto length = std::chrono::seconds(env_or("AKT_FAULTS_SECONDS", 30));
  const auto down = std::chrono::milliseconds(env_or("AKT_FAULTS_DOWN_MS", 3000));
  fault_cluster c({.title = "etcd member loss under traffic (3 members), a member down for " +
                            std::to_string(down.count()) + " ms in turn, for " +
                            std::to_string(length.count()) + " s",
                   .etcd_members = k_members});
  AKT_FAULTS_START_OR_END(c);
  c.start_traffic();

  const auto end = fault_cluster::clock::now() + length;
  auto next_at = fault_cluster::clock::now() + 3s;  // the traffic settles first
  int killed = -1;                                  // the member down, if any
  bool leader_next = false;                         // a follower first, then the leader, ...
  c.run_for(length + 30s, [&] {
    const auto now = fault_cluster::clock::now();
    if (killed >= 0) {
      if (now < next_at) return true;
      if (!c.restart_etcd_member(static_cast<std::size_t>(killed))) return false;
      killed = -1;
      next_at = fault_cluster::clock::now() + 3s;  // elections, fenced nodes rejoin
      return true;
    }
    if (now >= end) return false;
    if (now < next_at) return true;
    const int leader = c.etcd().leader(2000ms);
    if (leader < 0) return true;  // an election is still going on: the next tick
    const int victim = leader_next ? leader : a_follower(c, leader);
    if (victim < 0) return true;
    c.kill_etcd_member(static_cast<std::size_t>(victim));
    killed = victim;
    leader_next = !leader_next;
    next_at = fault_cluster::clock::now() + down;
    return true;
  });
  if (killed >= 0) (void)c.restart_etcd_member(static_cast<std::size_t>(killed));  // a failure

  const akt::faults::check_report r = c.finish();
  c.expect_clean(r);
  EXPECT_GE(c.etcd_kills(), 2) << "too few member kills";
  EXPECT_GE(c.etcd_leader_kills(), 1) << "the leader was never killed";
  EXPECT_EQ(r.kills, 0u);
  std::cout << "etcd member loss: " << c.etcd_kills() << " member kills (" << c.etcd_leader_kills()
            << " of the leader)\n";
  c.keep_or_remove_evidence(r);
}

TEST(Faults, EtcdLeaderLossFailoverIsBounded) {
  const int reps = static_cast<int>(env_or("AKT_FAULTS_REPS", 4));
  const auto down = std::chrono::milliseconds(env_or("AKT_FAULTS_DOWN_MS", 3000));
  fault_cluster c({.title = "etcd leader and a node killed together (3 members), " +
                            std::to_string(reps) + " times",
                   .etcd_members = k_members,
                   // The driver keeps its lease through the election: with 2 s its own lease
                   // could lapse too, and a node that sees it leave drops the acknowledgements it
                   // owes it (declared lost), so a call a grain applied at once reached the driver
                   // as request_timeout 2 s later and counted in akt's share (seed 3415629659: an
                   // ack due 4.6 s after the kill, request_timeout at 6.6 s).
                   .driver_lease_ttl = std::chrono::seconds(10)});
  AKT_FAULTS_START_OR_END(c);
  c.start_traffic();

  // One round: wait until every node is ready and the traffic settled, kill the leader and a
  // node at once (the node is started again at once and waits for its old lease), restart the
  // member after `down`, wait until the node joined again.
  enum class phase { settle, down, rejoin } at = phase::settle;
  auto next_at = fault_cluster::clock::now() + 3s;
  int done = 0, killed = -1;
  node_slot* node = nullptr;
  std::vector<std::pair<std::string, std::int64_t>> node_kills;  // name, ns just before
  c.run_for(std::chrono::seconds(25 * reps + 30), [&] {
    const auto now = fault_cluster::clock::now();
    switch (at) {
      case phase::settle: {
        // After the last round the traffic runs on for the settle time too: a victim's grains
        // move once its lease ends, about when it rejoins, and a call to each must come after
        // (seed 3179599116: traffic ended at the rejoin and 3 grains never answered again).
        if (done >= reps) return now < next_at;
        if (now < next_at) return true;
        for (const node_slot& s : c.nodes())
          if (!s.ready) return true;
        const int leader = c.etcd().leader(2000ms);
        if (leader < 0) return true;
        node = c.random_ready();
        if (node == nullptr) return true;
        c.kill_etcd_member(static_cast<std::size_t>(leader));
        killed = leader;
        node_kills.emplace_back(node->name, akt::faults::monotonic_ns());
        if (!c.kill_nine(*node)) return false;
        at = phase::down;
        next_at = now + down;
        return true;
      }
      case phase::down:
        if (now < next_at) return true;
        if (!c.restart_etcd_member(static_cast<std::size_t>(killed))) return false;
        killed = -1;
        at = phase::rejoin;
        return true;
      case phase::rejoin:
        if (!node->ready) return true;
        ++done;
        at = phase::settle;
        next_at = now + 3s;
        return true;
    }
    return true;
  });
  if (killed >= 0) (void)c.restart_etcd_member(static_cast<std::size_t>(killed));  // a failure

  const akt::faults::check_report r = c.finish();
  c.expect_clean(r);
  EXPECT_EQ(done, reps) << "not every round ran";
  EXPECT_EQ(c.etcd_leader_kills(), reps);
  EXPECT_EQ(r.kills, static_cast<std::size_t>(reps));
  ASSERT_FALSE(r.failover_ms.empty()) << "no kill hit a node that ran a grain";
  EXPECT_EQ(r.failover_unrecovered, 0u) << "a grain of a killed node never answered again";
  // Each round: etcd's share (the kill to the driver's node_left of the killed node) and akt's
  // (the rest of each grain's failover). The K lines are in the order of node_kills.
  // A round whose victim held no grain at its kill (it had rejoined with none since) has no K
  // line: the checker pairs each K line with its kill by time, so match on that, not on order.
  ASSERT_FALSE(r.failover_ms_by_kill.empty()) << "no round hit a grain";
  ASSERT_LE(r.failover_ms_by_kill.size(), node_kills.size());
  std::printf("etcd leader loss: %zu of %zu rounds killed a node that held grains\n",
              r.failover_ms_by_kill.size(), node_kills.size());
  const auto kill_before = [&](std::int64_t k_ns) {
    const std::pair<std::string, std::int64_t>* best = nullptr;
    for (const auto& k : node_kills)
      if (k.second <= k_ns && (best == nullptr || k.second > best->second)) best = &k;
    return best;
  };
  std::vector<double> etcd_share, akt_share;
  for (const auto& [k_ns, times] : r.failover_ms_by_kill) {
    const auto* kill = kill_before(k_ns);
    ASSERT_NE(kill, nullptr) << "a K line before every kill";
    const auto& [name, before_ns] = *kill;
    const std::int64_t left_ns = c.driver_saw_leave(name, before_ns);
    ASSERT_GE(left_ns, 0) << "the driver never saw " << name << " leave after its kill";
    const double lease_ms = static_cast<double>(left_ns - k_ns) / 1e6;
    etcd_share.push_back(lease_ms);
    for (double t : times) akt_share.push_back(t - lease_ms);
  }
  const double akt_bound_ms = 1000;
  const double total_bound_ms = 15000;  // 2 elections' worth beyond the worst case above
  auto row = [](const char* what, const std::vector<double>& v) {
    std::printf("  %s (%zu): p50 %.0f ms, p99 %.0f ms, max %.0f ms\n", what, v.size(),
                akt::faults::percentile(v, 50), akt::faults::percentile(v, 99),
                akt::faults::percentile(v, 100));
  };
  std::printf("etcd leader loss, %d rounds (issue's target 2 x TTL + 1 s = 5000 ms):\n", reps);
  row("failover of the killed node's grains", r.failover_ms);
  row("etcd's share: the kill to the driver's node_left (lease expired)", etcd_share);
  row("akt's share: node_left to the first ok call", akt_share);
  EXPECT_LE(akt::faults::percentile(akt_share, 100), akt_bound_ms)
      << "akt took more than 1 s to move a grain once the killed node's lease expired";
  EXPECT_LE(akt::faults::percentile(r.failover_ms, 100), total_bound_ms);
  c.keep_or_remove_evidence(r);
}

}  // namespace
