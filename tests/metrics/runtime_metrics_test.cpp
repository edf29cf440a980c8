// Tests for the runtime's own metrics (system_config::metrics.enabled): actors per kind,
// messages (stopped actors included), failures, restarts, sampled handler times, dead letters
// by reason, the dispatcher's figures, and a promtool check of a live system's scrape.

#include <gtest/gtest.h>
#include <akt/actor/actor_system.hpp>
#include <akt/mailbox/bounded_mailbox.hpp>
#include <akt/metrics/prometheus.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/test_support.hpp"

namespace metrics_kinds {

struct ping {};
struct crash {};
// Holds the actor's worker until *release is set (the actor sets *held first).
struct hold {
  std::atomic<bool>* held;
  std::atomic<bool>* release;
};

// Answers ping with 1; throws on crash.
class pinger : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<crash>() != nullptr) throw std::runtime_error("crash");
    if (ctx.get_if<ping>() != nullptr) ctx.reply(1);
    if (auto* h = ctx.get_if<hold>()) {
      h->held->store(true);
      h->held->notify_all();
      while (!h->release->load()) h->release->wait(false);
    }
  }
};

template <class Tag>
class tagged : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<ping>() != nullptr) ctx.reply(2);
  }
};
struct blue {};

}  // namespace metrics_kinds

namespace {

using namespace std::chrono_literals;
using akt::metrics::sample;
using akt::metrics::snapshot;
using metrics_kinds::crash;
using metrics_kinds::ping;
using metrics_kinds::pinger;

const sample* find_sample(const snapshot& s, std::string_view family, std::string_view label,
                          std::string_view value) {
  const auto* f = s.find(family);
  if (f == nullptr) return nullptr;
  for (const auto& smp : f->samples) {
    for (const auto& l : smp.labels)
      if (l.name == label && l.value == value) return &smp;
    if (label.empty() && smp.labels.empty()) return &smp;
  }
  return nullptr;
}

double value_of(const snapshot& s, std::string_view family, std::string_view kind) {
  const sample* smp = find_sample(s, family, "kind", kind);
  return smp != nullptr ? smp->value : -1;
}

akt::system_config enabled_config() {
  akt::system_config cfg;
  cfg.workers = 2;
  cfg.metrics.enabled = true;
  cfg.metrics.handler_sample_every = 1;  // time every message: the counts are exact
  return cfg;
}

TEST(RuntimeMetrics_Actors, CountsLiveActorsAndMessagesPerKindIncludingStoppedOnes) {
  akt::actor_system sys("rt-actors", enabled_config());
  ASSERT_TRUE(sys.start());
  std::vector<akt::pid> pids;
  for (int i = 0; i < 3; ++i) {
    auto p = sys.spawn<pinger>("p" + std::to_string(i));
    ASSERT_TRUE(p);
    pids.push_back(*p);
  }
  auto t = sys.spawn<metrics_kinds::tagged<metrics_kinds::blue>>("t");
  ASSERT_TRUE(t);
  for (const auto& p : pids)
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(p.ask<int>(ping{}, 5s));
  ASSERT_TRUE(t->ask<int>(ping{}, 5s));

  // A turn publishes its processed count when it ends, and the timer records after the handler
  // returned: both may come just after the reply the ask waited for.
  const sample* h = nullptr;
  snapshot s;
  EXPECT_TRUE(akt::test::eventually([&] {
    s = sys.metrics().collect();
    h = find_sample(s, "akt_actor_handler_seconds", "kind", "metrics_kinds::pinger");
    return value_of(s, "akt_actor_messages_total", "metrics_kinds::pinger") == 15 &&
           value_of(s, "akt_actor_messages_total", "metrics_kinds::tagged<metrics_kinds::blue>") ==
               1 &&
           h != nullptr && h->count == 15;
  }));
  EXPECT_EQ(value_of(s, "akt_actors", "metrics_kinds::pinger"), 3);
  EXPECT_EQ(value_of(s, "akt_actor_messages_total", "metrics_kinds::pinger"), 15);
  EXPECT_EQ(value_of(s, "akt_actors", "metrics_kinds::tagged<metrics_kinds::blue>"), 1);
  EXPECT_EQ(value_of(s, "akt_actor_messages_total", "metrics_kinds::tagged<metrics_kinds::blue>"),
            1);
  EXPECT_EQ(value_of(s, "akt_actor_mailbox_messages", "metrics_kinds::pinger"), 0);

  // A stopped actor's messages keep counting; it no longer counts as live.
  ASSERT_TRUE(sys.stop_actor(pids[0]));
  s = sys.metrics().collect();
  EXPECT_EQ(value_of(s, "akt_actors", "metrics_kinds::pinger"), 2);
  EXPECT_EQ(value_of(s, "akt_actor_messages_total", "metrics_kinds::pinger"), 15);

  // Every message was timed (sample every 1): the histogram counts them all.
  h = find_sample(s, "akt_actor_handler_seconds", "kind", "metrics_kinds::pinger");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->count, 15u);
  EXPECT_GT(h->sum, 0.0);
  EXPECT_EQ(find_sample(s, "akt_system_actors_spawned_total", "", "")->value, 4);
  // Turns were counted. Not one per message: the next ask can land while the turn that answered
  // the last one is still running, and that turn takes it too (TSan's timing showed 15 for 16).
  EXPECT_GE(find_sample(s, "akt_dispatcher_turns_total", "", "")->value, 1);
  EXPECT_EQ(find_sample(s, "akt_dispatcher_workers", "", "")->value, 2);
  ASSERT_NE(s.find("akt_dispatcher_parks_total"), nullptr);
  ASSERT_NE(s.find("akt_dispatcher_steals_total"), nullptr);
  ASSERT_NE(s.find("akt_dispatcher_handoffs_total"), nullptr);
  sys.stop();
}

TEST(RuntimeMetrics_Actors, SumsTheDepthOfMailboxesThatCount) {
  akt::actor_system sys("rt-mailbox", enabled_config());
  ASSERT_TRUE(sys.start());
  auto p =
      sys.spawn<pinger>("bounded", akt::with_mailbox(std::make_unique<akt::bounded_mailbox>(64)));
  ASSERT_TRUE(p);
  std::atomic<bool> held{false};
  std::atomic<bool> release{false};
  ASSERT_FALSE(p->tell(metrics_kinds::hold{&held, &release}));
  held.wait(false);  // the handler holds the worker: what follows waits in the mailbox
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(p->tell(ping{}));
  const double depth =
      value_of(sys.metrics().collect(), "akt_actor_mailbox_messages", "metrics_kinds::pinger");
  release.store(true);
  release.notify_all();
  EXPECT_EQ(depth, 3);
  ASSERT_TRUE(p->ask<int>(ping{}, 5s));
  sys.stop();
}

TEST(RuntimeMetrics_Actors, CountsFailuresRestartsAndDeadLettersByReason) {
  akt::system_config cfg = enabled_config();
  cfg.default_supervisor = akt::supervisor().otherwise(akt::directive::restart);
  akt::actor_system sys("rt-failures", cfg);
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<pinger>("p");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->ask<int>(crash{}, 5s).code(), akt::errc::handler_failed);
  EXPECT_EQ(p->ask<int>(crash{}, 5s).code(), akt::errc::handler_failed);
  ASSERT_TRUE(p->ask<int>(ping{}, 5s));  // restarted, answering again
  ASSERT_TRUE(akt::test::eventually([&] {
    return value_of(sys.metrics().collect(), "akt_actor_restarts_total", "metrics_kinds::pinger") ==
           2;
  }));
  snapshot s = sys.metrics().collect();
  EXPECT_EQ(value_of(s, "akt_actor_failures_total", "metrics_kinds::pinger"), 2);

  ASSERT_TRUE(sys.stop_actor(*p));
  EXPECT_TRUE(p->tell(ping{}));  // refused: dead
  s = sys.metrics().collect();
  const sample* dead = find_sample(s, "akt_dead_letters_total", "reason", "dead");
  ASSERT_NE(dead, nullptr);
  EXPECT_GE(dead->value, 1);
  sys.stop();
}

TEST(RuntimeMetrics_Scrape, PromtoolAcceptsALiveSystemsScrape) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool not installed (Debian: apt-get install prometheus)";
  akt::actor_system sys("rt-promtool", enabled_config());
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<pinger>("p");
  auto t = sys.spawn<metrics_kinds::tagged<metrics_kinds::blue>>("t");
  ASSERT_TRUE(p && t);
  ASSERT_TRUE(p->ask<int>(ping{}, 5s));
  ASSERT_TRUE(t->ask<int>(ping{}, 5s));
  ASSERT_TRUE(sys.stop_actor(*t));
  (void)t->tell(ping{});  // a dead letter
  // The timer records after the handler returned, so maybe just after the reply the ask waited
  // for: scrape until the pinger's histogram is in (CI once scraped before it).
  const std::string pinger_inf =
      "akt_actor_handler_seconds_bucket{kind=\"metrics_kinds::pinger\",le=\"+Inf\"}";
  std::string text;
  EXPECT_TRUE(akt::test::eventually([&] {
    text = akt::metrics::to_prometheus_text(sys.metrics().collect());
    return text.find(pinger_inf) != std::string::npos;
  })) << text;
  sys.stop();
  // One file per process: a second run of this test at the same time must not share it.
  const std::string path =
      ::testing::TempDir() + "akt_runtime_metrics." + std::to_string(::getpid()) + ".txt";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  const std::string cmd = "timeout 60 promtool check metrics < " + path + " 2>&1";
  std::FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[512];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << out << "\n--- text ---\n" << text;
  EXPECT_EQ(out, "") << "promtool lint output\n--- text ---\n" << text;
  std::remove(path.c_str());
}

// Scrapes race with busy actors, spawns and stops (under TSan: no race between the scrape's
// pass over the registry, the handler tables and the stopping actors). The message count of a
// kind never goes down from one scrape to the next, and ends exact.
TEST(RuntimeMetrics_Scrape, ConcurrentWithBusyActorsSpawnsAndStops) {
  akt::actor_system sys("rt-race", enabled_config());
  ASSERT_TRUE(sys.start());
  std::atomic<bool> stop{false};
  std::atomic<long> asked{0};
  std::thread churn([&] {
    for (int round = 0; !stop.load() && round < 200; ++round) {
      auto p = sys.spawn<pinger>("churn" + std::to_string(round));
      if (!p) continue;
      for (int i = 0; i < 20; ++i) {
        if (p->ask<int>(ping{}, 5s)) asked.fetch_add(1);
      }
      (void)sys.stop_actor(*p);
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  double last = 0;
  int scrapes = 0;
  while (asked.load() < 2000 && std::chrono::steady_clock::now() < deadline) {
    snapshot s = sys.metrics().collect();
    const double now = value_of(s, "akt_actor_messages_total", "metrics_kinds::pinger");
    if (now < 0 && last == 0) continue;  // no pinger has handled a message yet
    EXPECT_GE(now, last);
    if (now > last) last = now;
    (void)akt::metrics::to_prometheus_text(s);
    ++scrapes;
  }
  stop.store(true);
  churn.join();
  EXPECT_GT(scrapes, 0);
  EXPECT_EQ(value_of(sys.metrics().collect(), "akt_actor_messages_total", "metrics_kinds::pinger"),
            static_cast<double>(asked.load()));
  sys.stop();
}

TEST(RuntimeMetrics_Off, NoRuntimeFamilyAndNoHandlerSample) {
  akt::system_config cfg;
  cfg.workers = 1;
  akt::actor_system sys("rt-off", cfg);
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<pinger>("p");
  ASSERT_TRUE(p);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(p->ask<int>(ping{}, 5s));
  EXPECT_TRUE(sys.metrics().collect().families.empty());
  sys.stop();
}

}  // namespace
