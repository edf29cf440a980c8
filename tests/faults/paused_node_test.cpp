// A paused node under traffic (issue 20, "paused node"): the fault cluster (fault_cluster.hpp:
// a real etcd, five akt_fault_node processes with lease TTL 2 s, and this process as a driver
// sending acknowledged tells to 50 grains). A node chosen at random gets SIGSTOP for twice the
// TTL, then SIGCONT; a few seconds later the next one, never the same node twice in a row. Its
// lease expires in etcd while it is stopped, so the others claim its grains; after SIGCONT it
// must fence itself at once (no handler on its old claims) and join again under a new epoch.
// The checker (fault_checker.hpp) proves (a), (b) and (d), and for each pause that the paused
// process started no handler after SIGCONT on a claim it activated before SIGSTOP and that
// every handler it started after SIGCONT carries a newer epoch; overlapping activations (c)
// explained by a handler already running at the pause are counted apart.
//
// Environment (for soaks; the defaults are CI's run), besides fault_cluster.hpp's:
//   AKT_FAULTS_SECONDS   how long the pauses go on (40)
//   AKT_FAULTS_PAUSE_MS  how long each node stays stopped (4000: twice the TTL)

#include <gtest/gtest.h>

#include <chrono>

#include "faults/fault_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using akt::faults::env_or;
using akt::faults::fault_cluster;
using akt::faults::node_slot;

TEST(Faults, PausedNodeStartsNoHandlerOnItsOldClaims) {
  const auto length = std::chrono::seconds(env_or("AKT_FAULTS_SECONDS", 40));
  const auto pause_for = std::chrono::milliseconds(env_or("AKT_FAULTS_PAUSE_MS", 4000));
  fault_cluster c({.title = "paused node under traffic, SIGSTOP for " +
                            std::to_string(pause_for.count()) + " ms, pauses for " +
                            std::to_string(length.count()) + " s"});
  AKT_FAULTS_START_OR_END(c);
  c.start_traffic();

  const auto end = fault_cluster::clock::now() + length;
  auto next_at = fault_cluster::clock::now() + 2s;  // the traffic settles first
  node_slot* paused = nullptr;
  const node_slot* last = nullptr;
  c.run_for(length + 30s, [&] {
    const auto now = fault_cluster::clock::now();
    if (paused != nullptr) {
      if (now < next_at) return true;
      c.resume(*paused);
      last = paused;
      paused = nullptr;
      next_at = now + 4s;  // it fences, joins again, and the traffic settles
      return true;
    }
    if (now >= end) return false;
    if (now < next_at) return true;
    node_slot* victim = c.random_ready(last);
    if (victim == nullptr) return true;
    paused = victim;
    next_at = now + pause_for;
    return c.pause(*victim);  // a process that did not stop is reported
  });
  if (paused != nullptr) c.resume(*paused);  // only after a failure

  const akt::faults::check_report r = c.finish();
  c.expect_clean(r);
  EXPECT_GE(c.pauses(), 3) << "too few pauses";
  EXPECT_EQ(r.kills, 0u);
  EXPECT_FALSE(r.pause_failover_ms.empty()) << "no pause hit a node that ran a grain";
  std::cout << "paused node: " << c.pauses() << " pauses; handler starts after SIGCONT "
            << r.after_resume_starts << " (" << r.after_resume_reclaimed
            << " on grains claimed elsewhere meanwhile); overlaps (c) " << r.overlaps_c.size()
            << " (" << r.overlaps_c_paused << " explained by a pause)\n";
  c.keep_or_remove_evidence(r);
}

}  // namespace
