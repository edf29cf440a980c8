// Restart under the same name (issue 20): the fault cluster (fault_cluster.hpp: a real etcd,
// five akt_fault_node processes with lease TTL 2 s, and this process as a driver sending
// acknowledged tells to 50 grains), each node name on a loopback port of its own for the whole
// run. Every few seconds a node chosen at random gets SIGKILL and is started again at once under
// the same name and address (its port) while its old lease is still alive: every other time its
// join waits for that lease to expire, every other time it declares the old process gone
// (--old-process-gone: it revokes the old lease). The new process must never serve what the old
// one held. From evidence outside the nodes:
//   - the checker's (a): no handler line of the new process under the old process's epoch
//     (one epoch of a node, one process), every activation on a claim the test process saw
//     created in etcd for its node on a lease of its own process (never the old process's claim:
//     it is made anew), and no handler after the observed end of its lease; (b) and (d);
//   - this test: before each kill the driver asks the node's plain actor "probe-<node>" (a control:
//     it answers, and its line is in the old process's probe log); once the new process is
//     READY on the same address, it sends to the old process's probe pid again: no process's
//     probe log may hold those messages (remoting tells the incarnations apart).
// It reports, per variant, the time from the kill to READY and to the observed end of the old
// lease.
//
// Environment (for soaks; the defaults are CI's run), besides fault_cluster.hpp's:
//   AKT_FAULTS_SECONDS     how long the restarts go on (40)
//   AKT_FAULTS_RESTART_MS  the time from a restart's READY to the next kill (3000)

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "faults/fault_cluster.hpp"

namespace {

using namespace std::chrono_literals;
using akt::faults::apply_msg;
using akt::faults::env_or;
using akt::faults::fault_cluster;
using akt::faults::monotonic_ns;
using akt::faults::node_slot;

struct restart {
  std::string node;
  bool gone = false;          // --old-process-gone
  std::int64_t kill_ns = 0;   // when SIGKILL went
  std::int64_t ready_ns = 0;  // when the new process was seen READY
  long long old_pid = 0, new_pid = 0;
  std::string new_address;
};

// "M <node> <pid> <ns> <id>" lines of every probe log: id -> pids that ran it.
std::map<std::uint64_t, std::set<long long>> probe_runs(const std::filesystem::path& dir) {
  std::map<std::uint64_t, std::set<long long>> runs;
  if (!std::filesystem::is_directory(dir / "probes")) return runs;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "probes")) {
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      std::istringstream l(line);
      std::string tag, node;
      long long pid = 0;
      std::int64_t ns = 0;
      std::uint64_t id = 0;
      if (l >> tag >> node >> pid >> ns >> id && tag == "M") runs[id].insert(pid);
    }
  }
  return runs;
}

// From leases.log: the observed end of the record of `node` that was current at `at_ns` (the
// last put before it); -1 when none was seen.
std::int64_t lease_end_after(const std::filesystem::path& dir, const std::string& node,
                             std::int64_t at_ns) {
  std::ifstream in(dir / "leases.log");
  long long epoch = -1;
  std::map<long long, std::int64_t> deleted;
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    std::string tag, n, what;
    long long e = 0;
    std::int64_t ns = 0;
    if (!(l >> tag >> n >> e >> what >> ns) || tag != "L" || n != node) continue;
    if (what == "put" && ns <= at_ns) epoch = e;
    if (what == "delete") deleted[e] = ns;
  }
  const auto it = deleted.find(epoch);
  return it == deleted.end() ? -1 : it->second;
}

std::string ms_figures(std::vector<double> v) {
  if (v.empty()) return "none";
  char buf[96];
  std::snprintf(buf, sizeof buf, "p50 %.0f ms, max %.0f ms (%zu)", akt::faults::percentile(v, 50),
                akt::faults::percentile(v, 100), v.size());
  return buf;
}

TEST(Faults, RestartUnderTheSameNameNeverServesTheOldClaims) {
  const auto length = std::chrono::seconds(env_or("AKT_FAULTS_SECONDS", 40));
  const auto pace = std::chrono::milliseconds(env_or("AKT_FAULTS_RESTART_MS", 3000));
  fault_cluster c({.title = "restart under the same name and address, for " +
                            std::to_string(length.count()) + " s",
                   .fixed_ports = true});
  AKT_FAULTS_START_OR_END(c);
  c.start_traffic();

  std::vector<restart> restarts;
  std::vector<std::uint64_t> control_ok;  // probe ids the live process answered: (pid, id)
  std::map<std::uint64_t, long long> control_pid;
  std::vector<std::uint64_t> to_old;  // probe ids sent to an old incarnation's pid
  std::map<std::string, std::size_t> to_old_outcomes;
  std::uint64_t next_id = 1;
  akt::pid old_probe;
  node_slot* pending = nullptr;
  const node_slot* last = nullptr;
  const auto end = fault_cluster::clock::now() + length;
  auto next_at = fault_cluster::clock::now() + 2s;  // the traffic settles first
  auto ready_by = next_at;
  int variant = 0;
  c.run_for(length + 30s, [&] {
    const auto now = fault_cluster::clock::now();
    if (pending != nullptr) {
      if (!pending->ready) {
        if (now < ready_by) return true;
        ADD_FAILURE() << pending->name << " was not READY again within "
                      << fault_cluster::k_start_bound.count() << " s of its restart";
        return false;
      }
      restart& r = restarts.back();
      r.ready_ns = monotonic_ns();
      r.new_pid = pending->proc->pid();
      r.new_address = pending->proc->address();
      EXPECT_NE(r.new_address.find("@127.0.0.1:" + std::to_string(pending->port)),
                std::string::npos)
          << "the new process of " << pending->name
          << " is not on its old address: " << r.new_address;
      // The old incarnation's probe, now that its address belongs to the new process: the
      // message may fail any way (dead, a timeout); the new process must never run it.
      if (old_probe) {
        for (int i = 0; i < 3; ++i) {
          const std::uint64_t id = next_id++;
          to_old.push_back(id);
          auto answer = old_probe.ask<apply_msg>(apply_msg{id}, 1s);
          ++to_old_outcomes[answer ? "ok" : std::string(akt::to_string(answer.error().code()))];
        }
      }
      old_probe = akt::pid();
      last = pending;
      pending = nullptr;
      next_at = now + pace;
      return true;
    }
    if (now >= end) return false;
    if (now < next_at) return true;
    node_slot* victim = c.random_ready(last);
    if (victim == nullptr) return true;
    // The control: the live process's probe answers (and logs the message).
    const std::string node = "127.0.0.1:" + std::to_string(victim->port);
    if (auto p = c.driver().lookup(node, "probe-" + victim->name, 2s)) {
      const std::uint64_t id = next_id++;
      if (auto answer = p->ask<apply_msg>(apply_msg{id}, 2s); answer && answer->id == id) {
        control_ok.push_back(id);
        control_pid[id] = victim->proc->pid();
      }
      old_probe = *p;
    }
    restart r;
    r.node = victim->name;
    r.gone = (variant++ % 2) == 1;
    r.old_pid = victim->proc->pid();
    r.kill_ns = monotonic_ns();
    restarts.push_back(r);
    pending = victim;
    ready_by = now + fault_cluster::k_start_bound;
    return c.restart_same_address(*victim, r.gone);  // a failed start is reported
  });

  const akt::faults::check_report r = c.finish();
  c.expect_clean(r);
  EXPECT_GE(c.same_name_restarts(), 4) << "too few restarts";
  EXPECT_EQ(r.kills, static_cast<std::size_t>(c.same_name_restarts()));
  EXPECT_TRUE(r.leases_observed);
  EXPECT_GT(r.lease_checked, 0u) << r.summary();
  EXPECT_GT(r.claims_checked, 0u) << r.summary();

  // The probes: each control message in its (old) process's log, none sent to an old
  // incarnation in any log.
  const auto runs = probe_runs(c.dir());
  EXPECT_FALSE(control_ok.empty()) << "no probe answered before a kill";
  for (std::uint64_t id : control_ok) {
    const auto it = runs.find(id);
    EXPECT_TRUE(it != runs.end() && it->second == std::set<long long>{control_pid[id]})
        << "control probe message " << id << " is not in its process's log exactly";
  }
  std::size_t run_by_new = 0;
  for (std::uint64_t id : to_old) {
    if (const auto it = runs.find(id); it != runs.end()) {
      ++run_by_new;
      ADD_FAILURE() << "probe message " << id << ", sent to a killed incarnation's pid, was run by "
                    << "pid " << *it->second.begin();
    }
  }

  std::vector<double> ready_ms[2], lease_end_ms[2];
  int per_variant[2] = {0, 0};
  for (const restart& x : restarts) {
    if (x.ready_ns == 0) continue;
    const int v = x.gone ? 1 : 0;
    ++per_variant[v];
    ready_ms[v].push_back(static_cast<double>(x.ready_ns - x.kill_ns) / 1e6);
    const std::int64_t ended = lease_end_after(c.dir(), x.node, x.kill_ns);
    if (ended >= 0) lease_end_ms[v].push_back(static_cast<double>(ended - x.kill_ns) / 1e6);
  }
  std::string outcomes;
  for (const auto& [what, n] : to_old_outcomes)
    outcomes += " " + what + " x" + std::to_string(n) + ";";
  std::cout << "same-name restarts: " << c.same_name_restarts() << " (" << per_variant[0]
            << " waiting for the old lease, " << per_variant[1]
            << " declaring the old process gone)\n"
            << "  kill to READY on the same address: waiting " << ms_figures(ready_ms[0])
            << "; gone " << ms_figures(ready_ms[1]) << "\n"
            << "  kill to the old lease's observed end: waiting " << ms_figures(lease_end_ms[0])
            << "; gone " << ms_figures(lease_end_ms[1]) << "\n"
            << "  probe: " << control_ok.size() << " control answers; " << to_old.size()
            << " messages to old incarnations (" << outcomes << " ), run by a new process "
            << run_by_new << "\n"
            << "  activations checked against their claim " << r.claims_checked
            << " (claim not seen " << r.claims_unseen << "); handler starts checked against "
            << "their lease's end " << r.lease_checked << "\n";
  EXPECT_GT(per_variant[0], 0);
  EXPECT_GT(per_variant[1], 0);
  c.keep_or_remove_evidence(r);
}

}  // namespace
