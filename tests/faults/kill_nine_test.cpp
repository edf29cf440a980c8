// The cluster under kill -9 (issue 20, the first fault of the harness): the fault cluster
// (fault_cluster.hpp: a real etcd, five akt_fault_node processes with lease TTL 2 s, and this
// process as a driver sending acknowledged tells to 50 grains). Every few seconds one node,
// chosen at random, gets SIGKILL and is started again under the same name. Then everything is
// stopped by pid and the checker (fault_checker.hpp) proves from the evidence files that no
// stale handler started (a), no stale write was accepted (b), and every acknowledged message was
// applied exactly once (d); it reports overlapping activations (c) and the failover times after
// the kills.
//
// Environment (for soaks; the defaults are CI's run), besides fault_cluster.hpp's:
//   AKT_FAULTS_SECONDS   how long the traffic and the kills run (60)
//   AKT_FAULTS_KILL_MS   the time between two kills (4000)
//   AKT_FAULTS_SPARE     a node never killed (e.g. n0; none by default): the soak's memory bound
//                        is read on it, a process that lives the whole run (every other one is
//                        started again, small, after each kill)

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "faults/fault_cluster.hpp"

namespace {

using akt::faults::env_or;
using akt::faults::fault_cluster;

TEST(Faults, KillNineUnderTraffic) {
  const auto run_for = std::chrono::seconds(env_or("AKT_FAULTS_SECONDS", 60));
  const auto kill_every = std::chrono::milliseconds(env_or("AKT_FAULTS_KILL_MS", 4000));
  fault_cluster c({.title = "kill -9 under traffic, a kill every " +
                            std::to_string(kill_every.count()) + " ms for " +
                            std::to_string(run_for.count()) + " s"});
  AKT_FAULTS_START_OR_END(c);
  const char* spare_name = std::getenv("AKT_FAULTS_SPARE");
  const akt::faults::node_slot* spare = nullptr;
  for (const akt::faults::node_slot& s : c.nodes())
    if (spare_name != nullptr && s.name == spare_name) spare = &s;
  if (spare_name != nullptr && *spare_name != 0) {
    ASSERT_NE(spare, nullptr) << "AKT_FAULTS_SPARE names no node: " << spare_name;
  }
  c.start_traffic();

  // Every kill_every, SIGKILL to a ready node, started again at once.
  auto next_kill = fault_cluster::clock::now() + kill_every;
  c.run_for(run_for, [&] {
    if (fault_cluster::clock::now() < next_kill) return true;
    next_kill = fault_cluster::clock::now() + kill_every;
    akt::faults::node_slot* victim = c.random_ready(spare);
    return victim == nullptr || c.kill_nine(*victim);  // a failed start is reported
  });

  const akt::faults::check_report r = c.finish();
  c.expect_clean(r);
  EXPECT_GT(c.kills(), 0) << "the run was too short to kill anything";
  EXPECT_FALSE(r.failover_ms.empty()) << "no kill hit a node that ran a grain";
  c.keep_or_remove_evidence(r);
}

}  // namespace
