// akt_fault_node: one cluster node in a process of its own, for the fault harness (issue 20,
// tests/faults/kill_nine_test.cpp).
//
//   akt_fault_node --etcd HOST:PORT[,HOST:PORT...] --cluster NAME --node NAME --dir DIR
//                  [--ttl SECONDS]
//
// It starts an actor system named after the node with remoting on 127.0.0.1 (any free port)
// and the cluster on etcd (lease TTL --ttl, 2 s by default: etcd's minimum), hosting the grain
// kind faults.counter. Every handler start of a counter (on_activate, each on_receive,
// on_deactivate) appends one line to DIR/handlers/<node>-<pid>.log before it does anything
// else; each apply_msg is then written to the fenced store in DIR/store/ with the activation's
// fencing token, and answered with ack, or with an error when the store refused it (the formats
// are in fault_evidence.hpp). Once joined it prints
//
//   READY <akt://node@127.0.0.1:port>
//
// On SIGUSR1 it prints its member view, the members it sees sorted by name with their epochs:
//
//   VIEW driver:7587... n0:7587... n1:...
//
// and runs until its stdin closes or it gets SIGTERM (or SIGINT); then it stops its system,
// prints "STOPPED" and exits 0 (1 for bad arguments or a failed start, 2 for a failed stop).
// A kill -9 is the point of the harness: nothing here depends on a clean exit.

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
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
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

// Waits until stdin reaches its end or a blocked SIGTERM / SIGINT is pending.
void wait_for_the_end(int signals) {
  pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {signals, POLLIN, 0}};
  for (;;) {
    const int r = ::poll(fds, 2, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) return;  // a signal
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) != 0) {
      char buf[256];
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // end of input: the harness is gone or done with us
    }
  }
}

// Prints the node's member view (a VIEW line) each time SIGUSR1 arrives on `views` (a
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
               "[--ttl SECONDS]\n",
               self);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string endpoint, cluster, node, dir;
  long ttl = 2;
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
  if (pthread_sigmask(SIG_BLOCK, &mask, nullptr) != 0) return 1;
  const int signals = ::signalfd(-1, &mask, SFD_CLOEXEC);
  if (signals < 0) return 1;
  sigset_t view_mask;  // SIGUSR1: print the member view (report_views)
  sigemptyset(&view_mask);
  sigaddset(&view_mask, SIGUSR1);
  if (pthread_sigmask(SIG_BLOCK, &view_mask, nullptr) != 0) return 1;
  const int views = ::signalfd(-1, &view_mask, SFD_CLOEXEC);
  if (views < 0) return 1;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  std::error_code ec;
  fs::create_directories(fs::path(dir) / "handlers", ec);
  fs::create_directories(fs::path(dir) / "store", ec);
  if (akt::error e = akt::faults::register_fault_messages()) {
    std::fprintf(stderr, "register messages: %s\n", e.message().c_str());
    return 1;
  }

  akt::system_config cfg;
  cfg.workers = 2;
  cfg.shutdown_timeout = 10s;
  akt::remote_config rc;
  rc.host = "127.0.0.1";
  rc.port = 0;
  rc.heartbeat_interval = 100ms;
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
  std::printf("READY %s\n", sys.address().c_str());

  std::atomic<bool> views_stop{false};
  std::thread view_reporter([&] { report_views(sys, views, views_stop); });
  wait_for_the_end(signals);
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
