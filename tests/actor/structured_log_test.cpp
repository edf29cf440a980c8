// The logger's structured fields (issue 21, "Logging"): the record a logger receives names the
// node and the actor, a logger written before the fields existed still gets every event, and
// the spdlog adapter hands both to spdlog.

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "actor/actor_test_support.hpp"

#if AKT_TEST_SPDLOG
#include <spdlog/sinks/base_sink.h>

#include "akt/core/spdlog_logger.hpp"
#endif

namespace {

using akt::log_level;
using akt::log_record;
using akt::test::boom;
using akt::test::eventually;
using akt::test::recorder;

// Keeps each record's fields (copied: the views live only during the call).
class record_logger : public akt::logger {
 public:
  struct kept {
    log_level level;
    std::string component, text, node, actor, trace_id;
  };
  void log(log_level, std::string_view, std::string_view) override {
    ++three_argument_calls;  // never: the runtime calls the record form
  }
  void log(const log_record& r) override {
    std::lock_guard<std::mutex> lock(mu);
    records.push_back({r.level, std::string(r.component), std::string(r.text), std::string(r.node),
                       std::string(r.actor), std::string(r.trace_id)});
  }
  std::vector<kept> snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return records;
  }
  std::atomic<int> three_argument_calls{0};
  std::mutex mu;
  std::vector<kept> records;
};

TEST(Observability_Logger, AnActorFailureCarriesTheNodeAndTheActorAsFields) {
  auto log = std::make_shared<record_logger>();
  akt::actor_system sys("fields-node", {.workers = 1, .logger = log});
  ASSERT_TRUE(sys.start());
  recorder::shared s;
  auto p = sys.spawn<recorder>("noisy", &s);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(boom{"oops"}));
  ASSERT_TRUE(eventually([&] { return !log->snapshot().empty(); }));
  const auto r = log->snapshot().front();
  EXPECT_EQ(r.level, log_level::warning);
  EXPECT_EQ(r.node, "fields-node");
  EXPECT_EQ(r.actor, "noisy");
  EXPECT_EQ(r.component, "noisy");
  EXPECT_NE(r.text.find("oops"), std::string::npos) << r.text;
  EXPECT_EQ(r.text.find("node="), std::string::npos) << "fields are not folded into the text";
  EXPECT_TRUE(r.trace_id.empty()) << "no trace without tracing";
  EXPECT_EQ(log->three_argument_calls.load(), 0);
}

// Throws inside its handler after noting the trace it runs in.
struct traced_failure {};
class trace_noter : public akt::actor {
 public:
  explicit trace_noter(std::string* seen) : seen_(seen) {}
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<traced_failure>()) return ctx.unhandled();
    *seen_ = akt::current_trace_id();  // read by the test after the log record arrived
    throw std::runtime_error("traced oops");
  }

 private:
  std::string* seen_;
};

TEST(Observability_Logger, AnEventInATracedHandlerCarriesItsTraceId) {
  auto log = std::make_shared<record_logger>();
  akt::tracing_config tracing;
  tracing.sink = [](const akt::span_data&) {};
  akt::system_config cfg;
  cfg.workers = 1;
  cfg.logger = log;
  cfg.tracing = tracing;
  akt::actor_system sys("traced-node", cfg);
  ASSERT_TRUE(sys.start());
  std::string seen;
  auto p = sys.spawn<trace_noter>("noter", &seen);
  ASSERT_TRUE(p);
  {
    akt::trace_scope scope(sys, "test");
    ASSERT_FALSE(p->tell(traced_failure{}));
  }
  ASSERT_TRUE(eventually([&] { return !log->snapshot().empty(); }));
  const auto r = log->snapshot().front();
  EXPECT_EQ(r.actor, "noter");
  EXPECT_EQ(r.trace_id.size(), 32u) << r.text;
  EXPECT_EQ(r.trace_id, seen) << "the handler's trace";
  ASSERT_TRUE(sys.stop());
}

TEST(Observability_Logger, FormatFieldsLeavesTheEmptyFieldsOut) {
  log_record r;
  r.text = "lost";
  EXPECT_EQ(akt::format_fields(r), "lost");
  r.node = "akt://n1@127.0.0.1:7000";
  r.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  EXPECT_EQ(akt::format_fields(r),
            "lost node=akt://n1@127.0.0.1:7000 trace_id=4bf92f3577b34da6a3ce929d0e0e4736");
  r.actor = "user/a";
  EXPECT_EQ(akt::format_fields(r),
            "lost node=akt://n1@127.0.0.1:7000 actor=user/a "
            "trace_id=4bf92f3577b34da6a3ce929d0e0e4736");
}

#if AKT_TEST_SPDLOG
// A sink whose text the test may read while a worker logs: both sides hold the sink's own
// mutex. (An ostream_sink's stream read from the test thread would race with its writes.)
class captured_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    text_.append(line.data(), line.size());
  }
  void flush_() override {}

 private:
  std::string text_;
};

TEST(Observability_Logger, TheSpdlogAdapterWritesTheLevelTheTextAndTheFields) {
  auto sink = std::make_shared<captured_sink>();
  auto spd = std::make_shared<spdlog::logger>("akt-test", sink);
  spd->set_pattern("%l|%v");
  spd->set_level(spdlog::level::info);
  auto adapter = std::make_shared<akt::spdlog_logger>(spd);
  EXPECT_EQ(adapter->threshold(), log_level::info) << "the threshold is spdlog's level";

  akt::actor_system sys("spd-node", {.workers = 1, .logger = adapter});
  ASSERT_TRUE(sys.start());
  recorder::shared s;
  auto p = sys.spawn<recorder>("noisy", &s);
  ASSERT_TRUE(p);
  ASSERT_FALSE(p->tell(boom{"oops"}));
  ASSERT_TRUE(eventually([&] { return sink->text().find("oops") != std::string::npos; }));
  ASSERT_TRUE(sys.stop());
  const std::string text = sink->text();
  EXPECT_NE(text.find("warning|noisy: "), std::string::npos) << text;
  EXPECT_NE(text.find(" node=spd-node actor=noisy"), std::string::npos) << text;

  // Below spdlog's level nothing is written; raising the level there silences akt at once.
  log_record debug;
  debug.level = log_level::debug;
  debug.component = "test";
  debug.text = "quiet";
  adapter->log(debug);
  spd->set_level(spdlog::level::err);
  EXPECT_EQ(adapter->threshold(), log_level::error);
  log_record warn = debug;
  warn.level = log_level::warning;
  warn.text = "also quiet";
  adapter->log(warn);
  EXPECT_EQ(sink->text().find("quiet"), std::string::npos) << sink->text();
}
#endif
}  // namespace
