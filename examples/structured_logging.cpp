// The runtime's log events with their fields: a logger of your own that writes JSON lines, and
// the spdlog adapter. Quoted by docs/guide/08-observability.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>

#if AKT_EXAMPLE_WITH_SPDLOG
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <akt/core/spdlog_logger.hpp>
#endif

// [json-logger]
// One JSON object per line, the fields as keys: what a log shipper (Vector, Fluent Bit, Loki's
// promtail) reads without a parsing rule.
class json_lines_logger : public akt::logger {
 public:
  void log(akt::log_level level, std::string_view component, std::string_view text) override {
    akt::log_record r;
    r.level = level;
    r.component = component;
    r.text = text;
    log(r);
  }
  void log(const akt::log_record& r) override {
    std::string line = "{\"level\":\"" + std::string(akt::to_string(r.level)) + "\"";
    const auto field = [&line](const char* key, std::string_view value) {
      if (value.empty()) return;
      line += ",\"" + std::string(key) + "\":\"" + escaped(value) + "\"";
    };
    field("component", r.component);
    field("msg", r.text);
    field("node", r.node);
    field("actor", r.actor);
    field("trace_id", r.trace_id);
    line += "}\n";
    std::lock_guard<std::mutex> lock(mutex_);  // called from any thread
    std::fputs(line.c_str(), stdout);
  }
  akt::log_level threshold() const noexcept override { return akt::log_level::info; }

 private:
  static std::string escaped(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      if (static_cast<unsigned char>(c) < 0x20) continue;  // control characters dropped
      out += c;
    }
    return out;
  }
  std::mutex mutex_;
};
// [/json-logger]

struct fail {};
struct ping {};
class fragile : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<fail>()) throw std::runtime_error("the disk is full");
    if (ctx.is<ping>()) ctx.reply(1);
  }
};

// Sends a failing message, then an ask queued behind it: the default supervisor stops the
// actor, the ask is answered with the refusal, and by then the failure has been logged.
bool fail_once(akt::actor_system& sys) {
  auto a = sys.spawn<fragile>("fragile");
  if (!a || a->tell(fail{})) return false;
  (void)a->ask<int>(ping{}, std::chrono::seconds(5));
  return true;
}

int main() {
  {
    // [use-json-logger]
    akt::system_config cfg;
    cfg.logger = std::make_shared<json_lines_logger>();
    akt::actor_system sys("orders", cfg);
    // [/use-json-logger]
    if (!sys.start() || !fail_once(sys)) return 1;
    // Prints {"level":"warning","component":"fragile","msg":"handler failed (the disk is
    // full): stop","node":"orders","actor":"fragile"}
    if (!sys.stop()) return 1;
  }
#if AKT_EXAMPLE_WITH_SPDLOG
  {
    // [use-spdlog]
    auto spd = spdlog::stdout_logger_mt("akt");
    spd->set_level(spdlog::level::info);  // akt's threshold follows the spdlog logger's level
    akt::system_config cfg;
    cfg.logger = std::make_shared<akt::spdlog_logger>(spd);
    akt::actor_system sys("payments", cfg);
    // [/use-spdlog]
    if (!sys.start() || !fail_once(sys)) return 1;
    if (!sys.stop()) return 1;
    spdlog::drop("akt");
  }
#endif
  return 0;
}
