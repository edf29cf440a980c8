// akt_bench: local round trips (asks, tail latency, requests and their coroutine form).
// (see bench_shapes.hpp for what every messaging benchmark reports).

#include "bench_shapes.hpp"

namespace akt_bench {
namespace {

// =============================================================================================
// 4. AskPairwise: hardware_concurrency asker threads, each doing sequential asks to its own
// receiver. One iteration = one round of k_ask_batch asks per asker.

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

}  // namespace
}  // namespace akt_bench
