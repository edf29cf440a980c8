#include "akt/core/logger.hpp"

#include <cstdio>

namespace akt {

std::string_view to_string(log_level level) noexcept {
  switch (level) {
    case log_level::trace:
      return "trace";
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warning:
      return "warning";
    case log_level::error:
      return "error";
    case log_level::off:
      return "off";
  }
  return "?";
}

std::string format_fields(const log_record& r) {
  std::string out(r.text);
  const auto field = [&out](std::string_view key, std::string_view value) {
    if (value.empty()) return;
    out += ' ';
    out += key;
    out += '=';
    out += value;
  };
  field("node", r.node);
  field("actor", r.actor);
  field("trace_id", r.trace_id);
  return out;
}

void stderr_logger::log(log_level level, std::string_view component, std::string_view text) {
  if (level < threshold() || level == log_level::off) return;
  std::lock_guard<std::mutex> lock(mutex_);
  std::fprintf(stderr, "akt %.*s %.*s: %.*s\n", static_cast<int>(to_string(level).size()),
               to_string(level).data(), static_cast<int>(component.size()), component.data(),
               static_cast<int>(text.size()), text.data());
}

void stderr_logger::log(const log_record& r) {
  if (r.level < threshold() || r.level == log_level::off) return;
  log(r.level, r.component, format_fields(r));
}

}  // namespace akt
