#pragma once
// A pluggable logger. The runtime logs lifecycle and failure events (never anything on the
// message hot path). The default writes to stderr at warning level and above; set another
// level, or your own sink, in system_config.
//
// Each event is a log_record: the text with structured fields (the node, the actor or grain it
// concerns, the trace id of the message being handled). A logger that overrides only the
// three-argument log() still gets every event, without the fields; one that overrides
// log(const log_record&) gets them as separate values, to emit as JSON or as a structured
// logging library's fields (akt/core/spdlog_logger.hpp does this for spdlog).

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace akt {

enum class log_level : std::uint8_t { trace, debug, info, warning, error, off };

std::string_view to_string(log_level level) noexcept;

// One event with its fields. The views live only during the call: copy what you keep.
struct log_record {
  log_level level = log_level::info;
  // The part of the runtime that speaks ("remote", "shutdown", "akt.cluster"), or the actor's
  // path for an actor's own events (then also in `actor`).
  std::string_view component;
  std::string_view text;
  std::string_view node;      // the system's name; its address (akt://name@host:port) if remote
  std::string_view actor;     // the actor's path or the grain's identity; empty when none
  std::string_view trace_id;  // 32 lowercase hex digits of the traced message handled; or empty
};

// "text node=… actor=… trace_id=…", the empty fields left out: the one-line form the stderr
// logger prints and the fallback for loggers that take no fields.
std::string format_fields(const log_record& r);

class logger {
 public:
  virtual ~logger() = default;
  // Called from any thread, possibly concurrently: implementations synchronise themselves.
  virtual void log(log_level level, std::string_view component, std::string_view text) = 0;
  // The runtime calls this one. The default hands the text, without the fields, to the
  // three-argument log(), so a logger written before the fields existed works unchanged;
  // override it to receive the fields.
  virtual void log(const log_record& r) { log(r.level, r.component, r.text); }
  // Messages below this level are not even formatted.
  virtual log_level threshold() const noexcept { return log_level::trace; }
};

// One line per message on stderr: "akt <level> <component>: <text> node=… actor=… trace_id=…".
class stderr_logger final : public logger {
 public:
  explicit stderr_logger(log_level threshold = log_level::warning) : threshold_(threshold) {}
  void log(log_level level, std::string_view component, std::string_view text) override;
  void log(const log_record& r) override;
  log_level threshold() const noexcept override { return threshold_.load(); }
  void set_threshold(log_level level) noexcept { threshold_.store(level); }

 private:
  std::atomic<log_level> threshold_;
  std::mutex mutex_;  // one line at a time
};

// Discards everything.
class null_logger final : public logger {
 public:
  void log(log_level, std::string_view, std::string_view) override {}
  void log(const log_record&) override {}
  log_level threshold() const noexcept override { return log_level::off; }
};

}  // namespace akt
