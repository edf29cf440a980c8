// The fault harness's checker (fault_checker.hpp): parses the evidence files of a run and checks
// the invariants (a)-(d) of issue 20 on them, and measures failover after each kill.

#include "faults/fault_checker.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

namespace akt::faults {

namespace fs = std::filesystem;

namespace {

// The complete lines of a file; a last line without its newline (its writer was killed in the
// middle of it, or is still writing) is left out and counted in torn.
std::vector<std::string> lines_of(const fs::path& path, std::size_t& torn) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (begin < all.size()) {
    const std::size_t end = all.find('\n', begin);
    if (end == std::string::npos) {
      ++torn;
      break;
    }
    if (end > begin) out.push_back(all.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

struct handler_start {
  std::string node;
  long long pid = 0, epoch = 0;
  std::int64_t token = 0, ns = 0;
  std::string event, grain;
  std::uint64_t id = 0;
};

// One activation: the handlers one process ran under one claim of a grain.
struct activation {
  std::string grain, node;
  long long pid = 0;
  std::int64_t token = 0;
  std::int64_t first_ns = std::numeric_limits<std::int64_t>::max(), last_ns = 0;
  std::string last_event;  // of the last handler start (deactivate: it ended)
  std::size_t handlers = 0;
  std::string who() const {
    return grain + " token " + std::to_string(token) + " on " + node + " (pid " +
           std::to_string(pid) + ")";
  }
};

struct store_line {
  char tag = 0;
  std::int64_t token = 0;
  std::uint64_t id = 0;
  std::string node;
  long long pid = 0;
  std::int64_t ns = 0;
};

struct call {
  std::string grain;
  std::uint64_t id = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  std::string outcome, code;
};

struct fault {
  char tag = 0;
  std::string node;
  long long pid = 0;
  std::int64_t ns = 0;
};

std::string ms(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) / 1e9);
  return buf;
}

// Failover from the fault f: for each grain whose current activation at f (the newest claim
// whose first handler started before it) ran in f's process and had not ended, the time from f
// to the end of the first ok call that started after f; unrecovered counts the grains with none.
void measure_failover(const fault& f,
                      const std::map<std::string, std::vector<const activation*>>& by_grain,
                      const std::map<std::string, std::vector<call>>& calls_of,
                      std::vector<double>& times, std::size_t& unrecovered) {
  for (const auto& [grain, list] : by_grain) {
    const activation* current = nullptr;
    for (const activation* a : list) {
      if (a->first_ns <= f.ns && (current == nullptr || a->token > current->token)) current = a;
    }
    if (current == nullptr || current->node != f.node || current->pid != f.pid ||
        (current->last_event == "deactivate" && current->last_ns <= f.ns)) {
      continue;
    }
    bool recovered = false;
    const auto it = calls_of.find(grain);
    if (it != calls_of.end()) {
      for (const call& c : it->second) {  // sorted by start
        if (c.start_ns >= f.ns && c.outcome == "ok") {
          times.push_back(static_cast<double>(c.end_ns - f.ns) / 1e6);
          recovered = true;
          break;
        }
      }
    }
    if (!recovered) ++unrecovered;
  }
}

}  // namespace

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const std::size_t i = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return values[std::min(i, values.size() - 1)];
}

check_report check_evidence(const fs::path& dir) {
  check_report r;
  auto bad = [&](const fs::path& file, const std::string& line) {
    r.malformed.push_back(file.filename().string() + ": '" + line + "'");
  };

  // ---- the faults (first: the pauses explain overlaps and bound handlers below) ----
  std::vector<fault> faults;  // K, T and P lines
  struct pause {
    std::string node;
    long long pid = 0;
    std::int64_t stop_ns = 0, cont_ns = -1;  // cont_ns: -1 until its R line
  };
  std::vector<pause> pauses;
  std::vector<pause> stalls;        // W (stop_ns) and U (cont_ns) lines
  std::vector<fault> stall_faults;  // W lines, for the failover
  struct partition {
    fault cut;                  // the X line
    std::int64_t ttl_ns = 0;    // its lease TTL
    std::int64_t heal_ns = -1;  // -1 until its H line
  };
  std::vector<partition> partitions;
  for (const std::string& line : lines_of(dir / "faults.log", r.torn_lines)) {
    std::istringstream in(line);
    std::string tag;
    fault f;
    // Partitions: X <node> <pid> <ns> <ttl-ms> (cut), H <node> <pid> <ns> (healed).
    if (line.size() > 1 && (line[0] == 'X' || line[0] == 'H') && line[1] == ' ') {
      long long ttl_ms = 0;
      if (!(in >> tag >> f.node >> f.pid >> f.ns) || (line[0] == 'X' && !(in >> ttl_ms))) {
        bad(dir / "faults.log", line);
        continue;
      }
      f.tag = line[0];
      if (f.tag == 'X') {
        ++r.partitions;
        partitions.push_back({f, ttl_ms * 1'000'000, -1});
      } else {
        ++r.heals;
        for (partition& p : partitions)
          if (p.cut.pid == f.pid && p.heal_ns < 0) p.heal_ns = f.ns;
      }
      continue;
    }
    if (!(in >> tag >> f.node >> f.pid >> f.ns) || tag.size() != 1 ||
        std::string_view("KSTEPRWU").find(tag[0]) == std::string_view::npos) {
      bad(dir / "faults.log", line);
      continue;
    }
    f.tag = tag[0];
    switch (f.tag) {
      case 'K':
        ++r.kills;
        break;
      case 'S':
        ++r.starts;
        break;
      case 'T':
        ++r.terms;
        break;
      case 'P':
        ++r.pauses;
        pauses.push_back({f.node, f.pid, f.ns, -1});
        break;
      case 'R':
        for (pause& p : pauses)
          if (p.pid == f.pid && p.cont_ns < 0) p.cont_ns = f.ns;
        break;
      case 'W':
        ++r.stalls;
        stalls.push_back({f.node, f.pid, f.ns, -1});
        stall_faults.push_back(f);
        break;
      case 'U':
        for (pause& p : stalls)
          if (p.pid == f.pid && p.cont_ns < 0) p.cont_ns = f.ns;
        break;
      default:
        break;
    }
    if (f.tag == 'K' || f.tag == 'T' || f.tag == 'P') faults.push_back(f);
  }

  // ---- the store's faults (etcd.log): counted ----
  for (const std::string& line : lines_of(dir / "etcd.log", r.torn_lines)) {
    std::istringstream in(line);
    std::string tag, member, what;
    long long pid = 0;
    std::int64_t ns = 0;
    if (!(in >> tag >> member >> pid >> ns) || (tag != "M" && tag != "N" && tag != "Z")) {
      bad(dir / "etcd.log", line);
      continue;
    }
    in >> what;
    if (tag == "M") {
      if (what != "leader" && what != "follower") {
        bad(dir / "etcd.log", line);
        continue;
      }
      ++r.etcd_kills;
      if (what == "leader") ++r.etcd_leader_kills;
    } else if (tag == "N") {
      ++r.etcd_restarts;
    } else {
      ++r.compactions;
    }
  }

  // ---- handler starts, grouped into activations ----
  std::vector<handler_start> starts;
  std::map<std::tuple<std::string, std::int64_t, std::string, long long>, activation> acts;
  if (fs::is_directory(dir / "handlers")) {
    for (const auto& entry : fs::directory_iterator(dir / "handlers")) {
      for (const std::string& line : lines_of(entry.path(), r.torn_lines)) {
        std::istringstream in(line);
        std::string tag;
        handler_start h;
        if (!(in >> tag >> h.node >> h.pid >> h.epoch >> h.token >> h.ns >> h.event >> h.grain >>
              h.id) ||
            tag != "H") {
          bad(entry.path(), line);
          continue;
        }
        ++r.handler_starts;
        starts.push_back(h);
        activation& a = acts[{h.grain, h.token, h.node, h.pid}];
        if (a.handlers == 0) {
          a.grain = h.grain;
          a.node = h.node;
          a.pid = h.pid;
          a.token = h.token;
        }
        ++a.handlers;
        a.first_ns = std::min(a.first_ns, h.ns);
        if (h.ns >= a.last_ns) {
          a.last_ns = h.ns;
          a.last_event = h.event;
        }
      }
    }
  }
  r.activations = acts.size();
  std::map<std::string, std::vector<const activation*>> by_grain;
  for (const auto& [key, a] : acts) by_grain[a.grain].push_back(&a);

  for (auto& [grain, list] : by_grain) {
    // (a) one claim, one process.
    std::sort(list.begin(), list.end(),
              [](const activation* x, const activation* y) { return x->token < y->token; });
    for (std::size_t i = 1; i < list.size(); ++i) {
      if (list[i]->token == list[i - 1]->token) {
        r.violations_a.push_back("(a) one claim activated by two processes: " + list[i - 1]->who() +
                                 " and " + list[i]->who());
      }
    }
    // (a) no handler of token T after the first handler of a newer token T' > T: walk from the
    // newest down, keeping the earliest first start among the newer ones.
    const activation* earliest_newer = nullptr;
    for (std::size_t i = list.size(); i-- > 0;) {
      const activation* a = list[i];
      if (earliest_newer != nullptr && earliest_newer->token > a->token &&
          a->last_ns > earliest_newer->first_ns) {
        r.violations_a.push_back("(a) " + a->who() + " started a handler at " + ms(a->last_ns) +
                                 ", after " + earliest_newer->who() + " started its first at " +
                                 ms(earliest_newer->first_ns));
      }
      if (earliest_newer == nullptr || a->first_ns < earliest_newer->first_ns) earliest_newer = a;
    }
    // (c) overlapping intervals, in order of first start.
    std::vector<const activation*> by_start = list;
    std::sort(by_start.begin(), by_start.end(),
              [](const activation* x, const activation* y) { return x->first_ns < y->first_ns; });
    const activation* reaching = nullptr;  // the one whose interval reaches furthest so far
    for (const activation* a : by_start) {
      if (reaching != nullptr && a->first_ns <= reaching->last_ns) {
        for (const pause& p : pauses) {
          if (p.pid == reaching->pid && p.stop_ns >= reaching->first_ns &&
              p.stop_ns <= a->first_ns) {
            ++r.overlaps_c_paused;
            break;
          }
        }
        r.overlaps_c.push_back("(c) " + reaching->who() + " [" + ms(reaching->first_ns) + ", " +
                               ms(reaching->last_ns) + "] overlaps " + a->who() + " [" +
                               ms(a->first_ns) + ", " + ms(a->last_ns) + "]");
      }
      if (reaching == nullptr || a->last_ns > reaching->last_ns) reaching = a;
    }
  }

  // ---- (a) after a process came back: a pause's SIGCONT, a stall's release, a heal ----
  // Every handler it starts afterwards is on a claim activated after the fault began (never an
  // old one) and carries an epoch greater than every epoch its handlers carried before (it
  // fenced itself and joined again). `old_claim` and `returned` name the fault in the two
  // violations' texts, `fault_text` says when it was. Returns whether another process had claimed
  // h's grain meanwhile.
  auto describe = [&](const handler_start& h) {
    return h.grain + " token " + std::to_string(h.token) + " epoch " + std::to_string(h.epoch) +
           " on " + h.node + " (pid " + std::to_string(h.pid) + ") " + h.event + " at " + ms(h.ns);
  };
  auto epoch_before = [&](long long pid, std::int64_t fault_ns) {
    long long old_epoch = -1;
    for (const handler_start& h : starts)
      if (h.pid == pid && h.ns < fault_ns) old_epoch = std::max(old_epoch, h.epoch);
    return old_epoch;
  };
  auto check_came_back = [&](const handler_start& h, std::int64_t fault_ns, long long old_epoch,
                             const std::string& old_claim, const std::string& returned,
                             const std::string& fault_text) {
    const auto it = acts.find({h.grain, h.token, h.node, h.pid});
    if (it != acts.end() && it->second.first_ns < fault_ns) {
      r.violations_a.push_back("(a) " + describe(h) +
                               ": a handler on a claim activated before the " + old_claim + " (" +
                               fault_text + ")");
    }
    bool reclaimed = false;
    for (const activation* other : by_grain[h.grain]) {
      if (other->pid != h.pid && other->first_ns >= fault_ns && other->first_ns <= h.ns)
        reclaimed = true;
    }
    if (h.epoch <= old_epoch) {
      r.violations_a.push_back("(a) " + describe(h) + ": not a new epoch " + returned + " (" +
                               fault_text + "; epoch before it " + std::to_string(old_epoch) +
                               (reclaimed ? "; the grain was claimed elsewhere meanwhile)" : ")"));
    }
    return reclaimed;
  };

  for (const pause& p : pauses) {
    if (p.cont_ns < 0) continue;
    const long long old_epoch = epoch_before(p.pid, p.stop_ns);
    const std::string pause_text = "paused " + ms(p.stop_ns) + " to " + ms(p.cont_ns);
    for (const handler_start& h : starts) {
      if (h.pid != p.pid || h.ns <= p.cont_ns) continue;
      ++r.after_resume_starts;
      if (check_came_back(h, p.stop_ns, old_epoch, "pause, after SIGCONT", "after SIGCONT",
                          pause_text))
        ++r.after_resume_reclaimed;
    }
  }

  // A stall besides: no handler at all while every worker was stuck.
  for (const pause& p : stalls) {
    const std::string stall_text =
        "stalled " + ms(p.stop_ns) + " to " + (p.cont_ns < 0 ? "the end" : ms(p.cont_ns));
    const long long old_epoch = epoch_before(p.pid, p.stop_ns);
    for (const handler_start& h : starts) {
      if (h.pid != p.pid || h.ns <= p.stop_ns) continue;
      if (p.cont_ns < 0 || h.ns <= p.cont_ns) {
        r.stall_leaks.push_back(describe(h) + ": a handler while every worker was stuck (" +
                                stall_text + ")");
        continue;
      }
      ++r.after_release_starts;
      if (check_came_back(h, p.stop_ns, old_epoch, "stall, after its release",
                          "after the stall's release", stall_text))
        ++r.after_release_reclaimed;
    }
  }

  // ---- (a) against the leases etcd showed (leases.log, written by the test process) ----
  // A handler line of node N under epoch E that started after the observed delete of N's record
  // of epoch E started after that lease ended (the observation is late, never early).
  if (fs::exists(dir / "leases.log")) {
    r.leases_observed = true;
    std::map<std::pair<std::string, long long>, std::int64_t> ended;  // (node, epoch) -> ns
    std::set<std::pair<std::string, long long>> appeared;
    for (const std::string& line : lines_of(dir / "leases.log", r.torn_lines)) {
      if (!line.empty() && line[0] == 'G') continue;  // a claim: read below
      std::istringstream in(line);
      std::string tag, node, what;
      long long epoch = 0;
      std::int64_t ns = 0;
      if (!(in >> tag >> node >> epoch >> what >> ns) || tag != "L" ||
          (what != "put" && what != "delete")) {
        bad(dir / "leases.log", line);
        continue;
      }
      if (what == "put") {
        ++r.lease_puts;
        appeared.insert({node, epoch});
      } else {
        ++r.lease_ends;
        auto [it, fresh] = ended.emplace(std::make_pair(node, epoch), ns);
        if (!fresh) it->second = std::min(it->second, ns);
      }
    }
    for (const handler_start& h : starts) {
      const auto key = std::make_pair(h.node, h.epoch);
      if (!appeared.contains(key)) ++r.lease_unseen;
      const auto it = ended.find(key);
      if (it == ended.end()) continue;
      ++r.lease_checked;
      if (h.ns > it->second) {
        r.violations_a.push_back("(a) " + h.grain + " token " + std::to_string(h.token) + " " +
                                 h.event + " on " + h.node + " (pid " + std::to_string(h.pid) +
                                 ") under epoch " + std::to_string(h.epoch) + " started at " +
                                 ms(h.ns) + ", after etcd showed that lease's record deleted at " +
                                 ms(it->second));
      }
    }
  }

  // ---- (a) one epoch, one process; and each activation on a claim of its own ----
  // An epoch is the lease of one join of one process: handler lines of two processes of a node
  // under one epoch mean a process ran on a lease it never held (a restart under the same name
  // serving the old one's). Then, for each activation whose claim the test process saw created (G
  // lines in leases.log): the claim names its node as owner and lives on a lease that process
  // wrote handler lines under, never an older process's lease.
  std::map<std::pair<std::string, long long>, std::set<long long>> pids_of_epoch;
  std::map<long long, std::set<long long>> epochs_of_pid;
  for (const handler_start& h : starts) {
    if (h.epoch <= 0) continue;
    pids_of_epoch[{h.node, h.epoch}].insert(h.pid);
    epochs_of_pid[h.pid].insert(h.epoch);
  }
  for (const auto& [key, pids] : pids_of_epoch) {
    if (pids.size() < 2) continue;
    std::string who;
    for (long long pid : pids) who += (who.empty() ? "" : ", ") + std::to_string(pid);
    r.violations_a.push_back("(a) " + key.first + "'s epoch " + std::to_string(key.second) +
                             " in the handler lines of several of its processes: pids " + who);
  }
  if (fs::exists(dir / "leases.log")) {
    struct claim_seen {
      std::string owner;
      long long epoch = 0;
    };
    std::map<std::pair<std::string, std::int64_t>, claim_seen> claims;
    std::size_t ignored_torn = 0;  // counted once, by the lease pass above
    for (const std::string& line : lines_of(dir / "leases.log", ignored_torn)) {
      if (line.empty() || line[0] != 'G') continue;
      std::istringstream in(line);
      std::string tag, grain;
      std::int64_t token = 0, ns = 0;
      claim_seen cl;
      if (!(in >> tag >> grain >> token >> cl.owner >> cl.epoch >> ns) || tag != "G") {
        bad(dir / "leases.log", line);
        continue;
      }
      ++r.claims_seen;
      claims[{grain, token}] = cl;
    }
    for (const auto& [key, a] : acts) {
      const auto it = claims.find({a.grain, a.token});
      if (it == claims.end()) {
        ++r.claims_unseen;
        continue;
      }
      ++r.claims_checked;
      const claim_seen& cl = it->second;
      const std::set<long long>& own = epochs_of_pid[a.pid];
      if (cl.owner != a.node) {
        r.violations_a.push_back("(a) " + a.who() + " ran on a claim made for " + cl.owner);
      } else if (!own.contains(cl.epoch)) {
        r.violations_a.push_back("(a) " + a.who() + " ran on a claim on lease " +
                                 std::to_string(cl.epoch) + ", not one of that process's epochs");
      }
    }
  }

  // ---- (a) around a partition: nothing from cut + TTL to the heal, then a new epoch ----
  for (const partition& p : partitions) {
    const std::int64_t fenced_ns = p.cut.ns + p.ttl_ns;
    const std::int64_t heal_ns =
        p.heal_ns < 0 ? std::numeric_limits<std::int64_t>::max() : p.heal_ns;
    const std::string cut_text =
        "cut " + ms(p.cut.ns) + " (TTL " + ms(p.ttl_ns) + "), " +
        (p.heal_ns < 0 ? std::string("never healed") : "healed " + ms(p.heal_ns));
    const long long old_epoch = epoch_before(p.cut.pid, p.cut.ns);
    std::int64_t first_new_ns = -1, last_served_ns = -1;
    for (const handler_start& h : starts) {
      if (h.pid == p.cut.pid && h.ns > p.cut.ns && h.ns <= heal_ns)
        last_served_ns = std::max(last_served_ns, h.ns);
    }
    if (last_served_ns >= 0)
      r.served_after_cut_ms.push_back(static_cast<double>(last_served_ns - p.cut.ns) / 1e6);
    for (const handler_start& h : starts) {
      if (h.pid != p.cut.pid || h.ns <= fenced_ns) continue;
      if (h.ns <= heal_ns) {
        r.violations_a.push_back("(a) " + describe(h) +
                                 ": a handler while partitioned, past the lease (" + cut_text +
                                 ")");
        continue;
      }
      ++r.after_heal_starts;
      if (heal_ns - p.cut.ns <= p.ttl_ns) continue;  // a short cut: the lease may have held
      (void)check_came_back(h, p.cut.ns, old_epoch, "partition, after it", "after the partition",
                            cut_text);
      if (h.epoch > old_epoch && (first_new_ns < 0 || h.ns < first_new_ns)) first_new_ns = h.ns;
    }
    if (p.heal_ns < 0) continue;
    if (first_new_ns >= 0) {
      r.heal_to_serving_ms.push_back(static_cast<double>(first_new_ns - p.heal_ns) / 1e6);
    } else {
      ++r.heals_not_serving;
    }
  }

  // ---- the fenced store ----
  std::map<std::pair<std::string, std::uint64_t>, std::size_t> applied;   // (grain, id) -> times
  std::map<std::pair<std::string, std::uint64_t>, long long> applied_by;  // -> the last pid
  std::set<std::string> grains;
  for (const auto& [grain, list] : by_grain) grains.insert(grain);
  if (fs::is_directory(dir / "store")) {
    for (const auto& entry : fs::directory_iterator(dir / "store")) {
      const std::string grain = entry.path().filename().string();
      grains.insert(grain);
      std::int64_t highest = 0;
      for (const std::string& line : lines_of(entry.path(), r.torn_lines)) {
        std::istringstream in(line);
        std::string tag;
        store_line s;
        if (!(in >> tag >> s.token >> s.id >> s.node >> s.pid >> s.ns) || tag.size() != 1 ||
            (tag[0] != 'O' && tag[0] != 'A' && tag[0] != 'X')) {
          bad(entry.path(), line);
          continue;
        }
        s.tag = tag[0];
        if (s.tag == 'X') {
          ++r.stale_refused;
          if (s.token >= highest) {
            r.violations_b.push_back(
                "(b) " + grain + ": the store refused token " + std::to_string(s.token) + " from " +
                s.node + " though the highest it had accepted was " + std::to_string(highest));
          }
          continue;
        }
        // (b) an accepted write never carries a token below one accepted before it.
        if (s.token < highest) {
          r.violations_b.push_back("(b) " + grain + ": the store accepted " +
                                   (s.tag == 'A' ? "message " + std::to_string(s.id) : "an open") +
                                   " with stale token " + std::to_string(s.token) + " from " +
                                   s.node + " (pid " + std::to_string(s.pid) + ") at " + ms(s.ns) +
                                   " after token " + std::to_string(highest));
        }
        highest = std::max(highest, s.token);
        if (s.tag == 'A') {
          ++r.applied;
          ++applied[{grain, s.id}];
          applied_by[{grain, s.id}] = s.pid;
        }
      }
    }
  }
  r.grains = grains.size();

  // ---- the driver's calls, against the store (d) ----
  std::map<std::pair<std::string, std::uint64_t>, call> calls;
  std::map<std::string, std::vector<call>> calls_of;
  for (const std::string& line : lines_of(dir / "calls.log", r.torn_lines)) {
    std::istringstream in(line);
    std::string tag;
    call c;
    if (!(in >> tag >> c.grain >> c.id >> c.start_ns >> c.end_ns >> c.outcome >> c.code) ||
        tag != "C" ||
        (c.outcome != "ok" && c.outcome != "refused" && c.outcome != "store_refused" &&
         c.outcome != "possibly")) {
      bad(dir / "calls.log", line);
      continue;
    }
    if (!calls.emplace(std::make_pair(c.grain, c.id), c).second) {
      bad(dir / "calls.log", line + " (the id was sent twice)");
      continue;
    }
    ++r.calls;
    if (c.outcome == "ok") ++r.ok;
    if (c.outcome == "refused") ++r.refused;
    if (c.outcome == "store_refused") ++r.store_refused;
    if (c.outcome == "possibly") ++r.possibly;
    if (c.outcome != "ok") ++r.outcomes[c.outcome + " " + c.code];
    calls_of[c.grain].push_back(c);
  }
  for (const auto& [key, c] : calls) {
    auto it = applied.find(key);
    const std::size_t times = it == applied.end() ? 0 : it->second;
    const std::string what = c.grain + " message " + std::to_string(c.id) + " (" + c.outcome +
                             ", " + c.code + ", sent at " + ms(c.start_ns) + ")";
    if (c.outcome == "ok" && times != 1) {
      r.violations_d.push_back("(d) acknowledged " + what + " applied " + std::to_string(times) +
                               " times");
    } else if (c.outcome == "possibly") {
      if (times > 1)
        r.violations_d.push_back("(d) " + what + " applied " + std::to_string(times) + " times");
      if (times == 1) ++r.possibly_applied;
    } else if ((c.outcome == "refused" || c.outcome == "store_refused") && times != 0) {
      r.violations_d.push_back("(d) " + what + " was refused but applied " + std::to_string(times) +
                               " times");
    }
  }
  for (const auto& [key, times] : applied) {
    if (!calls.contains(key)) {
      r.violations_d.push_back("(d) " + key.first + " message " + std::to_string(key.second) +
                               " applied " + std::to_string(times) + " times, never sent");
    }
  }

  // ---- failover after each kill, clean stop and pause ----
  for (auto& [grain, list] : calls_of) {
    std::sort(list.begin(), list.end(),
              [](const call& x, const call& y) { return x.start_ns < y.start_ns; });
  }
  for (const fault& k : faults) {
    std::vector<double>& times = k.tag == 'K'   ? r.failover_ms
                                 : k.tag == 'T' ? r.stop_failover_ms
                                                : r.pause_failover_ms;
    std::size_t& unrecovered = k.tag == 'K'   ? r.failover_unrecovered
                               : k.tag == 'T' ? r.stop_unrecovered
                                              : r.pause_unrecovered;
    for (const auto& [grain, list] : by_grain) {
      // The grain's current activation at the kill: the newest claim whose first handler
      // started before it.
      const activation* current = nullptr;
      for (const activation* a : list) {
        if (a->first_ns <= k.ns && (current == nullptr || a->token > current->token)) current = a;
      }
      if (current == nullptr || current->node != k.node || current->pid != k.pid ||
          (current->last_event == "deactivate" && current->last_ns <= k.ns)) {
        continue;
      }
      bool recovered = false;
      for (const call& c : calls_of[grain]) {
        if (c.start_ns >= k.ns && c.outcome == "ok") {
          times.push_back(static_cast<double>(c.end_ns - k.ns) / 1e6);
          if (k.tag == 'K') {
            r.failover_ms_by_kill[k.ns].push_back(static_cast<double>(c.end_ns - k.ns) / 1e6);
          }
          recovered = true;
          break;
        }
      }
      if (!recovered) ++unrecovered;
    }
  }
  for (const fault& w : stall_faults)
    measure_failover(w, by_grain, calls_of, r.stall_failover_ms, r.stall_unrecovered);
  // Failover from each cut, measured as from a kill but to the first ok call served by another
  // process (a node cut from etcd only goes on serving until its lease validity ends).
  for (const partition& p : partitions) {
    for (const auto& [grain, list] : by_grain) {
      const activation* current = nullptr;
      for (const activation* a : list) {
        if (a->first_ns <= p.cut.ns && (current == nullptr || a->token > current->token))
          current = a;
      }
      if (current == nullptr || current->node != p.cut.node || current->pid != p.cut.pid ||
          (current->last_event == "deactivate" && current->last_ns <= p.cut.ns)) {
        continue;
      }
      bool recovered = false;
      for (const call& c : calls_of[grain]) {
        const auto by = applied_by.find({grain, c.id});
        if (c.start_ns >= p.cut.ns && c.outcome == "ok" && by != applied_by.end() &&
            by->second != p.cut.pid) {
          r.partition_failover_ms.push_back(static_cast<double>(c.end_ns - p.cut.ns) / 1e6);
          recovered = true;
          break;
        }
      }
      if (!recovered) ++r.partition_unrecovered;
    }
  }
  return r;
}

std::string check_report::summary(std::size_t max_examples) const {
  std::ostringstream out;
  out << "calls " << calls << ": ok " << ok << ", refused " << refused << ", store_refused "
      << store_refused << ", possibly delivered " << possibly << " (" << possibly_applied
      << " of them applied)\n";
  if (!outcomes.empty()) {
    out << "errors:";
    for (const auto& [what, n] : outcomes) out << " " << what << " x" << n << ";";
    out << "\n";
  }
  out << "handler starts " << handler_starts << " in " << activations << " activations of "
      << grains << " grains; applied " << applied << ", stale writes refused by the store "
      << stale_refused << ", torn lines " << torn_lines << "\n";
  out << "kills " << kills << ", starts " << starts << "; failover after a kill ("
      << failover_ms.size() << " grains";
  if (failover_unrecovered > 0) out << ", " << failover_unrecovered << " without a later ok call";
  char buf[128];
  std::snprintf(buf, sizeof buf, "): p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
                percentile(failover_ms, 50), percentile(failover_ms, 99),
                percentile(failover_ms, 100));
  out << buf;
  if (terms > 0 || pauses > 0) {
    out << "clean stops " << terms << ", pauses " << pauses << "; handler starts after SIGCONT "
        << after_resume_starts << " (" << after_resume_reclaimed
        << " on grains claimed elsewhere meanwhile)\n";
    for (const auto& [what, list, lost] :
         {std::tuple{"a clean stop", &stop_failover_ms, stop_unrecovered},
          std::tuple{"a pause", &pause_failover_ms, pause_unrecovered}}) {
      if (list->empty() && lost == 0) continue;
      std::snprintf(buf, sizeof buf,
                    "failover after %s (%zu grains, %zu without a later ok call): p50 %.0f ms, "
                    "p99 %.0f ms, max %.0f ms\n",
                    what, list->size(), lost, percentile(*list, 50), percentile(*list, 99),
                    percentile(*list, 100));
      out << buf;
    }
  }
  if (stalls > 0) {
    std::snprintf(buf, sizeof buf,
                  "stalls %zu; handler starts after the release %zu (%zu on grains claimed "
                  "elsewhere meanwhile), during a stall %zu\n",
                  stalls, after_release_starts, after_release_reclaimed, stall_leaks.size());
    out << buf;
    std::snprintf(buf, sizeof buf,
                  "failover after a stall (%zu grains, %zu without a later ok call): p50 %.0f "
                  "ms, p99 %.0f ms, max %.0f ms\n",
                  stall_failover_ms.size(), stall_unrecovered, percentile(stall_failover_ms, 50),
                  percentile(stall_failover_ms, 99), percentile(stall_failover_ms, 100));
    out << buf;
  }
  if (leases_observed) {
    out << "leases seen in etcd: " << lease_puts << " records, " << lease_ends
        << " ended; handler starts checked against their lease's end " << lease_checked
        << ", under an epoch etcd never showed " << lease_unseen << "\n";
    out << "claims seen in etcd: " << claims_seen << "; activations checked against their claim "
        << claims_checked << ", on a claim not seen " << claims_unseen << "\n";
  }
  if (partitions > 0 || heals > 0) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "partitions %zu, heals %zu; failover after a cut (%zu grains, %zu without a "
                  "later ok call): p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
                  partitions, heals, partition_failover_ms.size(), partition_unrecovered,
                  percentile(partition_failover_ms, 50), percentile(partition_failover_ms, 99),
                  percentile(partition_failover_ms, 100));
    out << text;
    if (!served_after_cut_ms.empty()) {
      std::snprintf(text, sizeof text,
                    "handlers after a cut, until its heal (%zu partitions): the last p50 %.0f ms, "
                    "max %.0f ms after the cut\n",
                    served_after_cut_ms.size(), percentile(served_after_cut_ms, 50),
                    percentile(served_after_cut_ms, 100));
      out << text;
    }
    std::snprintf(text, sizeof text,
                  "after a heal: handler starts %zu; serving again on a new epoch after %zu heals "
                  "(%zu not before the end): p50 %.0f ms, max %.0f ms after the heal\n",
                  after_heal_starts, heal_to_serving_ms.size(), heals_not_serving,
                  percentile(heal_to_serving_ms, 50), percentile(heal_to_serving_ms, 100));
    out << text;
  }
  if (etcd_kills > 0 || etcd_restarts > 0 || compactions > 0) {
    out << "etcd members killed " << etcd_kills << " (" << etcd_leader_kills
        << " leading), restarted " << etcd_restarts << "; compactions " << compactions << "\n";
  }
  out << "violations: (a) " << violations_a.size() << ", (b) " << violations_b.size() << ", (d) "
      << violations_d.size() << "; overlaps (c) " << overlaps_c.size() << " (" << overlaps_c_paused
      << " explained by a pause); malformed lines " << malformed.size() << "\n";
  for (const auto* list :
       {&violations_a, &violations_b, &overlaps_c, &violations_d, &malformed, &stall_leaks}) {
    for (std::size_t i = 0; i < list->size() && i < max_examples; ++i)
      out << "  " << (*list)[i] << "\n";
    if (list->size() > max_examples)
      out << "  ... and " << list->size() - max_examples << " more\n";
  }
  return out.str();
}

}  // namespace akt::faults
