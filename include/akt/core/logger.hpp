#pragma once
// A pluggable logger. The runtime logs lifecycle and failure events (never anything on the
// message hot path). The default writes to stderr at warning level and above; set another
// level, or your own sink, in system_config.

#include <atomic>
#include <memory>
#include <mutex>
#include <string_view>

namespace akt {

enum class log_level : std::uint8_t { trace, debug, info, warning, error, off };

std::string_view to_string(log_level level) noexcept;

class logger {
 public:
  virtual ~logger() = default;
  // Called from any thread, possibly concurrently: implementations synchronise themselves.
  virtual void log(log_level level, std::string_view component, std::string_view text) = 0;
  // Messages below this level are not even formatted.
  virtual log_level threshold() const noexcept { return log_level::trace; }
};

// One line per message on stderr: "akt <level> <component>: <text>".
class stderr_logger final : public logger {
 public:
  explicit stderr_logger(log_level threshold = log_level::warning) : threshold_(threshold) {}
  void log(log_level level, std::string_view component, std::string_view text) override;
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
  log_level threshold() const noexcept override { return log_level::off; }
};

}  // namespace akt
