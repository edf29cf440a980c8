#pragma once
// What akt_bench's files share: the messages and actors of the local shapes, the benchmark's
// actor system, the counters every messaging benchmark reports, and the pairwise tell and
// round-trip drivers (so that actor and grain shapes are measured alike).
//
// Every messaging benchmark is timed until the receivers have processed every message sent in
// the timed region (not until the last enqueue), uses wall-clock time, reports items_per_second
// and allocs_per_msg (heap allocations through any form of operator new during the timed region,
// divided by the messages of that region). The actor system is created once per benchmark run,
// outside the timed region, and warmed up before timing.

#include <benchmark/benchmark.h>

#include <akt/akt.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"

namespace akt_bench {

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
  explicit bench_system(benchmark::State& state, std::string name = "bench",
                        akt::system_config config = {})
      : sys(std::move(name), with_env_overrides(std::move(config))) {
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
inline bool warm_up_tells(const akt::pid& to, completion& done, std::uint64_t n) {
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

// Figures a shape measures over the timed region on top of region's own (the remote shapes:
// CPU time and allocations per group of threads). begin() runs before the region reads its
// allocation count and end() after, so what they allocate themselves is not counted.
struct region_probe {
  virtual ~region_probe() = default;
  virtual void begin() = 0;
  virtual void end(benchmark::State& state, std::uint64_t messages) = 0;
};

// Counters every messaging benchmark reports.
struct region {
  region_probe* probe;
  std::uint64_t allocs0 = 0;
  akt::system_stats stats0;
  explicit region(const akt::actor_system* sys, region_probe* p = nullptr) : probe(p) {
    if (probe != nullptr) probe->begin();
    allocs0 = allocation_count();
    stats0 = sys ? sys->stats() : akt::system_stats{};
  }

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
    if (probe != nullptr) probe->end(state, messages);
  }
};

// The pairwise tell shape (TellPairwise, GrainTellOneWayPairwise): messages per producer per
// round.
constexpr std::uint64_t k_pair_batch = 20000;

// Times rounds of the pairwise tell shape: n producer threads each call send(i, k) for
// k < k_pair_batch (true = the send failed); a round ends when every receiver i has counted its
// share on done[i]. Shared by TellPairwise and GrainTellOneWayPairwise so both measure alike.
// (The overload on an actor_system serves nodes that are not a bench_system: a local_cluster's.)
template <class Send>
void run_pairwise_tells(benchmark::State& state, akt::actor_system& sys, unsigned n,
                        completion* done, Send send, region_probe* probe = nullptr) {
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
  region r(&sys, probe);
  for (auto _ : state) {
    if (!run()) {
      state.SkipWithError("send failed");
      break;
    }
    ++timed_rounds;
  }
  const std::uint64_t msgs = timed_rounds * k_pair_batch * n;
  r.report(state, &sys, msgs, msgs);
  state.counters["pairs"] = n;
}
template <class Send>
void run_pairwise_tells(benchmark::State& state, bench_system& bs, unsigned n, completion* done,
                        Send send, region_probe* probe = nullptr) {
  run_pairwise_tells(state, bs.sys, n, done, std::move(send), probe);
}

// The pairwise round-trip shape (AskPairwise, the grain round trips): calls per caller per round.
constexpr std::uint64_t k_ask_batch = 2000;

// Times rounds of the pairwise round-trip shape: n caller threads each make k_ask_batch
// sequential calls call(i, k) (true = the call failed). Shared by AskPairwise and the grain
// round trips so all measure alike.
template <class Call>
void run_pairwise_calls(benchmark::State& state, akt::actor_system& sys, unsigned n, Call call,
                        region_probe* probe = nullptr) {
  std::atomic<std::uint64_t> failures{0};
  thread_team callers(n, [&](unsigned i) {
    for (std::uint64_t k = 0; k < k_ask_batch; ++k) {
      if (call(i, k)) failures.fetch_add(1, std::memory_order_relaxed);
    }
  });
  callers.run_round();  // warm-up
  if (failures.load() != 0) return state.SkipWithError("warm-up call failed");

  std::uint64_t timed_rounds = 0;
  region r(&sys, probe);
  for (auto _ : state) {
    callers.run_round();
    if (failures.load(std::memory_order_relaxed) != 0) {
      state.SkipWithError("call failed");
      break;
    }
    ++timed_rounds;
  }
  const std::uint64_t calls = timed_rounds * k_ask_batch * n;
  r.report(state, &sys, calls, calls);
  state.counters["pairs"] = n;
}
template <class Call>
void run_pairwise_calls(benchmark::State& state, bench_system& bs, unsigned n, Call call,
                        region_probe* probe = nullptr) {
  run_pairwise_calls(state, bs.sys, n, std::move(call), probe);
}

// ---- shapes shared by several benchmarks ----

// One producer (the benchmark thread) and one receiver of type Sink in a fresh system, warmed
// up: what TellSinglePair and TellSteadyState start from. ok() false: skipped with the reason.
// Member order matters: `done` outlives the system whose sink counts into it.
template <class Sink>
struct tell_pair {
  completion done;
  bench_system bs;
  akt::pid sink;
  std::uint64_t base = 0;  // done.count() before the timed region

  tell_pair(benchmark::State& state, akt::system_config config)
      : bs(state, "bench", std::move(config)) {
    if (!bs.ok) return;
    sink = spawn_or_fail<Sink>(state, bs.sys, "sink", &done);
    if (!sink) return;
    if (!warm_up_tells(sink, done, 20000)) {
      state.SkipWithError("warm-up tell failed");
      sink = akt::pid();
      return;
    }
    base = done.count();
  }
  bool ok() const noexcept { return static_cast<bool>(sink); }
};

// TellSinglePair (tell_bench.cpp): one tell per iteration; the last iteration waits until the
// receiver processed them all.
template <class Sink>
void run_tell_single_pair(benchmark::State& state, akt::system_config config = {}) {
  tell_pair<Sink> p(state, std::move(config));
  if (!p.ok()) return;
  const auto total = static_cast<std::uint64_t>(state.max_iterations);
  std::uint64_t sent = 0;
  region r(&p.bs.sys);
  for (auto _ : state) {
    if (p.sink.tell(ping{static_cast<long>(sent)})) {
      state.SkipWithError("tell failed");
      break;
    }
    if (++sent == total) p.done.wait_for(p.base + total);
  }
  r.report(state, &p.bs.sys, sent, sent);
}

// TellSteadyState (tell_bench.cpp): TellSinglePair with at most k_steady_window messages in
// flight, so the envelope pool never runs dry and the steady-state tell allocates nothing.
constexpr std::uint64_t k_steady_window = 256;

inline void run_tell_steady_state(benchmark::State& state, akt::system_config config = {}) {
  tell_pair<counting_sink> p(state, std::move(config));
  if (!p.ok()) return;
  const auto total = static_cast<std::uint64_t>(state.max_iterations);
  std::uint64_t sent = 0;
  std::uint64_t processed = 0;  // last seen, relative to base
  backoff wait;
  region r(&p.bs.sys);
  for (auto _ : state) {
    if (sent - processed >= k_steady_window) {
      processed = p.done.count() - p.base;
      wait.reset();
      while (sent - processed >= k_steady_window) {
        wait.pause();
        processed = p.done.count() - p.base;
      }
    }
    if (p.sink.tell(ping{static_cast<long>(sent)})) {
      state.SkipWithError("tell failed");
      break;
    }
    if (++sent == total) p.done.wait_for(p.base + total);
  }
  r.report(state, &p.bs.sys, sent, sent);
}

}  // namespace akt_bench
