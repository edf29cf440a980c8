// akt_compare_remote: the remote shapes of akt_bench (remote_bench.cpp) on akt and on CAF 0.17's
// remoting (libcaf_io, BASP: publish / remote_actor), each in two processes on loopback, with the
// same number of worker threads, alternating akt / CAF runs, printing the median of each, the
// akt/CAF ratio and the CPU each process used. See bench/README.md.
//
//   akt_compare_remote [scale] [runs] [filter]
//     scale  multiplies every message count (default 1.0)
//     runs   runs per framework and shape (default 3)
//     filter runs only the shapes whose name contains this text (default: all)
//   akt_compare_remote --serve akt|caf <pairs> <workers>
//     the server process: the program starts itself this way for every run (and stops it by its
//     pid, SIGTERM, afterwards); it prints "port <n>" once its receivers are reachable.
//
// Every run starts a fresh server process and a fresh client system (torn down afterwards), so
// nothing of one run or framework competes with the next. Tells are timed until the receivers
// processed every message: after its last tell each sending thread asks its receiver for its
// count until the count is reached (the first such ask travels behind the tells, so it usually
// answers at once). Asks are timed until the last reply arrived. CPU: the client's
// (CLOCK_PROCESS_CPUTIME_ID) and the server's (its threads' /proc schedstat) over the timed
// region, in cores (CPU seconds per wall second; this machine has hardware_concurrency of them).
// Also printed: the machine's ceiling, plain loopback TCP with 64-byte frames (raw_tcp.hpp).

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <akt/akt.hpp>
#include <atomic>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "compare/compare_support.hpp"
#include "raw_tcp.hpp"
#include "remote_messages.hpp"

namespace {

using akt_bench::completion;
using akt_bench::count_query;
using akt_bench::remote_ping;
using akt_bench::thread_team;
using akt_compare::clock_type;
using akt_compare::human;
using akt_compare::median;
using akt_compare::seconds_since;

constexpr auto k_timeout = std::chrono::seconds(10);
constexpr unsigned k_pipeline = 256;         // requests in flight per pair (AskPipelined)
constexpr std::size_t k_big_message = 1024;  // bytes of a Tell1KB message
// How long a sender waits between two count queries once the first did not find every message
// processed: bounds the time a finished run may go unnoticed.
constexpr auto k_poll_pause = std::chrono::microseconds(100);

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "akt_compare_remote: %s\n", what.c_str());
  std::exit(1);
}

struct config {
  unsigned workers = 1;
  unsigned pairs = 1;
  std::uint64_t tell_single = 400'000;
  std::uint64_t tell_pairwise = 400'000;  // in all, split over the pairs
  std::uint64_t ask_pairwise = 10'000;    // in all
  std::uint64_t ask_pipelined = 100'000;  // in all
  std::uint64_t ask_latency = 5'000;
  std::uint64_t tell_1kb = 100'000;
};

// One run of one shape on one framework.
struct run_result {
  double value = 0;               // the rate, or the p50 in microseconds for AskLatency
  double p99 = 0, p999 = 0;       // AskLatency, microseconds
  double client_cpu = 0;          // cores
  double server_cpu = 0;          // cores
  std::uint64_t window_full = 0;  // akt: sends refused for a full window, then resent
};

// =============================================================================================
// The server process

class server_process {
 public:
  server_process(const char* framework, unsigned pairs, unsigned workers) {
    int fds[2];
    if (::pipe(fds) != 0) fail("pipe");
    const std::string p = std::to_string(pairs), w = std::to_string(workers);
    pid_ = ::fork();
    if (pid_ < 0) fail("fork");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a client that dies takes its server along
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      const char* args[] = {
          "akt_compare_remote", "--serve", framework, p.c_str(), w.c_str(), nullptr};
      ::execv("/proc/self/exe", const_cast<char* const*>(args));
      std::_Exit(127);
    }
    ::close(fds[1]);
    std::FILE* in = ::fdopen(fds[0], "r");
    unsigned port = 0;
    if (in == nullptr || std::fscanf(in, "port %u", &port) != 1 || port == 0 || port > 65535)
      fail(std::string("the ") + framework + " server did not report its port");
    std::fclose(in);
    port_ = static_cast<std::uint16_t>(port);
  }
  ~server_process() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  server_process(const server_process&) = delete;
  server_process& operator=(const server_process&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  std::uint64_t cpu_ns() const noexcept { return akt_bench::other_process_cpu_ns(pid_); }

 private:
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

// Wall time and both processes' CPU time over a timed region.
class cpu_meter {
 public:
  explicit cpu_meter(const server_process& s)
      : server_(s),
        server0_(s.cpu_ns()),
        client0_(akt_bench::process_cpu_ns()),
        t0_(clock_type::now()) {}
  // Seconds since construction; fills r's CPU figures.
  double stop(run_result& r) const {
    const double wall = seconds_since(t0_);
    const std::uint64_t client = akt_bench::process_cpu_ns() - client0_;
    const std::uint64_t server = server_.cpu_ns() - server0_;
    r.client_cpu = static_cast<double>(client) / 1e9 / wall;
    r.server_cpu = static_cast<double>(server) / 1e9 / wall;
    return wall;
  }

 private:
  const server_process& server_;
  std::uint64_t server0_, client0_;
  clock_type::time_point t0_;
};

void latency_figures(std::vector<std::uint64_t>& ns, double seconds, run_result& r) {
  r.value = static_cast<double>(akt_bench::percentile(ns, 0.50)) / 1e3;
  r.p99 = static_cast<double>(akt_bench::percentile(ns, 0.99)) / 1e3;
  r.p999 = static_cast<double>(akt_bench::percentile(ns, 0.999)) / 1e3;
  (void)seconds;
}

// =============================================================================================
// akt

struct akt_sink final : akt::actor {
  std::uint64_t count = 0;
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<remote_ping>() != nullptr || ctx.get_if<std::string>() != nullptr) {
      ++count;
    } else if (ctx.get_if<count_query>() != nullptr) {
      ctx.reply(count);
    }
  }
};

struct akt_echo final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (const auto* p = ctx.get_if<remote_ping>(); p != nullptr && ctx.expects_reply())
      ctx.reply(remote_ping{p->n + 1});
  }
};

akt::system_config akt_node_config(unsigned workers) {
  akt_bench::register_remote_messages();
  akt::system_config cfg;
  cfg.workers = workers;
  cfg.remote = akt::remote_config{};  // 127.0.0.1, a free port
  return akt_bench::with_env_overrides(std::move(cfg));
}

[[noreturn]] void serve_akt(unsigned pairs, unsigned workers) {
  akt::actor_system sys("server", akt_node_config(workers));
  if (auto r = sys.start(); !r) fail("akt server start: " + r.error().message());
  for (unsigned i = 0; i < pairs; ++i) {
    if (!sys.spawn<akt_sink>("sink-" + std::to_string(i)) ||
        !sys.spawn<akt_echo>("echo-" + std::to_string(i)))
      fail("akt server spawn");
  }
  const std::string a = sys.address();
  std::printf("port %s\n", a.substr(a.rfind(':') + 1).c_str());
  std::fflush(stdout);
  for (;;) ::pause();
}

struct akt_client {
  akt::actor_system sys;
  std::uint16_t port;
  akt_client(unsigned workers, std::uint16_t p) : sys("client", akt_node_config(workers)), port(p) {
    if (auto r = sys.start(); !r) fail("akt client start: " + r.error().message());
  }
  ~akt_client() { (void)sys.stop(); }
  akt::pid lookup(const std::string& name) {
    auto p = sys.lookup("akt://server@127.0.0.1:" + std::to_string(port) + "/user/" + name);
    if (!p) fail("akt lookup " + name + ": " + p.error().message());
    return std::move(*p);
  }
};

// Resends while the window is full (the receivers are behind: back-pressure), counting.
template <class Send>
akt::error akt_send(std::atomic<std::uint64_t>& window_full, Send send) {
  akt::error e = send();
  for (int spins = 0; e == akt::errc::window_full; ++spins) {
    window_full.fetch_add(1, std::memory_order_relaxed);
    if (spins < 64)
      akt_bench::cpu_relax();
    else
      std::this_thread::yield();
    e = send();
  }
  return e;
}

// Asks the sink for its count until it reached `target`.
void akt_wait_count(const akt::pid& sink, std::uint64_t target) {
  for (;;) {
    auto n = sink.ask<std::uint64_t>(count_query{}, k_timeout);
    if (!n) fail("akt count query: " + n.error().message());
    if (*n >= target) return;
    std::this_thread::sleep_for(k_poll_pause);
  }
}

// `pairs` threads, each telling `per_pair` messages to its own sink on the server (1 KB strings
// when big), then waiting until the sink counted them. Messages per second.
run_result akt_tells(const config& cfg, unsigned pairs, std::uint64_t per_pair, bool big) {
  server_process srv("akt", pairs, cfg.workers);
  akt_client cl(cfg.workers, srv.port());
  std::vector<akt::pid> sinks;
  for (unsigned i = 0; i < pairs; ++i) sinks.push_back(cl.lookup("sink-" + std::to_string(i)));
  std::atomic<std::uint64_t> window_full{0};
  const std::string payload(k_big_message, 'x');
  std::uint64_t batch = std::max<std::uint64_t>(per_pair / 10, 1);  // warm-up
  std::uint64_t target = batch;
  thread_team team(pairs, [&](unsigned i) {
    for (std::uint64_t k = 0; k < batch; ++k) {
      akt::error e = akt_send(window_full, [&] {
        return big ? sinks[i].tell(std::string(payload))
                   : sinks[i].tell(remote_ping{static_cast<std::int64_t>(k)});
      });
      if (e) fail("akt tell: " + e.message());
    }
    akt_wait_count(sinks[i], target);
  });
  team.run_round();
  batch = per_pair;
  target += per_pair;
  run_result r;
  const std::uint64_t wf0 = window_full.load();
  cpu_meter m(srv);
  team.run_round();
  const double s = m.stop(r);
  r.value = static_cast<double>(per_pair * pairs) / s;
  r.window_full = window_full.load() - wf0;
  return r;
}

// `pairs` threads, each making `per_pair` sequential asks to its own echo. Asks per second.
run_result akt_asks(const config& cfg, unsigned pairs, std::uint64_t per_pair) {
  server_process srv("akt", pairs, cfg.workers);
  akt_client cl(cfg.workers, srv.port());
  std::vector<akt::pid> echoes;
  for (unsigned i = 0; i < pairs; ++i) echoes.push_back(cl.lookup("echo-" + std::to_string(i)));
  std::uint64_t batch = std::max<std::uint64_t>(per_pair / 10, 1);
  thread_team team(pairs, [&](unsigned i) {
    for (std::uint64_t k = 0; k < batch; ++k) {
      const auto x = static_cast<std::int64_t>(k);
      auto r = echoes[i].ask<remote_ping>(remote_ping{x}, k_timeout);
      if (!r || r->n != x + 1) fail("akt ask failed");
    }
  });
  team.run_round();  // warm-up
  batch = per_pair;
  run_result r;
  cpu_meter m(srv);
  team.run_round();
  r.value = static_cast<double>(per_pair * pairs) / m.stop(r);
  return r;
}

// AskPipelined: a requester actor in the client per pair keeps k_pipeline requests in flight to
// its echo, the continuation of each reply sending the next.
struct akt_pipeline_start {
  akt::pid target;
  std::uint64_t count;
};
struct akt_pipelined final : akt::actor {
  akt_pipelined(completion* c, std::atomic<std::uint64_t>* f) noexcept : done(c), failures(f) {}
  void receive(akt::receive_context& ctx) override {
    if (const auto* s = ctx.get_if<akt_pipeline_start>()) {
      target = s->target;
      left = s->count;
      fill(ctx);
    }
  }
  void fill(akt::receive_context& ctx) {
    while (in_flight < k_pipeline && left > 0) {
      --left;
      ++in_flight;
      const auto x = static_cast<std::int64_t>(next++);
      ctx.request<remote_ping>(target, remote_ping{x}, std::chrono::nanoseconds::zero(),
                               [this, x](akt::receive_context& c, akt::result<remote_ping> r) {
                                 --in_flight;
                                 if (!r && r.code() == akt::errc::window_full) {
                                   ++left;  // refused before it was sent: send it again
                                 } else {
                                   if (!r || r->n != x + 1) failures->fetch_add(1);
                                   done->note();
                                 }
                                 fill(c);
                               });
    }
  }
  completion* done;
  std::atomic<std::uint64_t>* failures;
  akt::pid target;
  std::uint64_t left = 0, next = 0;
  unsigned in_flight = 0;
};

run_result akt_pipelined_asks(const config& cfg, unsigned pairs, std::uint64_t per_pair) {
  server_process srv("akt", pairs, cfg.workers);
  akt_client cl(cfg.workers, srv.port());
  completion done;
  std::atomic<std::uint64_t> failures{0};
  std::vector<akt::pid> echoes, requesters;
  for (unsigned i = 0; i < pairs; ++i) {
    echoes.push_back(cl.lookup("echo-" + std::to_string(i)));
    auto q = cl.sys.spawn<akt_pipelined>("requester-" + std::to_string(i), &done, &failures);
    if (!q) fail("akt spawn: " + q.error().message());
    requesters.push_back(*q);
  }
  auto round = [&](std::uint64_t n) {
    const std::uint64_t target = done.count() + n * pairs;
    for (unsigned i = 0; i < pairs; ++i) (void)requesters[i].tell(akt_pipeline_start{echoes[i], n});
    done.wait_for(target);
  };
  round(std::max<std::uint64_t>(per_pair / 10, 1));
  run_result r;
  cpu_meter m(srv);
  round(per_pair);
  r.value = static_cast<double>(per_pair * pairs) / m.stop(r);
  if (failures.load() != 0) fail("akt pipelined request failed");
  return r;
}

// AskLatency: one thread, n sequential asks, each timed. p50 / p99 / p99.9 in microseconds.
run_result akt_latency(const config& cfg, std::uint64_t n) {
  server_process srv("akt", 1, cfg.workers);
  akt_client cl(cfg.workers, srv.port());
  akt::pid echo = cl.lookup("echo-0");
  for (std::int64_t k = 0; k < 1000; ++k) {
    if (!echo.ask<remote_ping>(remote_ping{k}, k_timeout)) fail("akt ask failed");
  }
  std::vector<std::uint64_t> ns;
  ns.reserve(n);
  run_result r;
  cpu_meter m(srv);
  for (std::uint64_t k = 0; k < n; ++k) {
    const auto t0 = clock_type::now();
    auto reply = echo.ask<remote_ping>(remote_ping{static_cast<std::int64_t>(k)}, k_timeout);
    ns.push_back(static_cast<std::uint64_t>((clock_type::now() - t0).count()));
    if (!reply) fail("akt ask failed: " + reply.error().message());
  }
  latency_figures(ns, m.stop(r), r);
  return r;
}

// =============================================================================================
// CAF

using sink_atom = caf::atom_constant<caf::atom("sink")>;
using echo_atom = caf::atom_constant<caf::atom("echo")>;
using count_atom = caf::atom_constant<caf::atom("count")>;

struct caf_sink_state {
  std::uint64_t count = 0;
};
caf::behavior caf_sink(caf::stateful_actor<caf_sink_state>* self) {
  return {
      [self](int) { ++self->state.count; },
      [self](const std::string&) { ++self->state.count; },
      [self](count_atom) { return self->state.count; },
  };
}

caf::behavior caf_echo(caf::event_based_actor*) {
  return {[](int x) { return x + 1; }};
}

// The one published actor: hands out the server's sinks and echoes by index.
struct caf_directory_state {
  std::vector<caf::actor> sinks, echoes;
};
caf::behavior caf_directory(caf::stateful_actor<caf_directory_state>* self, unsigned pairs) {
  for (unsigned i = 0; i < pairs; ++i) {
    self->state.sinks.push_back(self->spawn(caf_sink));
    self->state.echoes.push_back(self->spawn(caf_echo));
  }
  return {
      [self](sink_atom, int i) { return self->state.sinks.at(static_cast<std::size_t>(i)); },
      [self](echo_atom, int i) { return self->state.echoes.at(static_cast<std::size_t>(i)); },
  };
}

struct caf_config : caf::actor_system_config {
  explicit caf_config(unsigned workers) {
    load<caf::io::middleman>();
    set("scheduler.max-threads", static_cast<int>(workers));
  }
};

[[noreturn]] void serve_caf(unsigned pairs, unsigned workers) {
  caf_config cfg(workers);
  caf::actor_system sys(cfg);
  caf::actor dir = sys.spawn(caf_directory, pairs);
  auto port = sys.middleman().publish(dir, 0, "127.0.0.1");
  if (!port) fail("CAF publish: " + sys.render(port.error()));
  std::printf("port %u\n", static_cast<unsigned>(*port));
  std::fflush(stdout);
  for (;;) ::pause();
}

struct caf_client {
  caf_config cfg;
  caf::actor_system sys;
  caf::actor directory;
  caf_client(unsigned workers, std::uint16_t port) : cfg(workers), sys(cfg) {
    auto d = sys.middleman().remote_actor("127.0.0.1", port);
    if (!d) fail("CAF remote_actor: " + sys.render(d.error()));
    directory = *d;
  }
  template <class Atom>
  caf::actor get(Atom atom, unsigned i) {
    caf::actor out;
    caf::scoped_actor self{sys};
    self->request(directory, k_timeout, atom, static_cast<int>(i))
        .receive([&](caf::actor a) { out = std::move(a); },
                 [&](caf::error& e) { fail("CAF directory: " + sys.render(e)); });
    return out;
  }
};

void caf_wait_count(caf::scoped_actor& self, const caf::actor& sink, std::uint64_t target) {
  for (;;) {
    std::uint64_t n = 0;
    self->request(sink, k_timeout, count_atom::value)
        .receive([&](std::uint64_t c) { n = c; },
                 [&](caf::error& e) { fail("CAF count query: " + self->system().render(e)); });
    if (n >= target) return;
    std::this_thread::sleep_for(k_poll_pause);
  }
}

run_result caf_tells(const config& cfg, unsigned pairs, std::uint64_t per_pair, bool big) {
  server_process srv("caf", pairs, cfg.workers);
  caf_client cl(cfg.workers, srv.port());
  std::vector<caf::actor> sinks;
  for (unsigned i = 0; i < pairs; ++i) sinks.push_back(cl.get(sink_atom::value, i));
  const std::string payload(k_big_message, 'x');
  std::uint64_t batch = std::max<std::uint64_t>(per_pair / 10, 1);
  std::uint64_t target = batch;
  thread_team team(pairs, [&](unsigned i) {
    for (std::uint64_t k = 0; k < batch; ++k) {
      if (big)
        caf::anon_send(sinks[i], std::string(payload));
      else
        caf::anon_send(sinks[i], static_cast<int>(k));
    }
    caf::scoped_actor self{cl.sys};
    caf_wait_count(self, sinks[i], target);
  });
  team.run_round();  // warm-up
  batch = per_pair;
  target += per_pair;
  run_result r;
  cpu_meter m(srv);
  team.run_round();
  r.value = static_cast<double>(per_pair * pairs) / m.stop(r);
  team.stop();
  return r;
}

run_result caf_asks(const config& cfg, unsigned pairs, std::uint64_t per_pair) {
  server_process srv("caf", pairs, cfg.workers);
  caf_client cl(cfg.workers, srv.port());
  std::vector<caf::actor> echoes;
  for (unsigned i = 0; i < pairs; ++i) echoes.push_back(cl.get(echo_atom::value, i));
  std::vector<std::unique_ptr<caf::scoped_actor>> selves(pairs);
  enum class phase { create, ask, destroy } ph = phase::create;
  std::uint64_t batch = std::max<std::uint64_t>(per_pair / 10, 1);
  // Each thread creates, uses and destroys its own scoped_actor.
  thread_team team(pairs, [&](unsigned i) {
    switch (ph) {
      case phase::create:
        selves[i] = std::make_unique<caf::scoped_actor>(cl.sys);
        break;
      case phase::ask: {
        caf::scoped_actor& self = *selves[i];
        for (std::uint64_t k = 0; k < batch; ++k) {
          const int x = static_cast<int>(k);
          self->request(echoes[i], k_timeout, x)
              .receive(
                  [&](int y) {
                    if (y != x + 1) fail("CAF ask: wrong answer");
                  },
                  [&](caf::error& e) { fail("CAF ask: " + cl.sys.render(e)); });
        }
        break;
      }
      case phase::destroy:
        selves[i].reset();
        break;
    }
  });
  team.run_round();  // create
  ph = phase::ask;
  team.run_round();  // warm-up
  batch = per_pair;
  run_result r;
  cpu_meter m(srv);
  team.run_round();
  r.value = static_cast<double>(per_pair * pairs) / m.stop(r);
  ph = phase::destroy;
  team.run_round();
  team.stop();
  return r;
}

// CAF's AskPipelined: an event-based requester whose response handlers (request(...).then) keep
// k_pipeline requests in flight.
struct caf_pipelined_state {
  caf::actor target;
  std::uint64_t left = 0, next = 0;
  unsigned in_flight = 0;
  completion* done = nullptr;
  std::atomic<std::uint64_t>* failures = nullptr;
};
void caf_fill(caf::stateful_actor<caf_pipelined_state>* self) {
  auto& st = self->state;
  while (st.in_flight < k_pipeline && st.left > 0) {
    --st.left;
    ++st.in_flight;
    const int x = static_cast<int>(st.next++);
    self->request(st.target, caf::infinite, x)
        .then(
            [self, x](int y) {
              --self->state.in_flight;
              if (y != x + 1) self->state.failures->fetch_add(1);
              self->state.done->note();
              caf_fill(self);
            },
            [self](caf::error&) {
              --self->state.in_flight;
              self->state.failures->fetch_add(1);
              self->state.done->note();
              caf_fill(self);
            });
  }
}
caf::behavior caf_pipelined(caf::stateful_actor<caf_pipelined_state>* self, completion* done,
                            std::atomic<std::uint64_t>* failures, caf::actor target) {
  self->state.done = done;
  self->state.failures = failures;
  self->state.target = std::move(target);
  return {[self](std::uint64_t n) {
    self->state.left = n;
    caf_fill(self);
  }};
}

run_result caf_pipelined_asks(const config& cfg, unsigned pairs, std::uint64_t per_pair) {
  server_process srv("caf", pairs, cfg.workers);
  caf_client cl(cfg.workers, srv.port());
  completion done;
  std::atomic<std::uint64_t> failures{0};
  std::vector<caf::actor> requesters;
  for (unsigned i = 0; i < pairs; ++i) {
    requesters.push_back(
        cl.sys.spawn(caf_pipelined, &done, &failures, cl.get(echo_atom::value, i)));
  }
  auto round = [&](std::uint64_t n) {
    const std::uint64_t target = done.count() + n * pairs;
    for (auto& q : requesters) caf::anon_send(q, n);
    done.wait_for(target);
  };
  round(std::max<std::uint64_t>(per_pair / 10, 1));
  run_result r;
  cpu_meter m(srv);
  round(per_pair);
  r.value = static_cast<double>(per_pair * pairs) / m.stop(r);
  for (auto& q : requesters) caf::anon_send_exit(q, caf::exit_reason::user_shutdown);
  if (failures.load() != 0) fail("CAF pipelined request failed");
  return r;
}

run_result caf_latency(const config& cfg, std::uint64_t n) {
  server_process srv("caf", 1, cfg.workers);
  caf_client cl(cfg.workers, srv.port());
  caf::actor echo = cl.get(echo_atom::value, 0);
  std::vector<std::uint64_t> ns;
  ns.reserve(n);
  run_result r;
  {
    caf::scoped_actor self{cl.sys};
    auto ask = [&](int x) {
      self->request(echo, k_timeout, x)
          .receive(
              [&](int y) {
                if (y != x + 1) fail("CAF ask: wrong answer");
              },
              [&](caf::error& e) { fail("CAF ask: " + cl.sys.render(e)); });
    };
    for (int k = 0; k < 1000; ++k) ask(k);
    cpu_meter m(srv);
    for (std::uint64_t k = 0; k < n; ++k) {
      const auto t0 = clock_type::now();
      ask(static_cast<int>(k));
      ns.push_back(static_cast<std::uint64_t>((clock_type::now() - t0).count()));
    }
    latency_figures(ns, m.stop(r), r);
  }
  return r;
}

// =============================================================================================
// Driver

struct row {
  std::string shape;
  std::string unit;
  std::vector<run_result> akt, caf;
};

double median_of(const std::vector<run_result>& v, double run_result::*field) {
  std::vector<double> x;
  for (const run_result& r : v) x.push_back(r.*field);
  return median(x);
}

void print_row(const std::string& shape, const std::string& unit, double a, double c,
               const std::string& akt_cpu, const std::string& caf_cpu) {
  std::printf("%-22s %-8s %10s %10s %8.2fx  %-11s %-11s\n", shape.c_str(), unit.c_str(),
              human(a).c_str(), human(c).c_str(), c == 0 ? 0.0 : a / c, akt_cpu.c_str(),
              caf_cpu.c_str());
}

std::string cpu_text(const std::vector<run_result>& v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f+%.2f", median_of(v, &run_result::client_cpu),
                median_of(v, &run_result::server_cpu));
  return buf;
}

int client_main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::string filter = argc > 3 ? argv[3] : "";
  if (!(scale > 0) || runs < 1) {
    std::fprintf(stderr, "usage: akt_compare_remote [scale > 0] [runs >= 1] [shape filter]\n");
    return 2;
  }
  auto selected = [&](const std::string& name) {
    return filter.empty() || name.find(filter) != std::string::npos;
  };
  auto scaled = [scale](std::uint64_t v) {
    return std::max<std::uint64_t>(static_cast<std::uint64_t>(static_cast<double>(v) * scale), 10);
  };
  config cfg;
  cfg.workers = akt_bench::hardware_threads();
  cfg.pairs = akt_bench::pair_count();
  cfg.tell_single = scaled(cfg.tell_single);
  cfg.tell_pairwise = scaled(cfg.tell_pairwise);
  cfg.ask_pairwise = scaled(cfg.ask_pairwise);
  cfg.ask_pipelined = scaled(cfg.ask_pipelined);
  cfg.ask_latency = scaled(cfg.ask_latency);
  cfg.tell_1kb = scaled(cfg.tell_1kb);
  const unsigned pairs = cfg.pairs;
  std::printf(
      "akt_compare_remote: two processes on loopback, %u workers per process for both "
      "frameworks, %u pairs, %d runs each, CAF %d.%d.%d\n",
      cfg.workers, pairs, runs, CAF_MAJOR_VERSION, CAF_MINOR_VERSION, CAF_PATCH_VERSION);
  std::fflush(stdout);

  // The machine's ceiling: plain TCP over loopback, 64-byte frames, two threads of this process.
  if (selected("RawTcp")) {
    std::vector<double> batched, single, blocking, polling;
    for (int i = 0; i < runs; ++i) {
      batched.push_back(akt_bench::raw_tcp::stream(scaled(4'000'000), 1024).rate());
      single.push_back(akt_bench::raw_tcp::stream(scaled(40'000), 1).rate());
      auto b = akt_bench::raw_tcp::ping_pong(scaled(4'000), false);
      auto p = akt_bench::raw_tcp::ping_pong(scaled(10'000), true);
      blocking.push_back(static_cast<double>(akt_bench::percentile(b.rtt_ns, 0.5)) / 1e3);
      polling.push_back(static_cast<double>(akt_bench::percentile(p.rtt_ns, 0.5)) / 1e3);
      std::fprintf(stderr,
                   "  %-22s run %d: batched %s frames/s, one per write %s frames/s, ping-pong "
                   "p50 %.1f us blocking, %.1f us polling\n",
                   "RawTcp", i + 1, human(batched.back()).c_str(), human(single.back()).c_str(),
                   blocking.back(), polling.back());
    }
    std::printf(
        "raw loopback TCP, 64-byte frames (medians): batched %s frames/s, one write per frame %s "
        "frames/s, ping-pong round trip p50 %.1f us blocking, %.1f us polling\n",
        human(median(batched)).c_str(), human(median(single)).c_str(), median(blocking),
        median(polling));
    std::fflush(stdout);
  }

  std::vector<row> rows;
  auto shape = [&](const char* name, const char* unit, const std::function<run_result()>& on_akt,
                   const std::function<run_result()>& on_caf) {
    if (!selected(name)) return;
    row r{name, unit, {}, {}};
    for (int i = 0; i < runs; ++i) {
      r.akt.push_back(on_akt());
      r.caf.push_back(on_caf());
      const run_result& a = r.akt.back();
      const run_result& c = r.caf.back();
      std::fprintf(stderr,
                   "  %-22s run %d: akt %s (cpu %.2f+%.2f, %llu window-full resends), CAF %s (cpu "
                   "%.2f+%.2f)\n",
                   name, i + 1, human(a.value).c_str(), a.client_cpu, a.server_cpu,
                   static_cast<unsigned long long>(a.window_full), human(c.value).c_str(),
                   c.client_cpu, c.server_cpu);
    }
    rows.push_back(std::move(r));
  };

  shape(
      "RemoteTellSinglePair", "msg/s", [&] { return akt_tells(cfg, 1, cfg.tell_single, false); },
      [&] { return caf_tells(cfg, 1, cfg.tell_single, false); });
  shape(
      "RemoteTellPairwise", "msg/s",
      [&] { return akt_tells(cfg, pairs, cfg.tell_pairwise / pairs, false); },
      [&] { return caf_tells(cfg, pairs, cfg.tell_pairwise / pairs, false); });
  shape(
      "RemoteAskPairwise", "asks/s", [&] { return akt_asks(cfg, pairs, cfg.ask_pairwise / pairs); },
      [&] { return caf_asks(cfg, pairs, cfg.ask_pairwise / pairs); });
  shape(
      "RemoteAskPipelined", "asks/s",
      [&] { return akt_pipelined_asks(cfg, pairs, cfg.ask_pipelined / pairs); },
      [&] { return caf_pipelined_asks(cfg, pairs, cfg.ask_pipelined / pairs); });
  shape(
      "RemoteAskLatency", "us", [&] { return akt_latency(cfg, cfg.ask_latency); },
      [&] { return caf_latency(cfg, cfg.ask_latency); });
  shape(
      "RemoteTell1KB", "msg/s", [&] { return akt_tells(cfg, 1, cfg.tell_1kb, true); },
      [&] { return caf_tells(cfg, 1, cfg.tell_1kb, true); });

  std::printf("\n%-22s %-8s %10s %10s %9s  %-11s %-11s\n", "shape", "unit", "akt", "CAF", "akt/CAF",
              "akt cpu", "CAF cpu");
  std::printf("%-22s %-8s %10s %10s %9s  %-11s %-11s\n", "-----", "----", "---", "---", "-------",
              "c+s", "c+s");
  for (const row& r : rows) {
    const std::string ac = cpu_text(r.akt), cc = cpu_text(r.caf);
    if (r.shape == "RemoteAskLatency") {
      print_row(r.shape + " p50", r.unit, median_of(r.akt, &run_result::value),
                median_of(r.caf, &run_result::value), ac, cc);
      print_row(r.shape + " p99", r.unit, median_of(r.akt, &run_result::p99),
                median_of(r.caf, &run_result::p99), ac, cc);
      print_row(r.shape + " p99.9", r.unit, median_of(r.akt, &run_result::p999),
                median_of(r.caf, &run_result::p999), ac, cc);
      continue;
    }
    print_row(r.shape, r.unit, median_of(r.akt, &run_result::value),
              median_of(r.caf, &run_result::value), ac, cc);
    if (r.shape == "RemoteTell1KB") {
      print_row(r.shape + " MB/s", "MB/s",
                median_of(r.akt, &run_result::value) * k_big_message / 1e6,
                median_of(r.caf, &run_result::value) * k_big_message / 1e6, ac, cc);
    }
  }
  std::printf(
      "\n(median of %d runs each, each run a fresh server process and client; akt and CAF runs "
      "alternate; rates: higher is better, latencies (us): lower is better; cpu: cores used by "
      "the client + the server process over the timed region)\n",
      runs);
  std::printf(
      "(%llu msgs single pair, %llu pairwise, %llu asks pairwise, %llu pipelined asks, %llu "
      "latency asks, %llu 1 KB msgs per run)\n",
      static_cast<unsigned long long>(cfg.tell_single),
      static_cast<unsigned long long>(cfg.tell_pairwise),
      static_cast<unsigned long long>(cfg.ask_pairwise),
      static_cast<unsigned long long>(cfg.ask_pipelined),
      static_cast<unsigned long long>(cfg.ask_latency),
      static_cast<unsigned long long>(cfg.tell_1kb));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--serve") == 0) {
    if (argc < 5) fail("usage: akt_compare_remote --serve akt|caf <pairs> <workers>");
    const auto pairs = static_cast<unsigned>(std::atoi(argv[3]));
    const auto workers = static_cast<unsigned>(std::atoi(argv[4]));
    if (pairs == 0 || workers == 0) fail("--serve: pairs and workers must be positive");
    if (std::strcmp(argv[2], "akt") == 0) serve_akt(pairs, workers);
    if (std::strcmp(argv[2], "caf") == 0) serve_caf(pairs, workers);
    fail(std::string("--serve: unknown framework ") + argv[2]);
  }
  return client_main(argc, argv);
}
