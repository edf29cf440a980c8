#include "akt/metrics/prometheus.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

namespace akt::metrics {

namespace {

void append_escaped(std::string& out, std::string_view text, bool quote) {
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  std::to_chars_result r;
  // Whole numbers within 2^53 print as integers (counts read better than 1e+06).
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    r = std::to_chars(buf, buf + sizeof buf, static_cast<std::int64_t>(v));
  } else {
    r = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that reads back exactly
  }
  out.append(buf, r.ptr);
}

void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// {a="x",b="y"} plus an optional le; nothing when there is no label at all.
void append_labels(std::string& out, const std::vector<label>& labels, const char* le = nullptr,
                   double le_value = 0) {
  if (labels.empty() && le == nullptr) return;
  out += '{';
  bool first = true;
  for (const label& l : labels) {
    if (!first) out += ',';
    first = false;
    out += l.name;
    out += "=\"";
    append_escaped(out, l.value, true);
    out += '"';
  }
  if (le != nullptr) {
    if (!first) out += ',';
    out += "le=\"";
    if (le[0] != '\0') {
      out += le;
    } else {
      append_value(out, le_value);
    }
    out += '"';
  }
  out += '}';
}

}  // namespace

std::string to_prometheus_text(const snapshot& snap) {
  std::string out;
  out.reserve(256 * snap.families.size());
  for (const family_snapshot& f : snap.families) {
    if (f.samples.empty()) continue;
    out += "# HELP ";
    out += f.name;
    out += ' ';
    append_escaped(out, f.help, false);
    out += "\n# TYPE ";
    out += f.name;
    out += ' ';
    out += to_string(f.type);
    out += '\n';
    for (const sample& s : f.samples) {
      if (f.type != metric_type::histogram) {
        out += f.name;
        append_labels(out, s.labels);
        out += ' ';
        append_value(out, s.value);
        out += '\n';
        continue;
      }
      for (std::size_t i = 0; i < f.bounds.size() && i < s.buckets.size(); ++i) {
        out += f.name;
        out += "_bucket";
        append_labels(out, s.labels, "", f.bounds[i]);
        out += ' ';
        append_uint(out, s.buckets[i]);
        out += '\n';
      }
      out += f.name;
      out += "_bucket";
      append_labels(out, s.labels, "+Inf");
      out += ' ';
      append_uint(out, s.count);
      out += '\n';
      out += f.name;
      out += "_sum";
      append_labels(out, s.labels);
      out += ' ';
      append_value(out, s.sum);
      out += '\n';
      out += f.name;
      out += "_count";
      append_labels(out, s.labels);
      out += ' ';
      append_uint(out, s.count);
      out += '\n';
    }
  }
  return out;
}

}  // namespace akt::metrics
