// A partitioned node under traffic (issue 20, "partition"): the fault cluster (fault_cluster.hpp:
// a real etcd, five akt_fault_node processes with lease TTL 2 s, and this process as a driver
// sending acknowledged tells to 50 grains), each node behind two testkit tcp_proxies of its own
// (options::proxied): one to etcd, and one in front of its remoting port, which it advertises.
// A node chosen at random is cut off for twice the TTL and more, then healed; once the driver's
// membership shows it again under a new epoch, and the traffic settled, the next one, never the
// same node twice in a row. The 1st, 3rd, ... partition cuts both proxies (no keep-alive, claim
// or watch reaches etcd, and no connection from the other nodes or the driver reaches it; what
// is not cut is written at fault_cluster::partition); the 2nd, 4th, ... cuts etcd only, so the
// driver's requests keep reaching the node until the others see its lease expire: it must
// refuse them by its own clock.
//
// Its lease expires in etcd while it is cut off, so the others claim its grains; it must fence
// itself within its lease (no handler from cut + TTL until the heal), and after the heal rejoin
// under a new epoch, start no handler on its old claims, and serve again once grains move to it
// (the grains of the next partitioned node are claimed among the others, the healed one
// included). The
// checker (fault_checker.hpp) proves (a), (b), (d) and those rules, and measures the failover
// from each cut and the time from each heal to the node's first handler on its new epoch.
//
// Environment (for soaks; the defaults are CI's run), besides fault_cluster.hpp's:
//   AKT_FAULTS_SECONDS       how long the partitions go on (40)
//   AKT_FAULTS_PARTITION_MS  how long each node stays cut off (4500: more than twice the TTL)

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "faults/fault_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using akt::faults::env_or;
using akt::faults::fault_cluster;
using akt::faults::node_slot;
using akt::faults::percentile;

TEST(Faults, PartitionedNodeStopsServingWithinTheTtlAndServesAfterHealing) {
  const auto length = std::chrono::seconds(env_or("AKT_FAULTS_SECONDS", 40));
  const auto cut_for = std::chrono::milliseconds(env_or("AKT_FAULTS_PARTITION_MS", 4500));
  // How long a healed node may take to show in the driver's membership again, under a new
  // epoch: its etcd client reconnects, finds its lease gone and joins again (seconds; the bound
  // leaves room for ASan on 2 shared cores).
  constexpr auto rejoin_bound = 20s;
  fault_cluster c({.title = "partitioned node under traffic, cut off for " +
                            std::to_string(cut_for.count()) + " ms, partitions for " +
                            std::to_string(length.count()) + " s",
                   .proxied = true});
  AKT_FAULTS_START_OR_END(c);
  c.start_traffic();

  enum class phase { settle, cut, rejoining };
  phase now_in = phase::settle;
  const auto end = fault_cluster::clock::now() + length;
  auto next_at = fault_cluster::clock::now() + 2s;  // the traffic settles first
  node_slot* victim = nullptr;
  const node_slot* last = nullptr;
  akt::cluster::lease_id old_epoch = 0;
  auto healed_at = fault_cluster::clock::now();
  std::vector<double> rejoin_ms;  // heal -> the driver sees the node under a new epoch
  c.run_for(length + rejoin_bound + 10s, [&] {
    const auto now = fault_cluster::clock::now();
    switch (now_in) {
      case phase::settle: {
        if (now >= end) return false;
        if (now < next_at) return true;
        victim = c.random_ready(last);
        if (victim == nullptr) return true;
        old_epoch = c.member_epoch(victim->name);
        // Every other partition cuts etcd only: the node stays reachable and must fence itself.
        c.partition(*victim, /*peers=*/c.partitions() % 2 == 0);
        now_in = phase::cut;
        next_at = now + cut_for;
        return true;
      }
      case phase::cut:
        if (now < next_at) return true;
        c.heal(*victim);
        healed_at = fault_cluster::clock::now();
        now_in = phase::rejoining;
        return true;
      case phase::rejoining: {
        const akt::cluster::lease_id epoch = c.member_epoch(victim->name);
        if (epoch != 0 && epoch != old_epoch) {
          rejoin_ms.push_back(
              std::chrono::duration<double, std::milli>(fault_cluster::clock::now() - healed_at)
                  .count());
          last = victim;
          victim = nullptr;
          now_in = phase::settle;
          next_at = now + 3s;  // the traffic settles before the next cut
          return true;
        }
        if (now - healed_at < rejoin_bound) return true;
        ADD_FAILURE() << victim->name << " did not rejoin under a new epoch within "
                      << rejoin_bound.count() << " s of its heal (epoch before the cut "
                      << old_epoch << ", now " << epoch << "): " << victim->proc->log_text(3000);
        return false;
      }
    }
    return false;
  });
  if (victim != nullptr && victim->cut) c.heal(*victim);  // only after a failure

  const akt::faults::check_report r = c.finish();
  c.expect_clean(r);
  EXPECT_GE(c.partitions(), 3) << "too few partitions";
  EXPECT_EQ(c.heals(), c.partitions());
  EXPECT_EQ(rejoin_ms.size(), static_cast<std::size_t>(c.heals())) << "a node did not rejoin";
  EXPECT_EQ(r.kills, 0u);
  EXPECT_FALSE(r.partition_failover_ms.empty()) << "no partition hit a node that ran a grain";
  // An etcd-only cut leaves the node reachable: requests reached it after the cut (and the
  // checker proved that none started a handler past cut + TTL).
  EXPECT_FALSE(r.served_after_cut_ms.empty()) << "no request reached a node cut from etcd only";
  // After a heal the node serves again once grains move to it: the next partition's grains are
  // claimed among the others, the healed node included. Not after every heal: the next victim
  // may hold no grain (nothing moves), or round robin may give the few that move to the others
  // (one run in 20 showed 3 of 5 heals followed by handlers of the healed node). Every heal is
  // followed by a rejoin (above); at least one by serving, proven from the handler lines.
  EXPECT_GE(r.heal_to_serving_ms.size(), 1u) << r.summary();
  std::printf(
      "partition: %d partitions (every other one etcd only); rejoined (driver's membership, new "
      "epoch) p50 %.0f ms, max "
      "%.0f ms after the heal; handler starts after a heal %zu\n",
      c.partitions(), percentile(rejoin_ms, 50), percentile(rejoin_ms, 100), r.after_heal_starts);
  std::fflush(stdout);
  c.keep_or_remove_evidence(r);
}

}  // namespace
