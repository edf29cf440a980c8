#pragma once
// The metrics registry: counters, gauges and histograms with labels, and collectors that add
// families at scrape time. actor_system::metrics() is a system's registry; the runtime's own
// metrics (system_config::metrics.enabled) are collectors in it.
//
//   auto& reg = sys.metrics();
//   auto requests = reg.add_counter("shop_requests_total", "Requests served.", {"route"});
//   auto checkout = requests->with({"checkout"});   // keep the handle: with() takes a lock
//   checkout.inc();                                  // from any thread
//   std::string text = akt::metrics::to_prometheus_text(reg.collect());
//
// Contract (registry):
//  - Callers: every member from any thread. A collector must not add or remove collectors of
//    the registry that runs it (collect() holds the collectors' lock while they run).
//  - Progress: registration, with() and collect() take locks (not for the hot path: keep the
//    handles); counter::inc and histogram::observe are lock-free (relaxed read-modify-writes on
//    the calling thread's stripe), gauge updates are lock-free on one shared cell.
//  - Contention: a counter or histogram series keeps one cache line (a few for a histogram with
//    many buckets) per stripe; a thread updates the stripe of its own index (stripes() of them,
//    a power of two >= the hardware threads, at least 8), so threads never write a shared line
//    until there are more updating threads than stripes. A gauge is one cell shared by all: set
//    it from one place, or compute it in a collector.
//  - Ordering: a scrape reads each cell with a relaxed load; it sees every update that
//    happened-before collect() and some of those racing with it. A histogram's _count is the sum
//    of its bucket counts as read, so _count always equals the +Inf bucket.
//  - Memory: a counter series is stripes() cache lines (512 bytes at 8 stripes); a histogram
//    series stripes() * ceil((bounds + 2) / 8) lines; families and series live as long as the
//    registry. Handles are plain pointers: they must not outlive the registry.
//  - Names: metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* and
//    do not start with "__"; counters end in "_total"; a histogram may not use the label "le".
//    Label values are any UTF-8 text (escaped in the exposition).

#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "akt/core/result.hpp"
#include "akt/metrics/detail/stripes.hpp"
#include "akt/metrics/snapshot.hpp"

namespace akt::metrics {

namespace detail {
struct family;          // one registered family (src/metrics/registry.cpp)
struct registry_state;  // a registry's families and collectors
}  // namespace detail

// A monotonically increasing count. Copyable handle; a default-constructed one is empty and
// must not be used.
class counter {
 public:
  counter() noexcept = default;
  void inc(std::uint64_t n = 1) const noexcept {
    lines_[detail::stripe_index() & mask_].words[0].fetch_add(n, std::memory_order_relaxed);
  }
  // The sum over the stripes (as a scrape reads it).
  std::uint64_t value() const noexcept;
  explicit operator bool() const noexcept { return lines_ != nullptr; }

 private:
  friend struct detail::family;
  counter(detail::cache_line* lines, std::uint32_t mask) noexcept : lines_(lines), mask_(mask) {}
  detail::cache_line* lines_ = nullptr;
  std::uint32_t mask_ = 0;
};

// A value that goes up and down. One shared cell (see the contract above).
class gauge {
 public:
  gauge() noexcept = default;
  void set(double v) const noexcept {
    cell_->store(std::bit_cast<std::uint64_t>(v), std::memory_order_relaxed);
  }
  void add(double delta) const noexcept {
    std::uint64_t old = cell_->load(std::memory_order_relaxed);
    while (!cell_->compare_exchange_weak(
        old, std::bit_cast<std::uint64_t>(std::bit_cast<double>(old) + delta),
        std::memory_order_relaxed)) {
    }
  }
  void sub(double delta) const noexcept { add(-delta); }
  double value() const noexcept {
    return std::bit_cast<double>(cell_->load(std::memory_order_relaxed));
  }
  explicit operator bool() const noexcept { return cell_ != nullptr; }

 private:
  friend struct detail::family;
  explicit gauge(std::atomic<std::uint64_t>* cell) noexcept : cell_(cell) {}
  std::atomic<std::uint64_t>* cell_ = nullptr;
};

// Observations counted into fixed buckets (bucket i counts values <= bound i, the Prometheus
// `le` rule; larger values and NaN go to +Inf), with their sum and count.
class histogram {
 public:
  histogram() noexcept = default;
  void observe(double v) const noexcept;
  explicit operator bool() const noexcept { return lines_ != nullptr; }

 private:
  friend struct detail::family;
  histogram(detail::cache_line* lines, const double* bounds, std::uint32_t bound_count,
            std::uint32_t lines_per_stripe, std::uint32_t mask) noexcept
      : lines_(lines),
        bounds_(bounds),
        bound_count_(bound_count),
        lines_per_stripe_(lines_per_stripe),
        mask_(mask) {}
  detail::cache_line* lines_ = nullptr;
  const double* bounds_ = nullptr;
  std::uint32_t bound_count_ = 0;
  std::uint32_t lines_per_stripe_ = 0;
  std::uint32_t mask_ = 0;
};

// A registered family: with(values) gives the series of those label values (one value per
// label name, in the order registered; created at first use). with() takes the family's lock:
// keep the handle it returns. A wrong number of values is a precondition violation (asserted;
// without asserts missing values are empty and extra ones ignored).
template <class Handle>
class family_handle {
 public:
  family_handle() noexcept = default;
  Handle with(std::initializer_list<std::string_view> values = {}) const;
  Handle with(const std::vector<std::string>& values) const;
  explicit operator bool() const noexcept { return family_ != nullptr; }

 private:
  friend class registry;
  explicit family_handle(detail::family* f) noexcept : family_(f) {}
  detail::family* family_ = nullptr;
};
using counter_family = family_handle<counter>;
using gauge_family = family_handle<gauge>;
using histogram_family = family_handle<histogram>;

// Removes its collector when destroyed or reset (waiting for a collect() that runs it to
// finish, so that afterwards the callback is never running). Must not outlive the registry.
class collector_handle {
 public:
  collector_handle() noexcept = default;
  collector_handle(collector_handle&& o) noexcept
      : state_(std::exchange(o.state_, nullptr)), id_(o.id_) {}
  collector_handle& operator=(collector_handle&& o) noexcept {
    if (this != &o) {
      reset();
      state_ = std::exchange(o.state_, nullptr);
      id_ = o.id_;
    }
    return *this;
  }
  collector_handle(const collector_handle&) = delete;
  collector_handle& operator=(const collector_handle&) = delete;
  ~collector_handle() { reset(); }
  void reset() noexcept;
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  friend class registry;
  collector_handle(detail::registry_state* state, std::uint64_t id) noexcept
      : state_(state), id_(id) {}
  detail::registry_state* state_ = nullptr;
  std::uint64_t id_ = 0;
};

class registry {
 public:
  registry();
  ~registry();
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  // Registers a family, or returns the one registered under that name with the same type,
  // label names (and bounds). errc::invalid_argument (the detail says why) for an invalid name
  // or label name, a counter not named *_total, unsorted or non-finite bounds, or a name already
  // registered with another type, labels or bounds.
  result<counter_family> add_counter(std::string_view name, std::string_view help,
                                     std::vector<std::string> label_names = {});
  result<gauge_family> add_gauge(std::string_view name, std::string_view help,
                                 std::vector<std::string> label_names = {});
  // bounds: strictly increasing finite upper bounds (+Inf is implied), at most 64.
  result<histogram_family> add_histogram(std::string_view name, std::string_view help,
                                         std::vector<double> bounds,
                                         std::vector<std::string> label_names = {});

  // Adds a callback run at every collect(), after the registered families were read, that
  // appends families of its own (the runtime's metrics are read this way: pulled from state it
  // keeps anyway). It runs on the thread that calls collect(), one collector at a time.
  collector_handle add_collector(std::function<void(snapshot&)> collector);

  // Every family with its series, then what the collectors add. Families of the same name and
  // type added by several collectors are merged into one; a later family with a name already
  // used by another type is dropped.
  snapshot collect() const;

  // Stripes per counter or histogram series (see the contract).
  std::uint32_t stripes() const noexcept;

 private:
  std::unique_ptr<detail::registry_state> state_;
};

// Bounds helpers: count bounds from start, each `factor` (> 1) times the previous one, or
// `width` (> 0) more.
std::vector<double> exponential_bounds(double start, double factor, std::size_t count);
std::vector<double> linear_bounds(double start, double width, std::size_t count);

// Name checks (the rules in the contract above).
bool valid_metric_name(std::string_view name) noexcept;
bool valid_label_name(std::string_view name) noexcept;

}  // namespace akt::metrics
