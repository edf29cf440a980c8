#pragma once
// The fault harness's checker (issue 20): reads the evidence a run left in its directory (the
// formats are in fault_evidence.hpp) and proves, from files no node can take back:
//
//   (a) no handler of an activation (grain, token T) started after the first handler of a newer
//       activation (token T' > T) of the same grain started, and no claim (grain, token) was
//       activated by two processes: the claim a handler ran on was still current when it
//       started, as far as handler times show. (Whether a handler started after its node's
//       lease validity ended needs the lease's times, which the evidence does not hold yet.)
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
