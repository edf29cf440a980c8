// akt_bench: actor lifecycle costs (spawning idle actors, supervision restarts).
// (see bench_shapes.hpp for what every messaging benchmark reports).

#include "bench_shapes.hpp"

namespace akt_bench {
namespace {

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

}  // namespace
}  // namespace akt_bench
