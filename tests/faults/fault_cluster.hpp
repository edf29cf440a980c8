#pragma once
// The fault tests' cluster (issue 20): a real etcd, N akt_fault_node processes (lease TTL 2 s)
// hosting the counter grains, and the test process itself as a cluster member ("driver") that
// hosts no grain and sends acknowledged tells to G grains, one thread per grain. A fault test
// is then short: start(), start_traffic(), inject faults on a schedule with the node calls
// below (each writes its line to faults.log), finish() (traffic stops, every node is back and
// stops cleanly, the checker reads the evidence), expect_clean(report).
//
//   fault_cluster c({.title = "kill -9 under traffic"});
//   if (!c.start()) return;
//   c.start_traffic();
//   c.run_for(60s, [&](auto now) { ... c.kill_nine(c.random_ready()) ... });
//   const auto r = c.finish();
//   c.expect_clean(r);
//
// Environment shared by every fault test (the defaults are CI's runs):
//   AKT_FAULTS_GRAINS    grains the driver sends to, one thread each (50)
//   AKT_FAULTS_PACE_MS   the pause of a grain's thread between two calls (100)
//   AKT_FAULTS_SEED      the seed of the choice of victims (random by default; printed)
//   AKT_FAULTS_KEEP      when set, the evidence directory is kept even when the test passes
//   AKT_FAULTS_RSS_EVERY_S  a memory sample of every process each that many seconds (soaks)
//   AKT_FAULTS_HEAP_PROFILE when set (ASan builds), the driver's live heap by allocation stack
//
// Contract: owner only: every member function is called from the test's main thread, which
// started the nodes and outlives them (node_process's PR_SET_PDEATHSIG). The traffic threads
// touch only the driver system, `sent_` (atomic, relaxed: read after they are joined) and the
// calls.log descriptor (one write(2) per line). Failures are reported with GoogleTest's
// ADD_FAILURE / EXPECT_*; functions that cannot go on return false. The destructor stops the
// traffic and every process still running (SIGKILL), so an early return leaves nothing behind.

#include <gtest/gtest.h>

#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/etcd/etcd_store.hpp>
#include <akt/testkit/tcp_proxy.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>

#include <cstddef>
// The ASan runtime's live-heap figure (declared here: GCC ships no allocator_interface.h).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "faults/fault_checker.hpp"
#include "faults/fault_evidence.hpp"
#include "faults/fault_leases.hpp"
#include "faults/fault_messages.hpp"
#include "faults/fault_process.hpp"
#include "support/etcd_process.hpp"
#include "support/process_state.hpp"
#include "support/test_support.hpp"

// Starts a fault test's cluster, or ends the test there: skipped when etcd is not installed,
// failed when the cluster did not start (start() reported why). In the test's body only (it
// returns from it).
#define AKT_FAULTS_START_OR_END(cluster)                                                  \
  do {                                                                                    \
    if (!(cluster).start()) {                                                             \
      if ((cluster).skipped()) GTEST_SKIP() << "etcd is not installed (scripts/deps.sh)"; \
      return;                                                                             \
    }                                                                                     \
  } while (false)

namespace akt::faults {

inline long env_or(const char* name, long fallback) {
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
inline const char* classify(const akt::error& e) {
  if (!e) return "ok";
  if (e.code() == akt::errc::invalid_argument &&
      e.detail().find(k_store_refused) != std::string_view::npos) {
    return "store_refused";
  }
  if (akt::detail::error_access::refused(e) || e.code() == akt::errc::unreachable ||
      e.code() == akt::errc::not_owner) {
    return "refused";
  }
  return "possibly";
}

// A directory for the run's evidence, on tmpfs where there is one.
inline std::filesystem::path make_evidence_dir() {
  namespace fs = std::filesystem;
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
inline double rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return -1;
}

using akt::test::process_state;

// One node name and its current process.
struct node_slot {
  std::string name;
  std::unique_ptr<node_process> proc;
  int starts = 0;
  bool ready = false;
  // Restart under the same name and address (options::fixed_ports): the port every process of
  // this name listens on, and whether its next start declares the previous process gone
  // (--old-process-gone: the join revokes its lease instead of waiting for it to expire).
  int port = 0;
  bool old_process_gone = false;
  // options::proxied: the node reaches etcd through etcd_proxy and advertises peer_proxy, which
  // forwards to the port it listens on; partition() blackholes both (the slot keeps them across
  // restarts). Null otherwise.
  std::unique_ptr<akt::testkit::tcp_proxy> etcd_proxy, peer_proxy;
  bool cut = false;  // partitioned now (between partition() and heal())
};

// A loopback port for a node to listen on for the whole run, below the ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range starts at 32768 by default), so that no outgoing
// connection of any process can take it while its node is down between two processes: one
// that binds now, chosen at random in [20000, 32000); 0 when none after many tries.
inline int fixed_loopback_port(std::mt19937& rng) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = std::uniform_int_distribution<int>(20000, 31999)(rng);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    const int one = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as the node does
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool free = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (free) return port;
  }
  return 0;
}

class fault_cluster {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr auto k_start_bound = std::chrono::seconds(60);  // a start under ASan, 2 cores

  struct options {
    std::string title;  // printed with the verdict
    int nodes = 5;
    // Each node name keeps one loopback port for the run (node_slot::port), so that a process
    // started again under its name has its predecessor's address too.
    bool fixed_ports = false;
    // Each node behind two testkit tcp_proxies of its own (node_slot): one to etcd, one in
    // front of its remoting port, which it advertises; needed by partition() / heal().
    bool proxied = false;
    // etcd members (1, or 3 for the member-loss faults); nodes and the driver get every
    // member's endpoint, and the store fails over between them.
    int etcd_members = 1;
    // The driver's own lease TTL (the nodes' is 2 s). The driver is the test's client, not under
    // test; a test that loses etcd's leader gives it a longer one (below).
    std::chrono::seconds driver_lease_ttl{2};
  };

  explicit fault_cluster(options o)
      : opt_(std::move(o)),
        n_grains_(static_cast<int>(env_or("AKT_FAULTS_GRAINS", 50))),
        pace_(env_or("AKT_FAULTS_PACE_MS", 100)),
        seed_(static_cast<unsigned>(
            env_or("AKT_FAULTS_SEED", static_cast<long>(std::random_device{}())))),
        rng_(seed_) {}
  ~fault_cluster() {
    stop_traffic();
    if (driver_) (void)driver_->stop();
    nodes_.clear();  // each node_process SIGKILLs and reaps a process still running
    if (faults_fd_ >= 0) ::close(faults_fd_);
    if (calls_fd_ >= 0) ::close(calls_fd_);
    if (etcd_fd_ >= 0) ::close(etcd_fd_);
  }
  fault_cluster(const fault_cluster&) = delete;
  fault_cluster& operator=(const fault_cluster&) = delete;

  // etcd, the nodes (until all are READY) and the driver (until it sees every node). False, with
  // a failure reported, when the run cannot go on; skipped (GTEST_SKIP by the caller, see
  // skipped()) when etcd is not installed.
  bool start() {
    if (akt::test::etcd_binary().empty()) {
      skipped_ = true;
      return false;
    }
    if (akt::error e = register_fault_messages()) {
      ADD_FAILURE() << "register messages: " << e.message();
      return false;
    }
    try {
      etcd_ = std::make_unique<akt::test::etcd_cluster>(opt_.etcd_members);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "etcd did not start: " << e.what();
      return false;
    }
    dir_ = make_evidence_dir();
    if (dir_.empty()) {
      ADD_FAILURE() << "no evidence directory";
      return false;
    }
    std::printf("%s: evidence in %s, seed %u\n", opt_.title.c_str(), dir_.c_str(), seed_);
    cluster_ = "faults" + std::to_string(::getpid());
    faults_fd_ = open_append(dir_ / "faults.log");
    calls_fd_ = open_append(dir_ / "calls.log");
    etcd_fd_ = open_append(dir_ / "etcd.log");
    if (faults_fd_ < 0 || calls_fd_ < 0 || etcd_fd_ < 0) {
      ADD_FAILURE() << "cannot open the evidence files under " << dir_;
      return false;
    }
    // The leases as etcd shows them (check (a) against their ends), watched before any node
    // starts.
    if (std::string why = leases_.start(etcd_->endpoints(), cluster_, dir_ / "leases.log");
        !why.empty()) {
      ADD_FAILURE() << "the lease watch did not start: " << why;
      return false;
    }
    nodes_.resize(static_cast<std::size_t>(opt_.nodes));
    for (int i = 0; i < opt_.nodes; ++i) {
      nodes_[static_cast<std::size_t>(i)].name = "n" + std::to_string(i);
      if (opt_.fixed_ports) {
        nodes_[static_cast<std::size_t>(i)].port = fixed_loopback_port(rng_);
        if (nodes_[static_cast<std::size_t>(i)].port == 0) {
          ADD_FAILURE() << "no free loopback port for n" << i;
          return false;
        }
      }
      if (!start_node(nodes_[static_cast<std::size_t>(i)])) return false;
    }
    if (!akt::test::eventually([&] { return poll_nodes(); }, k_start_bound)) {
      ADD_FAILURE() << "the nodes did not all join";
      return false;
    }
    return start_driver();
  }
  bool skipped() const noexcept { return skipped_; }

  // One thread per grain: an acknowledged tell_grain (timeout 2 s) with message ids 1, 2, ...,
  // a line in calls.log after each, then the pace.
  void start_traffic() {
    for (int g = 0; g < n_grains_; ++g) {
      traffic_.emplace_back([this, g] {
        const std::string name = "g" + std::to_string(g);
        const akt::grain_identity id{std::string(k_counter_kind), name};
        for (std::uint64_t msg = 1;; ++msg) {
          const std::int64_t start = monotonic_ns();
          const akt::error e =
              akt::tell_grain(*driver_, id, apply_msg{msg}, {.timeout = std::chrono::seconds(2)});
          const std::int64_t end = monotonic_ns();
          sent_.fetch_add(1, std::memory_order_relaxed);
          (void)append_line(calls_fd_, "C " + name + " " + std::to_string(msg) + " " +
                                           std::to_string(start) + " " + std::to_string(end) + " " +
                                           classify(e) + " " +
                                           std::string(akt::to_string(e.code())));
          std::unique_lock<std::mutex> lock(stop_mutex_);
          if (stop_cv_.wait_for(lock, pace_, [&] { return stop_; })) return;
        }
      });
    }
  }

  // Runs `fault` every 50 ms (the injector's tick) for `length`, noting the nodes that became
  // ready in between and sampling memory at the start, middle and end. `fault` returns false to
  // end the run early (a failure it reported).
  void run_for(std::chrono::milliseconds length, const std::function<bool()>& fault) {
    sample_rss();
    const auto end = clock::now() + length;
    const auto middle = clock::now() + length / 2;
    bool sampled_middle = false;
    // AKT_FAULTS_RSS_EVERY_S: a soak's memory series, a sample every that many seconds besides
    // the start, middle and end (0: none).
    const auto rss_every = std::chrono::seconds(env_or("AKT_FAULTS_RSS_EVERY_S", 0));
    auto next_rss = clock::now() + rss_every;
    while (clock::now() < end) {
      {
        // The injector's tick: a bounded wait on the traffic's stop (a driver thread that failed
        // ends the run early), not a fixed sleep.
        std::unique_lock<std::mutex> lock(stop_mutex_);
        if (stop_cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop_; })) break;
      }
      (void)poll_nodes();
      if (!sampled_middle && clock::now() >= middle) {
        sampled_middle = true;
        sample_rss();
      }
      if (rss_every.count() > 0 && clock::now() >= next_rss) {
        next_rss += rss_every;
        sample_rss();
      }
      if (!fault()) break;
    }
    sample_rss();
  }

  // ---- the nodes ----
  std::vector<node_slot>& nodes() noexcept { return nodes_; }
  std::mt19937& rng() noexcept { return rng_; }
  unsigned seed() const noexcept { return seed_; }
  const std::filesystem::path& dir() const noexcept { return dir_; }
  int kills() const noexcept { return kills_; }
  int terms() const noexcept { return terms_; }
  int pauses() const noexcept { return pauses_; }

  // A ready node chosen at random (not `except`); null when none.
  node_slot* random_ready(const node_slot* except = nullptr) {
    std::vector<node_slot*> up;
    for (node_slot& s : nodes_)
      if (s.ready && &s != except) up.push_back(&s);
    if (up.empty()) return nullptr;
    return up[std::uniform_int_distribution<std::size_t>(0, up.size() - 1)(rng_)];
  }

  // Starts (again) the node of slot s under its name; it is ready once poll_nodes saw READY.
  bool start_node(node_slot& s) {
    std::string why;
    const std::filesystem::path log =
        dir_ / "logs" / (s.name + "-" + std::to_string(s.starts++) + ".log");
    s.ready = false;
    std::vector<std::string> args = {AKT_FAULT_NODE_PATH,
                                     "--etcd",
                                     etcd_endpoint_list(),
                                     "--cluster",
                                     cluster_,
                                     "--node",
                                     s.name,
                                     "--dir",
                                     dir_.string(),
                                     "--ttl",
                                     "2"};
    if (s.port != 0) args.insert(args.end(), {"--port", std::to_string(s.port)});
    if (s.old_process_gone) args.insert(args.end(), {"--old-process-gone", "1"});
    s.proc = node_process::start(proxied_args(s, std::move(args)), log, why);
    if (!s.proc) ADD_FAILURE() << s.name << ": " << why;
    return s.proc != nullptr;
  }

  // Notes the nodes that became ready (an S line each); a node that exited instead is reported
  // and started again. True when every node is ready.
  bool poll_nodes() {
    bool all = true;
    for (node_slot& s : nodes_) {
      if (s.ready || !s.proc) {  // no process: its start failed (reported), or it is stopped
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
  }

  // SIGKILL (a K line), then started again at once under the same name (its start waits until
  // the old lease expired).
  bool kill_nine(node_slot& s) {
    fault_line('K', s);
    s.proc->kill_nine();
    ++kills_;
    return start_node(s);
  }

  // Restart under the same name and address: SIGKILL (a K line), then started again at once on
  // the slot's port (options::fixed_ports) while the old lease is still alive; with
  // old_process_gone the new process revokes that lease as it joins, else it waits for it to
  // expire. The start counts as a kill (kills()) and as a same-name restart.
  bool restart_same_address(node_slot& s, bool old_process_gone) {
    s.old_process_gone = old_process_gone;
    ++same_name_restarts_;
    return kill_nine(s);
  }
  int same_name_restarts() const noexcept { return same_name_restarts_; }
  // The driver's system (a cluster member hosting no grain), for a test's own sends; valid
  // between start() and finish().
  akt::actor_system& driver() noexcept { return *driver_; }

  // A clean stop: SIGTERM (a T line), and the exit within `bound`, which must be 0 (an E line);
  // the slot has no ready process after it. False, with a failure reported, otherwise.
  bool terminate(node_slot& s, std::chrono::milliseconds bound) {
    fault_line('T', s);
    s.ready = false;
    s.proc->ask_to_stop();
    ++terms_;
    const int status = s.proc->finish(bound);
    if (status != 0) {
      ADD_FAILURE() << s.name << " did not stop cleanly after SIGTERM (status " << status
                    << "): " << s.proc->log_text(3000);
      return false;
    }
    fault_line('E', s);
    return true;
  }

  // SIGSTOP; the P line is written once the process shows as stopped (every later handler start
  // of it is after SIGCONT). False when it did not stop within a second.
  bool pause(node_slot& s) {
    ::kill(s.proc->pid(), SIGSTOP);
    ++pauses_;
    const bool stopped = akt::test::eventually([&] { return process_state(s.proc->pid()) == 'T'; },
                                               std::chrono::milliseconds(1000));
    fault_line('P', s);
    if (!stopped) ADD_FAILURE() << s.name << " did not stop on SIGSTOP";
    return stopped;
  }
  // The R line, then SIGCONT.
  void resume(node_slot& s) {
    fault_line('R', s);
    ::kill(s.proc->pid(), SIGCONT);
  }

  // Every dispatcher worker of s stuck in a handler (SIGUSR1: fault_node_main.cpp's stall); the
  // W line is written once the node printed STALLED (every later handler start of it is after
  // the release). False, with a failure reported, when it did not say so within 15 s (its first
  // stall spawns the stall actors, a store round trip each).
  bool stall(node_slot& s) {
    const std::size_t before = count_in_log(s, "STALLED ");
    ::kill(s.proc->pid(), SIGUSR1);
    const bool stalled = akt::test::eventually([&] { return count_in_log(s, "STALLED ") > before; },
                                               std::chrono::milliseconds(15000));
    if (!stalled) {
      ADD_FAILURE() << s.name << " did not stall on SIGUSR1: " << s.proc->log_text(3000);
      return false;
    }
    ++stalls_;
    fault_line('W', s);
    return true;
  }
  // The U line, then SIGUSR2: the stall actors return.
  void unstall(node_slot& s) {
    fault_line('U', s);
    ::kill(s.proc->pid(), SIGUSR2);
  }
  int stalls() const noexcept { return stalls_; }

  // What node s's current process printed of its own membership, from a thread that needs no
  // dispatcher worker: each "EPOCH <epoch> <ns>" (every new epoch, the first join's included)
  // or "FENCED <epoch> <ns>" line (prefix "EPOCH " or "FENCED "), as {epoch, ns}, in order.
  struct membership_mark {
    unsigned long long epoch = 0;
    std::int64_t ns = 0;
  };
  std::vector<membership_mark> marks(const node_slot& s, const std::string& prefix) const {
    std::vector<membership_mark> out;
    if (!s.proc) return out;
    const std::string text = s.proc->log_text();
    for (std::size_t at = text.find(prefix); at != std::string::npos;
         at = text.find(prefix, at + 1)) {
      if ((at != 0 && text[at - 1] != '\n') || text.find('\n', at) == std::string::npos) continue;
      char* end = nullptr;
      membership_mark m;
      m.epoch = std::strtoull(text.c_str() + at + prefix.size(), &end, 10);
      m.ns = std::strtoll(end, nullptr, 10);
      out.push_back(m);
    }
    return out;
  }
  // The members as the driver sees them (each with its epoch).
  std::vector<akt::cluster::member> driver_members() {
    return driver_ ? akt::cluster::members(*driver_) : std::vector<akt::cluster::member>();
  }

  // ---- partitions (options::proxied) ----
  //
  // What a partition cuts, and what it cannot: a node's remoting sends its own frames on
  // connections it opens to each peer's advertised address, and each peer answers on its own
  // connections back (src/remote/association.hpp). Here every node advertises its peer_proxy,
  // so blackholing the partitioned node's peer_proxy cuts every connection INTO it, from the
  // other nodes and from the driver: from the cut on it receives no request, answer, credit or
  // pong. Its etcd_proxy cuts its keep-alives, claims and watch. NOT cut: the TCP connections it
  // opened itself to the other nodes' peer_proxies (each of those proxies is shared by every
  // client of that node, and nodes dial the address a peer advertises in etcd, so there is no
  // per-pair link to cut without a product change or a network namespace per node): frames it
  // sends on them still arrive. After the cut those are only pings, answers to requests that
  // reached it before the cut, and what it sends on its own initiative (the fault node's grains
  // send nothing): no new work reaches it, and peers hear from it only its last answers and
  // its pings.
  //
  // With peers = false only etcd is cut: the node stays reachable, requests keep reaching it
  // until the others see its lease expire, and it must refuse them by its own clock once its
  // lease validity ended (the fencing itself is what is tested, not only the cut).

  // Cuts slot s off: its proxies blackholed (etcd's, and with `peers` the one in front of it),
  // then an X line "X <node> <pid> <ns> <ttl-ms>" (the lease TTL bounds the checker's rule: no
  // handler of the node from cut + TTL until it heals).
  void partition(node_slot& s, bool peers = true) {
    s.etcd_proxy->blackhole();
    if (peers) s.peer_proxy->blackhole();
    s.cut = true;
    ++partitions_;
    (void)append_line(faults_fd_, "X " + s.name + " " + std::to_string(s.proc->pid()) + " " +
                                      std::to_string(monotonic_ns()) + " " +
                                      std::to_string(k_lease_ttl_ms));
  }
  // Heals slot s: an H line (its handlers from here on may run on a new epoch), then both
  // proxies pass again (what they held is delivered, in order).
  void heal(node_slot& s) {
    fault_line('H', s);
    s.etcd_proxy->pass();
    s.peer_proxy->pass();
    s.cut = false;
    ++heals_;
  }
  int partitions() const noexcept { return partitions_; }
  int heals() const noexcept { return heals_; }
  // The epoch of node `name` as the driver's membership sees it; 0 when it is not a member.
  akt::cluster::lease_id member_epoch(const std::string& name) {
    if (!driver_) return 0;
    for (const akt::cluster::member& m : akt::cluster::members(*driver_))
      if (m.name == name && !m.leaving) return m.epoch;
    return 0;
  }

  // Waits until slot s is ready (polling every node meanwhile); false after `bound`.
  bool wait_ready(node_slot& s, std::chrono::milliseconds bound) {
    return akt::test::eventually(
        [&] {
          (void)poll_nodes();
          return s.ready;
        },
        bound);
  }

  // ---- etcd (the store's faults: etcd_member_loss_test.cpp, store_restart_test.cpp) ----
  // Each fault is a line in etcd.log (fault_evidence.hpp's format: tag, member, pid,
  // CLOCK_MONOTONIC ns, then what it was): M a member got SIGKILL ("leader" or "follower"), N it
  // serves again after its restart, Z the store was compacted ("rev <revision>").
  akt::test::etcd_cluster& etcd() noexcept { return *etcd_; }
  int etcd_kills() const noexcept { return etcd_kills_; }
  int etcd_leader_kills() const noexcept { return etcd_leader_kills_; }
  int compactions() const noexcept { return compactions_; }

  // The index of the member that leads (waits up to 10 s for one); -1 when none does.
  int etcd_leader() { return etcd_->leader(); }

  // SIGKILL to member i (an M line first, saying whether it led when the line was written).
  void kill_etcd_member(std::size_t i) {
    akt::test::etcd_member& m = etcd_->member(i);
    const bool led =
        etcd_->members().size() == 1 || akt::test::etcd_detail::is_leader(m.client_port);
    (void)append_line(etcd_fd_, "M etcd-" + m.name + " " + std::to_string(m.pid) + " " +
                                    std::to_string(monotonic_ns()) + " " +
                                    (led ? "leader" : "follower"));
    m.kill();
    ++etcd_kills_;
    if (led) ++etcd_leader_kills_;
  }

  // Starts member i again on its ports and data dir; once it answers /health, an N line. False,
  // with a failure reported, when it did not come back.
  bool restart_etcd_member(std::size_t i) {
    std::string why;
    if (!etcd_->restart(i, why)) {
      ADD_FAILURE() << why;
      return false;
    }
    const akt::test::etcd_member& m = etcd_->member(i);
    (void)append_line(etcd_fd_, "N etcd-" + m.name + " " + std::to_string(m.pid) + " " +
                                    std::to_string(monotonic_ns()));
    ++etcd_restarts_;
    return true;
  }

  // Compacts the store at its current revision (etcdctl): every watch that resumes from an
  // older revision then ends with "compacted". The revision compacted at, a Z line; 0 (and a
  // failure reported) when etcdctl failed.
  long long compact_etcd() {
    // A write of the harness's own first, so that there is a revision past the last compaction
    // (etcd refuses to compact at a revision already compacted: two compactions 300 ms apart
    // with no write between failed so, seed 307301519).
    if (etcd_->etcdctl({"put", "/akt-faults/compaction", std::to_string(compactions_)}) != 0) {
      ADD_FAILURE() << "etcdctl put before a compaction failed";
      return 0;
    }
    const std::string status = etcd_->etcdctl_output({"endpoint", "status", "-w", "json"});
    const auto at = status.find("\"revision\":");
    if (at == std::string::npos) {
      ADD_FAILURE() << "etcdctl endpoint status gave no revision: '" << status << "'";
      return 0;
    }
    const long long rev = std::strtoll(status.c_str() + at + 11, nullptr, 10);
    if (rev <= 0 || etcd_->etcdctl({"compact", std::to_string(rev)}) != 0) {
      ADD_FAILURE() << "etcdctl compact " << rev << " failed";
      return 0;
    }
    (void)append_line(etcd_fd_,
                      "Z etcd 0 " + std::to_string(monotonic_ns()) + " rev " + std::to_string(rev));
    ++compactions_;
    return rev;
  }

  // ---- member views (after store faults: they must converge) ----

  // The first time (CLOCK_MONOTONIC ns) at or after `after_ns` at which the driver saw node
  // `name` leave (node_left: its record vanished, by a clean stop or its lease's expiry); -1 if
  // it did not.
  std::int64_t driver_saw_leave(const std::string& name, std::int64_t after_ns) {
    std::lock_guard<std::mutex> lock(left_mutex_);
    for (const auto& [who, ns] : left_)
      if (who == name && ns >= after_ns) return ns;
    return -1;
  }

  // The driver's member view: "name:epoch" of each member it sees, sorted.
  std::vector<std::string> driver_view() {
    std::vector<std::string> v;
    if (!driver_) return v;
    for (const auto& m : akt::cluster::members(*driver_))
      v.push_back(m.name + ":" + std::to_string(m.epoch));
    std::sort(v.begin(), v.end());
    return v;
  }

  // Node s's member view: SIGWINCH, then its next VIEW line (fault_node_main.cpp), waiting up to
  // `bound`; empty when none came.
  std::vector<std::string> node_view(node_slot& s, std::chrono::milliseconds bound) {
    if (!s.proc) return {};
    auto count_views = [&](const std::string& text) {
      std::size_t n = 0;
      for (std::size_t at = text.find("VIEW"); at != std::string::npos;
           at = text.find("VIEW", at + 4))
        ++n;
      return n;
    };
    const std::size_t before = count_views(s.proc->log_text());
    ::kill(s.proc->pid(), SIGWINCH);
    std::string text;
    if (!akt::test::eventually(
            [&] {
              text = s.proc->log_text();
              return count_views(text) > before && text.back() == '\n';
            },
            bound)) {
      return {};
    }
    const auto at = text.rfind("VIEW");
    std::istringstream in(text.substr(at + 4, text.find('\n', at) - at - 4));
    std::vector<std::string> v;
    for (std::string item; in >> item;) v.push_back(item);
    return v;
  }

  // Waits up to `bound` until every node's view and the driver's are the same: every node and
  // the driver, each once, with the same epochs. False, with the last views in `why`, if not.
  bool views_converge(std::chrono::milliseconds bound, std::string& why) {
    return akt::test::eventually(
        [&] {
          (void)poll_nodes();
          const auto want = driver_view();
          std::ostringstream out;
          out << "driver:";
          for (const auto& m : want) out << " " << m;
          bool same = want.size() == nodes_.size() + 1;
          for (node_slot& s : nodes_) {
            const auto v =
                s.ready ? node_view(s, std::chrono::seconds(2)) : std::vector<std::string>{};
            out << "; " << s.name << (s.ready ? ":" : " (not ready):");
            for (const auto& m : v) out << " " << m;
            same = same && s.ready && v == want;
          }
          why = out.str();
          return same;
        },
        bound);
  }

  // ---- the end ----

  // Stops the traffic and the driver, waits until every node is back, stops each with SIGTERM
  // (each must exit 0), stops etcd, and checks the evidence; prints the verdict.
  check_report finish() {
    stop_traffic();
#if defined(__SANITIZE_ADDRESS__)
    // AKT_FAULTS_HEAP_PROFILE: the driver's live heap by allocation stack (ASan's profile: the
    // stacks holding the top 90 %), before the driver stops: where a soak's growth sits.
    if (std::getenv("AKT_FAULTS_HEAP_PROFILE") != nullptr) __sanitizer_print_memory_profile(90, 20);
#endif
    if (driver_) {
      EXPECT_TRUE(driver_->stop());
    }
    left_sub_.reset();  // before the system it is subscribed to
    driver_.reset();
    EXPECT_TRUE(akt::test::eventually([&] { return poll_nodes(); }, k_start_bound))
        << "a restarted node did not join";
    for (node_slot& s : nodes_)
      if (s.proc) s.proc->ask_to_stop();
    for (node_slot& s : nodes_) {
      if (!s.proc) continue;
      const int status = s.proc->finish(std::chrono::seconds(30));
      EXPECT_EQ(status, 0) << s.name << " did not stop cleanly: " << s.proc->log_text(3000);
    }
    // The nodes revoked their leases as they stopped: the last deletes reach the lease watch
    // (bounded; a delete not seen only leaves its epoch's handlers unchecked against it).
    (void)akt::test::eventually([&] { return !leases_.any_record(); }, std::chrono::seconds(5));
    leases_.stop();
    etcd_.reset();
    check_report r = check_evidence(dir_);
    std::cout << opt_.title << ": " << opt_.nodes << " nodes, " << n_grains_ << " grains, "
              << kills_ << " kills, " << terms_ << " clean stops, " << pauses_ << " pauses, seed "
              << seed_ << "\n"
              << r.summary();
    std::cout << "RSS MiB at start / middle / end, and every AKT_FAULTS_RSS_EVERY_S when set (#: "
                 "the process's start count of its name):";
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      std::cout << " " << nodes_[i].name << " " << rss_[i] << ";";
    std::cout << " driver " << (rss_.empty() ? std::string() : rss_.back()) << "\n" << std::flush;
    return r;
  }

  // What every fault test expects of its report: every call in calls.log, the fault counts as
  // injected, something acknowledged and checked, no violation of (a), (b), (d) and no malformed
  // line. Removes the evidence when all passed (unless AKT_FAULTS_KEEP), else prints where it is.
  void expect_clean(const check_report& r) {
    EXPECT_EQ(r.calls, static_cast<std::size_t>(sent_.load())) << "every call is in calls.log";
    EXPECT_EQ(r.kills, static_cast<std::size_t>(kills_));
    EXPECT_EQ(r.terms, static_cast<std::size_t>(terms_));
    EXPECT_EQ(r.pauses, static_cast<std::size_t>(pauses_));
    EXPECT_EQ(r.partitions, static_cast<std::size_t>(partitions_));
    EXPECT_EQ(r.heals, static_cast<std::size_t>(heals_));
    EXPECT_EQ(r.etcd_kills, static_cast<std::size_t>(etcd_kills_));
    EXPECT_EQ(r.etcd_leader_kills, static_cast<std::size_t>(etcd_leader_kills_));
    EXPECT_EQ(r.etcd_restarts, static_cast<std::size_t>(etcd_restarts_));
    EXPECT_EQ(r.compactions, static_cast<std::size_t>(compactions_));
    EXPECT_GT(r.ok, 0u);
    EXPECT_GT(r.handler_starts, 0u);
    EXPECT_TRUE(r.violations_a.empty()) << r.summary();
    EXPECT_TRUE(r.violations_b.empty()) << r.summary();
    EXPECT_TRUE(r.violations_d.empty()) << r.summary();
    EXPECT_TRUE(r.malformed.empty()) << r.summary();
    EXPECT_EQ(r.stalls, static_cast<std::size_t>(stalls_));
    EXPECT_TRUE(r.stall_leaks.empty()) << r.summary();
  }
  // Call last: removes the evidence when the test passed (unless AKT_FAULTS_KEEP).
  void keep_or_remove_evidence(const check_report& r) {
    if (r.clean() && !::testing::Test::HasFailure() && std::getenv("AKT_FAULTS_KEEP") == nullptr) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    } else {
      std::cout << "evidence kept in " << dir_.string() << "\n";
    }
  }

 private:
  static constexpr long k_lease_ttl_ms = 2000;  // the nodes' --ttl 2

  // The node's command line, for options::proxied with its proxies (made on the slot's first
  // start) in it: --etcd the etcd_proxy, --port a free port (chosen here, as etcd_process
  // chooses etcd's: a port taken meanwhile fails the start, and poll_nodes starts it again on
  // another), --advertise the peer_proxy, which forwards there.
  std::vector<std::string> proxied_args(node_slot& s, std::vector<std::string> argv) {
    if (!opt_.proxied) return argv;
    const std::string ep = etcd_->endpoints().front();  // partitions run on one etcd member
    if (!s.etcd_proxy) {
      s.etcd_proxy = std::make_unique<akt::testkit::tcp_proxy>(
          "127.0.0.1", static_cast<std::uint16_t>(std::stoi(ep.substr(ep.rfind(':') + 1))));
      s.peer_proxy = std::make_unique<akt::testkit::tcp_proxy>("127.0.0.1", 0);
    }
    const int port = akt::test::etcd_detail::free_ports(1).front();
    s.peer_proxy->set_target("127.0.0.1", static_cast<std::uint16_t>(port));
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == "--etcd") argv[i + 1] = s.etcd_proxy->address();
    argv.insert(argv.end(),
                {"--port", std::to_string(port), "--advertise", s.peer_proxy->address()});
    return argv;
  }

  bool start_driver() {
    using namespace std::chrono_literals;
    akt::system_config cfg;
    cfg.workers = 2;
    cfg.shutdown_timeout = 10s;
    akt::remote_config rc;
    rc.heartbeat_interval = 100ms;
    rc.heartbeat_misses = k_heartbeat_misses;
    rc.node_lost_after = 2s;
    rc.reconnect_min = 10ms;
    rc.reconnect_max = 200ms;
    cfg.remote = rc;
    akt::cluster_config cc;
    cc.cluster_name = cluster_;
    cc.node_name = "driver";
    akt::etcd::etcd_options eo;
    eo.endpoints = etcd_->endpoints();
    eo.call_timeout = 1000ms;
    cc.store = akt::etcd::provider(eo);
    cc.lease_ttl = opt_.driver_lease_ttl;
    cc.fence_margin = 300ms;
    cfg.cluster = cc;  // grain_kinds empty: every grain is claimed for, and runs on, a node
    driver_ = std::make_unique<akt::actor_system>("driver", cfg);
    if (!driver_->start()) {
      ADD_FAILURE() << "the driver did not start";
      return false;
    }
    left_sub_ = driver_->events().subscribe<akt::cluster::node_left>(
        [this](const akt::cluster::node_left& e) {
          const std::int64_t now = monotonic_ns();
          std::lock_guard<std::mutex> lock(left_mutex_);
          left_.emplace_back(e.node.name, now);
        });
    if (!akt::test::eventually(
            [&] { return akt::cluster::members(*driver_).size() == nodes_.size() + 1; },
            std::chrono::duration_cast<std::chrono::milliseconds>(k_start_bound))) {
      ADD_FAILURE() << "the driver does not see every node";
      return false;
    }
    return true;
  }

  // Every etcd member's endpoint, comma-separated (akt_fault_node's --etcd).
  std::string etcd_endpoint_list() const {
    std::string list;
    for (const auto& e : etcd_->endpoints()) list += (list.empty() ? "" : ",") + e;
    return list;
  }

  void stop_traffic() {
    {
      std::lock_guard<std::mutex> lock(stop_mutex_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    for (auto& t : traffic_) t.join();  // each returns within a call's timeout
    traffic_.clear();
  }

  // Complete lines of s's current log that begin with `prefix`.
  static std::size_t count_in_log(const node_slot& s, const std::string& prefix) {
    if (!s.proc) return 0;
    const std::string text = s.proc->log_text();
    std::size_t n = 0;
    for (std::size_t at = text.find(prefix); at != std::string::npos;
         at = text.find(prefix, at + 1)) {
      if ((at == 0 || text[at - 1] == '\n') && text.find('\n', at) != std::string::npos) ++n;
    }
    return n;
  }

  void fault_line(char tag, const node_slot& s) {
    (void)append_line(faults_fd_, std::string(1, tag) + " " + s.name + " " +
                                      std::to_string(s.proc->pid()) + " " +
                                      std::to_string(monotonic_ns()));
  }

  // The memory of each node process (and of this one, the driver): a process started again
  // starts small, so each sample names the process's start count.
  void sample_rss() {
    rss_.resize(nodes_.size() + 1);
    char buf[64];
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const node_slot& s = nodes_[i];
      std::snprintf(buf, sizeof buf, "%s%.0f (#%d)", rss_[i].empty() ? "" : " / ",
                    s.proc ? rss_mib(s.proc->pid()) : -1.0, s.starts);
      rss_[i] += buf;
    }
    std::snprintf(buf, sizeof buf, "%s%.0f", rss_.back().empty() ? "" : " / ", rss_mib(::getpid()));
    rss_.back() += buf;
#if defined(__SANITIZE_ADDRESS__)
    // Under ASan the resident set also holds the allocator's free chunks and each thread's
    // quarantine, which it keeps; the live heap says whether the driver itself grows.
    std::snprintf(buf, sizeof buf, " (heap %.1f)",
                  static_cast<double>(__sanitizer_get_current_allocated_bytes()) / (1 << 20));
    rss_.back() += buf;
#endif
  }

  const options opt_;
  const int n_grains_;
  const std::chrono::milliseconds pace_;
  const unsigned seed_;
  std::mt19937 rng_;
  bool skipped_ = false;
  std::unique_ptr<akt::test::etcd_cluster> etcd_;
  std::filesystem::path dir_;
  std::string cluster_;
  int faults_fd_ = -1, calls_fd_ = -1;
  int etcd_fd_ = -1;  // etcd.log: the etcd faults (M, N, Z lines)
  std::vector<node_slot> nodes_;
  std::unique_ptr<akt::actor_system> driver_;
  std::vector<std::thread> traffic_;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;          // guarded by stop_mutex_
  std::atomic<long> sent_{0};  // traffic threads add; read after they are joined
  int kills_ = 0, terms_ = 0, pauses_ = 0;
  int stalls_ = 0;
  int partitions_ = 0, heals_ = 0;
  int etcd_kills_ = 0, etcd_leader_kills_ = 0, etcd_restarts_ = 0, compactions_ = 0;
  std::vector<std::string> rss_;  // per node, then the driver
  int same_name_restarts_ = 0;
  // The driver's node_left events (name, CLOCK_MONOTONIC ns): the callback runs on the driver's
  // threads, the test's thread reads (driver_saw_leave). Declared after driver_: destroyed first.
  std::mutex left_mutex_;
  std::vector<std::pair<std::string, std::int64_t>> left_;  // guarded by left_mutex_
  akt::subscription left_sub_;
  // Last: destroyed first, before etcd (its watch ends with the connection).
  lease_watcher leases_;
};

}  // namespace akt::faults
