#pragma once
// snapshot: the values of a registry's metrics at one scrape (registry::collect()), as plain
// data: families, each with its samples. Collectors (registry::add_collector) append families
// to it; to_prometheus_text renders it.
//
// Not thread-safe: a snapshot belongs to the thread that collects it.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace akt::metrics {

enum class metric_type : std::uint8_t { counter, gauge, histogram };

// "counter", "gauge", "histogram".
std::string_view to_string(metric_type type) noexcept;

// A label: name and value.
struct label {
  std::string name;
  std::string value;
  friend bool operator==(const label&, const label&) = default;
};

// One series of a family: its labels and value (counter, gauge) or buckets (histogram).
struct sample {
  std::vector<label> labels;
  double value = 0;  // counter or gauge
  // Histogram: cumulative counts, one per bound of the family (observations <= bound, the
  // Prometheus `le` rule); `count` is the +Inf bucket.
  std::vector<std::uint64_t> buckets;
  std::uint64_t count = 0;
  double sum = 0;
};

// A family: name, help, type, the bounds of a histogram's buckets, and its samples.
struct family_snapshot {
  std::string name;
  std::string help;
  metric_type type = metric_type::gauge;
  std::vector<double> bounds;  // histogram only: strictly increasing upper bounds, +Inf implied
  std::vector<sample> samples;

  // Appends a counter or gauge sample.
  sample& add(std::vector<label> labels, double value);
  // Appends a histogram sample; `buckets` are cumulative, one per bound.
  sample& add_histogram(std::vector<label> labels, std::vector<std::uint64_t> buckets,
                        std::uint64_t count, double sum);
};

struct snapshot {
  std::vector<family_snapshot> families;

  // Appends a family (collectors call this). Names follow the registry's rules (registry.hpp);
  // a collector is trusted to use valid ones (checked by AKT_ASSERT in debug builds).
  family_snapshot& add_family(std::string name, std::string help, metric_type type,
                              std::vector<double> bounds = {});
  // The family of that name, or null.
  const family_snapshot* find(std::string_view name) const noexcept;
};

}  // namespace akt::metrics
