// akt_bench: remoting (issue 10). Two nodes in one process, on loopback: node "alpha" sends,
// node "beta" holds the receivers, which alpha looks up by address. Every shape is timed until
// the receivers processed every message (tells) or the last reply arrived (asks), like the local
// ones (bench_shapes.hpp), and adds what a remote figure needs beside it: the CPU the process
// used (two nodes share this machine's cores), heap allocations split by thread group (sending
// threads, each node's workers, each node's other threads: its I/O thread, its timer), the bytes
// and system calls per message on the wire, context switches per message (the hand-offs between
// threads), and how often a send found the window full.
// Also here: the machine's ceiling, plain TCP over loopback with frames of the same size
// (raw_tcp.hpp). See bench/README.md.

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "bench_shapes.hpp"
#include "raw_tcp.hpp"
#include "remote_messages.hpp"

namespace akt_bench {
namespace {

using akt::errc;

// Both nodes: the default configuration with remoting on (and the settings of
// with_env_overrides: the dispatcher's idle spin, the I/O threads' polling).
akt::system_config remote_node_config() {
  register_remote_messages();
  akt::system_config cfg;
  cfg.remote = akt::remote_config{};  // 127.0.0.1, a free port
  return with_env_overrides(std::move(cfg));
}

// =============================================================================================
// Which thread is whose: threads a node started (listed before and after its start), and among
// them the workers (they mark themselves when they run a benchmark actor); the sending threads
// mark themselves too.

// The threads of this process at one moment.
struct thread_list {
  static constexpr std::size_t k_max = 512;  // bounds the threads told apart
  int tids[k_max];
  std::size_t n = 0;
  static thread_list now() noexcept {
    thread_list l;
    l.n = list_threads(l.tids, k_max);
    return l;
  }
  bool contains(int tid) const noexcept { return std::find(tids, tids + n, tid) != tids + n; }
};

// A set of threads that add themselves (note()), from any thread, lock-free, no allocation.
// A thread checks a thread_local first, so noting on every message costs one compare. Sets are
// told apart by a serial number, not their address: the next run's set may sit at the same
// address on the benchmark thread's stack.
class thread_marks {
 public:
  void note() noexcept {
    thread_local std::uint64_t noted_for = 0;
    if (noted_for == serial_) return;
    noted_for = serial_;
    const unsigned i = n_.fetch_add(1, std::memory_order_relaxed);
    if (i < k_max) tids_[i].store(current_tid(), std::memory_order_release);
  }
  bool contains(int tid) const noexcept {
    const unsigned n = std::min<unsigned>(n_.load(std::memory_order_acquire), k_max);
    for (unsigned i = 0; i < n; ++i) {
      if (tids_[i].load(std::memory_order_acquire) == tid) return true;
    }
    return false;
  }

 private:
  static constexpr unsigned k_max = 64;  // bounds the threads remembered
  static inline std::atomic<std::uint64_t> next_serial_{1};
  const std::uint64_t serial_ = next_serial_.fetch_add(1, std::memory_order_relaxed);
  std::atomic<int> tids_[k_max] = {};
  std::atomic<unsigned> n_{0};
};

enum group : int { g_send, g_a_workers, g_a_other, g_b_workers, g_b_other, g_other, k_groups };
constexpr const char* k_alloc_counter[k_groups] = {"allocs_send",    "allocs_a_workers",
                                                   "allocs_a_other", "allocs_b_workers",
                                                   "allocs_b_other", "allocs_other"};

// Node alpha (the senders' side) and node beta (the receivers'), each a started system with
// remoting on 127.0.0.1 and a free port.
struct two_nodes {
  thread_list before_a;
  bench_system a;
  thread_list before_b;
  bench_system b;
  thread_list after_b;
  thread_marks
      senders;  // threads that send: the benchmark's, producers, requesting actors' workers
  thread_marks workers;  // workers that ran a benchmark actor (either node)
  bool ok;

  explicit two_nodes(benchmark::State& state)
      : before_a(thread_list::now()),
        a(state, "alpha", remote_node_config()),
        before_b(thread_list::now()),
        b(state, "beta", remote_node_config()),
        after_b(thread_list::now()),
        ok(a.ok && b.ok) {
    senders.note();  // the benchmark thread
  }

  // beta's actor `name`, as a pid on alpha, looked up by its address (a round trip).
  akt::pid remote(benchmark::State& state, const std::string& name) {
    auto p = a.sys.lookup(b.sys.address() + "/user/" + name);
    if (!p) {
      state.SkipWithError(("lookup failed: " + p.error().message()).c_str());
      return {};
    }
    return std::move(*p);
  }

  group group_of(int tid) const noexcept {
    if (senders.contains(tid)) return g_send;
    if (before_b.contains(tid) && !before_a.contains(tid))
      return workers.contains(tid) ? g_a_workers : g_a_other;
    if (after_b.contains(tid) && !before_b.contains(tid))
      return workers.contains(tid) ? g_b_workers : g_b_other;
    return g_other;
  }
};

// The remote counters over a timed region (see the file comment). CPU figures are in cores: CPU
// seconds per wall-clock second (2.0 = both cores of this machine busy).
class remote_probe final : public region_probe {
 public:
  explicit remote_probe(two_nodes& nodes) : nodes_(nodes) {}

  std::atomic<std::uint64_t> window_full{0};  // sends refused with window_full, then resent

  void begin() override {
    out0_ = wire_out();
    threads_ = thread_list::now();
    for (std::size_t i = 0; i < threads_.n; ++i) {
      cpu0_[i] = thread_cpu_ns(threads_.tids[i]);
      switches0_[i] = thread_context_switches(threads_.tids[i]);
    }
    window_full0_ = window_full.load();
    process0_ = process_cpu_ns();
    t0_ = clock_type::now();
    allocs0_.take();
  }

  void end(benchmark::State& state, std::uint64_t messages) override {
    allocs1_.take();
    const double wall = std::chrono::duration<double>(clock_type::now() - t0_).count();
    const double process_s = static_cast<double>(process_cpu_ns() - process0_) / 1e9;
    double cpu[k_groups] = {};
    double switches[k_groups] = {};
    for (std::size_t i = 0; i < threads_.n; ++i) {
      const group g = nodes_.group_of(threads_.tids[i]);
      const std::uint64_t now = thread_cpu_ns(threads_.tids[i]);
      if (now >= cpu0_[i]) cpu[g] += static_cast<double>(now - cpu0_[i]) / 1e9;
      const std::uint64_t sw = thread_context_switches(threads_.tids[i]);
      if (sw >= switches0_[i]) switches[g] += static_cast<double>(sw - switches0_[i]);
    }
    double allocs[k_groups] = {};
    for (std::size_t i = 0; i < detail::k_count_slots; ++i) {
      const std::uint64_t d = allocs1_.allocations[i] - allocs0_.allocations[i];
      if (d == 0) continue;
      const bool same = allocs0_.owner[i] == allocs1_.owner[i] && allocs1_.owner[i] > 0;
      allocs[same ? nodes_.group_of(allocs1_.owner[i]) : g_other] += static_cast<double>(d);
    }
    const double m = messages == 0 ? 1.0 : static_cast<double>(messages);
    for (int g = 0; g < k_groups; ++g) state.counters[k_alloc_counter[g]] = allocs[g] / m;
    if (wall > 0) {
      state.counters["cpu_process"] = process_s / wall;
      state.counters["cpu_send"] = cpu[g_send] / wall;
      state.counters["cpu_a"] = (cpu[g_a_workers] + cpu[g_a_other]) / wall;
      state.counters["cpu_b"] = (cpu[g_b_workers] + cpu[g_b_other]) / wall;
    }
    // Each time a thread sleeps and is woken again (a hand-off to a sleeping thread) counts one.
    state.counters["switches_send_per_msg"] = switches[g_send] / m;
    state.counters["switches_nodes_per_msg"] = (switches[g_a_workers] + switches[g_a_other] +
                                                switches[g_b_workers] + switches[g_b_other]) /
                                               m;
    const wire out1 = wire_out();
    const double frames = static_cast<double>(out1.frames - out0_.frames);
    state.counters["wire_bytes_per_msg"] = static_cast<double>(out1.bytes - out0_.bytes) / m;
    state.counters["frames_per_write"] =
        out1.writes == out0_.writes ? 0.0
                                    : frames / static_cast<double>(out1.writes - out0_.writes);
    state.counters["window_full_per_msg"] =
        static_cast<double>(window_full.load() - window_full0_) / m;
  }

 private:
  struct wire {
    std::uint64_t bytes = 0, frames = 0, writes = 0;
  };
  // What alpha wrote to its peers (tells, asks; not beta's replies or credits).
  wire wire_out() const {
    wire w;
    for (const akt::peer_stats& p : nodes_.a.sys.peers()) {
      w.bytes += p.bytes_out;
      w.frames += p.frames_out;
      w.writes += p.writes;
    }
    return w;
  }

  two_nodes& nodes_;
  thread_list threads_;
  std::uint64_t cpu0_[thread_list::k_max] = {};
  std::uint64_t switches0_[thread_list::k_max] = {};
  std::uint64_t process0_ = 0;
  std::uint64_t window_full0_ = 0;
  clock_type::time_point t0_;
  wire out0_;
  thread_allocations allocs0_, allocs1_;
};

// Sends with send() until it is not refused for a full window: each refusal is the back-pressure
// working (the receivers are behind by a window); the sender backs off briefly and resends.
template <class Send>
akt::error send_resending(remote_probe& probe, Send send) {
  akt::error e = send();
  if (e != errc::window_full) return e;
  backoff wait;
  do {
    probe.window_full.fetch_add(1, std::memory_order_relaxed);
    wait.pause();
    e = send();
  } while (e == errc::window_full);
  return e;
}

// ---- actors (on beta unless said otherwise) ----

// Counts every ping (or string: RemoteTell1KB) it processes into a completion.
struct remote_sink final : akt::actor {
  remote_sink(completion* c, thread_marks* w) noexcept : done(c), workers(w) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<remote_ping>() != nullptr || ctx.get_if<std::string>() != nullptr) {
      workers->note();
      done->note();
    }
  }
  completion* done;
  thread_marks* workers;
};

// Answers a ping n with ping n + 1.
struct remote_echo final : akt::actor {
  explicit remote_echo(thread_marks* w) noexcept : workers(w) {}
  void receive(akt::receive_context& ctx) override {
    if (const auto* p = ctx.get_if<remote_ping>(); p != nullptr && ctx.expects_reply()) {
      workers->note();
      ctx.reply(remote_ping{p->n + 1});
    }
  }
  thread_marks* workers;
};

// =============================================================================================
// RemoteTellSinglePair: the benchmark thread tells one actor on the other node; one tell per
// iteration, the last iteration waits until all were processed. RemoteTell1KB: the same with a
// 1,024-byte std::string (built-in serializer); the benchmark copies it for every tell (one
// allocation per message on the sending thread that is the benchmark's, not akt's).

constexpr std::size_t k_big_message = 1024;

template <bool Big>
void remote_tell_single_pair(benchmark::State& state) {
  completion done;
  two_nodes nodes(state);
  if (!nodes.ok) return;
  if (!spawn_or_fail<remote_sink>(state, nodes.b.sys, "sink", &done, &nodes.workers)) return;
  akt::pid sink = nodes.remote(state, "sink");
  if (!sink) return;
  remote_probe probe(nodes);
  const std::string payload(k_big_message, 'x');
  auto tell = [&](std::uint64_t k) {
    return send_resending(probe, [&] {
      if constexpr (Big) {
        return sink.tell(std::string(payload));
      } else {
        return sink.tell(remote_ping{static_cast<std::int64_t>(k)});
      }
    });
  };
  constexpr std::uint64_t k_warm = Big ? 5000 : 20000;
  for (std::uint64_t k = 0; k < k_warm; ++k) {
    if (akt::error e = tell(k)) return state.SkipWithError(("warm-up: " + e.message()).c_str());
  }
  done.wait_for(k_warm);

  const auto total = static_cast<std::uint64_t>(state.max_iterations);
  std::uint64_t sent = 0;
  region r(&nodes.b.sys, &probe);
  for (auto _ : state) {
    if (akt::error e = tell(sent)) {
      state.SkipWithError(("tell failed: " + e.message()).c_str());
      break;
    }
    if (++sent == total) done.wait_for(k_warm + total);
  }
  r.report(state, &nodes.b.sys, sent, sent);
  if (Big) {
    state.SetBytesProcessed(static_cast<std::int64_t>(sent * k_big_message));
    state.counters["MB_per_s"] = benchmark::Counter(static_cast<double>(sent * k_big_message) / 1e6,
                                                    benchmark::Counter::kIsRate);
  }
}
void BM_RemoteTellSinglePair(benchmark::State& state) { remote_tell_single_pair<false>(state); }
BENCHMARK(BM_RemoteTellSinglePair)->UseRealTime();
// The same with metrics and the HTTP endpoint on both nodes, and with tracing on but unsampled
// (issue 21's overhead targets).
void BM_RemoteTellSinglePairObserved(benchmark::State& state) {
  observed o(observe_mode::metrics_http);
  remote_tell_single_pair<false>(state);
}
BENCHMARK(BM_RemoteTellSinglePairObserved)->UseRealTime();
void BM_RemoteTellSinglePairTracingUnsampled(benchmark::State& state) {
  observed o(observe_mode::tracing_unsampled);
  remote_tell_single_pair<false>(state);
}
BENCHMARK(BM_RemoteTellSinglePairTracingUnsampled)->UseRealTime();
void BM_RemoteTell1KB(benchmark::State& state) { remote_tell_single_pair<true>(state); }
BENCHMARK(BM_RemoteTell1KB)->UseRealTime();

// =============================================================================================
// RemoteTellPairwise: pair_count() producer threads on alpha's side, each telling its own actor
// on beta; a round is k_pair_batch tells per producer (run_pairwise_tells, as TellPairwise).

void BM_RemoteTellPairwise(benchmark::State& state) {
  const unsigned n = pair_count();
  std::unique_ptr<completion[]> done(new completion[n]);
  two_nodes nodes(state);
  if (!nodes.ok) return;
  std::vector<akt::pid> sinks;
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = "sink-" + std::to_string(i);
    if (!spawn_or_fail<remote_sink>(state, nodes.b.sys, name, &done[i], &nodes.workers)) return;
    sinks.push_back(nodes.remote(state, name));
    if (!sinks.back()) return;
  }
  remote_probe probe(nodes);
  run_pairwise_tells(
      state, nodes.b, n, done.get(),
      [&](unsigned i, std::uint64_t k) {
        nodes.senders.note();
        return static_cast<bool>(send_resending(
            probe, [&] { return sinks[i].tell(remote_ping{static_cast<std::int64_t>(k)}); }));
      },
      &probe);
}
BENCHMARK(BM_RemoteTellPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// =============================================================================================
// RemoteAskPairwise: pair_count() threads, each making sequential blocking asks to its own echo
// actor on beta; a round is k_ask_batch asks per thread (run_pairwise_calls, as AskPairwise).

void BM_RemoteAskPairwise(benchmark::State& state) {
  const unsigned n = pair_count();
  two_nodes nodes(state);
  if (!nodes.ok) return;
  std::vector<akt::pid> echoes;
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = "echo-" + std::to_string(i);
    if (!spawn_or_fail<remote_echo>(state, nodes.b.sys, name, &nodes.workers)) return;
    echoes.push_back(nodes.remote(state, name));
    if (!echoes.back()) return;
  }
  remote_probe probe(nodes);
  run_pairwise_calls(
      state, nodes.b, n,
      [&](unsigned i, std::uint64_t k) {
        nodes.senders.note();
        const auto x = static_cast<std::int64_t>(k);
        akt::result<remote_ping> r = echoes[i].ask<remote_ping>(remote_ping{x}, k_ask_timeout);
        while (!r && r.code() == errc::window_full) {
          probe.window_full.fetch_add(1, std::memory_order_relaxed);
          std::this_thread::yield();
          r = echoes[i].ask<remote_ping>(remote_ping{x}, k_ask_timeout);
        }
        return !r || r->n != x + 1;
      },
      &probe);
}
BENCHMARK(BM_RemoteAskPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// =============================================================================================
// RemoteAskPipelined: pair_count() requester actors on alpha, each keeping k_pipeline requests
// (receive_context::request with a continuation) in flight to its own echo actor on beta; the
// continuation of each reply sends the next. A round is k_pipelined_batch requests per pair.

constexpr unsigned k_pipeline = 256;  // requests in flight per pair
constexpr std::uint64_t k_pipelined_batch = 20000;

struct start_pipeline {
  akt::pid target;
  std::uint64_t count;
};

// On alpha. A reply or an error each ends one request; every request is noted on done, and
// the ones that failed (other than a full window, which is resent) on failures.
struct pipelined_requester final : akt::actor {
  pipelined_requester(completion* c, thread_marks* s, remote_probe* p,
                      std::atomic<std::uint64_t>* f) noexcept
      : done(c), senders(s), probe(p), failures(f) {}
  void receive(akt::receive_context& ctx) override {
    if (const auto* s = ctx.get_if<start_pipeline>()) {
      senders->note();
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
                                 if (!r && r.code() == errc::window_full) {
                                   probe->window_full.fetch_add(1, std::memory_order_relaxed);
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
  thread_marks* senders;
  remote_probe* probe;
  std::atomic<std::uint64_t>* failures;
  akt::pid target;
  std::uint64_t left = 0;
  std::uint64_t next = 0;
  unsigned in_flight = 0;
};

void BM_RemoteAskPipelined(benchmark::State& state) {
  const unsigned n = pair_count();
  completion done;
  std::atomic<std::uint64_t> failures{0};
  two_nodes nodes(state);
  if (!nodes.ok) return;
  remote_probe probe(nodes);
  std::vector<akt::pid> echoes;
  std::vector<akt::pid> requesters;
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = "echo-" + std::to_string(i);
    if (!spawn_or_fail<remote_echo>(state, nodes.b.sys, name, &nodes.workers)) return;
    echoes.push_back(nodes.remote(state, name));
    requesters.push_back(spawn_or_fail<pipelined_requester>(state, nodes.a.sys,
                                                            "requester-" + std::to_string(i), &done,
                                                            &nodes.senders, &probe, &failures));
    if (!echoes.back() || !requesters.back()) return;
  }
  auto round = [&](std::uint64_t per_pair) {
    const std::uint64_t target = done.count() + per_pair * n;
    for (unsigned i = 0; i < n; ++i) (void)requesters[i].tell(start_pipeline{echoes[i], per_pair});
    done.wait_for(target);
  };
  round(2000);  // warm-up
  if (failures.load() != 0) return state.SkipWithError("warm-up request failed");
  std::uint64_t rounds = 0;
  region r(&nodes.b.sys, &probe);
  for (auto _ : state) {
    round(k_pipelined_batch);
    ++rounds;
  }
  const std::uint64_t requests = rounds * k_pipelined_batch * n;
  r.report(state, &nodes.b.sys, requests, requests);
  state.counters["pairs"] = n;
  state.counters["in_flight_per_pair"] = k_pipeline;
  if (failures.load() != 0) state.SkipWithError("a request failed");
}
BENCHMARK(BM_RemoteAskPipelined)->UseRealTime()->Unit(benchmark::kMillisecond);

// =============================================================================================
// RemoteAskLatency: the benchmark thread asks one echo actor on beta, one ask per iteration, on
// an otherwise idle pair of nodes; each round trip is timed: p50, p99, p99.9 and the maximum.
// Each iteration also makes one raw TCP round trip of a 64-byte frame with a blocking echo thread
// (raw_tcp::echo_link), timed apart (raw_p50_ns ...): on a machine shared with other work the
// two are then measured at the same moments, and p50_vs_raw compares them. The iteration time
// (manual) is the ask's alone.

void BM_RemoteAskLatency(benchmark::State& state) {
  two_nodes nodes(state);
  if (!nodes.ok) return;
  if (!spawn_or_fail<remote_echo>(state, nodes.b.sys, "echo", &nodes.workers)) return;
  akt::pid echo = nodes.remote(state, "echo");
  if (!echo) return;
  raw_tcp::echo_link raw(false);
  for (std::int64_t k = 0; k < 2000; ++k) {  // warm-up
    if (!echo.ask<remote_ping>(remote_ping{k}, k_ask_timeout))
      return state.SkipWithError("warm-up ask failed");
    (void)raw.round_trip();
  }
  remote_probe probe(nodes);
  std::vector<std::uint64_t> lat, raw_lat;
  lat.reserve(static_cast<std::size_t>(state.max_iterations));
  raw_lat.reserve(static_cast<std::size_t>(state.max_iterations));
  std::int64_t k = 0;
  region r(&nodes.b.sys, &probe);
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    akt::result<remote_ping> reply = echo.ask<remote_ping>(remote_ping{k}, k_ask_timeout);
    const auto t1 = clock_type::now();
    lat.push_back(static_cast<std::uint64_t>((t1 - t0).count()));
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    if (!reply || reply->n != k + 1) {
      state.SkipWithError("ask failed");
      break;
    }
    raw_lat.push_back(raw.round_trip());
    ++k;
  }
  const auto asks = static_cast<std::uint64_t>(k);
  r.report(state, &nodes.b.sys, asks, asks);
  const std::uint64_t p50 = percentile(lat, 0.50);
  state.counters["p50_ns"] = static_cast<double>(p50);
  state.counters["p99_ns"] = static_cast<double>(percentile(lat, 0.99));
  state.counters["p999_ns"] = static_cast<double>(percentile(lat, 0.999));
  state.counters["max_ns"] = lat.empty() ? 0.0 : static_cast<double>(lat.back());
  const std::uint64_t raw_p50 = percentile(raw_lat, 0.50);
  state.counters["raw_p50_ns"] = static_cast<double>(raw_p50);
  state.counters["raw_p99_ns"] = static_cast<double>(percentile(raw_lat, 0.99));
  state.counters["p50_vs_raw"] =
      raw_p50 == 0 ? 0.0 : static_cast<double>(p50) / static_cast<double>(raw_p50);
}
BENCHMARK(BM_RemoteAskLatency)->UseManualTime();

// =============================================================================================
// The ceiling (raw_tcp.hpp): frames of raw_tcp::k_frame bytes between two threads over loopback
// TCP, no framework. Each iteration opens a connection and times the transfer alone.

// RawTcpStream/<frames per write>: 1024 = a writer that batches (the ceiling of a remote tell
// rate), 1 = one send() per frame.
void BM_RawTcpStream(benchmark::State& state) {
  const auto per_write = static_cast<std::size_t>(state.range(0));
  const std::uint64_t n = per_write >= 64 ? 4'000'000 : 40'000;
  std::uint64_t frames = 0;
  double cpu = 0, wall = 0;
  for (auto _ : state) {
    const raw_tcp::result r = raw_tcp::stream(n, per_write);
    state.SetIterationTime(r.seconds);
    frames += r.frames;
    cpu += r.cpu_seconds;
    wall += r.seconds;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(frames));
  state.SetBytesProcessed(static_cast<std::int64_t>(frames * raw_tcp::k_frame));
  state.counters["cpu_process"] = wall > 0 ? cpu / wall : 0;
  state.counters["frame_bytes"] = raw_tcp::k_frame;
}
BENCHMARK(BM_RawTcpStream)->Arg(1024)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// RawTcpPingPong/<polling>: sequential round trips of one frame; 0 = blocking reads on both
// sides, 1 = both sides poll non-blocking sockets. Items: round trips.
void BM_RawTcpPingPong(benchmark::State& state) {
  const bool polling = state.range(0) != 0;
  const std::uint64_t n = polling ? 20'000 : 4'000;
  std::vector<std::uint64_t> lat;
  double cpu = 0, wall = 0;
  const std::uint64_t switches0 = process_context_switches();
  for (auto _ : state) {
    raw_tcp::result r = raw_tcp::ping_pong(n, polling);
    state.SetIterationTime(r.seconds);
    lat.insert(lat.end(), r.rtt_ns.begin(), r.rtt_ns.end());
    cpu += r.cpu_seconds;
    wall += r.seconds;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(lat.size()));
  state.counters["cpu_process"] = wall > 0 ? cpu / wall : 0;
  // Both threads, per round trip (connection setup included: a few per iteration).
  state.counters["switches_per_msg"] =
      lat.empty() ? 0.0
                  : static_cast<double>(process_context_switches() - switches0) /
                        static_cast<double>(lat.size());
  state.counters["p50_ns"] = static_cast<double>(percentile(lat, 0.50));
  state.counters["p99_ns"] = static_cast<double>(percentile(lat, 0.99));
  state.counters["p999_ns"] = static_cast<double>(percentile(lat, 0.999));
}
BENCHMARK(BM_RawTcpPingPong)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace akt_bench
