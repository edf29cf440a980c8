// The cluster under kill -9 (issue 20, the first fault of the harness): a real etcd, five
// akt_fault_node processes (lease TTL 2 s) hosting the counter grains, and this process as a
// cluster member that hosts no grain and sends acknowledged tells to 50 grains without pause.
// Every few seconds one node, chosen at random, gets SIGKILL and is started again under the
// same name. Then everything is stopped by pid and the checker (fault_checker.hpp) proves from
// the evidence files that no stale handler started (a), no stale write was accepted (b), and
// every acknowledged message was applied exactly once (d); it reports overlapping activations
// (c) and the failover times after the kills.
//
// Environment (for soaks; the defaults are CI's run):
//   AKT_FAULTS_SECONDS   how long the traffic and the kills run (60)
//   AKT_FAULTS_KILL_MS   the time between two kills (4000)
//   AKT_FAULTS_GRAINS    grains the driver sends to, one thread each (50)
//   AKT_FAULTS_PACE_MS   the pause of a grain's thread between two calls (100)
//   AKT_FAULTS_SEED      the seed of the choice of victims (random by default; printed)
//   AKT_FAULTS_KEEP      when set, the evidence directory is kept even when the test passes

#include <gtest/gtest.h>

#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/etcd/etcd_store.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "faults/fault_checker.hpp"
#include "faults/fault_evidence.hpp"
#include "faults/fault_messages.hpp"
#include "faults/fault_process.hpp"
#include "support/etcd_process.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using akt::errc;
using akt::test::eventually;
using steady = std::chrono::steady_clock;

long env_or(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// How the driver counts a call's outcome (the checker's (d) holds it to this):
//   ok            acknowledged: applied exactly once
//   store_refused the grain ran and the fenced store refused the write (or the activation
//                 opening the grain): never applied
//   refused       refused before any handler ran (the refusal mark, unreachable, not_owner):
//                 never applied
//   possibly      anything else (connection_lost, request_timeout, a remote dead, ...): it may
//                 have run, so it is never sent again: applied at most once
const char* classify(const akt::error& e) {
  if (!e) return "ok";
  if (e.code() == errc::invalid_argument &&
      e.detail().find(akt::faults::k_store_refused) != std::string_view::npos) {
    return "store_refused";
  }
  if (akt::detail::error_access::refused(e) || e.code() == errc::unreachable ||
      e.code() == errc::not_owner) {
    return "refused";
  }
  return "possibly";
}

// A directory for the run's evidence, on tmpfs where there is one.
fs::path make_evidence_dir() {
  fs::path base = "/dev/shm";
  if (!fs::is_directory(base)) base = fs::temp_directory_path();
  std::string templ = (base / "akt-faults-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) return {};
  fs::create_directories(fs::path(templ) / "handlers");
  fs::create_directories(fs::path(templ) / "store");
  fs::create_directories(fs::path(templ) / "logs");
  return templ;
}

// The resident set of a process in MiB (/proc/<pid>/status, VmRSS); -1 when it cannot be read.
double rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return -1;
}

// One node name and its current process.
struct node_slot {
  std::string name;
  std::unique_ptr<akt::faults::node_process> proc;
  int starts = 0;
  bool ready = false;
};

TEST(Faults, KillNineUnderTraffic) {
  if (akt::test::etcd_binary().empty()) GTEST_SKIP() << "etcd is not installed (scripts/deps.sh)";
  const auto run_for = std::chrono::seconds(env_or("AKT_FAULTS_SECONDS", 60));
  const auto kill_every = std::chrono::milliseconds(env_or("AKT_FAULTS_KILL_MS", 4000));
  const int n_grains = static_cast<int>(env_or("AKT_FAULTS_GRAINS", 50));
  const auto pace = std::chrono::milliseconds(env_or("AKT_FAULTS_PACE_MS", 100));
  const unsigned seed =
      static_cast<unsigned>(env_or("AKT_FAULTS_SEED", static_cast<long>(std::random_device{}())));
  constexpr int k_nodes = 5;
  constexpr auto k_start_bound = 60s;  // a node's start under ASan, 2 shared cores

  ASSERT_FALSE(akt::faults::register_fault_messages());
  std::unique_ptr<akt::test::etcd_process> etcd;
  try {
    etcd = std::make_unique<akt::test::etcd_process>();
  } catch (const std::exception& e) {
    FAIL() << "etcd did not start: " << e.what();
  }
  const fs::path dir = make_evidence_dir();
  ASSERT_FALSE(dir.empty());
  std::printf("evidence in %s, seed %u\n", dir.c_str(), seed);
  const std::string cluster = "faults" + std::to_string(::getpid());
  const int faults_fd = akt::faults::open_append(dir / "faults.log");
  const int calls_fd = akt::faults::open_append(dir / "calls.log");
  ASSERT_GE(faults_fd, 0);
  ASSERT_GE(calls_fd, 0);
  auto fault_line = [&](char tag, const node_slot& s) {
    (void)akt::faults::append_line(faults_fd, std::string(1, tag) + " " + s.name + " " +
                                                  std::to_string(s.proc->pid()) + " " +
                                                  std::to_string(akt::faults::monotonic_ns()));
  };

  // ---- the nodes ----
  std::vector<node_slot> nodes(k_nodes);
  auto start_node = [&](node_slot& s) {
    std::string why;
    const fs::path log = dir / "logs" / (s.name + "-" + std::to_string(s.starts++) + ".log");
    s.ready = false;
    s.proc = akt::faults::node_process::start(
        {AKT_FAULT_NODE_PATH, "--etcd", etcd->endpoint(), "--cluster", cluster, "--node", s.name,
         "--dir", dir.string(), "--ttl", "2"},
        log, why);
    if (!s.proc) ADD_FAILURE() << s.name << ": " << why;
    return s.proc != nullptr;
  };
  // Notes the nodes that became ready; a node that exited instead is reported and started again.
  auto poll_nodes = [&] {
    bool all = true;
    for (node_slot& s : nodes) {
      if (s.ready || !s.proc) {  // no process: its start failed (reported)
        all = all && s.ready;
        continue;
      }
      if (s.proc->ready()) {
        s.ready = true;
        fault_line('S', s);
        continue;
      }
      all = false;
      if (int status = 0; s.proc->exited(&status)) {
        ADD_FAILURE() << s.name << " exited before READY (status " << status
                      << "): " << s.proc->log_text(3000);
        (void)start_node(s);
      }
    }
    return all;
  };
  for (int i = 0; i < k_nodes; ++i) {
    nodes[static_cast<std::size_t>(i)].name = "n" + std::to_string(i);
    ASSERT_TRUE(start_node(nodes[static_cast<std::size_t>(i)]));
  }
  ASSERT_TRUE(eventually(poll_nodes, k_start_bound)) << "the nodes did not all join";

  // ---- the driver: a member that hosts no grain ----
  akt::system_config cfg;
  cfg.workers = 2;
  cfg.shutdown_timeout = 10s;
  akt::remote_config rc;
  rc.heartbeat_interval = 100ms;
  rc.node_lost_after = 2s;
  rc.reconnect_min = 10ms;
  rc.reconnect_max = 200ms;
  cfg.remote = rc;
  akt::cluster_config cc;
  cc.cluster_name = cluster;
  cc.node_name = "driver";
  akt::etcd::etcd_options eo;
  eo.endpoints = {etcd->endpoint()};
  eo.call_timeout = 1000ms;
  cc.store = akt::etcd::provider(eo);
  cc.lease_ttl = 2s;
  cc.fence_margin = 300ms;
  cfg.cluster = cc;  // grain_kinds empty: every grain is claimed for, and runs on, a node
  akt::actor_system driver("driver", cfg);
  ASSERT_TRUE(driver.start());
  ASSERT_TRUE(eventually([&] { return akt::cluster::members(driver).size() == k_nodes + 1; },
                         std::chrono::duration_cast<std::chrono::milliseconds>(k_start_bound)))
      << "the driver does not see every node";

  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stop = false;
  auto wait_or_stop = [&](std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(stop_mutex);
    return stop_cv.wait_for(lock, d, [&] { return stop; });
  };
  std::atomic<long> sent{0};
  std::vector<std::thread> traffic;
  for (int g = 0; g < n_grains; ++g) {
    traffic.emplace_back([&, g] {
      const std::string name = "g" + std::to_string(g);
      const akt::grain_identity id{std::string(akt::faults::k_counter_kind), name};
      for (std::uint64_t msg = 1;; ++msg) {
        const std::int64_t start = akt::faults::monotonic_ns();
        const akt::error e =
            akt::tell_grain(driver, id, akt::faults::apply_msg{msg}, {.timeout = 2s});
        const std::int64_t end = akt::faults::monotonic_ns();
        ++sent;
        (void)akt::faults::append_line(calls_fd, "C " + name + " " + std::to_string(msg) + " " +
                                                     std::to_string(start) + " " +
                                                     std::to_string(end) + " " + classify(e) + " " +
                                                     std::string(akt::to_string(e.code())));
        if (wait_or_stop(pace)) return;
      }
    });
  }

  // ---- the faults: every kill_every, SIGKILL to a ready node, started again at once ----
  // The memory of each node process (and of this one, the driver) at the start, the middle and
  // the end of the run: a process started again after a kill starts small, so each sample names
  // the process's start count.
  std::vector<std::string> rss(nodes.size() + 1);
  auto sample_rss = [&] {
    char buf[64];
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const node_slot& s = nodes[i];
      std::snprintf(buf, sizeof buf, "%s%.0f (#%d)", rss[i].empty() ? "" : " / ",
                    s.proc ? rss_mib(s.proc->pid()) : -1.0, s.starts);
      rss[i] += buf;
    }
    std::snprintf(buf, sizeof buf, "%s%.0f", rss.back().empty() ? "" : " / ", rss_mib(::getpid()));
    rss.back() += buf;
  };
  sample_rss();
  std::mt19937 rng(seed);
  int kills = 0;
  const auto end = steady::now() + run_for;
  const auto middle = steady::now() + run_for / 2;
  bool sampled_middle = false;
  auto next_kill = steady::now() + kill_every;
  while (steady::now() < end) {
    std::this_thread::sleep_for(50ms);  // the injector's tick: restarts are noticed this often
    (void)poll_nodes();
    if (!sampled_middle && steady::now() >= middle) {
      sampled_middle = true;
      sample_rss();
    }
    if (steady::now() < next_kill) continue;
    next_kill = steady::now() + kill_every;
    std::vector<node_slot*> up;
    for (node_slot& s : nodes)
      if (s.ready) up.push_back(&s);
    if (up.empty()) continue;
    node_slot& victim = *up[std::uniform_int_distribution<std::size_t>(0, up.size() - 1)(rng)];
    fault_line('K', victim);
    victim.proc->kill_nine();
    ++kills;
    if (!start_node(victim)) break;  // reported; the traffic threads must still be stopped
  }

  sample_rss();

  // ---- the end: traffic stops, every node is back, then all stop cleanly ----
  {
    std::lock_guard<std::mutex> lock(stop_mutex);
    stop = true;
  }
  stop_cv.notify_all();
  for (auto& t : traffic) t.join();  // each returns within a call's timeout
  EXPECT_TRUE(driver.stop());
  EXPECT_TRUE(eventually(poll_nodes, k_start_bound)) << "a restarted node did not join";
  for (node_slot& s : nodes)
    if (s.proc) s.proc->ask_to_stop();
  for (node_slot& s : nodes) {
    if (!s.proc) continue;
    const int status = s.proc->finish(30s);
    EXPECT_EQ(status, 0) << s.name << " did not stop cleanly: " << s.proc->log_text(3000);
  }
  etcd.reset();
  ::close(faults_fd);
  ::close(calls_fd);

  // ---- the verdict, from the files alone ----
  const akt::faults::check_report r = akt::faults::check_evidence(dir);
  std::cout << "kill -9 under traffic: " << run_for.count() << " s, " << k_nodes << " nodes, "
            << n_grains << " grains, a kill every " << kill_every.count() << " ms, " << kills
            << " kills, seed " << seed << "\n"
            << r.summary();
  std::cout << "RSS MiB at start / middle / end (#: the process's start count of its name):";
  for (std::size_t i = 0; i < nodes.size(); ++i)
    std::cout << " " << nodes[i].name << " " << rss[i] << ";";
  std::cout << " driver " << rss.back() << "\n" << std::flush;
  EXPECT_EQ(r.calls, static_cast<std::size_t>(sent.load())) << "every call is in calls.log";
  EXPECT_EQ(r.kills, static_cast<std::size_t>(kills));
  EXPECT_GT(kills, 0) << "the run was too short to kill anything";
  EXPECT_GT(r.ok, 0u);
  EXPECT_GT(r.handler_starts, 0u);
  EXPECT_FALSE(r.failover_ms.empty()) << "no kill hit a node that ran a grain";
  EXPECT_TRUE(r.violations_a.empty()) << r.summary();
  EXPECT_TRUE(r.violations_b.empty()) << r.summary();
  EXPECT_TRUE(r.violations_d.empty()) << r.summary();
  EXPECT_TRUE(r.malformed.empty()) << r.summary();
  if (r.clean() && !::testing::Test::HasFailure() && std::getenv("AKT_FAULTS_KEEP") == nullptr) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  } else {
    std::cout << "evidence kept in " << dir.string() << "\n";
  }
}

}  // namespace
