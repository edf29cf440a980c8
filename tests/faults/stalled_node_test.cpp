// A stalled node under traffic (issue 20, "stalled node"): the fault cluster (fault_cluster.hpp:
// a real etcd, five akt_fault_node processes with lease TTL 2 s, and this process as a driver
// sending acknowledged tells to 50 grains). A node chosen at random gets SIGUSR1: every one of
// its dispatcher workers is then stuck in a handler of a plain stall actor (fault_node_main.cpp),
// while its process, its remoting and its membership thread run on. Its dispatcher probe is no
// longer handled, so it must stop renewing its lease and fence itself like a partitioned node;
// the others claim its grains. After 2×TTL and more it is released (SIGUSR2): the messages that
// queued meanwhile must be refused by the fence, not run (no handler on its old claims), and it
// must join again under a new epoch. A few seconds later the next one, never the same node twice
// in a row.
//
// The checker (fault_checker.hpp) proves (a), (b) and (d), and for each stall that the stalled
// process started no handler while stalled (so the stall held every worker), none after the
// release on a claim it activated before the stall, and only handlers of a newer epoch after it.
// From outside the checker, the test reads what the node printed of its own membership (EPOCH and
// FENCED lines, from a thread that needs no worker) and what the driver sees: each stall must
// fence the node while it is stalled, the node must not take a lease again before its release,
// and it must be a member again under a new epoch after it.
//
// Environment (for soaks; the defaults are CI's run), besides fault_cluster.hpp's:
//   AKT_FAULTS_SECONDS   how long the stalls go on (40)
//   AKT_FAULTS_STALL_MS  how long each node stays stalled (4500: more than twice the TTL)

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "faults/fault_checker.hpp"
#include "faults/fault_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using akt::faults::env_or;
using akt::faults::fault_cluster;
using akt::faults::monotonic_ns;
using akt::faults::node_slot;
using akt::faults::percentile;

// What one stall showed from outside the checker.
struct stall_record {
  std::string node;
  unsigned long long epoch_before = 0, epoch_after = 0;
  std::int64_t stall_ns = 0, release_ns = 0;
  double fenced_after_ms = -1;  // from the W line to the node's FENCED line; -1: none
  int joins_while_stalled = 0;  // EPOCH lines printed between the stall and its release
  double rejoin_ms = -1;        // from the release to its new epoch; -1: not seen
};

std::string ms_stats(const std::vector<double>& v) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "p50 %.0f ms, p99 %.0f ms, max %.0f ms (%zu)", percentile(v, 50),
                percentile(v, 99), percentile(v, 100), v.size());
  return buf;
}

TEST(Faults, StalledNodeFencesItselfAndStartsNoHandlerOnItsOldClaims) {
  const auto length = std::chrono::seconds(env_or("AKT_FAULTS_SECONDS", 40));
  const auto stall_for = std::chrono::milliseconds(env_or("AKT_FAULTS_STALL_MS", 4500));
  fault_cluster c({.title = "stalled node under traffic, every worker stuck for " +
                            std::to_string(stall_for.count()) + " ms, stalls for " +
                            std::to_string(length.count()) + " s"});
  AKT_FAULTS_START_OR_END(c);
  c.start_traffic();

  enum class phase { idle, stalled, rejoining };
  phase at = phase::idle;
  const auto end = fault_cluster::clock::now() + length;
  auto next_at = fault_cluster::clock::now() + 2s;  // the traffic settles first
  node_slot* victim = nullptr;
  const node_slot* last = nullptr;
  std::vector<stall_record> records;
  c.run_for(length + 25s, [&] {
    const auto now = fault_cluster::clock::now();
    switch (at) {
      case phase::idle: {
        if (now >= end) return false;
        if (now < next_at) return true;
        victim = c.random_ready(last);
        if (victim == nullptr) return true;
        const auto epochs = c.marks(*victim, "EPOCH ");
        if (epochs.empty()) return true;  // its watcher has not printed yet
        stall_record rec;
        rec.node = victim->name;
        rec.epoch_before = epochs.back().epoch;
        if (!c.stall(*victim)) return false;  // reported
        rec.stall_ns = monotonic_ns();
        records.push_back(rec);
        at = phase::stalled;
        next_at = now + stall_for;
        return true;
      }
      case phase::stalled: {
        if (now < next_at) return true;
        stall_record& rec = records.back();
        rec.release_ns = monotonic_ns();
        c.unstall(*victim);
        for (const auto& f : c.marks(*victim, "FENCED ")) {
          if (f.ns >= rec.stall_ns && f.ns <= rec.release_ns) {
            rec.fenced_after_ms = static_cast<double>(f.ns - rec.stall_ns) / 1e6;
            break;
          }
        }
        for (const auto& e : c.marks(*victim, "EPOCH "))
          if (e.ns > rec.stall_ns && e.ns < rec.release_ns) ++rec.joins_while_stalled;
        at = phase::rejoining;
        next_at = now + 20s;  // the bound of its rejoin
        return true;
      }
      case phase::rejoining: {
        stall_record& rec = records.back();
        // A member again: its last mark is a new epoch after its last fence, and the driver
        // sees its record under that epoch.
        const auto epochs = c.marks(*victim, "EPOCH ");
        const auto fences = c.marks(*victim, "FENCED ");
        const bool member_again =
            !epochs.empty() && epochs.back().epoch != rec.epoch_before &&
            (fences.empty() || epochs.back().ns > fences.back().ns) && [&] {
              for (const auto& m : c.driver_members())
                if (m.name == victim->name &&
                    static_cast<unsigned long long>(m.epoch) == epochs.back().epoch)
                  return true;
              return false;
            }();
        if (member_again) {
          rec.epoch_after = epochs.back().epoch;
          if (epochs.back().ns > rec.release_ns)
            rec.rejoin_ms = static_cast<double>(epochs.back().ns - rec.release_ns) / 1e6;
          last = victim;
          victim = nullptr;
          at = phase::idle;
          next_at = now + 3s;  // the traffic settles
          return true;
        }
        if (now >= next_at) {
          ADD_FAILURE() << victim->name << " is not a member again 20 s after its release: "
                        << victim->proc->log_text(3000);
          victim = nullptr;
          return false;
        }
        return true;
      }
    }
    return true;
  });
  if (at == phase::stalled && victim != nullptr) c.unstall(*victim);  // only after a failure

  const akt::faults::check_report r = c.finish();
  c.expect_clean(r);
  EXPECT_GE(c.stalls(), 3) << "too few stalls";
  EXPECT_EQ(r.kills, 0u);
  EXPECT_EQ(r.pauses, 0u);
  EXPECT_FALSE(r.stall_failover_ms.empty()) << "no stall hit a node that ran a grain";
  std::vector<double> fenced_ms, rejoin_ms;
  for (const stall_record& rec : records) {
    EXPECT_GE(rec.fenced_after_ms, 0) << rec.node << " did not fence itself while stalled";
    EXPECT_EQ(rec.joins_while_stalled, 0) << rec.node << " took a lease again while stalled";
    EXPECT_NE(rec.epoch_after, 0u) << rec.node << " did not join again after its release";
    EXPECT_NE(rec.epoch_after, rec.epoch_before) << rec.node << ": not a new epoch";
    if (rec.fenced_after_ms >= 0) fenced_ms.push_back(rec.fenced_after_ms);
    if (rec.rejoin_ms >= 0) rejoin_ms.push_back(rec.rejoin_ms);
    std::cout << "  stall of " << rec.node << ": epoch " << rec.epoch_before << " -> "
              << rec.epoch_after << ", fenced " << rec.fenced_after_ms
              << " ms after the stall, joins while stalled " << rec.joins_while_stalled
              << ", new epoch " << rec.rejoin_ms << " ms after the release\n";
  }
  std::cout << "stalled node: " << c.stalls() << " stalls; self-fence after the stall "
            << ms_stats(fenced_ms) << "; new epoch after the release " << ms_stats(rejoin_ms)
            << "; handler starts after the release " << r.after_release_starts << " ("
            << r.after_release_reclaimed << " on grains claimed elsewhere meanwhile); failover "
            << "after a stall " << ms_stats(r.stall_failover_ms) << ", " << r.stall_unrecovered
            << " grains without a later ok call; overlaps (c) " << r.overlaps_c.size() << "\n";
  c.keep_or_remove_evidence(r);
}

}  // namespace
