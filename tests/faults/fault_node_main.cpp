// akt_fault_node: one cluster node in a process of its own, for the fault harness (issue 20,
// tests/faults/kill_nine_test.cpp).
//
//   akt_fault_node --etcd HOST:PORT[,HOST:PORT...] --cluster NAME --node NAME --dir DIR
//                  [--ttl SECONDS] [--port PORT] [--old-process-gone 0|1] [--advertise HOST:PORT]
//
// --port: remoting listens on that port (0, the default: any free one); a node started again
// under its name and address (issue 20, "restart under the same name") binds its
// predecessor's port at once (the listener sets SO_REUSEADDR, so the killed process's
// connections in TIME_WAIT do not hold it). --old-process-gone 1: the join revokes the lease of
// an earlier process holding the name instead of waiting for it to expire
// (cluster_config::old_process_gone).
// --advertise: the address remoting advertises (remote_config::advertised_host/port), e.g.
// a testkit tcp_proxy in front of the port it listens on (issue 20, "partition").
//
// It starts an actor system named after the node with remoting on 127.0.0.1 (any free port)
// and the cluster on etcd (lease TTL --ttl, 2 s by default: etcd's minimum), hosting the grain
// kind faults.counter. Every handler start of a counter (on_activate, each on_receive,
// on_deactivate) appends one line to DIR/handlers/<node>-<pid>.log before it does anything
// else; each apply_msg is then written to the fenced store in DIR/store/ with the activation's
// fencing token, and answered with ack, or with an error when the store refused it (the formats
// are in fault_evidence.hpp). --port binds remoting to that port instead of a free one, and
// --advertise makes it tell its peers (and print) another address: the partition fault puts a
// testkit tcp_proxy there, in front of the node, so that every connection into it can be cut.
// Once joined it prints
//
//   READY <akt://node@127.0.0.1:port>
//
// On SIGWINCH it prints its member view, the members it sees sorted by name with their epochs:
//
//   VIEW driver:7587... n0:7587... n1:...
//
// and runs until its stdin closes or it gets SIGTERM (or SIGINT); then it stops its system,
// prints "STOPPED" and exits 0 (1 for bad arguments or a failed start, 2 for a failed stop).
// A kill -9 is the point of the harness: nothing here depends on a clean exit.
//
// The stalled node (tests/faults/stalled_node_test.cpp): on SIGUSR1 it sends one blocking
// message to each of worker_count() plain stall actors (spawned on the first SIGUSR1, named
// after the node and pid), so that every dispatcher worker is stuck in a handler, and prints
// "STALLED <workers>" once all are inside; SIGUSR2 releases them ("RELEASED"); a stall ends by
// itself after 60 s so nothing hangs forever. Its membership, as the node sees it, is printed
// by a watcher thread that needs no dispatcher worker: "EPOCH <epoch> <ns>" at every new epoch
// (the first join included) and "FENCED <epoch> <ns>" when the node fences itself (ns: the
// CLOCK_MONOTONIC time it noticed, within 20 ms).

#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/etcd/etcd_store.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "faults/fault_evidence.hpp"
#include "faults/fault_messages.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using akt::faults::apply_msg;

// What every counter of this process shares (a grain dependency): the node's handler log and
// the fenced store. Thread-safe: the log is one O_APPEND descriptor written a line per write(2);
// the store locks per call (fault_evidence.hpp).
struct evidence {
  evidence(const fs::path& dir, std::string node_name)
      : node(std::move(node_name)),
        pid(::getpid()),
        log_fd(akt::faults::open_append(dir / "handlers" /
                                        (node + "-" + std::to_string(pid) + ".log"))),
        store(dir / "store", node) {}
  ~evidence() {
    if (log_fd >= 0) ::close(log_fd);
  }
  evidence(const evidence&) = delete;
  evidence& operator=(const evidence&) = delete;

  // One handler start, at `ns` (taken first thing in the handler).
  void handler_started(akt::actor_system& sys, std::int64_t ns, std::int64_t token,
                       const char* event, const std::string& grain, std::uint64_t id) {
    // The membership epoch (the lease the node's record lives on) as this node knows it now.
    auto me = akt::cluster::self(sys);
    const long long epoch = me ? static_cast<long long>(me->epoch) : -1;
    const std::string line = "H " + node + " " + std::to_string(pid) + " " + std::to_string(epoch) +
                             " " + std::to_string(token) + " " + std::to_string(ns) + " " + event +
                             " " + grain + " " + std::to_string(id);
    if (!akt::faults::append_line(log_fd, line)) std::perror("handler log");
  }

  const std::string node;
  const pid_t pid;
  const int log_fd;
  akt::faults::fenced_store store;
};

class counter final : public akt::grain {
 public:
  static constexpr std::string_view akt_type_name = akt::faults::k_counter_kind;

  akt::error on_activate(akt::grain_props& props) override {
    const std::int64_t now = akt::faults::monotonic_ns();
    ev_ = props.dependency<evidence>("evidence");
    if (!ev_) return akt::error(akt::errc::invalid_argument, "no evidence dependency");
    name_ = props.identity().name;
    token_ = props.fencing_token();
    ev_->handler_started(props.system(), now, token_, "activate", name_, 0);
    // Raises the store's fence to this activation's token: from now on an older activation's
    // writes are refused, even before this one writes anything.
    switch (ev_->store.open(name_, token_)) {
      case akt::faults::fenced_store::outcome::accepted:
        return {};
      case akt::faults::fenced_store::outcome::refused:
        return akt::error(akt::errc::invalid_argument, std::string(akt::faults::k_store_refused) +
                                                           ": open with token " +
                                                           std::to_string(token_));
      case akt::faults::fenced_store::outcome::failed:
        break;
    }
    return akt::error(akt::errc::invalid_argument, "the fenced store could not be written");
  }

  void on_receive(akt::grain_context& ctx) override {
    const std::int64_t now = akt::faults::monotonic_ns();
    const auto* m = ctx.get_if<apply_msg>();
    const std::int64_t token = ctx.fencing_token();
    ev_->handler_started(ctx.system(), now, token, "receive", name_, m ? m->id : 0);
    if (!m) return ctx.unhandled();
    switch (ev_->store.apply(name_, token, m->id)) {
      case akt::faults::fenced_store::outcome::accepted:
        return ctx.ack();  // only now: an acknowledged message is in the store
      case akt::faults::fenced_store::outcome::refused:
        return ctx.reply_error(akt::error(
            akt::errc::invalid_argument,
            std::string(akt::faults::k_store_refused) + ": token " + std::to_string(token)));
      case akt::faults::fenced_store::outcome::failed:
        break;
    }
    // The line may or may not be in the file: the caller counts it as possibly applied.
    ctx.reply_error(akt::error(akt::errc::handler_failed, "the fenced store could not be written"));
  }

  akt::error on_deactivate(akt::grain_props& props) override {
    const std::int64_t now = akt::faults::monotonic_ns();
    if (ev_) ev_->handler_started(props.system(), now, token_, "deactivate", name_, 0);
    return {};
  }

 private:
  std::shared_ptr<evidence> ev_;
  std::string name_;
  std::int64_t token_ = 0;
};

// The stall (SIGUSR1 / SIGUSR2): one gate shared by the stall actors. Thread-safe: every field
// is guarded by mutex; the actors' handlers wait on cv, the main thread opens and closes it.
struct stall_gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool stalled = false;  // guarded: the handlers wait while it is set
  int inside = 0;        // guarded: handlers now waiting
};

// A plain actor (no grain: the evidence files see nothing of it) whose one message blocks its
// dispatcher worker until the gate opens, or 60 s passed.
class stall_actor final : public akt::actor {
 public:
  explicit stall_actor(std::shared_ptr<stall_gate> gate) : gate_(std::move(gate)) {}
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<int>()) return;
    std::unique_lock<std::mutex> lock(gate_->mutex);
    ++gate_->inside;
    gate_->cv.notify_all();
    (void)gate_->cv.wait_for(lock, std::chrono::seconds(60), [&] { return !gate_->stalled; });
    --gate_->inside;
    gate_->cv.notify_all();
  }

 private:
  std::shared_ptr<stall_gate> gate_;
};

// The stall's driver, run by the main thread on SIGUSR1 / SIGUSR2.
class staller {
 public:
  staller(akt::actor_system& sys, std::string node) : sys_(sys), node_(std::move(node)) {}

  void stall() {
    // Spawned from this (non-worker) thread: a cluster node's spawn claims the name in the
    // store. Named with the pid: unique in the cluster even beside an earlier process of the node.
    while (actors_.size() < sys_.worker_count()) {
      const std::string name = "stall-" + node_ + "-" + std::to_string(::getpid()) + "-" +
                               std::to_string(actors_.size());
      auto p = sys_.spawn<stall_actor>(name, gate_);
      if (!p) {
        std::fprintf(stderr, "stall: spawn %s: %s\n", name.c_str(), p.error().message().c_str());
        return;
      }
      actors_.push_back(*p);
    }
    {
      std::lock_guard<std::mutex> lock(gate_->mutex);
      if (gate_->stalled) return;
      gate_->stalled = true;
    }
    for (akt::pid& p : actors_) {
      if (akt::error e = p.tell(1)) {
        std::fprintf(stderr, "stall: tell: %s\n", e.message().c_str());
      }
    }
    std::unique_lock<std::mutex> lock(gate_->mutex);
    const auto n = static_cast<int>(actors_.size());
    if (gate_->cv.wait_for(lock, std::chrono::seconds(10), [&] { return gate_->inside == n; })) {
      std::printf("STALLED %d\n", n);
    } else {
      std::fprintf(stderr, "stall: only %d of %d workers stuck after 10 s\n", gate_->inside, n);
    }
  }

  void release() {
    {
      std::lock_guard<std::mutex> lock(gate_->mutex);
      if (!gate_->stalled) return;
      gate_->stalled = false;
    }
    gate_->cv.notify_all();
    std::printf("RELEASED\n");
  }

 private:
  akt::actor_system& sys_;
  const std::string node_;
  std::shared_ptr<stall_gate> gate_ = std::make_shared<stall_gate>();
  std::vector<akt::pid> actors_;
};

// Prints the node's membership as it changes (EPOCH, FENCED), every 20 ms, from a thread of its
// own: it reads membership's state, never waits for a dispatcher worker. Stops on destruction.
class membership_watcher {
 public:
  explicit membership_watcher(akt::actor_system& sys)
      : thread_([this, &sys] {
          unsigned long long epoch = 0;
          bool fenced = false;
          std::unique_lock<std::mutex> lock(mutex_);
          while (!cv_.wait_for(lock, std::chrono::milliseconds(20), [&] { return stop_; })) {
            const bool now_fenced = akt::cluster::fenced(sys);
            auto me = akt::cluster::self(sys);
            if (now_fenced && !fenced) {
              std::printf("FENCED %llu %lld\n", epoch,
                          static_cast<long long>(akt::faults::monotonic_ns()));
            }
            fenced = now_fenced;
            if (!now_fenced && me && me->epoch != 0 &&
                static_cast<unsigned long long>(me->epoch) != epoch) {
              epoch = static_cast<unsigned long long>(me->epoch);
              std::printf("EPOCH %llu %lld\n", epoch,
                          static_cast<long long>(akt::faults::monotonic_ns()));
            }
          }
        }) {}
  ~membership_watcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  membership_watcher(const membership_watcher&) = delete;
  membership_watcher& operator=(const membership_watcher&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mutex_
  std::thread thread_;
};

// A plain actor named "probe-<node>" (a cluster-wide name; issue 20, restart under the same name):
// each apply_msg it handles appends "M <node> <pid> <ns> <id>" to DIR/probes/<node>-<pid>.log first
// thing, then answers with the same message. A peer holding the pid of a killed process's probe
// must never reach the probe of the process started again at its address (remoting tells the two
// apart by their incarnation): its lines show what each process ran.
class probe final : public akt::actor {
 public:
  explicit probe(std::shared_ptr<evidence> ev, const fs::path& dir)
      : ev_(std::move(ev)),
        fd_(akt::faults::open_append(dir / "probes" /
                                     (ev_->node + "-" + std::to_string(ev_->pid) + ".log"))) {}
  ~probe() override {
    if (fd_ >= 0) ::close(fd_);
  }
  probe(const probe&) = delete;
  probe& operator=(const probe&) = delete;

  void receive(akt::receive_context& ctx) override {
    const std::int64_t now = akt::faults::monotonic_ns();
    const auto* m = ctx.get_if<apply_msg>();
    if (!m) return;
    (void)akt::faults::append_line(fd_, "M " + ev_->node + " " + std::to_string(ev_->pid) + " " +
                                            std::to_string(now) + " " + std::to_string(m->id));
    if (ctx.expects_reply()) ctx.reply(apply_msg{m->id});
  }

 private:
  std::shared_ptr<evidence> ev_;
  const int fd_;
};

// Waits until stdin reaches its end or a blocked SIGTERM / SIGINT is pending; a SIGUSR1 stalls
// the node's workers and a SIGUSR2 releases them meanwhile.
void wait_for_the_end(int signals, staller& stall) {
  pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {signals, POLLIN, 0}};
  for (;;) {
    const int r = ::poll(fds, 2, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) {  // a signal
      signalfd_siginfo info{};
      if (::read(signals, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
      if (info.ssi_signo == SIGUSR1) {
        stall.stall();
      } else if (info.ssi_signo == SIGUSR2) {
        stall.release();
      } else {
        return;  // SIGTERM, SIGINT
      }
      continue;
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) != 0) {
      char buf[256];
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // end of input: the harness is gone or done with us
    }
  }
}

// Prints the node's member view (a VIEW line) each time SIGWINCH arrives on `views` (a
// signalfd), until `stop`; polls it every 100 ms so that it notices the stop.
void report_views(akt::actor_system& sys, int views, const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_acquire)) {
    pollfd p{views, POLLIN, 0};
    if (::poll(&p, 1, 100) != 1 || (p.revents & POLLIN) == 0) continue;
    signalfd_siginfo info{};
    if (::read(views, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
    std::vector<std::string> seen;
    for (const auto& m : akt::cluster::members(sys))
      seen.push_back(m.name + ":" + std::to_string(m.epoch));
    std::sort(seen.begin(), seen.end());
    std::string line = "VIEW";
    for (const auto& s : seen) line += " " + s;
    std::printf("%s\n", line.c_str());
  }
}

int usage(const char* self) {
  std::fprintf(stderr,
               "usage: %s --etcd HOST:PORT[,HOST:PORT...] --cluster NAME --node NAME --dir DIR "
               "[--ttl SECONDS]\n"
               "       [--port PORT] [--old-process-gone 0|1] [--advertise HOST:PORT]\n",
               self);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string endpoint, cluster, node, dir;
  long ttl = 2;
  long port = 0;
  bool old_process_gone = false;
  std::string advertise_host;  // --advertise HOST:PORT: empty is the bound one
  long advertise_port = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage(argv[0]);
    const char* value = argv[++i];
    if (arg == "--etcd") {
      endpoint = value;
    } else if (arg == "--cluster") {
      cluster = value;
    } else if (arg == "--node") {
      node = value;
    } else if (arg == "--dir") {
      dir = value;
    } else if (arg == "--ttl") {
      ttl = std::strtol(value, nullptr, 10);
    } else if (arg == "--port") {
      port = std::strtol(value, nullptr, 10);
      if (port < 0 || port > 65535) return usage(argv[0]);
    } else if (arg == "--old-process-gone") {
      old_process_gone = std::strtol(value, nullptr, 10) != 0;
    } else if (arg == "--advertise") {
      const std::string text = value;
      const auto colon = text.rfind(':');
      if (colon == std::string::npos || colon == 0) return usage(argv[0]);
      advertise_host = text.substr(0, colon);
      advertise_port = std::strtol(text.c_str() + colon + 1, nullptr, 10);
      if (advertise_port <= 0 || advertise_port > 65535) return usage(argv[0]);
    } else {
      return usage(argv[0]);
    }
  }
  if (endpoint.empty() || cluster.empty() || node.empty() || dir.empty() || ttl < 2)
    return usage(argv[0]);

  // Blocked before any thread starts, so that every thread inherits the mask and the signals
  // wait for the signalfd below instead of killing the process mid-flight.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGUSR1);  // the stall and its release
  sigaddset(&mask, SIGUSR2);
  if (pthread_sigmask(SIG_BLOCK, &mask, nullptr) != 0) return 1;
  const int signals = ::signalfd(-1, &mask, SFD_CLOEXEC);
  if (signals < 0) return 1;
  sigset_t view_mask;  // SIGWINCH: print the member view (report_views)
  sigemptyset(&view_mask);
  sigaddset(&view_mask, SIGWINCH);
  if (pthread_sigmask(SIG_BLOCK, &view_mask, nullptr) != 0) return 1;
  const int views = ::signalfd(-1, &view_mask, SFD_CLOEXEC);
  if (views < 0) return 1;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  std::error_code ec;
  fs::create_directories(fs::path(dir) / "handlers", ec);
  fs::create_directories(fs::path(dir) / "store", ec);
  fs::create_directories(fs::path(dir) / "probes", ec);
  if (akt::error e = akt::faults::register_fault_messages()) {
    std::fprintf(stderr, "register messages: %s\n", e.message().c_str());
    return 1;
  }

  akt::system_config cfg;
  cfg.workers = 2;
  cfg.shutdown_timeout = 10s;
  akt::remote_config rc;
  rc.host = "127.0.0.1";
  rc.port = static_cast<std::uint16_t>(port);
  rc.advertised_host = advertise_host;
  rc.advertised_port = static_cast<std::uint16_t>(advertise_port);
  rc.heartbeat_interval = 100ms;
  rc.heartbeat_misses = akt::faults::k_heartbeat_misses;
  rc.node_lost_after = 2s;
  rc.reconnect_min = 10ms;
  rc.reconnect_max = 200ms;
  cfg.remote = rc;
  akt::cluster_config cc;
  cc.cluster_name = cluster;
  cc.node_name = node;
  akt::etcd::etcd_options eo;
  // --etcd may list several members, comma-separated (a 3-member etcd): the store fails over.
  for (std::size_t begin = 0; begin <= endpoint.size();) {
    const std::size_t end = std::min(endpoint.find(',', begin), endpoint.size());
    if (end > begin) eo.endpoints.push_back(endpoint.substr(begin, end - begin));
    begin = end + 1;
  }
  eo.call_timeout = 1000ms;
  eo.connect_wait = 10000ms;
  cc.store = akt::etcd::provider(eo);
  cc.lease_ttl = std::chrono::seconds(ttl);
  cc.fence_margin = 300ms;
  // A node started again under its name waits here until its killed predecessor's lease expired.
  cc.start_wait = 20s;
  cc.old_process_gone = old_process_gone;
  cc.grain_kinds = {std::string(akt::faults::k_counter_kind)};
  cfg.cluster = cc;

  akt::actor_system sys(node, cfg);
  auto shared = std::make_shared<evidence>(fs::path(dir), node);
  if (shared->log_fd < 0) {
    std::fprintf(stderr, "cannot open the handler log under %s\n", dir.c_str());
    return 1;
  }
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("evidence", shared);
  akt::grain_options options;
  options.dependencies = deps;
  if (akt::error e = akt::with_grain_default_options<counter>(sys, options)) {
    std::fprintf(stderr, "register kind: %s\n", e.message().c_str());
    return 1;
  }
  if (auto started = sys.start(); !started) {
    std::fprintf(stderr, "start: %s\n", started.error().message().c_str());
    return 1;
  }
  if (auto ready = akt::cluster::wait_ready(sys, 20s); !ready) {
    std::fprintf(stderr, "cluster not ready: %s\n", ready.error().message().c_str());
    (void)sys.stop();
    return 1;
  }
  if (auto p = sys.spawn<probe>("probe-" + node, shared, fs::path(dir)); !p) {
    std::fprintf(stderr, "spawn the probe: %s\n", p.error().message().c_str());
    (void)sys.stop();
    return 1;
  }
  std::printf("READY %s\n", sys.address().c_str());

  std::atomic<bool> views_stop{false};
  std::thread view_reporter([&] { report_views(sys, views, views_stop); });
  staller stall(sys, node);
  {
    membership_watcher watcher(sys);
    wait_for_the_end(signals, stall);
  }
  stall.release();  // a stalled node stops too: its workers must finish their handlers
  views_stop.store(true, std::memory_order_release);
  view_reporter.join();
  ::close(views);
  auto stopped = sys.stop();
  ::close(signals);
  if (!stopped) {
    std::fprintf(stderr, "stop: %s\n", stopped.error().message().c_str());
    return 2;
  }
  std::printf("STOPPED\n");
  return 0;
}
