#pragma once
// Renders a snapshot in the Prometheus text exposition format, version 0.0.4 (the body of a
// /metrics response; Content-Type: text/plain; version=0.0.4; charset=utf-8).
//
// Per family: `# HELP` (help text with '\' and newline escaped), `# TYPE`, then one line per
// sample; label values escape '\', '"' and newline. A histogram writes `<name>_bucket{le="..."}`
// per bound (cumulative), `le="+Inf"`, `<name>_sum` and `<name>_count`. Families with no sample
// are left out (a bare HELP/TYPE carries nothing). Values print in the shortest form that reads
// back exactly; NaN and infinities as NaN, +Inf, -Inf.

#include <string>

#include "akt/metrics/snapshot.hpp"

namespace akt::metrics {

inline constexpr const char* k_prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

std::string to_prometheus_text(const snapshot& snap);

}  // namespace akt::metrics
