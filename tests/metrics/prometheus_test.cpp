// Tests for akt::metrics::to_prometheus_text: the exact text of each metric type, escaping,
// and a check of the whole rendering by Prometheus's own parser (promtool check metrics).

#include <gtest/gtest.h>
#include <akt/metrics/prometheus.hpp>
#include <akt/metrics/registry.hpp>

#include <sys/wait.h>

#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

namespace {

using akt::metrics::metric_type;
using akt::metrics::registry;
using akt::metrics::snapshot;
using akt::metrics::to_prometheus_text;

TEST(PrometheusText_Counter, WritesHelpTypeAndSamples) {
  registry reg;
  auto fam = reg.add_counter("jobs_total", "Jobs done.", {"queue"});
  fam->with({"a"}).inc(3);
  fam->with({"b"}).inc(1);
  EXPECT_EQ(to_prometheus_text(reg.collect()),
            "# HELP jobs_total Jobs done.\n"
            "# TYPE jobs_total counter\n"
            "jobs_total{queue=\"a\"} 3\n"
            "jobs_total{queue=\"b\"} 1\n");
}

TEST(PrometheusText_Gauge, WritesValuesWithoutLabelsAndSpecialFloats) {
  snapshot snap;
  auto& f = snap.add_family("g", "G.", metric_type::gauge);
  f.add({}, 0.25);
  f.add({{"x", "1"}}, std::numeric_limits<double>::infinity());
  f.add({{"x", "2"}}, -std::numeric_limits<double>::infinity());
  f.add({{"x", "3"}}, std::numeric_limits<double>::quiet_NaN());
  f.add({{"x", "4"}}, 1e21);
  EXPECT_EQ(to_prometheus_text(snap),
            "# HELP g G.\n# TYPE g gauge\ng 0.25\ng{x=\"1\"} +Inf\ng{x=\"2\"} -Inf\n"
            "g{x=\"3\"} NaN\ng{x=\"4\"} 1e+21\n");
}

TEST(PrometheusText_Histogram, WritesCumulativeBucketsInfSumAndCount) {
  registry reg;
  auto h = reg.add_histogram("rt_seconds", "Round trips.", {0.5, 2}, {"peer"})->with({"n1"});
  h.observe(0.25);
  h.observe(1);
  h.observe(3);
  EXPECT_EQ(to_prometheus_text(reg.collect()),
            "# HELP rt_seconds Round trips.\n"
            "# TYPE rt_seconds histogram\n"
            "rt_seconds_bucket{peer=\"n1\",le=\"0.5\"} 1\n"
            "rt_seconds_bucket{peer=\"n1\",le=\"2\"} 2\n"
            "rt_seconds_bucket{peer=\"n1\",le=\"+Inf\"} 3\n"
            "rt_seconds_sum{peer=\"n1\"} 4.25\n"
            "rt_seconds_count{peer=\"n1\"} 3\n");
}

TEST(PrometheusText_Escaping, EscapesLabelValuesAndHelp) {
  snapshot snap;
  snap.add_family("e", "Back\\slash and\nnewline \"quoted\".", metric_type::gauge)
      .add({{"v", "a\"b\\c\nd"}}, 1);
  EXPECT_EQ(to_prometheus_text(snap),
            "# HELP e Back\\\\slash and\\nnewline \"quoted\".\n# TYPE e gauge\n"
            "e{v=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(PrometheusText_Empty, FamiliesWithoutSamplesAreLeftOut) {
  registry reg;
  ASSERT_TRUE(reg.add_counter("unused_total", "Never used.", {"l"}));
  EXPECT_EQ(to_prometheus_text(reg.collect()), "");
}

// Runs `promtool check metrics` on text (its stdin) and returns its exit status and output.
std::pair<int, std::string> promtool_check(const std::string& text) {
  char path[] = "/tmp/akt_promtool_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  std::FILE* f = fdopen(fd, "w");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  const std::string cmd = "timeout 60 promtool check metrics < " + std::string(path) + " 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 512> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  unlink(path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Every metric type, odd label values (quotes, backslashes, newlines, UTF-8, empty), a help
// text that needs escaping, special float values, and what collectors add: promtool must parse
// it and have nothing to say. No lint warning is tolerated.
TEST(PrometheusText_Promtool, ParsesEveryTypeAndOddLabelValuesWithoutComplaint) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool not installed (Debian: apt-get install prometheus)";
  registry reg;
  auto c = reg.add_counter("akt_test_requests_total", "Requests \\ with \"odd\"\nhelp.",
                           {"route", "code"});
  c->with({"/a\"b\\c\nd", "200"}).inc(5);
  c->with({"ünïcødé ✓", ""}).inc(1);
  c->with({"{}=,", " spaces "}).inc(2);
  auto g = reg.add_gauge("akt_test_temperature_celsius", "A gauge.", {"room"});
  g->with({"kitchen"}).set(-3.5);
  g->with({"void"}).set(std::numeric_limits<double>::quiet_NaN());
  g->with({"sun"}).set(std::numeric_limits<double>::infinity());
  auto nolabel = reg.add_gauge("akt_test_up", "No labels.");
  nolabel->with().set(1);
  auto h = reg.add_histogram("akt_test_latency_seconds", "A histogram.",
                             akt::metrics::exponential_bounds(0.0001, 4, 8), {"kind"});
  h->with({"a::b<c, d>"}).observe(0.002);
  h->with({"a::b<c, d>"}).observe(100);
  h->with({"x"}).observe(1e-9);
  auto h2 = reg.add_histogram("akt_test_sizes_bytes", "No labels, no bounds.", {});
  h2->with().observe(12);
  auto coll = reg.add_collector([](snapshot& s) {
    s.add_family("akt_test_pulled", "From a collector.", metric_type::gauge)
        .add({{"kind", "ns::type<int>"}}, 42);
    s.add_family("akt_test_pulled_total", "Counted by a collector.", metric_type::counter)
        .add({{"reason", "dead"}}, 7);
  });
  const std::string text = to_prometheus_text(reg.collect());
  auto [status, out] = promtool_check(text);
  EXPECT_EQ(status, 0) << out << "\n--- text ---\n" << text;
  EXPECT_EQ(out, "") << "promtool lint output\n--- text ---\n" << text;
}

// The check catches what it must: a broken text fails it (so the test above is not vacuous).
TEST(PrometheusText_Promtool, RejectsBrokenText) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool not installed (Debian: apt-get install prometheus)";
  auto [status, out] = promtool_check("# TYPE x counter\nx{a=\"unterminated} 1\n");
  EXPECT_NE(status, 0) << out;
  auto [status2, out2] = promtool_check("# HELP x_total h\n# TYPE x_total counter\nx 1\n");
  EXPECT_NE(status2 == 0 && out2.empty(), true) << out2;
}

}  // namespace
