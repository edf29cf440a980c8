// Metrics benchmarks (issue 21):
//  - TellSinglePairMetrics/on:<0|1>/every:<N>: TellSinglePair with the runtime's metrics off
//    (0) or on (1), timing one handler in N per worker: the rate, off against on.
//  - TellSteadyStateMetrics/on:<0|1>/every:<N>: TellSteadyState (at most 256 in flight, so the
//    envelope pool never runs dry) with the same settings: allocs_per_msg must be 0 with
//    metrics on (the sampled path allocates only a kind's first slot on a thread, during the
//    warm-up).
//  - MetricsScrape100kActors: a system holding 100,000 actors of 50 kinds (each has handled one
//    message, so every per-kind family has 50 series), timing sys.metrics().collect() followed
//    by to_prometheus_text, one scrape per iteration. Reports the text's size and series count.

#include <benchmark/benchmark.h>

#include <akt/metrics/prometheus.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "bench_shapes.hpp"

namespace akt_bench {
namespace {

akt::system_config metrics_config(const benchmark::State& state) {
  akt::system_config cfg;
  cfg.metrics.enabled = state.range(0) != 0;
  cfg.metrics.handler_sample_every = static_cast<std::uint32_t>(state.range(1));
  return cfg;
}

void BM_TellSinglePairMetrics(benchmark::State& state) {
  run_tell_single_pair<counting_sink>(state, metrics_config(state));
}
BENCHMARK(BM_TellSinglePairMetrics)
    ->Args({0, 64})
    ->Args({1, 64})
    ->Args({1, 1})
    ->ArgNames({"on", "every"})
    ->UseRealTime();

void BM_TellSteadyStateMetrics(benchmark::State& state) {
  run_tell_steady_state(state, metrics_config(state));
}
BENCHMARK(BM_TellSteadyStateMetrics)
    ->Args({0, 64})
    ->Args({1, 64})
    ->Args({1, 1})
    ->ArgNames({"on", "every"})
    ->UseRealTime();

// 50 kinds of actor: kind<0> .. kind<49>, each counting what it handles.
template <int N>
struct kind final : akt::actor {
  explicit kind(completion* c) noexcept : done(c) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<ping>() != nullptr) done->note();
  }
  completion* done;
};

constexpr int k_kinds = 50;
constexpr int k_actors = 100'000;
constexpr int k_grains = 10'000;

// The scrape's grains: activated and left active (no idle deactivation during the run).
struct scraped_grain final : akt::grain {
  void on_receive(akt::grain_context& ctx) override { ctx.unhandled(); }
};

template <int... N>
bool spawn_all(akt::actor_system& sys, completion* done, std::integer_sequence<int, N...>) {
  bool ok = true;
  for (int i = 0; i < k_actors / k_kinds && ok; ++i) {
    ((ok = ok &&
           [&] {
             auto p = sys.spawn<kind<N>>("a" + std::to_string(N) + "-" + std::to_string(i), done);
             return p && !p->tell(ping{i});
           }()),
     ...);
  }
  return ok;
}

// Issue 21's scrape target: a node with 100,000 actors of 50 kinds and 10,000 active grains
// answers a scrape (collect + the text format) within 50 ms.
void BM_MetricsScrape100kActors(benchmark::State& state) {
  akt::system_config cfg;
  cfg.metrics.enabled = true;
  cfg.metrics.handler_sample_every = 16;
  completion done;
  bench_system bs(state, "bench-scrape", cfg);
  if (!bs.ok) return;
  if (!spawn_all(bs.sys, &done, std::make_integer_sequence<int, k_kinds>{}))
    return state.SkipWithError("spawn failed");
  done.wait_for(k_actors);
  akt::grain_options idle_never;
  idle_never.deactivate_after = std::chrono::hours(1);
  if (akt::error e = akt::with_grain_default_options<scraped_grain>(bs.sys, idle_never))
    return state.SkipWithError(("grain kind: " + e.message()).c_str());
  for (int i = 0; i < k_grains; ++i) {
    if (!akt::activate_grain<scraped_grain>(bs.sys, "g-" + std::to_string(i)))
      return state.SkipWithError("activate_grain failed");
  }
  std::size_t bytes = 0;
  std::size_t series = 0;
  for (auto _ : state) {
    akt::metrics::snapshot snap = bs.sys.metrics().collect();
    std::string text = akt::metrics::to_prometheus_text(snap);
    bytes = text.size();
    series = 0;
    for (const auto& f : snap.families) series += f.samples.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["actors"] = static_cast<double>(bs.sys.stats().actors);
  state.counters["grains"] = static_cast<double>(akt::active_grains(bs.sys).size());
  state.counters["text_bytes"] = static_cast<double>(bytes);
  state.counters["series"] = static_cast<double>(series);
}
BENCHMARK(BM_MetricsScrape100kActors)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace akt_bench
