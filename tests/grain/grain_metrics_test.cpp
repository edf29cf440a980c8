// The grain layer's runtime metrics (src/grain/grain_metrics.hpp): per kind activations,
// deactivations, the active gauge, activation time, refusals by reason and messages, after a
// known workload on a manual clock (idle deactivation only when the test advances it).

#include <gtest/gtest.h>
#include <akt/akt.hpp>

#include <akt/testkit/manual_time.hpp>

#include "support/metrics_reading.hpp"
#include "support/test_support.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;
using akt::errc;
using akt::test::eventually;
using akt::test::histogram_count;
using akt::test::metric_value;

// How many on_activate calls fail before they succeed again (set by a test).
std::atomic<int> g_failing_activations{0};

// Answers get{} with its total, adds add{}.
struct add {
  long n;
};
struct get {};

struct counted final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.metrics.counted";
  long total = 0;
  akt::error on_activate(akt::grain_props&) override {
    if (g_failing_activations.load() > 0) {
      g_failing_activations--;
      return akt::error(errc::init_failure, "told to fail");
    }
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    if (const auto* a = ctx.get_if<add>()) {
      total += a->n;
      ctx.ack();
    } else if (ctx.is<get>()) {
      ctx.reply(total);
    } else {
      ctx.unhandled();
    }
  }
};

const std::string k_kind = "test.metrics.counted";

akt::grain_identity id(std::string name) { return {k_kind, std::move(name)}; }

akt::system_config metrics_on(bool manual_time = true) {
  akt::system_config cfg;
  cfg.workers = 2;
  cfg.manual_time = manual_time;
  cfg.metrics.enabled = true;
  return cfg;
}

double value(akt::actor_system& sys, std::string_view family,
             std::vector<akt::metrics::label> extra = {}) {
  extra.push_back({"kind", k_kind});
  return metric_value(sys, family, extra).value_or(-1);
}

// Acknowledged adds: each returns once the grain handled it.
void send_adds(akt::actor_system& sys, const std::string& name, int n) {
  for (int i = 0; i < n; ++i) {
    akt::error e = akt::tell_grain(sys, id(name), add{1});
    ASSERT_FALSE(e) << e.message();
  }
}

TEST(GrainMetrics, ActivationsDeactivationsActiveAndMessagesFollowAKnownWorkload) {
  akt::actor_system sys("g-metrics", metrics_on());
  ASSERT_TRUE(sys.start());
  akt::grain_options o;
  o.deactivate_after = std::chrono::hours(1);
  ASSERT_FALSE(akt::with_grain_default_options<counted>(sys, o));

  send_adds(sys, "a", 5);
  send_adds(sys, "b", 1);
  send_adds(sys, "c", 1);
  // No scrape before the deactivation: the message count after it must come from the stopped
  // cells' own counts, not from a figure an earlier scrape kept.
  // Busy in the first idle period (the adds came after the timer was armed): idle in the second.
  ASSERT_TRUE(akt::testkit::advance(sys, std::chrono::hours(1)));
  ASSERT_TRUE(akt::testkit::advance(sys, std::chrono::hours(1)));
  ASSERT_TRUE(eventually([&] { return value(sys, "akt_grains_active") == 0; }))
      << value(sys, "akt_grains_active");
  ASSERT_TRUE(eventually([&] { return value(sys, "akt_grain_messages_total") == 7; }))
      << value(sys, "akt_grain_messages_total");
  EXPECT_EQ(value(sys, "akt_grain_activations_total"), 3);
  EXPECT_EQ(value(sys, "akt_grain_deactivations_total"), 3);
  EXPECT_EQ(histogram_count(sys, "akt_grain_activation_seconds", {{"kind", k_kind}}).value_or(0),
            3u);

  // Two of them again: two more activations, live, whose messages are read from the directory.
  send_adds(sys, "a", 2);
  send_adds(sys, "d", 3);
  EXPECT_EQ(value(sys, "akt_grains_active"), 2);
  EXPECT_EQ(value(sys, "akt_grain_activations_total"), 5);
  EXPECT_EQ(value(sys, "akt_grain_deactivations_total"), 3);
  EXPECT_EQ(value(sys, "akt_grain_messages_total"), 12);
  EXPECT_EQ(histogram_count(sys, "akt_grain_activation_seconds", {{"kind", k_kind}}).value_or(0),
            5u);
  auto total = akt::ask_grain<long>(sys, id("a"), get{}, 5s);
  ASSERT_TRUE(total) << total.error().message();
  EXPECT_EQ(*total, 2) << "a fresh activation after the idle deactivation";
  EXPECT_EQ(value(sys, "akt_grain_messages_total"), 13);
  EXPECT_FALSE(metric_value(sys, "akt_grain_refusals_total", {{"kind", k_kind}}))
      << "nothing was refused";
}

TEST(GrainMetrics, RefusalsAreCountedByKindAndReason) {
  akt::actor_system sys("g-metrics-refusals", metrics_on(false));
  ASSERT_TRUE(sys.start());
  akt::grain_options o;
  o.activation_attempts = 1;
  ASSERT_FALSE(akt::with_grain_default_options<counted>(sys, o));

  g_failing_activations = 2;
  for (int i = 0; i < 2; ++i) {
    auto r = akt::ask_grain<long>(sys, id("refuses"), get{}, 5s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.code(), errc::init_failure) << r.error().message();
  }
  EXPECT_EQ(value(sys, "akt_grain_refusals_total", {{"reason", "init_failure"}}), 2);
  EXPECT_EQ(value(sys, "akt_grain_activations_total"), 0);
  EXPECT_EQ(value(sys, "akt_grains_active"), 0);
  auto ok = akt::ask_grain<long>(sys, id("refuses"), get{}, 5s);
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(value(sys, "akt_grain_activations_total"), 1);
  EXPECT_EQ(value(sys, "akt_grain_refusals_total", {{"reason", "init_failure"}}), 2);

  // An invalid name: refused at the activation, with its own reason.
  auto bad = akt::ask_grain<long>(sys, id("not a name!"), get{}, 5s);
  ASSERT_FALSE(bad);
  EXPECT_EQ(value(sys, "akt_grain_refusals_total", {{"reason", "invalid_actor_name"}}), 1);
  g_failing_activations = 0;
}

TEST(GrainMetrics, AFullMailboxIsCountedOnTheDirectPathAndThroughTheDirectory) {
  // Deterministic: no turn runs until the test runs them, so the mailbox fills.
  akt::system_config cfg = metrics_on(false);
  cfg.deterministic = true;
  akt::actor_system sys("g-metrics-full", cfg);
  ASSERT_TRUE(sys.start());
  akt::grain_options o;
  o.mailbox_capacity = 2;
  ASSERT_FALSE(akt::with_grain_default_options<counted>(sys, o));
  auto ref = akt::get_grain<counted>(sys, "full");
  ASSERT_TRUE(ref) << ref.error().message();
  ASSERT_FALSE(ref->tell_one_way(add{1}));  // activates it, through the directory
  ASSERT_FALSE(ref->tell_one_way(add{1}));  // the remembered activation: the direct path
  EXPECT_EQ(ref->tell_one_way(add{1}).code(), errc::mailbox_full);
  EXPECT_EQ(value(sys, "akt_grain_refusals_total", {{"reason", "mailbox_full"}}), 1);
  EXPECT_EQ(akt::tell_grain(sys, id("full"), add{1}, {.one_way = true}).code(), errc::mailbox_full);
  EXPECT_EQ(value(sys, "akt_grain_refusals_total", {{"reason", "mailbox_full"}}), 2);
  sys.run_until_idle();
  EXPECT_EQ(value(sys, "akt_grain_messages_total"), 2);
}

TEST(GrainMetrics, ScrapesDuringActivationsAndIdleDeactivationsNeverGoBackAndEndExact) {
  akt::actor_system sys("g-metrics-race", metrics_on(false));
  ASSERT_TRUE(sys.start());
  akt::grain_options o;
  o.deactivate_after = 2ms;  // activations end and start again all through the run
  ASSERT_FALSE(akt::with_grain_default_options<counted>(sys, o));

  constexpr int k_senders = 2, k_adds = 300;
  std::atomic<bool> stop{false}, senders_done{false};
  std::atomic<int> went_back{0}, scrapes{0};
  std::thread scraper([&] {
    double last = 0;
    while (!stop.load()) {
      const double now = value(sys, "akt_grain_messages_total");
      if (now < last) went_back++;
      last = std::max(last, now);
      scrapes++;
    }
  });
  std::atomic<int> failed{0};
  const bool in_time = akt::test::run_bounded(k_senders, 60s, senders_done, [&](int t) {
    for (int i = 0; i < k_adds && !senders_done.load(); ++i) {
      if (akt::tell_grain(sys, id("r" + std::to_string((i + t) % 10)), add{1})) failed++;
    }
  });
  ASSERT_TRUE(in_time);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_TRUE(eventually([&] {
    return value(sys, "akt_grain_messages_total") == k_senders * k_adds &&
           value(sys, "akt_grains_active") == 0 &&
           value(sys, "akt_grain_activations_total") == value(sys, "akt_grain_deactivations_total");
  })) << value(sys, "akt_grain_messages_total")
      << " messages, " << value(sys, "akt_grains_active") << " active, "
      << value(sys, "akt_grain_activations_total") << " activations, "
      << value(sys, "akt_grain_deactivations_total") << " deactivations";
  stop = true;
  scraper.join();
  EXPECT_GT(scrapes.load(), 0);
  EXPECT_EQ(went_back.load(), 0) << "a scrape reported fewer messages than one before it";
}

TEST(GrainMetrics, OffTheLayerRegistersNothingAndKeepsNoFigures) {
  akt::system_config cfg;
  cfg.workers = 1;
  akt::actor_system sys("g-metrics-off", cfg);
  ASSERT_TRUE(sys.start());
  ASSERT_FALSE(akt::with_grain_default_options<counted>(sys, {}));
  send_adds(sys, "a", 2);
  EXPECT_FALSE(akt::test::has_family(sys, "akt_grains_active"));
  EXPECT_FALSE(akt::test::has_family(sys, "akt_grain_activations_total"));
  EXPECT_FALSE(akt::test::has_family(sys, "akt_grain_activation_seconds"));
}

}  // namespace
