#pragma once
// Reading a system's metrics in tests: one scrape (registry::collect()), then the value of a
// counter or gauge series, or the count of a histogram series, picked by label values.

#include <akt/actor/actor_system.hpp>
#include <akt/metrics/registry.hpp>
#include <akt/metrics/snapshot.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace akt::test {

// The series of `family` in `snap` whose labels include every one of `labels` (the first
// such), or null.
inline const akt::metrics::sample* find_sample(
    const akt::metrics::snapshot& snap, std::string_view family,
    const std::vector<akt::metrics::label>& labels = {}) {
  for (const auto& f : snap.families) {
    if (f.name != family) continue;
    for (const auto& s : f.samples) {
      bool all = true;
      for (const auto& want : labels) {
        bool found = false;
        for (const auto& have : s.labels) found = found || have == want;
        all = all && found;
      }
      if (all) return &s;
    }
  }
  return nullptr;
}

// A counter's or gauge's value now (one scrape of sys), or nothing when the series is absent.
inline std::optional<double> metric_value(akt::actor_system& sys, std::string_view family,
                                          const std::vector<akt::metrics::label>& labels = {}) {
  const akt::metrics::snapshot snap = sys.metrics().collect();
  const akt::metrics::sample* s = find_sample(snap, family, labels);
  if (s == nullptr) return std::nullopt;
  return s->value;
}

// A histogram series' observation count now, or nothing when the series is absent.
inline std::optional<std::uint64_t> histogram_count(
    akt::actor_system& sys, std::string_view family,
    const std::vector<akt::metrics::label>& labels = {}) {
  const akt::metrics::snapshot snap = sys.metrics().collect();
  const akt::metrics::sample* s = find_sample(snap, family, labels);
  if (s == nullptr) return std::nullopt;
  return s->count;
}

// Whether any family of that name is in a scrape of sys.
inline bool has_family(akt::actor_system& sys, std::string_view family) {
  return sys.metrics().collect().find(family) != nullptr;
}

}  // namespace akt::test
