// Tests for akt::metrics::registry: counters, gauges, histograms with labels, collectors, name
// checks, and striped counters under several threads.

#include <gtest/gtest.h>
#include <akt/metrics/registry.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace {

using akt::errc;
using akt::metrics::label;
using akt::metrics::metric_type;
using akt::metrics::registry;
using akt::metrics::snapshot;

TEST(MetricsRegistry_Counter, CountsPerLabelSet) {
  registry reg;
  auto fam = reg.add_counter("jobs_total", "Jobs done.", {"queue"});
  ASSERT_TRUE(fam);
  auto a = fam->with({"a"});
  auto b = fam->with({"b"});
  a.inc();
  a.inc(4);
  b.inc(2);
  EXPECT_EQ(a.value(), 5u);
  EXPECT_EQ(fam->with({"a"}).value(), 5u);  // the same series
  snapshot snap = reg.collect();
  const auto* f = snap.find("jobs_total");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->type, metric_type::counter);
  EXPECT_EQ(f->help, "Jobs done.");
  ASSERT_EQ(f->samples.size(), 2u);
  EXPECT_EQ(f->samples[0].labels, (std::vector<label>{{"queue", "a"}}));
  EXPECT_EQ(f->samples[0].value, 5.0);
  EXPECT_EQ(f->samples[1].labels, (std::vector<label>{{"queue", "b"}}));
  EXPECT_EQ(f->samples[1].value, 2.0);
}

TEST(MetricsRegistry_Gauge, SetsAddsAndSubtracts) {
  registry reg;
  auto g = reg.add_gauge("temperature_celsius", "Heat.")->with();
  g.set(20.5);
  g.add(1.5);
  g.sub(2);
  EXPECT_DOUBLE_EQ(g.value(), 20.0);
  snapshot snap = reg.collect();
  ASSERT_EQ(snap.find("temperature_celsius")->samples.size(), 1u);
  EXPECT_DOUBLE_EQ(snap.find("temperature_celsius")->samples[0].value, 20.0);
}

TEST(MetricsRegistry_Histogram, BucketsFollowTheLeRule) {
  registry reg;
  auto h = reg.add_histogram("latency_seconds", "Latency.", {0.1, 1, 10})->with();
  for (double v : {0.05, 0.1, 0.5, 1.0, 5.0, 50.0}) h.observe(v);
  h.observe(std::numeric_limits<double>::quiet_NaN());  // counted in +Inf; the sum turns NaN
  snapshot snap = reg.collect();
  const auto& s = snap.find("latency_seconds")->samples.at(0);
  // le=0.1 holds 0.05 and 0.1 (<=), le=1 adds 0.5 and 1.0, le=10 adds 5.0, +Inf the rest.
  EXPECT_EQ(s.buckets, (std::vector<std::uint64_t>{2, 4, 5}));
  EXPECT_EQ(s.count, 7u);
  EXPECT_TRUE(std::isnan(s.sum));
}

TEST(MetricsRegistry_Histogram, SumsObservations) {
  registry reg;
  auto h =
      reg.add_histogram("size_bytes", "Sizes.", akt::metrics::exponential_bounds(1, 2, 10))->with();
  h.observe(3);
  h.observe(4.5);
  snapshot snap = reg.collect();
  const auto& s = snap.find("size_bytes")->samples.at(0);
  EXPECT_DOUBLE_EQ(s.sum, 7.5);
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.buckets.size(), 10u);
  EXPECT_EQ(s.buckets[1], 0u);  // le=2
  EXPECT_EQ(s.buckets[2], 1u);  // le=4
  EXPECT_EQ(s.buckets[3], 2u);  // le=8
}

TEST(MetricsRegistry_Names, InvalidNamesAreRefused) {
  registry reg;
  EXPECT_EQ(reg.add_counter("", "x").code(), errc::invalid_argument);
  EXPECT_EQ(reg.add_counter("1abc_total", "x").code(), errc::invalid_argument);
  EXPECT_EQ(reg.add_counter("a-b_total", "x").code(), errc::invalid_argument);
  EXPECT_EQ(reg.add_counter("no_suffix", "x").code(), errc::invalid_argument);
  EXPECT_EQ(reg.add_gauge("ok_name", "x", {"bad-label"}).code(), errc::invalid_argument);
  EXPECT_EQ(reg.add_gauge("ok_name", "x", {"__reserved"}).code(), errc::invalid_argument);
  EXPECT_EQ(reg.add_gauge("ok_name", "x", {"a", "a"}).code(), errc::invalid_argument);
  EXPECT_EQ(reg.add_histogram("h_seconds", "x", {1}, {"le"}).code(), errc::invalid_argument);
  EXPECT_EQ(reg.add_histogram("h_seconds", "x", {2, 1}).code(), errc::invalid_argument);
  EXPECT_EQ(reg.add_histogram("h_seconds", "x", {1, 1}).code(), errc::invalid_argument);
  EXPECT_EQ(
      reg.add_histogram("h_seconds", "x", {1, std::numeric_limits<double>::infinity()}).code(),
      errc::invalid_argument);
  EXPECT_TRUE(reg.add_gauge("ns:sub_name", "colons are allowed in metric names", {"_x1"}));
  auto refused = reg.add_counter("bad name_total", "x");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().detail().find("bad name_total"), std::string_view::npos);
}

TEST(MetricsRegistry_Names, DuplicateWithAnotherTypeIsRefused) {
  registry reg;
  auto first = reg.add_gauge("things_total", "Things.");
  ASSERT_TRUE(first);
  EXPECT_EQ(reg.add_counter("things_total", "Things.").code(), errc::invalid_argument);
  EXPECT_EQ(reg.add_gauge("things_total", "Things.", {"l"}).code(), errc::invalid_argument);
  // The same registration again returns the same family.
  auto again = reg.add_gauge("things_total", "Things.");
  ASSERT_TRUE(again);
  again->with().set(3);
  EXPECT_EQ(first->with().value(), 3.0);
}

TEST(MetricsRegistry_Collector, RunsAtCollectAndIsRemovedByItsHandle) {
  registry reg;
  int runs = 0;
  auto handle = reg.add_collector([&](snapshot& s) {
    ++runs;
    s.add_family("pulled_things", "Pulled.", metric_type::gauge).add({{"k", "v"}}, 7);
  });
  snapshot snap = reg.collect();
  EXPECT_EQ(runs, 1);
  ASSERT_NE(snap.find("pulled_things"), nullptr);
  EXPECT_EQ(snap.find("pulled_things")->samples.at(0).value, 7.0);
  handle.reset();
  snap = reg.collect();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(snap.find("pulled_things"), nullptr);
}

TEST(MetricsRegistry_Collector, FamiliesOfTheSameNameAreMerged) {
  registry reg;
  auto a = reg.add_collector([](snapshot& s) {
    s.add_family("merged", "M.", metric_type::gauge).add({{"from", "a"}}, 1);
  });
  auto b = reg.add_collector([](snapshot& s) {
    s.add_family("merged", "M.", metric_type::gauge).add({{"from", "b"}}, 2);
    s.add_family("merged", "M.", metric_type::counter).add({{"from", "c"}}, 3);  // dropped
  });
  snapshot snap = reg.collect();
  ASSERT_EQ(snap.families.size(), 1u);
  EXPECT_EQ(snap.families[0].samples.size(), 2u);
}

TEST(MetricsRegistry_Collector, HandleMovesAndOutlivesNothing) {
  registry reg;
  std::atomic<int> runs{0};
  akt::metrics::collector_handle kept;
  {
    auto h = reg.add_collector([&](snapshot&) { runs.fetch_add(1); });
    kept = std::move(h);
  }
  (void)reg.collect();
  EXPECT_EQ(runs.load(), 1);
  kept = {};
  (void)reg.collect();
  EXPECT_EQ(runs.load(), 1);
}

// Several threads hammer one counter and one histogram while another thread scrapes: the totals
// are exact at the end and (under TSan) no race is reported. Each thread also writes a slot of
// its own that the main thread reads after join, so TSan sees the ownership hand-over.
TEST(MetricsRegistry_Striped, ManyThreadsOnOneCounterSumExactly) {
  registry reg;
  auto c = reg.add_counter("hammer_total", "Hammered.")->with();
  auto h = reg.add_histogram("hammer_seconds", "Hammered.", {0.5, 1.5})->with();
  constexpr int k_threads = 6;
  constexpr std::uint64_t k_per_thread = 200'000;
  std::vector<std::uint64_t> done(k_threads, 0);
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!stop.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline) {
      snapshot s = reg.collect();
      ASSERT_LE(s.find("hammer_total")->samples.at(0).value, double(k_threads * k_per_thread));
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < k_per_thread; ++i) {
        c.inc();
        if (i % 16 == 0) h.observe(1.0);
      }
      done[t] = k_per_thread;
    });
  }
  for (auto& th : threads) th.join();
  stop.store(true);
  scraper.join();
  std::uint64_t total_done = 0;
  for (auto d : done) total_done += d;
  EXPECT_EQ(c.value(), total_done);
  snapshot s = reg.collect();
  EXPECT_EQ(s.find("hammer_total")->samples.at(0).value, double(k_threads * k_per_thread));
  const auto& hs = s.find("hammer_seconds")->samples.at(0);
  const std::uint64_t observed = k_threads * ((k_per_thread + 15) / 16);
  EXPECT_EQ(hs.count, observed);
  EXPECT_EQ(hs.buckets, (std::vector<std::uint64_t>{0, observed}));
  EXPECT_DOUBLE_EQ(hs.sum, double(observed));
}

TEST(MetricsRegistry_Striped, StripesCoverTheHardwareThreads) {
  registry reg;
  const std::uint32_t n = reg.stripes();
  EXPECT_GE(n, 8u);
  EXPECT_EQ(n & (n - 1), 0u);
  EXPECT_GE(n, std::thread::hardware_concurrency());
}

}  // namespace
