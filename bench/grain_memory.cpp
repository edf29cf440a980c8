// akt_grain_memory: holds many idle grains, lets their idle timeout passivate them, and prints
// the process's memory before, while held and after (see bench/README.md).
//
//   akt_grain_memory [grains = 1000000] [deactivate_after_ms = 3000] [cycles = 2]
//
// Each cycle activates `grains` fresh identities with one one-way tell_grain each (the grain
// handles that message and stays idle), measures (the idle timeout must be longer than the
// activations take, or the first grains are gone before the measurement: the program prints how
// many already were), then waits until every grain has run
// on_deactivate and the activation directory is empty, and measures again. A second cycle
// reuses the freed memory: if passivation leaked, the second cycle's figures would grow.
// Memory: the glibc heap in use (mallinfo2, as akt_bench's bytes per actor) and the resident
// set (/proc/self/statm), the latter also after malloc_trim, which hands free pages back.
// Exit status 1 when an activation fails or the grains are not all passivated within a minute.

#include <malloc.h>

#include <akt/akt.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "bench_support.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct hello {};

// Shared with every activation through the kind's dependencies.
struct tally {
  akt_bench::completion handled;  // messages handled
  std::atomic<std::uint64_t> deactivated{0};
};

// An idle grain: no state of its own beyond what the framework keeps.
struct idle_grain final : akt::grain {
  tally* t = nullptr;
  akt::error on_activate(akt::grain_props& props) override {
    auto p = props.dependency<tally>("tally");
    if (!p) return akt::error(akt::errc::invalid_argument, "no tally dependency");
    t = p.get();
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    if (ctx.is<hello>()) t->handled.note();
  }
  akt::error on_deactivate(akt::grain_props&) override {
    t->deactivated.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
};

struct snapshot {
  double heap_mib;
  double rss_mib;
};

snapshot measure() {
  constexpr double mib = 1024.0 * 1024.0;
  return {static_cast<double>(akt_bench::heap_in_use()) / mib,
          static_cast<double>(akt_bench::resident_bytes()) / mib};
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t grains = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1'000'000;
  const long after_ms = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 3000;
  const int cycles = argc > 3 ? std::atoi(argv[3]) : 2;
  if (grains == 0 || after_ms <= 0 || cycles <= 0) {
    std::fprintf(stderr, "usage: %s [grains] [deactivate_after_ms] [cycles]\n", argv[0]);
    return 2;
  }

  akt::actor_system sys("grain-memory");
  if (!sys.start()) return 1;
  auto t = std::make_shared<tally>();
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("tally", t);
  if (akt::with_grain_default_options<idle_grain>(
          sys, {.deactivate_after = std::chrono::milliseconds(after_ms), .dependencies = deps}))
    return 1;
  auto first = akt::activate_grain<idle_grain>(sys, "warm-0");  // also tells us the kind's name
  if (!first) return 1;
  akt::grain_identity id = *first;

  std::printf("akt_grain_memory: %zu grains, deactivate_after %ld ms, %d cycles\n", grains,
              after_ms, cycles);
  std::printf("%-7s %-22s %10s %10s %14s %14s %8s\n", "cycle", "phase", "heap MiB", "RSS MiB",
              "heap B/grain", "RSS B/grain", "seconds");
  auto row = [&](int cycle, const char* phase, snapshot s, const snapshot* base, double secs) {
    char heap_per[32] = "";
    char rss_per[32] = "";
    if (base != nullptr) {
      const double n = static_cast<double>(grains);
      std::snprintf(heap_per, sizeof heap_per, "%.1f", (s.heap_mib - base->heap_mib) * 1048576 / n);
      std::snprintf(rss_per, sizeof rss_per, "%.1f", (s.rss_mib - base->rss_mib) * 1048576 / n);
    }
    std::printf("%-7d %-22s %10.1f %10.1f %14s %14s %8.2f\n", cycle, phase, s.heap_mib, s.rss_mib,
                heap_per, rss_per, secs);
    std::fflush(stdout);
  };

  // Waits until `target` grains ran on_deactivate and the directory is empty, at most a minute.
  auto wait_passivated = [&](std::uint64_t target) {
    const auto until = clock_type::now() + std::chrono::minutes(1);
    while (t->deactivated.load(std::memory_order_relaxed) < target) {
      if (clock_type::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // on_deactivate runs just before the activation leaves the directory.
    while (!akt::active_grains(sys).empty()) {
      if (clock_type::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  };

  if (!wait_passivated(1)) return 1;  // the warm-up grain: timers and pools exist
  malloc_trim(0);
  const snapshot base = measure();
  row(0, "baseline (trimmed)", base, nullptr, 0);

  std::uint64_t handled = 0;
  std::uint64_t deactivated = 1;
  char name[32];
  for (int c = 1; c <= cycles; ++c) {
    const auto t0 = clock_type::now();
    for (std::size_t i = 0; i < grains; ++i) {
      const int len = std::snprintf(name, sizeof name, "g-%zu", i);
      id.name.assign(name, static_cast<std::size_t>(len));
      if (akt::error e = akt::tell_grain(sys, id, hello{}, {.one_way = true})) {
        std::fprintf(stderr, "activation of %s failed: %s\n", id.str().c_str(),
                     e.message().c_str());
        return 1;
      }
    }
    handled += grains;
    t->handled.wait_for(handled);
    const double activate_s = seconds_since(t0);
    const snapshot held = measure();
    const std::uint64_t early = t->deactivated.load(std::memory_order_relaxed) - deactivated;
    row(c, early == 0 ? "held (all idle)" : "held (some passivated)", held, &base, activate_s);
    if (early != 0)
      std::printf("        %llu grains were passivated before the measurement\n",
                  static_cast<unsigned long long>(early));

    const auto t1 = clock_type::now();
    deactivated += grains;
    if (!wait_passivated(deactivated)) {
      std::fprintf(stderr, "grains still active after a minute: %zu\n",
                   akt::active_grains(sys).size());
      return 1;
    }
    const double passivate_s = seconds_since(t1);
    row(c, "passivated", measure(), &base, passivate_s);
    malloc_trim(0);
    row(c, "passivated, trimmed", measure(), &base, 0);
  }
  std::printf("activations: %llu\n",
              static_cast<unsigned long long>(akt::grain_activation_count(sys)));
  if (auto r = sys.stop(); !r) {
    std::fprintf(stderr, "stop: %s\n", r.error().message().c_str());
    return 1;
  }
  return 0;
}
