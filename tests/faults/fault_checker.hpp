#pragma once
// The fault harness's checker (issue 20): reads the evidence a run left in its directory (the
// formats are in fault_evidence.hpp) and proves, from files no node can take back:
//
//   (a) no handler of an activation (grain, token T) started after the first handler of a newer
//       activation (token T' > T) of the same grain started, and no claim (grain, token) was
//       activated by two processes: the claim a handler ran on was still current when it
//       started, as far as handler times show. (Whether a handler started after its node's
//       lease validity ended needs the lease's times: see below.)
//   (b) the fenced store never accepted a write with a stale token: per grain, the tokens of its
//       accepted lines (O, A) never decrease, in the order the store took them;
//   (c) no two activations of one grain started handlers in overlapping intervals (an
//       activation's interval: its first to its last handler start), reported on their own:
//       under kill -9 an overlap also breaks (a), under a pause it may be explained;
//   (d) every call the driver saw acknowledged (ok) is applied exactly once in the store, every
//       "possibly delivered" one at most once, every refused one (refused before delivery, or
//       by the store) never, and nothing is applied that the driver did not send.
//
// After a pause (a P line, SIGSTOP, and its R line, SIGCONT, of the same process) it also
// proves, as part of (a): the paused process started no handler after SIGCONT on a claim it had
// activated before SIGSTOP (its old claims), and every handler it started after SIGCONT carries
// a membership epoch greater than every epoch its handlers carried before SIGSTOP (it rejoined
// under a new one). Overlaps (c) in which the older activation's process was paused between
// the two first starts are counted apart as explained by the pause.
//
// After a stall (a W line: every dispatcher worker of the process stuck in a handler, written
// once the node said so; and its U line, the release, written before the node is told) it
// proves the same as after a pause, as part of (a): no handler after the release on a claim
// activated before the stall, and a new epoch on every handler after it. Besides, a stalled
// process starts no handler between W and U (a stall_leaks line each: the stall was not one,
// so the run proves nothing about it); failover is measured from each W line as from a pause.
// Against the leases (leases.log, when the run has it: the test process's own watch of the member
// records in etcd, fault_leases.hpp) it proves (a) strictly, as part of (a): no handler line of
// node N under epoch E started after the observed delete of N's record of epoch E. The delete is
// observed late, never early, so a handler after it certainly started after its lease ended.
// Also: no epoch of a node appears in the handler lines of two of its processes (a restarted
// process never runs under its predecessor's lease), and each activation ran on a claim (as the
// test process saw it created in etcd) made for its node on a lease that process held: never
// an old process's.
// After a partition (an X line "X <node> <pid> <ns> <ttl-ms>": the node cut off from etcd, and
// from its peers or not, and its H line when it healed) it proves, as part of (a): the process
// started no handler from cut + TTL until its heal (its lease, last renewed before the cut,
// ended by then; for a partition not yet healed: until the end of the run), and when the
// partition outlasted the TTL, no handler after the heal on a claim it activated before the
// cut, and every handler it started after the heal carries an epoch greater than every epoch
// its handlers carried before the cut. It measures the failover from each cut like a kill's, to
// the first acknowledged call after the cut that another process applied; for each heal the
// time to the process's first handler on a new epoch (it rejoined and serves again), or counts
// the heal as not serving again before the run ended; and how long after each cut it went on
// starting handlers.
// The store's faults are in etcd.log, apart from the nodes' (M: an etcd member got SIGKILL,
// "leader" or "follower"; N: it serves again after a restart; Z: the store was compacted): they
// are counted; the invariants above are what must hold through them.
//
// It also measures failover: for each kill (K line), the grains whose current activation (the
// newest token whose first handler started before the kill) ran in the killed process, and for
// each, the time from the kill to the end of the first acknowledged call to it that started
// after the kill; the same from each clean stop (T line, SIGTERM) and each pause (P line).
//
// Contract: plain functions over files; call from one thread at a time per report (a report is
// a value). Memory: every line of the run is held while checking (a minute's run: a few MB).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace akt::faults {

struct check_report {
  // What was checked.
  std::size_t handler_starts = 0;  // H lines
  std::size_t activations = 0;     // distinct (grain, token, node, pid)
  std::size_t grains = 0;
  std::size_t calls = 0;  // C lines, by outcome below
  std::size_t ok = 0, refused = 0, store_refused = 0, possibly = 0;
  std::size_t applied = 0;        // A lines
  std::size_t stale_refused = 0;  // X lines: writes the store refused
  std::size_t torn_lines = 0;     // last lines without a newline (a killed writer)
  std::size_t kills = 0, starts = 0, terms = 0, pauses = 0;
  // Handler starts a paused process made after its SIGCONT (checked against its old claims and
  // epochs), and how many of them were on grains a newer claim had taken meanwhile.
  std::size_t after_resume_starts = 0, after_resume_reclaimed = 0;
  std::size_t possibly_applied = 0;  // "possibly delivered" calls that were applied (once)
  std::map<std::string, std::size_t> outcomes;  // "outcome code" -> calls, errors only
  // What broke, one line of evidence each.
  std::vector<std::string> violations_a, violations_b, overlaps_c, violations_d;
  std::size_t overlaps_c_paused = 0;   // of overlaps_c: explained by a pause (see above)
  std::vector<std::string> malformed;  // lines that do not parse (a harness bug: fails too)
  // Failover after each kill, per grain that was on the killed process (milliseconds), and the
  // grains that had no acknowledged call after their kill before the run ended.
  std::vector<double> failover_ms;
  std::size_t failover_unrecovered = 0;
  // The same measure from each clean stop (T) and from each pause (P).
  std::vector<double> stop_failover_ms, pause_failover_ms;
  std::size_t stop_unrecovered = 0, pause_unrecovered = 0;
  // Partitions (X lines) and heals (H lines): failover from each cut (as from a kill), the
  // time from each heal to the process's first handler on a new epoch, the heals after which it
  // started none before the run ended, and its handler starts after its heals (checked).
  std::size_t partitions = 0, heals = 0;
  std::vector<double> partition_failover_ms, heal_to_serving_ms;
  // For each partition after whose cut the process still started handlers before its heal
  // (requests reached it: only etcd was cut), the time from the cut to the last of them: how
  // long it went on serving (rule: under the TTL).
  std::vector<double> served_after_cut_ms;
  std::size_t partition_unrecovered = 0, heals_not_serving = 0, after_heal_starts = 0;

  // Stalls (W and U lines): handler starts of a stalled process after its release (checked as
  // after a SIGCONT), how many on grains a newer claim had taken meanwhile, the handler starts
  // of a stalled process while it was stalled (none if the stall held every worker), and the
  // failover from each stall.
  std::size_t stalls = 0;
  std::size_t after_release_starts = 0, after_release_reclaimed = 0;
  std::vector<std::string> stall_leaks;
  std::vector<double> stall_failover_ms;
  std::size_t stall_unrecovered = 0;
  // The leases as the test process saw them in etcd (leases.log, fault_leases.hpp), when the
  // run has that file: records that appeared and ended, the handler starts whose lease's end was
  // seen (each checked: it started before that end, else a violation of (a)), and handler
  // starts under an epoch no record of their node was seen with (a record that came and went
  // while the watch was being restarted; counted, not checked).
  bool leases_observed = false;
  std::size_t lease_puts = 0, lease_ends = 0, lease_checked = 0, lease_unseen = 0;
  // The grain claims it saw created (G lines), the activations held to theirs (its owner is
  // the activation's node, its lease one of that process's epochs) and those whose claim was
  // not seen.
  std::size_t claims_seen = 0, claims_checked = 0, claims_unseen = 0;
  // The store's faults (etcd.log): members killed (of them, the leader), restarted, and the
  // compactions; and the lines of that file that do not parse go to malformed.
  std::size_t etcd_kills = 0, etcd_leader_kills = 0, etcd_restarts = 0, compactions = 0;
  // failover_ms again, per kill: the K line's time (ns) -> the failover of each of its grains.
  std::map<std::int64_t, std::vector<double>> failover_ms_by_kill;

  bool clean() const {
    return violations_a.empty() && violations_b.empty() && violations_d.empty() &&
           malformed.empty();
  }
  // A few lines: the counts, the failover percentiles and the first violations of each kind.
  std::string summary(std::size_t max_examples = 10) const;
};

// Reads every evidence file under dir and checks (a)-(d).
check_report check_evidence(const std::filesystem::path& dir);

// The p-th percentile (0..100) of values by nearest rank; 0 for none.
double percentile(std::vector<double> values, double p);

}  // namespace akt::faults
