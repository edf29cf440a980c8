#pragma once
// An akt::logger that writes to an spdlog logger, for programs that already log with spdlog
// (Debian: libspdlog-dev; link spdlog::spdlog). Header-only and included by nothing else in akt,
// so a program that does not include it needs no spdlog.
//
//   auto sink = spdlog::stdout_color_mt("app");
//   akt::system_config cfg;
//   cfg.logger = std::make_shared<akt::spdlog_logger>(sink);
//
// Each event becomes one spdlog message at the matching level (akt's warning is spdlog's warn):
// "<component>: <text>", followed by the record's fields as key=value pairs (node, actor,
// trace_id; the empty ones left out), so a pattern or a JSON formatter downstream can pick them
// up. The threshold is the spdlog logger's own level, read on every event, so changing it with
// spdlog's API takes effect at once. Thread safety is spdlog's: use a thread-safe (_mt) logger,
// since the runtime logs from any thread.

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>
#include <utility>

#include "akt/core/logger.hpp"

namespace akt {

class spdlog_logger final : public logger {
 public:
  explicit spdlog_logger(std::shared_ptr<spdlog::logger> sink) : sink_(std::move(sink)) {}

  void log(log_level level, std::string_view component, std::string_view text) override {
    log_record r;
    r.level = level;
    r.component = component;
    r.text = text;
    log(r);
  }

  void log(const log_record& r) override {
    const spdlog::level::level_enum level = to_spdlog(r.level);
    if (!sink_->should_log(level)) return;
    sink_->log(level, "{}: {}", r.component, format_fields(r));
  }

  log_level threshold() const noexcept override {
    switch (sink_->level()) {
      case spdlog::level::trace:
        return log_level::trace;
      case spdlog::level::debug:
        return log_level::debug;
      case spdlog::level::info:
        return log_level::info;
      case spdlog::level::warn:
        return log_level::warning;
      case spdlog::level::err:
      case spdlog::level::critical:
        return log_level::error;
      default:
        return log_level::off;
    }
  }

  static spdlog::level::level_enum to_spdlog(log_level level) noexcept {
    switch (level) {
      case log_level::trace:
        return spdlog::level::trace;
      case log_level::debug:
        return spdlog::level::debug;
      case log_level::info:
        return spdlog::level::info;
      case log_level::warning:
        return spdlog::level::warn;
      case log_level::error:
        return spdlog::level::err;
      case log_level::off:
        break;
    }
    return spdlog::level::off;
  }

 private:
  std::shared_ptr<spdlog::logger> sink_;
};

}  // namespace akt
