// akt_bench: Google Benchmark programs for akt's local messaging (see bench/README.md).
//
// Every messaging benchmark is timed until the receivers have processed every message sent in
// the timed region (not until the last enqueue), uses wall-clock time, reports items_per_second
// and allocs_per_msg (heap allocations through any form of operator new during the timed region,
// divided by the messages of that region). The actor system is created once per benchmark run,
// outside the timed region, and warmed up before timing.

// This unit replaces the global operator new / delete to count allocations (bench_support.hpp).
#define AKT_BENCH_REPLACE_OPERATOR_NEW 1

#include <benchmark/benchmark.h>

#include <akt/akt.hpp>
#include <akt/mailbox/mpsc_queue.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"

namespace {

using akt_bench::allocation_count;
using akt_bench::completion;
using akt_bench::cpu_relax;
using akt_bench::thread_team;
using clock_type = std::chrono::steady_clock;

constexpr auto k_ask_timeout = std::chrono::seconds(5);

// ---- messages and actors ----

struct ping {
  long n;
};

// Counts every ping it processes into a completion.
struct counting_sink final : akt::actor {
  explicit counting_sink(completion* c) noexcept : done(c) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<ping>() != nullptr) done->note();
  }
  completion* done;
};

// Answers every ask with 1L.
struct echo final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (ctx.expects_reply()) ctx.reply(1L);
  }
};

// ---- helpers ----

// An actor system for one benchmark run: started on construction, stopped on destruction.
struct bench_system {
  akt::actor_system sys;
  bool ok = true;
  explicit bench_system(benchmark::State& state) : sys("bench", akt::system_config{}) {
    if (auto r = sys.start(); !r) {
      state.SkipWithError(("start failed: " + r.error().message()).c_str());
      ok = false;
    }
  }
  ~bench_system() { (void)sys.stop(); }
  bench_system(const bench_system&) = delete;
  bench_system& operator=(const bench_system&) = delete;
};

template <class T, class... Args>
akt::pid spawn_or_fail(benchmark::State& state, akt::actor_system& sys, const std::string& name,
                       Args&&... args) {
  auto r = sys.template spawn<T>(name, std::forward<Args>(args)...);
  if (!r) {
    state.SkipWithError(("spawn failed: " + r.error().message()).c_str());
    return {};
  }
  return std::move(*r);
}

// Tells n pings and waits until the receiver has processed them (a warm-up).
bool warm_up_tells(const akt::pid& to, completion& done, std::uint64_t n) {
  const std::uint64_t base = done.count();
  for (std::uint64_t i = 0; i < n; ++i) {
    if (to.tell(ping{static_cast<long>(i)})) return false;
  }
  done.wait_for(base + n);
  return true;
}

// Spins briefly, then yields: the wait of a window-limited producer.
class backoff {
 public:
  void pause() noexcept {
    if (++spins_ < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  void reset() noexcept { spins_ = 0; }

 private:
  int spins_ = 0;
};

// Counters every messaging benchmark reports.
struct region {
  std::uint64_t allocs0;
  akt::system_stats stats0;
  explicit region(const akt::actor_system* sys)
      : allocs0(allocation_count()), stats0(sys ? sys->stats() : akt::system_stats{}) {}

  void report(benchmark::State& state, const akt::actor_system* sys, std::uint64_t messages,
              std::uint64_t items) const {
    const std::uint64_t allocs = allocation_count() - allocs0;
    state.SetItemsProcessed(static_cast<std::int64_t>(items));
    const double m = messages == 0 ? 1.0 : static_cast<double>(messages);
    state.counters["allocs_per_msg"] = static_cast<double>(allocs) / m;
    if (sys != nullptr) {
      const akt::system_stats s = sys->stats();
      state.counters["turns_per_msg"] = static_cast<double>(s.turns - stats0.turns) / m;
      state.counters["parks"] = static_cast<double>(s.parks - stats0.parks);
    }
  }
};

// =============================================================================================
// 1. TellSinglePair: one producer (the benchmark thread) -> one receiver. One tell per
// iteration; the last iteration waits until the receiver has processed all of them.

template <class Sink>
void tell_single_pair(benchmark::State& state) {
  completion done;
  bench_system bs(state);
  if (!bs.ok) return;
  akt::pid sink = spawn_or_fail<Sink>(state, bs.sys, "sink", &done);
  if (!sink) return;
  if (!warm_up_tells(sink, done, 20000)) return state.SkipWithError("warm-up tell failed");

  const std::uint64_t base = done.count();
  const auto total = static_cast<std::uint64_t>(state.max_iterations);
  std::uint64_t sent = 0;
  region r(&bs.sys);
  for (auto _ : state) {
    if (sink.tell(ping{static_cast<long>(sent)})) {
      state.SkipWithError("tell failed");
      break;
    }
    if (++sent == total) done.wait_for(base + total);
  }
  r.report(state, &bs.sys, sent, sent);
}
void BM_TellSinglePair(benchmark::State& state) { tell_single_pair<counting_sink>(state); }
BENCHMARK(BM_TellSinglePair)->UseRealTime();

// 1b. TellSinglePairGetIfChain / TellSinglePairMatch: the same with a receiver that tells three
// message types apart, written as an if / else-if chain on get_if and with akt::match (ping
// last in both, so both pay the same two failed compares).
struct other_a {};
struct other_b {};
struct chain_sink final : akt::actor {
  explicit chain_sink(completion* c) noexcept : done(c) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<other_a>() != nullptr)
      benchmark::DoNotOptimize(this);
    else if (ctx.get_if<other_b>() != nullptr)
      benchmark::DoNotOptimize(done);
    else if (auto* p = ctx.get_if<ping>())
      done->note(), benchmark::DoNotOptimize(p);
    else
      ctx.unhandled();
  }
  completion* done;
};
struct match_sink final : akt::actor {
  explicit match_sink(completion* c) noexcept : done(c) {}
  void receive(akt::receive_context& ctx) override {
    akt::match(
        ctx, [&](const other_a&) { benchmark::DoNotOptimize(this); },
        [&](const other_b&) { benchmark::DoNotOptimize(done); },
        [&](const ping& p) { done->note(), benchmark::DoNotOptimize(&p); });
  }
  completion* done;
};
void BM_TellSinglePairGetIfChain(benchmark::State& state) { tell_single_pair<chain_sink>(state); }
BENCHMARK(BM_TellSinglePairGetIfChain)->UseRealTime();
void BM_TellSinglePairMatch(benchmark::State& state) { tell_single_pair<match_sink>(state); }
BENCHMARK(BM_TellSinglePairMatch)->UseRealTime();

// =============================================================================================
// 8. TellSteadyState: TellSinglePair with at most k_window messages in flight (sent but not yet
// processed). The receiver recycles envelopes as fast as they are taken, so the envelope pool
// never runs dry: the steady-state tell path allocates nothing.

constexpr std::uint64_t k_window = 256;

void BM_TellSteadyState(benchmark::State& state) {
  completion done;
  bench_system bs(state);
  if (!bs.ok) return;
  akt::pid sink = spawn_or_fail<counting_sink>(state, bs.sys, "sink", &done);
  if (!sink) return;
  if (!warm_up_tells(sink, done, 20000)) return state.SkipWithError("warm-up tell failed");

  const std::uint64_t base = done.count();
  const auto total = static_cast<std::uint64_t>(state.max_iterations);
  std::uint64_t sent = 0;
  std::uint64_t processed = 0;  // last seen, relative to base
  backoff wait;
  region r(&bs.sys);
  for (auto _ : state) {
    if (sent - processed >= k_window) {
      processed = done.count() - base;
      wait.reset();
      while (sent - processed >= k_window) {
        wait.pause();
        processed = done.count() - base;
      }
    }
    if (sink.tell(ping{static_cast<long>(sent)})) {
      state.SkipWithError("tell failed");
      break;
    }
    if (++sent == total) done.wait_for(base + total);
  }
  r.report(state, &bs.sys, sent, sent);
  state.counters["window"] = static_cast<double>(k_window);
}
BENCHMARK(BM_TellSteadyState)->UseRealTime();

// =============================================================================================
// 2. TellPairwise: hardware_concurrency independent pairs, each a producer thread telling its
// own receiver. One iteration = one round: every producer tells k_pair_batch messages, and the
// round ends when every receiver has processed its share.

constexpr std::uint64_t k_pair_batch = 20000;

// Times rounds of the pairwise tell shape: n producer threads each call send(i, k) for
// k < k_pair_batch (true = the send failed); a round ends when every receiver i has counted its
// share on done[i]. Shared by TellPairwise and GrainTellOneWayPairwise so both measure alike.
template <class Send>
void run_pairwise_tells(benchmark::State& state, bench_system& bs, unsigned n, completion* done,
                        Send send) {
  std::atomic<std::uint64_t> failures{0};
  thread_team producers(n, [&](unsigned i) {
    for (std::uint64_t k = 0; k < k_pair_batch; ++k) {
      if (send(i, k)) failures.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::uint64_t rounds = 0;
  auto run = [&]() -> bool {
    producers.run_round();
    if (failures.load(std::memory_order_relaxed) != 0) return false;
    ++rounds;
    for (unsigned i = 0; i < n; ++i) done[i].wait_for(rounds * k_pair_batch);
    return true;
  };
  if (!run()) return state.SkipWithError("warm-up send failed");

  std::uint64_t timed_rounds = 0;
  region r(&bs.sys);
  for (auto _ : state) {
    if (!run()) {
      state.SkipWithError("send failed");
      break;
    }
    ++timed_rounds;
  }
  const std::uint64_t msgs = timed_rounds * k_pair_batch * n;
  r.report(state, &bs.sys, msgs, msgs);
  state.counters["pairs"] = n;
}

void BM_TellPairwise(benchmark::State& state) {
  const unsigned n = akt_bench::pair_count();
  std::unique_ptr<completion[]> done(new completion[n]);
  bench_system bs(state);
  if (!bs.ok) return;
  std::vector<akt::pid> sinks;
  for (unsigned i = 0; i < n; ++i) {
    sinks.push_back(
        spawn_or_fail<counting_sink>(state, bs.sys, "sink-" + std::to_string(i), &done[i]));
    if (!sinks.back()) return;
  }
  run_pairwise_tells(state, bs, n, done.get(), [&](unsigned i, std::uint64_t k) {
    return static_cast<bool>(sinks[i].tell(ping{static_cast<long>(k)}));
  });
}
BENCHMARK(BM_TellPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// =============================================================================================
// 3. Tell: hardware_concurrency producer threads -> one receiver (its drain rate). One iteration
// = one round of k_pair_batch tells per producer.

void BM_Tell(benchmark::State& state) {
  const unsigned n = akt_bench::pair_count();
  completion done;
  bench_system bs(state);
  if (!bs.ok) return;
  akt::pid sink = spawn_or_fail<counting_sink>(state, bs.sys, "sink", &done);
  if (!sink) return;
  std::atomic<std::uint64_t> failures{0};
  thread_team producers(n, [&](unsigned) {
    for (std::uint64_t k = 0; k < k_pair_batch; ++k) {
      if (sink.tell(ping{static_cast<long>(k)})) failures.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::uint64_t rounds = 0;
  auto run = [&]() -> bool {
    producers.run_round();
    if (failures.load(std::memory_order_relaxed) != 0) return false;
    ++rounds;
    done.wait_for(rounds * k_pair_batch * n);
    return true;
  };
  if (!run()) return state.SkipWithError("warm-up tell failed");

  std::uint64_t timed_rounds = 0;
  region r(&bs.sys);
  for (auto _ : state) {
    if (!run()) {
      state.SkipWithError("tell failed");
      break;
    }
    ++timed_rounds;
  }
  const std::uint64_t msgs = timed_rounds * k_pair_batch * n;
  r.report(state, &bs.sys, msgs, msgs);
  state.counters["producers"] = n;
}
BENCHMARK(BM_Tell)->UseRealTime()->Unit(benchmark::kMillisecond);

// =============================================================================================
// 4. AskPairwise: hardware_concurrency asker threads, each doing sequential asks to its own
// receiver. One iteration = one round of k_ask_batch asks per asker.

constexpr std::uint64_t k_ask_batch = 2000;

// Times rounds of the pairwise round-trip shape: n caller threads each make k_ask_batch
// sequential calls call(i, k) (true = the call failed). Shared by AskPairwise and the grain
// round trips so all measure alike.
template <class Call>
void run_pairwise_calls(benchmark::State& state, bench_system& bs, unsigned n, Call call) {
  std::atomic<std::uint64_t> failures{0};
  thread_team callers(n, [&](unsigned i) {
    for (std::uint64_t k = 0; k < k_ask_batch; ++k) {
      if (call(i, k)) failures.fetch_add(1, std::memory_order_relaxed);
    }
  });
  callers.run_round();  // warm-up
  if (failures.load() != 0) return state.SkipWithError("warm-up call failed");

  std::uint64_t timed_rounds = 0;
  region r(&bs.sys);
  for (auto _ : state) {
    callers.run_round();
    if (failures.load(std::memory_order_relaxed) != 0) {
      state.SkipWithError("call failed");
      break;
    }
    ++timed_rounds;
  }
  const std::uint64_t calls = timed_rounds * k_ask_batch * n;
  r.report(state, &bs.sys, calls, calls);
  state.counters["pairs"] = n;
}

void BM_AskPairwise(benchmark::State& state) {
  const unsigned n = akt_bench::pair_count();
  bench_system bs(state);
  if (!bs.ok) return;
  std::vector<akt::pid> echoes;
  for (unsigned i = 0; i < n; ++i) {
    echoes.push_back(spawn_or_fail<echo>(state, bs.sys, "echo-" + std::to_string(i)));
    if (!echoes.back()) return;
  }
  run_pairwise_calls(state, bs, n, [&](unsigned i, std::uint64_t k) {
    auto r = echoes[i].ask<long>(ping{static_cast<long>(k)}, k_ask_timeout);
    return !r || *r != 1L;
  });
}
BENCHMARK(BM_AskPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// =============================================================================================
// 5. AskTailLatencyUnderLoad: the benchmark thread does sequential asks to its own receiver (one
// ask per iteration, each timed) while hardware_concurrency background producers flood tells to
// their own receivers. Background producers keep at most k_flood_window messages in flight each,
// so the load is sustained without an unbounded backlog: the latency measured is scheduler
// interference, not the probe waiting behind a queue of its own.

constexpr std::uint64_t k_flood_window = 4096;

void BM_AskTailLatencyUnderLoad(benchmark::State& state) {
  const unsigned n = akt_bench::pair_count();
  std::unique_ptr<completion[]> done(new completion[n]);
  bench_system bs(state);
  if (!bs.ok) return;
  akt::pid probe = spawn_or_fail<echo>(state, bs.sys, "probe");
  if (!probe) return;
  std::vector<akt::pid> sinks;
  for (unsigned i = 0; i < n; ++i) {
    sinks.push_back(
        spawn_or_fail<counting_sink>(state, bs.sys, "sink-" + std::to_string(i), &done[i]));
    if (!sinks.back()) return;
  }

  std::atomic<bool> quit{false};
  std::atomic<std::uint64_t> failures{0};
  std::vector<std::uint64_t> sent(n, 0);
  std::vector<std::thread> flood;
  flood.reserve(n);
  for (unsigned i = 0; i < n; ++i) {
    flood.emplace_back([&, i] {
      std::uint64_t s = 0;
      std::uint64_t p = 0;
      backoff wait;
      while (!quit.load(std::memory_order_relaxed)) {
        if (s - p >= k_flood_window) {
          p = done[i].count();
          wait.reset();
          while (s - p >= k_flood_window && !quit.load(std::memory_order_relaxed)) {
            wait.pause();
            p = done[i].count();
          }
          continue;
        }
        if (sinks[i].tell(ping{static_cast<long>(s)})) {
          failures.fetch_add(1, std::memory_order_relaxed);
          break;
        }
        ++s;
      }
      sent[i] = s;
    });
  }
  auto stop_flood = [&] {
    quit.store(true, std::memory_order_relaxed);
    for (auto& t : flood) t.join();
    flood.clear();
    for (unsigned i = 0; i < n; ++i) done[i].wait_for(sent[i]);  // drain before stopping
  };

  // Warm-up: asks while the flood ramps up (at most 2000 asks or 200 ms: under overload a round
  // trip can take milliseconds).
  const auto warm_end = clock_type::now() + std::chrono::milliseconds(200);
  for (int i = 0; i < 2000 && clock_type::now() < warm_end; ++i) {
    auto r = probe.ask<long>(ping{i}, k_ask_timeout);
    if (!r) {
      stop_flood();
      return state.SkipWithError(("warm-up ask failed: " + r.error().message()).c_str());
    }
  }

  std::vector<std::uint64_t> lat;
  lat.reserve(static_cast<std::size_t>(state.max_iterations));
  std::uint64_t bg0 = 0;
  for (unsigned i = 0; i < n; ++i) bg0 += done[i].count();
  std::uint64_t bg1 = 0;
  bool failed = false;
  region r(&bs.sys);
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    auto reply = probe.ask<long>(ping{1}, k_ask_timeout);
    const auto t1 = clock_type::now();
    if (!reply) {
      state.SkipWithError(("ask failed: " + reply.error().message()).c_str());
      failed = true;
      break;
    }
    lat.push_back(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
  }
  for (unsigned i = 0; i < n; ++i) bg1 += done[i].count();
  const std::uint64_t asks = lat.size();
  const std::uint64_t background = bg1 - bg0;
  r.report(state, &bs.sys, asks + background, asks);
  stop_flood();
  if (failed) return;
  if (failures.load() != 0) return state.SkipWithError("background tell failed");

  state.counters["background_msgs"] = static_cast<double>(background);
  state.counters["background_msgs_per_second"] =
      benchmark::Counter(static_cast<double>(background), benchmark::Counter::kIsRate);
  state.counters["p50_ns"] = static_cast<double>(akt_bench::percentile(lat, 0.50));
  state.counters["p99_ns"] = static_cast<double>(akt_bench::percentile(lat, 0.99));
  state.counters["p999_ns"] = static_cast<double>(akt_bench::percentile(lat, 0.999));
  state.counters["max_ns"] = static_cast<double>(lat.empty() ? 0 : lat.back());
  state.counters["producers"] = n;
}
BENCHMARK(BM_AskTailLatencyUnderLoad)->UseRealTime();

// =============================================================================================
// 6. SpawnIdleActor: spawns N idle actors (one iteration), reports spawns/s and the heap growth
// per actor (glibc mallinfo2: arena chunks in use + mmap-ed chunks), before and after each actor
// processed one message.

struct idle_actor final : akt::actor {
  explicit idle_actor(completion* c) noexcept : done(c) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<ping>() != nullptr) done->note();
  }
  completion* done;
};

void BM_SpawnIdleActor(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  completion done;
  bench_system bs(state);
  if (!bs.ok) return;
  // Warm-up: the runtime's lazily built pieces (registry, pools) exist before measuring.
  {
    completion warm;
    std::vector<akt::pid> w;
    for (int i = 0; i < 64; ++i) {
      w.push_back(spawn_or_fail<idle_actor>(state, bs.sys, "warm-" + std::to_string(i), &warm));
      if (!w.back()) return;
      (void)w.back().tell(ping{i});
    }
    warm.wait_for(64);
    for (auto& p : w) (void)bs.sys.stop_actor(p);
  }

  std::vector<akt::pid> pids;
  pids.reserve(n);
  char name[32];
  const std::size_t heap0 = akt_bench::heap_in_use();
  region r(nullptr);
  for (auto _ : state) {
    for (std::size_t i = 0; i < n; ++i) {
      const int len = std::snprintf(name, sizeof name, "idle-%zu", i);
      auto p =
          bs.sys.spawn<idle_actor>(std::string_view(name, static_cast<std::size_t>(len)), &done);
      if (!p) {
        state.SkipWithError(("spawn failed: " + p.error().message()).c_str());
        break;
      }
      pids.push_back(std::move(*p));
    }
  }
  const std::size_t heap1 = akt_bench::heap_in_use();
  const std::uint64_t allocs = allocation_count() - r.allocs0;
  const auto spawned = static_cast<double>(pids.size());
  state.SetItemsProcessed(static_cast<std::int64_t>(pids.size()));
  if (pids.size() != n) return;

  // One message each, then measure again: each mailbox now keeps one envelope as its sentinel.
  for (std::size_t i = 0; i < n; ++i) {
    if (pids[i].tell(ping{static_cast<long>(i)})) return state.SkipWithError("tell failed");
  }
  done.wait_for(n);
  const std::size_t heap2 = akt_bench::heap_in_use();

  state.counters["actors"] = spawned;
  state.counters["bytes_per_actor"] =
      (static_cast<double>(heap1) - static_cast<double>(heap0)) / spawned;
  state.counters["bytes_per_actor_after_msg"] =
      (static_cast<double>(heap2) - static_cast<double>(heap0)) / spawned;
  state.counters["allocs_per_actor"] = static_cast<double>(allocs) / spawned;
  for (auto& p : pids) (void)p.stop();
  pids.clear();
}
BENCHMARK(BM_SpawnIdleActor)
    ->Arg(100000)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// =============================================================================================
// 7. RawMpscQueue: the machine's ceiling for one producer core handing nodes to one consumer
// core through akt's sentinel-style mpsc_queue, no actor runtime. The benchmark thread produces
// (one push per iteration); a consumer thread pops and checks FIFO order. Nodes come from a ring
// of k_ring nodes; a node is reused only after the consumer retired it (it is neither queued nor
// the sentinel).

struct raw_node : akt::mpsc_node {
  std::uint64_t seq = 0;
};

constexpr std::uint64_t k_ring = 4096;

void BM_RawMpscQueue(benchmark::State& state) {
  std::unique_ptr<raw_node[]> nodes(new raw_node[k_ring]);
  auto q = std::make_unique<akt::mpsc_queue>();
  // Writer: the consumer (release, after each pop). Reader: the producer (acquire), before
  // reusing a ring slot.
  alignas(64) std::atomic<std::uint64_t> popped{0};
  alignas(64) std::atomic<bool> quit{false};
  std::atomic<bool> out_of_order{false};

  std::thread consumer([&] {
    std::uint64_t count = 0;
    int idle = 0;
    for (;;) {
      akt::mpsc_node* retired = nullptr;
      akt::mpsc_node* got = q->pop(retired);
      if (got != nullptr) {
        if (static_cast<raw_node*>(got)->seq != count) {
          out_of_order.store(true, std::memory_order_relaxed);
        }
        ++count;
        popped.store(count, std::memory_order_release);
        idle = 0;
        continue;
      }
      if (quit.load(std::memory_order_acquire)) return;
      if (++idle < 256)
        cpu_relax();
      else
        std::this_thread::yield();
    }
  });

  std::uint64_t k = 0;            // next sequence number to push
  std::uint64_t seen_popped = 0;  // producer's cached copy of popped
  backoff wait;
  auto push_one = [&] {
    // Slot k % k_ring last held node k - k_ring, retired once node k - k_ring + 1 was popped;
    // one node more of margin.
    if (k + 2 >= seen_popped + k_ring) {
      seen_popped = popped.load(std::memory_order_acquire);
      wait.reset();
      while (k + 2 >= seen_popped + k_ring) {
        wait.pause();
        seen_popped = popped.load(std::memory_order_acquire);
      }
    }
    raw_node* node = &nodes[k % k_ring];
    node->seq = k;
    q->push(node);
    ++k;
  };
  auto wait_drained = [&] {
    wait.reset();
    while (popped.load(std::memory_order_acquire) != k) wait.pause();
  };
  for (int i = 0; i < 100000; ++i) push_one();  // warm-up
  wait_drained();

  const std::uint64_t base = k;
  const auto total = static_cast<std::uint64_t>(state.max_iterations);
  region r(nullptr);
  for (auto _ : state) {
    push_one();
    if (k - base == total) wait_drained();
  }
  r.report(state, nullptr, k - base, k - base);
  quit.store(true, std::memory_order_release);
  consumer.join();
  if (out_of_order.load()) state.SkipWithError("mpsc_queue delivered out of order");
}
BENCHMARK(BM_RawMpscQueue)->UseRealTime();

// =============================================================================================
// 8. RequestPairwise: hardware_concurrency pairs of actors; each requester sends a non-blocking
// request (receive_context::request) to its own echo actor and, in the continuation that runs on
// the requester, sends the next one. One iteration = k_request_batch requests per pair.

constexpr std::uint64_t k_request_batch = 20000;

struct start_requests {
  akt::pid target;
  std::uint64_t count;
};

struct requester final : akt::actor {
  explicit requester(completion* c) noexcept : done(c) {}
  void receive(akt::receive_context& ctx) override {
    if (auto* s = ctx.get_if<start_requests>()) {
      target = s->target;
      left = s->count;
      next(ctx);
    }
  }
  void next(akt::receive_context& ctx) {
    if (left == 0) return;
    --left;
    ctx.request<long>(target, ping{1}, std::chrono::nanoseconds::zero(),
                      [this](akt::receive_context& c, akt::result<long> r) {
                        if (r) done->note();
                        next(c);
                      });
  }
  completion* done;
  akt::pid target;
  std::uint64_t left = 0;
};

void BM_RequestPairwise(benchmark::State& state) {
  const unsigned n = akt_bench::pair_count();
  completion done;
  bench_system bs(state);
  if (!bs.ok) return;
  std::vector<akt::pid> requesters;
  std::vector<akt::pid> echoes;
  for (unsigned i = 0; i < n; ++i) {
    echoes.push_back(spawn_or_fail<echo>(state, bs.sys, "echo-" + std::to_string(i)));
    requesters.push_back(
        spawn_or_fail<requester>(state, bs.sys, "requester-" + std::to_string(i), &done));
    if (!echoes.back() || !requesters.back()) return;
  }
  auto round = [&](std::uint64_t per_pair) {
    const std::uint64_t target = done.count() + per_pair * n;
    for (unsigned i = 0; i < n; ++i) (void)requesters[i].tell(start_requests{echoes[i], per_pair});
    done.wait_for(target);
  };
  round(2000);  // warm-up
  std::uint64_t rounds = 0;
  region r(&bs.sys);
  for (auto _ : state) {
    round(k_request_batch);
    ++rounds;
  }
  const std::uint64_t requests = rounds * k_request_batch * n;
  r.report(state, &bs.sys, requests, requests);
  state.counters["pairs"] = n;
}
BENCHMARK(BM_RequestPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// RequestPairwiseCoroutine: RequestPairwise's shape, with the requester's loop written as a
// coroutine (akt/actor/coroutine.hpp): one coroutine per start_requests co_awaits each request
// in turn (non-reentrant, the default), so the frame is allocated once per batch.

struct coroutine_requester final : akt::actor {
  explicit coroutine_requester(completion* c) noexcept : done(c) {}
  void receive(akt::receive_context& ctx) override {
    if (auto* s = ctx.get_if<start_requests>()) {
      akt::run(requests(akt::async_context(ctx), s->target, s->count));
    }
  }
  akt::task<> requests(akt::async_context ctx, akt::pid target, std::uint64_t count) {
    for (std::uint64_t i = 0; i < count; ++i) {
      akt::result<long> r =
          co_await ctx.ask<long>(target, ping{1}, std::chrono::nanoseconds::zero());
      if (r) done->note();
    }
  }
  completion* done;
};

void BM_RequestPairwiseCoroutine(benchmark::State& state) {
  const unsigned n = akt_bench::pair_count();
  completion done;
  bench_system bs(state);
  if (!bs.ok) return;
  std::vector<akt::pid> requesters;
  std::vector<akt::pid> echoes;
  for (unsigned i = 0; i < n; ++i) {
    echoes.push_back(spawn_or_fail<echo>(state, bs.sys, "echo-" + std::to_string(i)));
    requesters.push_back(
        spawn_or_fail<coroutine_requester>(state, bs.sys, "requester-" + std::to_string(i), &done));
    if (!echoes.back() || !requesters.back()) return;
  }
  auto round = [&](std::uint64_t per_pair) {
    const std::uint64_t target = done.count() + per_pair * n;
    for (unsigned i = 0; i < n; ++i) (void)requesters[i].tell(start_requests{echoes[i], per_pair});
    done.wait_for(target);
  };
  round(2000);  // warm-up
  std::uint64_t rounds = 0;
  region r(&bs.sys);
  for (auto _ : state) {
    round(k_request_batch);
    ++rounds;
  }
  const std::uint64_t requests = rounds * k_request_batch * n;
  r.report(state, &bs.sys, requests, requests);
  state.counters["pairs"] = n;
}
BENCHMARK(BM_RequestPairwiseCoroutine)->UseRealTime()->Unit(benchmark::kMillisecond);

// =============================================================================================
// 9. SupervisionRestart: one actor whose supervisor restarts it on every failure; each crash
// message fails the handler (by exception, or by receive_context::fail for range(0) == 1), and
// the timed region ends when the fresh instances' pre_start has run that many times.

struct crash {};

struct crasher final : akt::actor {
  crasher(completion* c, bool report) noexcept : starts(c), report_error(report) {}
  akt::error pre_start(akt::actor_context&) override {
    starts->note();
    return {};
  }
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<crash>()) return;
    if (report_error) {
      ctx.fail(akt::error(akt::errc::handler_failed));
    } else {
      throw std::runtime_error("crash");
    }
  }
  completion* starts;
  bool report_error;
};

void BM_SupervisionRestart(benchmark::State& state) {
  const bool by_error = state.range(0) == 1;
  completion starts;
  akt::actor_system sys(
      "bench",
      akt::system_config{.default_supervisor = akt::supervisor().otherwise(akt::directive::restart),
                         .logger = std::make_shared<akt::null_logger>()});
  if (!sys.start()) return state.SkipWithError("start failed");
  auto p = sys.spawn<crasher>("crasher", &starts, by_error);
  if (!p) return state.SkipWithError("spawn failed");
  constexpr std::uint64_t k_batch = 10000;
  auto round = [&] {
    const std::uint64_t target = starts.count() + k_batch;
    for (std::uint64_t i = 0; i < k_batch; ++i) (void)p->tell(crash{});
    starts.wait_for(target);
  };
  round();  // warm-up
  std::uint64_t rounds = 0;
  region r(&sys);
  for (auto _ : state) {
    round();
    ++rounds;
  }
  r.report(state, &sys, rounds * k_batch, rounds * k_batch);
  state.counters["restarts"] = static_cast<double>(sys.stats(*p).restarts);
  (void)sys.stop();
}
BENCHMARK(BM_SupervisionRestart)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("by_error")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// =============================================================================================
// Grains (virtual actors). The pairwise shapes are the actor benchmarks above with each receiver
// actor replaced by a grain, addressed by identity on every send (the directory lookup is part
// of what is measured). Grains are activated before timing.

// The pair grains' completions, handed to the grains as a dependency: grain "sink-<i>" counts
// into done[i].
struct grain_sinks {
  std::unique_ptr<completion[]> done;
  unsigned n = 0;
};

// Counts every ping into its pair's completion (the analogue of counting_sink).
struct counting_grain final : akt::grain {
  completion* done = nullptr;
  akt::error on_activate(akt::grain_props& props) override {
    auto sinks = props.dependency<grain_sinks>("sinks");
    if (!sinks) return akt::error(akt::errc::invalid_argument, "no sinks dependency");
    const std::string& name = props.identity().name;
    const auto dash = name.rfind('-');
    unsigned i = 0;
    if (dash != std::string::npos) i = static_cast<unsigned>(std::stoul(name.substr(dash + 1)));
    done = &sinks->done[i % sinks->n];
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    if (ctx.get_if<ping>() != nullptr) {
      done->note();
      ctx.ack();  // answers an acknowledged tell; nothing to answer for a one-way one
    } else {
      ctx.unhandled();
    }
  }
};

// Answers every ask with 1L (an acknowledged tell sees that as no_err); the analogue of echo.
struct echo_grain final : akt::grain {
  void on_receive(akt::grain_context& ctx) override { ctx.reply(1L); }
};

// Activates one grain of kind T per pair ("<prefix>-<i>") and returns their identities (empty
// after a failure, which skips the benchmark).
template <class T>
std::vector<akt::grain_identity> pair_grains(benchmark::State& state, akt::actor_system& sys,
                                             const char* prefix, unsigned n) {
  std::vector<akt::grain_identity> ids;
  for (unsigned i = 0; i < n; ++i) {
    auto id = akt::activate_grain<T>(sys, std::string(prefix) + "-" + std::to_string(i));
    if (!id) {
      state.SkipWithError(("activate_grain failed: " + id.error().message()).c_str());
      return {};
    }
    ids.push_back(std::move(*id));
  }
  return ids;
}

// Declares T's dependencies (the pair completions) before any of its grains is activated.
std::shared_ptr<grain_sinks> counting_grain_kind(benchmark::State& state, akt::actor_system& sys,
                                                 unsigned n) {
  auto sinks = std::make_shared<grain_sinks>();
  sinks->done.reset(new completion[n]);
  sinks->n = n;
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("sinks", sinks);
  if (auto e = akt::with_grain_default_options<counting_grain>(sys, {.dependencies = deps})) {
    state.SkipWithError(("grain kind: " + e.message()).c_str());
    return nullptr;
  }
  return sinks;
}

// ---------------------------------------------------------------------------------------------
// 10. GrainTellOneWayPairwise: TellPairwise with grains. hardware_concurrency producer threads,
// each making one-way tell_grain calls to its own grain; a round is k_pair_batch tells per
// producer and ends when every grain has processed its share.

void BM_GrainTellOneWayPairwise(benchmark::State& state) {
  const unsigned n = akt_bench::pair_count();
  bench_system bs(state);
  if (!bs.ok) return;
  auto sinks = counting_grain_kind(state, bs.sys, n);
  if (!sinks) return;
  const auto ids = pair_grains<counting_grain>(state, bs.sys, "sink", n);
  if (ids.empty()) return;
  completion* done = sinks->done.get();
  run_pairwise_tells(state, bs, n, done, [&](unsigned i, std::uint64_t k) {
    return static_cast<bool>(
        akt::tell_grain(bs.sys, ids[i], ping{static_cast<long>(k)}, {.one_way = true}));
  });
}
BENCHMARK(BM_GrainTellOneWayPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// 10b. GrainRefTellOneWayPairwise: the same through a grain_ref per producer, whose one-way tells
// go straight to the activation they reached (no directory lookup, no lock).
void BM_GrainRefTellOneWayPairwise(benchmark::State& state) {
  const unsigned n = akt_bench::pair_count();
  bench_system bs(state);
  if (!bs.ok) return;
  auto sinks = counting_grain_kind(state, bs.sys, n);
  if (!sinks) return;
  const auto ids = pair_grains<counting_grain>(state, bs.sys, "sink", n);
  if (ids.empty()) return;
  std::vector<akt::grain_ref<counting_grain>> refs;
  for (const auto& id : ids) refs.emplace_back(bs.sys, id);
  completion* done = sinks->done.get();
  run_pairwise_tells(state, bs, n, done, [&](unsigned i, std::uint64_t k) {
    return static_cast<bool>(refs[i].tell_one_way(ping{static_cast<long>(k)}));
  });
}
BENCHMARK(BM_GrainRefTellOneWayPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------
// 11. GrainAskPairwise and 12. GrainTellPairwise: AskPairwise with grains. hardware_concurrency
// threads, each making sequential blocking calls to its own grain: ask_grain (answered with
// 1L), or acknowledged tell_grain (returns once the grain answered). A round is k_ask_batch
// calls per thread.

void grain_round_trips(benchmark::State& state, bool ask) {
  const unsigned n = akt_bench::pair_count();
  bench_system bs(state);
  if (!bs.ok) return;
  const auto ids = pair_grains<echo_grain>(state, bs.sys, "echo", n);
  if (ids.empty()) return;
  run_pairwise_calls(state, bs, n, [&](unsigned i, std::uint64_t k) {
    if (ask) {
      auto r = akt::ask_grain<long>(bs.sys, ids[i], ping{static_cast<long>(k)}, k_ask_timeout);
      return !r || *r != 1L;
    }
    return static_cast<bool>(
        akt::tell_grain(bs.sys, ids[i], ping{static_cast<long>(k)}, {.timeout = k_ask_timeout}));
  });
}

void BM_GrainAskPairwise(benchmark::State& state) { grain_round_trips(state, true); }
BENCHMARK(BM_GrainAskPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_GrainTellPairwise(benchmark::State& state) { grain_round_trips(state, false); }
BENCHMARK(BM_GrainTellPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------
// 13. GrainActivate: the benchmark thread sends one one-way tell_grain to range(0) fresh
// identities (one iteration); each send activates its grain, which processes the message.
// Timed until every grain has processed its message; items_per_second = activations/s. The
// kind's deactivate_after is an hour, so no passivation competes with the activations; the
// grains are deactivated when the system stops, outside the timed region. A fixed count keeps
// the directory the same size in every repetition.
//
// 14. GrainIdleBytes: the same activations, measuring the glibc heap (and the resident set)
// before and after, like SpawnIdleActor: bytes per idle grain that has handled its activating
// message, and per grain activated by activate_grain without a message.

struct activated_grain final : akt::grain {
  completion* done = nullptr;
  akt::error on_activate(akt::grain_props& props) override {
    auto c = props.dependency<completion>("done");
    if (!c) return akt::error(akt::errc::invalid_argument, "no completion dependency");
    done = c.get();
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    if (ctx.get_if<ping>() != nullptr) done->note();
  }
};

// Declares activated_grain's options and returns the identity template ("kind/-").
bool activated_grain_kind(benchmark::State& state, akt::actor_system& sys,
                          const std::shared_ptr<completion>& done, akt::grain_identity& id) {
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("done", done);
  if (auto e = akt::with_grain_default_options<activated_grain>(
          sys, {.deactivate_after = std::chrono::hours(1), .dependencies = deps})) {
    state.SkipWithError(("grain kind: " + e.message()).c_str());
    return false;
  }
  // Warm-up: the layer, the directory shards and the pools exist before measuring.
  for (int i = 0; i < 64; ++i) {
    auto w = akt::activate_grain<activated_grain>(sys, "warm-" + std::to_string(i));
    if (!w) {
      state.SkipWithError(("warm-up activate_grain failed: " + w.error().message()).c_str());
      return false;
    }
    if (akt::tell_grain(sys, *w, ping{i}, {.one_way = true})) {
      state.SkipWithError("warm-up tell_grain failed");
      return false;
    }
    id = *w;
  }
  done->wait_for(64);
  return true;
}

// Activates n fresh grains ("<prefix>-<i>") with one one-way ping each (with_message) or by
// activate_grain; false after a failure (reported).
bool activate_fresh(benchmark::State& state, akt::actor_system& sys, akt::grain_identity& id,
                    const char* prefix, std::size_t n, bool with_message) {
  char name[32];
  for (std::size_t i = 0; i < n; ++i) {
    const int len = std::snprintf(name, sizeof name, "%s-%zu", prefix, i);
    id.name.assign(name, static_cast<std::size_t>(len));
    akt::error e;
    if (with_message) {
      e = akt::tell_grain(sys, id, ping{static_cast<long>(i)}, {.one_way = true});
    } else if (auto r = akt::activate_grain<activated_grain>(sys, id.name); !r) {
      e = r.error();
    }
    if (e) {
      state.SkipWithError(("activation failed: " + e.message()).c_str());
      return false;
    }
  }
  return true;
}

void BM_GrainActivate(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto done = std::make_shared<completion>();
  bench_system bs(state);
  if (!bs.ok) return;
  akt::grain_identity id;
  if (!activated_grain_kind(state, bs.sys, done, id)) return;
  const std::uint64_t activations0 = akt::grain_activation_count(bs.sys);
  const std::uint64_t base = done->count();
  region r(&bs.sys);
  for (auto _ : state) {
    if (!activate_fresh(state, bs.sys, id, "fresh", n, true)) break;
    done->wait_for(base + n);
  }
  if (done->count() < base + n) return;
  r.report(state, &bs.sys, n, n);
  state.counters["activations"] =
      static_cast<double>(akt::grain_activation_count(bs.sys) - activations0);
}
BENCHMARK(BM_GrainActivate)
    ->Arg(100000)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_GrainIdleBytes(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto done = std::make_shared<completion>();
  bench_system bs(state);
  if (!bs.ok) return;
  akt::grain_identity id;
  if (!activated_grain_kind(state, bs.sys, done, id)) return;
  const std::uint64_t base = done->count();
  malloc_trim(0);  // memory freed by earlier benchmarks must not hide the resident-set growth
  const std::size_t heap0 = akt_bench::heap_in_use();
  const std::size_t rss0 = akt_bench::resident_bytes();
  for (auto _ : state) {
    if (!activate_fresh(state, bs.sys, id, "idle", n, true)) break;
    done->wait_for(base + n);
  }
  if (done->count() < base + n) return;
  const std::size_t heap1 = akt_bench::heap_in_use();
  const std::size_t rss1 = akt_bench::resident_bytes();
  if (!activate_fresh(state, bs.sys, id, "bare", n, false)) return;
  const std::size_t heap2 = akt_bench::heap_in_use();
  const auto count = static_cast<double>(n);
  state.SetItemsProcessed(static_cast<std::int64_t>(n));
  state.counters["grains"] = count;
  state.counters["bytes_per_grain"] =
      (static_cast<double>(heap1) - static_cast<double>(heap0)) / count;
  state.counters["rss_bytes_per_grain"] =
      (static_cast<double>(rss1) - static_cast<double>(rss0)) / count;
  state.counters["bytes_per_grain_of"] =
      (static_cast<double>(heap2) - static_cast<double>(heap1)) / count;
}
BENCHMARK(BM_GrainIdleBytes)
    ->Arg(100000)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
