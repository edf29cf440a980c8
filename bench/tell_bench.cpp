// akt_bench: local tells (single pair, steady state, pairwise, fan-in) and the raw queue limit.
// (see bench_shapes.hpp for what every messaging benchmark reports).

#include <akt/mailbox/mpsc_queue.hpp>
#include "bench_shapes.hpp"

namespace akt_bench {
namespace {

// =============================================================================================
// 1. TellSinglePair: one producer (the benchmark thread) -> one receiver. One tell per
// iteration; the last iteration waits until the receiver has processed all of them.

void BM_TellSinglePair(benchmark::State& state) { run_tell_single_pair<counting_sink>(state); }
BENCHMARK(BM_TellSinglePair)->UseRealTime();
// 1a. The same with metrics and the HTTP endpoint on, and with tracing on but unsampled: the
// A/B pairs of issue 21's overhead targets (scripts/bench_ratio_runs.sh runs them interleaved).
void BM_TellSinglePairObserved(benchmark::State& state) {
  observed o(observe_mode::metrics_http);
  run_tell_single_pair<counting_sink>(state);
}
BENCHMARK(BM_TellSinglePairObserved)->UseRealTime();
void BM_TellSinglePairTracingUnsampled(benchmark::State& state) {
  observed o(observe_mode::tracing_unsampled);
  run_tell_single_pair<counting_sink>(state);
}
BENCHMARK(BM_TellSinglePairTracingUnsampled)->UseRealTime();

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
void BM_TellSinglePairGetIfChain(benchmark::State& state) {
  run_tell_single_pair<chain_sink>(state);
}
BENCHMARK(BM_TellSinglePairGetIfChain)->UseRealTime();
void BM_TellSinglePairMatch(benchmark::State& state) { run_tell_single_pair<match_sink>(state); }
BENCHMARK(BM_TellSinglePairMatch)->UseRealTime();

// =============================================================================================
// 8. TellSteadyState: TellSinglePair with at most k_steady_window messages in flight (sent but not
// yet processed). The receiver recycles envelopes as fast as they are taken, so the envelope pool
// never runs dry: the steady-state tell path allocates nothing.

void BM_TellSteadyState(benchmark::State& state) {
  run_tell_steady_state(state);
  state.counters["window"] = static_cast<double>(k_steady_window);
}
BENCHMARK(BM_TellSteadyState)->UseRealTime();

// =============================================================================================
// 2. TellPairwise: hardware_concurrency independent pairs, each a producer thread telling its
// own receiver. One iteration = one round: every producer tells k_pair_batch messages, and the
// round ends when every receiver has processed its share.

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

}  // namespace
}  // namespace akt_bench
