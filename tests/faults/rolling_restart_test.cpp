// A rolling restart under traffic (issue 20, "clean shutdown and rolling restart"): the fault
// cluster (fault_cluster.hpp: a real etcd, five akt_fault_node processes with lease TTL 2 s, and
// this process as a driver sending acknowledged tells to 50 grains). Each node in turn gets
// SIGTERM, must exit 0, and is started again under its name once it exited; when it is READY
// again and a second has passed, the next node goes. Rounds over the five nodes go on until the
// run's length has passed (at least one full round). The checker (fault_checker.hpp) proves
// (a), (b) and (d) from the evidence; the test also counts the calls that ended in an error and
// reports them against what the guide promises a caller of a rolling restart
// (docs/guide/07-cluster.md, "What a caller sees": no error), and asserts it.
//
// Environment (for soaks; the defaults are CI's run), besides fault_cluster.hpp's:
//   AKT_FAULTS_SECONDS   how long the rounds go on (40; the last round is finished)
//   AKT_FAULTS_STRICT    0: report the errors callers saw instead of asserting none (1)

#include <gtest/gtest.h>

#include <chrono>

#include "faults/fault_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using akt::faults::env_or;
using akt::faults::fault_cluster;
using akt::faults::node_slot;

TEST(Faults, RollingRestartLosesNothing) {
  const auto length = std::chrono::seconds(env_or("AKT_FAULTS_SECONDS", 40));
  fault_cluster c({.title = "rolling restart under traffic, rounds for " +
                            std::to_string(length.count()) + " s"});
  AKT_FAULTS_START_OR_END(c);
  c.start_traffic();

  const std::size_t n = c.nodes().size();
  const auto end = fault_cluster::clock::now() + length;
  auto next_at = fault_cluster::clock::now() + 2s;  // the traffic settles first
  std::size_t restarts = 0;
  node_slot* restarting = nullptr;
  // The cap only bounds a round that never finishes (a node that does not join again).
  c.run_for(length + 120s, [&] {
    const auto now = fault_cluster::clock::now();
    if (restarting != nullptr) {
      if (!restarting->ready) return true;
      restarting = nullptr;
      ++restarts;
      next_at = now + 1s;
      return true;
    }
    if (now < next_at) return true;
    if (now >= end && restarts > 0 && restarts % n == 0) return false;  // rounds done
    node_slot& s = c.nodes()[restarts % n];
    if (!c.terminate(s, 30s) || !c.start_node(s)) return false;  // reported
    restarting = &s;
    return true;
  });

  const akt::faults::check_report r = c.finish();
  c.expect_clean(r);
  EXPECT_GE(restarts, n) << "not one full round";
  EXPECT_EQ(r.kills, 0u);
  // The calls that ended in an error, by outcome and code (the checker's (d) already proved
  // that none of them was lost or applied twice, and that every ok one was applied once).
  const std::size_t errors = r.refused + r.store_refused + r.possibly;
  std::cout << "rolling restart: " << restarts << " restarts (" << restarts / n
            << " rounds); calls ended in an error: " << errors << " (" << r.refused << " refused, "
            << r.store_refused << " refused by the store, " << r.possibly
            << " possibly delivered)\n";
  EXPECT_EQ(r.store_refused, 0u) << r.summary();
  // The guide promises a caller of a rolling restart "no error" (docs/guide/07-cluster.md,
  // "What a caller sees": the stopping node refuses before any handler runs and the caller's
  // node sends once more). This test found three ways it did not hold (docs/reliability.md,
  // "Rolling restart"), fixed since: a stopping node was still chosen for new grains, a node
  // that does not host the kind answered its own refusal unmarked, and a grain cached on a
  // node's earlier process stayed unreachable while a new process of that name lived.
  // What the resend once hides is a refusal (issue 20: "callers see none of the errors a
  // rolling restart hides"); a call that ran out of its time (request_timeout, 2 s here) is not
  // one of those: the machine's load decides it (one in a CI run, with the other fault tests and
  // the suite on both cores), so those are reported, not asserted.
  auto timed_out = r.outcomes.find("possibly request_timeout");
  const std::size_t timeouts = timed_out == r.outcomes.end() ? 0 : timed_out->second;
  std::cout << "rolling restart: calls that ran out of time: " << timeouts << "\n";
  if (env_or("AKT_FAULTS_STRICT", 1) != 0) {
    EXPECT_EQ(errors - timeouts, 0u)
        << "the guide promises no error in a rolling restart: " << r.summary();
  }
  c.keep_or_remove_evidence(r);
}

}  // namespace
