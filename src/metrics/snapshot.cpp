#include "akt/metrics/snapshot.hpp"

#include "akt/core/assert.hpp"
#include "akt/metrics/registry.hpp"

namespace akt::metrics {

std::string_view to_string(metric_type type) noexcept {
  switch (type) {
    case metric_type::counter:
      return "counter";
    case metric_type::gauge:
      return "gauge";
    case metric_type::histogram:
      return "histogram";
  }
  return "untyped";
}

sample& family_snapshot::add(std::vector<label> labels, double value) {
  AKT_ASSERT(type != metric_type::histogram);
  sample& s = samples.emplace_back();
  s.labels = std::move(labels);
  s.value = value;
  return s;
}

sample& family_snapshot::add_histogram(std::vector<label> labels,
                                       std::vector<std::uint64_t> buckets, std::uint64_t count,
                                       double sum) {
  AKT_ASSERT(type == metric_type::histogram && buckets.size() == bounds.size());
  sample& s = samples.emplace_back();
  s.labels = std::move(labels);
  s.buckets = std::move(buckets);
  s.count = count;
  s.sum = sum;
  return s;
}

family_snapshot& snapshot::add_family(std::string name, std::string help, metric_type type,
                                      std::vector<double> bounds) {
  AKT_ASSERT(valid_metric_name(name));
  family_snapshot& f = families.emplace_back();
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  f.bounds = std::move(bounds);
  return f;
}

const family_snapshot* snapshot::find(std::string_view name) const noexcept {
  for (const auto& f : families)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace akt::metrics
