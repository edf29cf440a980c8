// The dashboard in a real browser: headless Chromium loads it from one node of a running
// three-node cluster (in this process: remoting on loopback, the in-process store) while the test
// keeps actors, grains and remote links busy, and checks through the DOM that the page lists the
// three members, each with its own figures read through the node (their counts move, each has a
// rate and a plot), that the plots begin with the samples the nodes kept before the page opened
// (/api/history), that its counters move (between two refreshes and between two loads), that the
// page loads and asks nothing of any other origin. It prints how long the page took to load
// (navigation timing: the figure docs/benchmarks.md quotes) and saves a screenshot (the docs
// show it). tests/http/dashboard_check.py drives the browser over the DevTools protocol; this
// test bounds its time and kills it, and the browser, by pid.
// Skipped only when Chromium (or python3) is not installed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <akt/http/http.hpp>

#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_support.hpp"
#include "http/history_rows.hpp"
#include "http/http_client.hpp"

extern char** environ;

namespace {

using namespace akt::cluster_test;

struct count_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "shop.cart";
  void on_receive(akt::grain_context& ctx) override {
    if (ctx.is<int>()) ctx.reply(++n_);
  }
  int n_ = 0;
};

struct order_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "shop.order";
  void on_receive(akt::grain_context& ctx) override {
    if (ctx.is<int>()) ctx.reply(0);
  }
};

struct sink final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<int>()) ++seen_;
  }
  long seen_ = 0;
};

std::string find_program(const char* env, std::vector<std::string> candidates) {
  if (const char* e = std::getenv(env); e != nullptr && *e != '\0')
    candidates.insert(candidates.begin(), e);
  for (const auto& c : candidates) {
    if (c.find('/') != std::string::npos) {
      if (::access(c.c_str(), X_OK) == 0) return c;
      continue;
    }
    for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
      const std::string p = std::string(dir) + "/" + c;
      if (::access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return {};
}

// Runs argv with stdout into out_file; kills it (and the browser whose pid it wrote) when it
// outlives the deadline. Returns the exit status, or -1 when it was killed.
int run_bounded(const std::vector<std::string>& argv, const std::string& out_file,
                const std::string& pid_file, std::chrono::seconds limit) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -2;
  // Waits for the child's exit on a pidfd (readable once it exited), bounded by `limit`.
  int status = 0;
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd pfd{pidfd, POLLIN, 0};
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(limit).count();
    const int ready = ::poll(&pfd, 1, static_cast<int>(ms));
    ::close(pidfd);
    if (ready == 1 && ::waitpid(pid, &status, 0) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ::kill(pid, SIGKILL);
  (void)::waitpid(pid, &status, 0);
  std::ifstream pf(pid_file);
  pid_t browser = 0;
  if (pf >> browser && browser > 0) ::kill(-browser, SIGKILL);  // its process group
  return -1;
}

std::map<std::string, std::string> read_report(const std::string& file, std::string& text) {
  std::map<std::string, std::string> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    text += line + "\n";
    const auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

double num(const std::map<std::string, std::string>& r, const std::string& k) {
  auto it = r.find(k);
  return it == r.end() ? -1 : std::atof(it->second.c_str());
}

TEST(Http_Dashboard, ChromiumShowsThreeMembersTheirHistoryAndMovingCounters) {
  const std::string chromium = find_program("AKT_CHROMIUM", {"chromium", "chromium-browser"});
  if (chromium.empty())
    GTEST_SKIP() << "chromium is not installed (Debian: apt-get install chromium)";
  const std::string python = find_program("AKT_PYTHON", {"python3"});
  if (python.empty()) GTEST_SKIP() << "python3 is not installed";

  auto store = std::make_shared<test_store>();
  const std::vector<std::vector<std::string>> roles = {{"web"}, {"worker"}, {"worker", "batch"}};
  std::vector<std::unique_ptr<akt::actor_system>> nodes;
  for (std::size_t i = 0; i < 3; ++i) {
    akt::system_config cfg = cluster_node_config(store, "node-" + std::to_string(i), "shop");
    cfg.cluster->roles = roles[i];
    cfg.http = akt::http_config{};
    cfg.http->history_interval = 100ms;  // samples before the page opens, in under a second
    cfg.metrics.enabled = true;          // the page's busiest kinds read akt_*_messages_total
    nodes.push_back(std::make_unique<akt::actor_system>("node-" + std::to_string(i), cfg));
    ASSERT_FALSE(akt::register_grain_kind<count_grain>(*nodes.back()));
    ASSERT_FALSE(akt::register_grain_kind<order_grain>(*nodes.back()));
  }
  for (auto& n : nodes) ASSERT_TRUE(n->start());
  for (auto& n : nodes) {
    ASSERT_TRUE(akt::test::eventually([&] { return akt::cluster::members(*n).size() == 3; }, 10s));
  }
  std::vector<akt::pid> sinks, remote_sinks;
  for (std::size_t i = 0; i < 3; ++i) {
    auto s = nodes[i]->spawn<sink>("sink-" + std::to_string(i));
    ASSERT_TRUE(s) << s.error().message();
    sinks.push_back(*s);
  }
  for (std::size_t i = 0; i < 3; ++i) {  // node i's handle on node i+1's sink
    auto r = nodes[i]->lookup(nodes[(i + 1) % 3]->address() + "/user/sink-" +
                              std::to_string((i + 1) % 3));
    ASSERT_TRUE(r) << r.error().message();
    remote_sinks.push_back(*r);
  }

  // Load: local and remote tells, grain asks from every node (the grains spread over the three).
  std::atomic<bool> stop{false};
  std::mutex pace_mutex;
  std::condition_variable pace;  // ends a pause between rounds at once when the test stops
  std::thread driver([&] {
    for (int round = 0; !stop.load(); ++round) {
      for (std::size_t i = 0; i < 3; ++i) {
        for (int k = 0; k < 100; ++k) (void)sinks[i].tell(k);
        for (int k = 0; k < 20; ++k) (void)remote_sinks[i].tell(k);
        const std::string name = "c" + std::to_string((round * 3 + static_cast<int>(i)) % 24);
        (void)akt::ask_grain<int>(*nodes[i], {"shop.cart", name}, 1, 2s);
        if (round % 4 == 0) {
          (void)akt::ask_grain<int>(*nodes[i], {"shop.order", "o" + std::to_string(round % 8)}, 1,
                                    2s);
        }
      }
      // A steady rate, not a burst: a pause between rounds that the stop ends.
      std::unique_lock<std::mutex> lock(pace_mutex);
      pace.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop.load(); });
    }
  });

  // Each node holds eight samples before the browser opens the page, which shows them at once.
  for (auto& n : nodes) {
    ASSERT_TRUE(akt::test::eventually([&] {
      return akt::http_test::history_rows(akt::http_test::get(n->http_port(), "/api/history").body)
                 .size() >= 8;
    }));
  }

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("akt-dashboard-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const char* shot_env = std::getenv("AKT_DASHBOARD_SCREENSHOT");
  const std::string screenshot =
      shot_env != nullptr && *shot_env != '\0' ? shot_env : (dir / "dashboard.png").string();
  const std::string report = (dir / "report.txt").string(),
                    pid_file = (dir / "chromium.pid").string();
  const std::string url = "http://127.0.0.1:" + std::to_string(nodes[0]->http_port()) + "/";
  const int rc =
      run_bounded({python, std::string(AKT_SOURCE_DIR) + "/tests/http/dashboard_check.py",
                   "--chromium", chromium, "--url", url, "--members", "3", "--screenshot",
                   screenshot, "--pidfile", pid_file, "--timeout", "90"},
                  report, pid_file, std::chrono::seconds(100));
  {
    std::lock_guard<std::mutex> lock(pace_mutex);
    stop = true;
  }
  pace.notify_all();
  driver.join();
  std::string text;
  const auto r = read_report(report, text);
  std::printf("%s", text.c_str());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_EQ(num(r, "ok"), 1) << text;
  EXPECT_EQ(num(r, "members"), 3) << "members listed: " << text;
  EXPECT_EQ(r.count("member_names") ? r.at("member_names") : "", "node-0,node-1,node-2");
  EXPECT_EQ(r.count("member_states") ? r.at("member_states") : "", "up,up,up");
  EXPECT_GT(num(r, "processed_2"), num(r, "processed_1")) << "counters move between refreshes";
  EXPECT_GT(num(r, "processed_3"), num(r, "processed_1")) << "and between two loads";
  // Each member's figures, read through this node: every row's count moved, and after a few
  // refreshes every row shows a rate and a plot of more than one point.
  auto list = [&](const std::string& key) {
    std::vector<std::string> v;
    std::stringstream in(r.count(key) ? r.at(key) : "");
    for (std::string item; std::getline(in, item, ',');) v.push_back(item);
    return v;
  };
  const auto p1 = list("member_processed_1"), p2 = list("member_processed_2");
  ASSERT_EQ(p1.size(), 3u) << text;
  ASSERT_EQ(p2.size(), 3u) << text;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_GT(std::atof(p1[i].c_str()), 0) << "member " << i << ": " << text;
    EXPECT_GT(std::atof(p2[i].c_str()), std::atof(p1[i].c_str())) << "member " << i << ": " << text;
  }
  const auto rates = list("member_rates"), points = list("member_points");
  ASSERT_EQ(rates.size(), 3u) << text;
  ASSERT_EQ(points.size(), 3u) << text;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(!rates[i].empty() && std::isdigit(static_cast<unsigned char>(rates[i][0])))
        << "member " << i << " rate: " << text;
    EXPECT_GE(std::atoi(points[i].c_str()), 2) << "member " << i << " plot: " << text;
  }
  // Live readings alone give five points at the sixth refresh; the nodes' histories, read when
  // the page opens, give them at once (the first refresh asks for them).
  EXPECT_LE(num(r, "history_refreshes"), 4) << "plots seeded from /api/history: " << text;
  EXPECT_GE(num(r, "peers"), 1) << "remote peers listed";
  EXPECT_GT(num(r, "grain_kinds"), 0) << "grain kinds listed";
  EXPECT_EQ(num(r, "external_requests"), 0) << "no request outside the node";
  // The page loads. Its 1 s target is a figure this test prints (load_ms, reload_ms) and
  // docs/benchmarks.md quotes from quiet runs, not a bound it asserts: under TSan beside seven
  // other tests on two cores, the page's response once took 1.6 s from request to end. 10 s
  // separates a page that loads from one that does not.
  EXPECT_GT(num(r, "load_ms"), 0);
  EXPECT_LT(num(r, "load_ms"), 10000) << "page load (navigation timing)";
  EXPECT_LT(num(r, "reload_ms"), 10000) << "second load (navigation timing)";
  EXPECT_TRUE(std::filesystem::exists(screenshot));
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) EXPECT_TRUE((*it)->stop());
  if (shot_env == nullptr) std::filesystem::remove_all(dir);
}

}  // namespace
