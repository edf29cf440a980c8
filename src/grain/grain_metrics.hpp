#pragma once
// The grain layer's part of the runtime metrics (system_config::metrics, seam 2 of the
// observability work; docs/guide/08-observability-runtime-metrics.md):
//
//   akt_grains_active{kind}                 gauge: activations in the directory at the scrape
//   akt_grain_activations_total{kind}       counter: activations that succeeded
//   akt_grain_deactivations_total{kind}     counter: activations that ended
//   akt_grain_activation_seconds{kind}      histogram: time from the start of an activation
//                                           (fence, claim, on_activate) to its success
//   akt_grain_refusals_total{kind,reason}   counter: messages refused before any handler ran
//   akt_grain_messages_total{kind}          counter: user messages the kind's cells handled
//
// Costs. Nothing per message beyond what the layer already did: the counters are written per
// activation, per deactivation and per refusal (cold paths), into one figures block per kind;
// the active gauge and the message count are read from the directory at the scrape (each
// shard's lock in turn, as active_grains() does). Metrics off: no kind has figures (a null
// pointer the cold paths test), no collector is registered, no clock is read.
//
// Contract: grain_kind_figures may be written from any thread (relaxed read-modify-writes: they
// are counts and order nothing); it lives as long as its kind (the layer). grain_metrics is
// built by the layer's constructor and destroyed first in its destructor: the collector handle
// waits out a scrape in progress, so the scrape never sees a layer being destroyed. collect()
// runs on the scraping thread (the registry runs one collector at a time).

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

#include "akt/core/error.hpp"
#include "akt/metrics/registry.hpp"
#include "akt/metrics/snapshot.hpp"

namespace akt::detail {

class grain_layer;
struct grain_kind;

// Refusal reasons are errc values; errc is a std::uint8_t enum with fewer values than this.
inline constexpr std::size_t k_refusal_reasons = 64;
static_assert(static_cast<std::size_t>(errc::cluster_quorum_timeout) < k_refusal_reasons,
              "a refusal reason's errc must fit the per-kind table");

// The figures of one kind (allocated on their own cache lines: they are written by activating
// threads, and must not share a line with the kind's name and factory, which every send reads).
struct alignas(64) grain_kind_figures {
  std::atomic<std::uint64_t> activations{0};
  std::atomic<std::uint64_t> deactivations{0};
  // Messages handled by this kind's cells that have stopped (each adds its count when it stops;
  // the live cells' counts are read from the directory at the scrape).
  std::atomic<std::uint64_t> messages_of_stopped{0};
  std::array<std::atomic<std::uint64_t>, k_refusal_reasons> refusals{};
  akt::metrics::histogram activation_seconds;  // this kind's series (lock-free observe)

  void refused(errc why) noexcept {
    refusals[static_cast<std::size_t>(why) % k_refusal_reasons].fetch_add(
        1, std::memory_order_relaxed);
  }
};

class grain_metrics {
 public:
  // Registers akt_grain_activation_seconds and the collector in reg.
  grain_metrics(grain_layer& layer, akt::metrics::registry& reg);
  ~grain_metrics() { collector_.reset(); }
  grain_metrics(const grain_metrics&) = delete;
  grain_metrics& operator=(const grain_metrics&) = delete;

  // The figures of a newly registered kind (its histogram series made now: with() takes the
  // family's lock, once per kind).
  std::unique_ptr<grain_kind_figures> figures_for(std::string_view kind) const;

  // Bounds of akt_grain_activation_seconds: 100 us to about 52 s, doubling (a local
  // activation takes microseconds; a cluster claim a store round trip; a slow on_activate
  // up to the activation timeout, 5 s by default, times its attempts).
  static std::vector<double> activation_bounds();

 private:
  void collect(akt::metrics::snapshot& out);

  grain_layer& layer_;
  akt::metrics::histogram_family activation_seconds_;
  // The scrape's state (the collector runs one at a time; the mutex is for a second registry
  // reader all the same): the message count last reported per kind (by the kind's index), so
  // that the counter never goes back (see collect()).
  std::mutex mutex_;
  std::vector<std::uint64_t> last_messages_;
  akt::metrics::collector_handle collector_;  // reset first (the destructor)
};

}  // namespace akt::detail
