// Ping-pong between two processes, over akt's remoting, with protobuf messages. Run without
// arguments, the program starts its ponger as a child process of itself (`remote_ping_pong
// pong`), looks it up, plays rounds of ping-pong three ways (blocking asks from main,
// non-blocking requests from an actor, a grain on the other node), prints the round-trip
// figures, and stops the child by its pid. Arguments: a number of rounds (1000), and
// `--tls <dir>` to run both nodes over mutual TLS with <dir>/server.pem, server.key and ca.pem
// (tests/remote/certs has a set). Quoted by docs/guide/06-remoting.md.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include <akt/akt.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "remote_ping_pong.pb.h"

extern char** environ;

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// [plain_struct]
// A plain struct crosses nodes under a stable name, with an encode/decode pair.
struct summary {
  static constexpr std::string_view akt_type_name = "pingpong.summary";
  std::uint64_t rounds = 0;
  double mean_micros = 0;
};

akt::error encode_summary(const summary& s, akt::remote::byte_writer& w) {
  w.put_u64(s.rounds);
  w.put_u64(std::bit_cast<std::uint64_t>(s.mean_micros));
  return {};
}

akt::result<summary> decode_summary(akt::remote::byte_reader& r) {
  summary s;
  std::uint64_t bits = 0;
  if (!r.get_u64(s.rounds) || !r.get_u64(bits)) return akt::errc::decode_failed;
  s.mean_micros = std::bit_cast<double>(bits);
  return s;
}
// [/plain_struct]

// [register]
void register_messages() {
  // One line per protobuf message: it crosses nodes under its full name ("pingpong.Ping").
  (void)akt::remote::register_protobuf<pingpong::Ping>();
  (void)akt::remote::register_protobuf<pingpong::Pong>();
  (void)akt::remote::register_message<summary>(&encode_summary, &decode_summary);
}
// [/register]

// [ponger]
// Answers each asked Ping with a Pong of the same round (a told one needs no answer), and a
// summary with a line of text (std::string is one of the built-in serializers).
class ponger : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    akt::match(
        ctx,
        [&](const pingpong::Ping& ping, auto& c) {
          pingpong::Pong pong;
          pong.set_round(ping.round());
          if (c.expects_reply()) c.reply(std::move(pong));
        },
        [&](const summary& s, auto& c) {
          c.reply("pong heard " + std::to_string(s.rounds) + " rounds of " +
                  std::to_string(static_cast<int>(s.mean_micros)) + " us");
        });
  }
};
// [/ponger]

// [tally]
// A grain hosted by the ponger's node: counts the pings sent to its identity.
class tally : public akt::grain {
 public:
  static constexpr std::string_view akt_type_name = "pingpong.tally";
  void on_receive(akt::grain_context& ctx) override {
    akt::match(ctx, [&](const pingpong::Ping& ping, auto& c) {
      pingpong::Pong pong;
      pong.set_round(ping.round());
      pong.set_count(++count_);
      c.reply(std::move(pong));
    });
  }

 private:
  std::uint64_t count_ = 0;
};
// [/tally]

// [settings]
akt::system_config node_settings(const char* tls_dir) {
  akt::system_config cfg;
  cfg.workers = 2;
  akt::remote_config rc;          // listens on 127.0.0.1, any free port
  rc.heartbeat_interval = 200ms;  // a silent peer is closed after 3 missed heartbeats
  rc.node_lost_after = 2s;        // a peer unreachable this long is lost
  if (tls_dir != nullptr) {       // mutual TLS: both nodes present a certificate of the CA
    const std::string dir = tls_dir;
    rc.tls.enabled = true;
    rc.tls.certificate_file = dir + "/server.pem";
    rc.tls.private_key_file = dir + "/server.key";
    rc.tls.ca_file = dir + "/ca.pem";
    rc.tls.mutual = true;
  }
  cfg.remote = rc;
  return cfg;
}
// [/settings]

// ---- the ponger's process ----

int run_ponger(const char* tls_dir) {
  // SIGTERM and SIGINT wait in a signalfd (blocked before any thread starts, so every thread
  // inherits the mask): the process stops its system cleanly instead of dying mid-flight.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  const int signals = signalfd(-1, &mask, SFD_CLOEXEC);

  // [serve]
  akt::actor_system sys("pong", node_settings(tls_dir));
  if (!sys.start()) return 1;
  (void)sys.register_actor_kind<ponger>("ponger");  // spawn_on from other nodes
  (void)akt::register_grain_kind<tally>(sys);
  if (!sys.spawn<ponger>("ponger")) return 1;
  std::printf("ADDRESS %s\n", sys.address().c_str());  // akt://pong@127.0.0.1:<port>
  // [/serve]
  std::fflush(stdout);

  // Runs until SIGTERM, or until stdin closes (the parent went away).
  pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {signals, POLLIN, 0}};
  for (bool done = false; !done;) {
    if (poll(fds, 2, -1) < 0) {
      done = errno != EINTR;
    } else if (fds[1].revents != 0) {
      done = true;
    } else if (fds[0].revents != 0) {
      char buf[64];
      done = read(STDIN_FILENO, buf, sizeof buf) <= 0;
    }
  }
  return sys.stop() ? 0 : 2;
}

// ---- the pinger's process ----

// [pinger]
// Plays rounds of ping-pong with requests: each Pong's continuation sends the next Ping, on
// this actor's turn, and no worker ever blocks. The play ask is answered after the last Pong.
struct play {  // local only: it never crosses nodes, so it needs no serializer
  std::uint64_t rounds;
};

class pinger : public akt::actor {
 public:
  explicit pinger(akt::pid partner) : partner_(std::move(partner)) {}
  void receive(akt::receive_context& ctx) override {
    if (auto* p = ctx.get_if<play>()) {
      rounds_ = p->rounds;
      done_ = ctx.defer_reply();  // answered from the last continuation
      next(ctx);
    }
  }

 private:
  void next(akt::receive_context& ctx) {
    pingpong::Ping ping;
    ping.set_round(round_);
    (void)ctx.request<pingpong::Pong>(
        partner_, std::move(ping), 5s,
        [this](akt::receive_context& c, akt::result<pingpong::Pong> pong) {
          if (!pong) return done_.reply_error(pong.error());  // the same errc as locally
          if (++round_ == rounds_) return done_.reply(round_);
          next(c);
        });
  }

  akt::pid partner_;
  akt::reply_handle done_;
  std::uint64_t rounds_ = 0, round_ = 0;
};
// [/pinger]

// [watcher]
// Watches an actor on another node and reports why it stopped: ok for a stop, node_lost when
// its node vanished.
struct watch_it {};

class watcher : public akt::actor {
 public:
  watcher(akt::pid target, std::promise<akt::error>* stopped)
      : target_(std::move(target)), stopped_(stopped) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<watch_it>()) {
      ctx.watch(target_);
      ctx.ack();
    } else if (auto* t = ctx.get_if<akt::terminated>()) {
      stopped_->set_value(t->reason);
    }
  }

 private:
  akt::pid target_;
  std::promise<akt::error>* stopped_;
};
// [/watcher]

// The ponger as a child process of this program, its stdin and stdout pipes to this one.
struct child_process {
  pid_t pid = -1;
  int to_child = -1, from_child = -1;

  bool start(const char* tls_dir) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return false;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // none of this process's sockets
    std::string self = "/proc/self/exe", pong = "pong", tls = "--tls";
    std::vector<char*> args{self.data(), pong.data()};
    if (tls_dir != nullptr) {
      args.push_back(tls.data());
      args.push_back(const_cast<char*>(tls_dir));
    }
    args.push_back(nullptr);
    const int rc = posix_spawn(&pid, self.c_str(), &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    to_child = in[1];
    from_child = out[0];
    return rc == 0;
  }

  // The child's first line (its ADDRESS line), waited for at most `bound`.
  std::string first_line(std::chrono::milliseconds bound) {
    std::string line;
    const auto deadline = steady::now() + bound;
    while (line.find('\n') == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
      pollfd p{from_child, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
      char buf[256];
      const ssize_t n = read(from_child, buf, sizeof buf);
      if (n <= 0) return {};
      line.append(buf, static_cast<std::size_t>(n));
    }
    return line.substr(0, line.find('\n'));
  }

  // [stop_child]
  // Stops the child by its pid: SIGTERM, a bounded wait for its exit, SIGKILL as a last resort.
  int stop(std::chrono::milliseconds bound) {
    kill(pid, SIGTERM);
    const auto deadline = steady::now() + bound;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (steady::now() >= deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
      }
      std::this_thread::sleep_for(5ms);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // [/stop_child]
};

// Microseconds at quantile q of sorted samples.
double at(const std::vector<double>& sorted, double q) {
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(q * sorted.size()))];
}

int play_rounds(akt::actor_system& sys, const std::string& address, std::uint64_t rounds) {
  const std::string node = address.substr(address.find('@') + 1);  // "127.0.0.1:<port>"

  // [lookup]
  // A round trip to the ponger's node: actor_not_found, unreachable, ... come back as errors.
  akt::result<akt::pid> partner = sys.lookup(address + "/user/ponger");
  if (!partner) {
    std::printf("lookup: %s\n", partner.error().message().c_str());
    return 1;
  }
  // [/lookup]

  // [ask]
  std::vector<double> micros;
  for (std::uint64_t i = 0; i < rounds; ++i) {
    pingpong::Ping ping;
    ping.set_round(i);
    const auto t0 = steady::now();
    akt::result<pingpong::Pong> pong = partner->ask<pingpong::Pong>(ping, 5s);
    if (!pong) {
      std::printf("ask: %s\n", pong.error().message().c_str());
      return 1;
    }
    micros.push_back(std::chrono::duration<double, std::micro>(steady::now() - t0).count());
  }
  // [/ask]
  std::sort(micros.begin(), micros.end());
  double total = 0;
  for (double m : micros) total += m;
  std::printf("asks:     %llu round trips, mean %.1f us, p50 %.1f us, p99 %.1f us\n",
              static_cast<unsigned long long>(rounds), total / static_cast<double>(rounds),
              at(micros, 0.5), at(micros, 0.99));
  akt::result<std::string> heard =
      partner->ask<std::string>(summary{rounds, total / static_cast<double>(rounds)}, 5s);
  std::printf("summary:  %s\n", heard ? heard->c_str() : heard.error().message().c_str());

  // [tell]
  // A tell returns once the message is queued for the node: ok, or why it was refused
  // (window_full when the receivers are behind, unreachable, not_serializable, ...).
  pingpong::Ping hello;
  hello.set_note("hello from ping");
  if (akt::error e = partner->tell(hello)) std::printf("tell: %s\n", e.message().c_str());
  // [/tell]

  // [spawn_on]
  // A second ponger, created on the other node from its registered kind.
  akt::result<akt::pid> second = sys.spawn_on(node, "ponger", "ponger-2");
  // [/spawn_on]
  if (!second) {
    std::printf("spawn_on: %s\n", second.error().message().c_str());
    return 1;
  }
  auto p = sys.spawn<pinger>("pinger", *second);
  if (!p) return 1;
  const auto t0 = steady::now();
  akt::result<std::uint64_t> played = p->ask<std::uint64_t>(play{rounds}, 60s);
  if (!played) {
    std::printf("requests: %s\n", played.error().message().c_str());
    return 1;
  }
  const double secs = std::chrono::duration<double>(steady::now() - t0).count();
  std::printf("requests: %llu round trips in %.3f s, %.0f per second\n",
              static_cast<unsigned long long>(*played), secs, static_cast<double>(*played) / secs);

  // [grain]
  // The grain "pingpong.tally/table-1" on the ponger's node: activated there on first message.
  const akt::grain_identity table{"pingpong.tally", "table-1"};
  pingpong::Ping ping;
  (void)akt::remote::tell_grain_on(sys, node, table, ping, {.one_way = true});
  akt::result<pingpong::Pong> counted =
      akt::remote::ask_grain_on<pingpong::Pong>(sys, node, table, ping, 5s);
  // [/grain]
  if (!counted) {
    std::printf("grain: %s\n", counted.error().message().c_str());
    return 1;
  }
  std::printf("grain:    %s counted %llu pings\n", table.str().c_str(),
              static_cast<unsigned long long>(counted->count()));

  // [stats]
  for (const akt::peer_stats& peer : sys.peers()) {
    std::printf("peer %s: %llu messages and %llu bytes out in %llu writes, %llu messages in\n",
                peer.address.c_str(), static_cast<unsigned long long>(peer.messages_out),
                static_cast<unsigned long long>(peer.bytes_out),
                static_cast<unsigned long long>(peer.writes),
                static_cast<unsigned long long>(peer.messages_in));
  }
  // [/stats]
  return 0;
}

int run_pinger(const char* tls_dir, std::uint64_t rounds) {
  akt::actor_system sys("ping", node_settings(tls_dir));
  // [events]
  akt::subscription up = sys.events().subscribe<akt::peer_connected>(
      [](const akt::peer_connected& e) { std::printf("connected to %s\n", e.address.c_str()); });
  // [/events]
  if (!sys.start()) return 1;

  child_process child;
  if (!child.start(tls_dir)) {
    std::printf("could not start the ponger: %s\n", std::strerror(errno));
    return 1;
  }
  const std::string line = child.first_line(20s);
  if (line.rfind("ADDRESS ", 0) != 0) {
    std::printf("the ponger did not start\n");
    child.stop(5s);
    return 1;
  }
  const std::string address = line.substr(8);  // akt://pong@127.0.0.1:<port>
  int failed = play_rounds(sys, address, rounds);

  // Watch the ponger, then stop its process: the watcher hears it go.
  std::promise<akt::error> stopped;
  std::future<akt::error> gone = stopped.get_future();
  akt::result<akt::pid> partner = sys.lookup(address + "/user/ponger");
  akt::result<akt::pid> w = partner ? sys.spawn<watcher>("watcher", *partner, &stopped)
                                    : akt::result<akt::pid>(partner.error());
  const bool watching = w && w->ask(watch_it{}, 5s).has_value();
  const int status = child.stop(10s);
  std::printf("ponger process %d exited with %d\n", static_cast<int>(child.pid), status);
  if (watching && gone.wait_for(10s) == std::future_status::ready) {
    const akt::error why = gone.get();
    std::printf("watcher: the ponger stopped (%s)\n", why ? why.message().c_str() : "ok");
  } else {
    std::printf("watcher: no terminated\n");
    failed = 1;
  }
  close(child.to_child);
  close(child.from_child);
  if (!sys.stop()) failed = 1;
  return failed != 0 || status != 0 ? 1 : 0;
}

int main(int argc, char** argv) {
  register_messages();
  const char* tls_dir = nullptr;
  bool pong = false;
  std::uint64_t rounds = 1000;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "pong") {
      pong = true;
    } else if (arg == "--tls" && i + 1 < argc) {
      tls_dir = argv[++i];
    } else {
      rounds = std::max<std::uint64_t>(1, std::strtoull(argv[i], nullptr, 10));
    }
  }
  return pong ? run_ponger(tls_dir) : run_pinger(tls_dir, rounds);
}
