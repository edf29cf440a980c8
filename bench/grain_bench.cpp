// akt_bench: grains (virtual actors): tells, round trips, activation and memory.
// (see bench_shapes.hpp for what every messaging benchmark reports).

#include "bench_shapes.hpp"

namespace akt_bench {
namespace {

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
void grain_ref_tell_one_way_pairwise(benchmark::State& state) {
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
void BM_GrainRefTellOneWayPairwise(benchmark::State& state) {
  grain_ref_tell_one_way_pairwise(state);
}
BENCHMARK(BM_GrainRefTellOneWayPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);
// 10c. The same with metrics and the HTTP endpoint on, and with tracing on but unsampled (issue
// 21's overhead targets).
void BM_GrainRefTellOneWayPairwiseObserved(benchmark::State& state) {
  observed o(observe_mode::metrics_http);
  grain_ref_tell_one_way_pairwise(state);
}
BENCHMARK(BM_GrainRefTellOneWayPairwiseObserved)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_GrainRefTellOneWayPairwiseTracingUnsampled(benchmark::State& state) {
  observed o(observe_mode::tracing_unsampled);
  grain_ref_tell_one_way_pairwise(state);
}
BENCHMARK(BM_GrainRefTellOneWayPairwiseTracingUnsampled)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

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
}  // namespace akt_bench
