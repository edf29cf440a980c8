// The etcd store when etcd is not there: down at start, killed while running, one member of
// three killed. Each test starts etcd processes of its own.

#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "etcd/etcd_test_support.hpp"
#include "support/process_state.hpp"

namespace akt::test {
namespace {

using cluster::op_outcome;
using cluster::range_result;

TEST(EtcdFaults, DownAtStartIsUnavailableWithinTheWait) {
  const auto port = etcd_detail::free_ports(1).front();  // nothing listens there
  const auto start = std::chrono::steady_clock::now();
  auto r = etcd::connect({{"127.0.0.1:" + std::to_string(port)}, 1000ms, 1500ms});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::cluster_unavailable) << r.error().message();
  EXPECT_NE(r.error().detail().find(std::to_string(port)), std::string_view::npos)
      << r.error().message();
  EXPECT_GE(took, 1400ms);  // it waited (etcd might have been starting)
  EXPECT_LT(took, 6s);      // and no longer than the wait, plus slack
}

TEST(EtcdFaults, KilledWhileRunningCallsTimeOutAndWatchesEnd) {
  AKT_SKIP_WITHOUT_ETCD();
  etcd_process etcd;
  auto connected = etcd::connect({{etcd.endpoint()}, 1000ms, 10000ms});
  ASSERT_TRUE(connected) << connected.error().message();
  auto& s = **connected;
  auto first = await<range_result>([&](auto cb) { s.get("/k", std::move(cb)); });
  ASSERT_TRUE(first && *first);
  recording_handler h;
  auto handle = s.watch("/", (*first)->header_revision + 1, h);

  etcd.kill();
  ASSERT_TRUE(h.wait_end(15s));
  EXPECT_EQ(h.end(), errc::cluster_registry_timeout) << h.end().message();

  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto r = await<range_result>([&](auto cb) { s.get("/k", std::move(cb)); }, 15s);
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(r) << "no completion";
    EXPECT_EQ(r->error_or_ok(), errc::cluster_registry_timeout) << r->error_or_ok().message();
    EXPECT_LT(took, 3s);  // call_timeout 1 s, plus slack
  }
  auto put = await<op_outcome>([&](auto cb) { s.put_if_absent("/p", "v", 0, std::move(cb)); });
  ASSERT_TRUE(put);
  EXPECT_EQ(put->error_or_ok(), errc::cluster_registry_timeout);
  auto ka = await<cluster::keep_alive_ack>([&](auto cb) { s.keep_alive(1, std::move(cb)); });
  ASSERT_TRUE(ka);
  EXPECT_EQ(ka->error_or_ok(), errc::cluster_registry_timeout);

  // A watch started now ends at once, too.
  recording_handler h2;
  auto handle2 = s.watch("/", 1, h2);
  ASSERT_TRUE(h2.wait_end(15s));
  EXPECT_EQ(h2.end(), errc::cluster_registry_timeout) << h2.end().message();
}

TEST(EtcdFaults, PausedEtcdTimesCallsOutAndEndsWatchesByKeepAlive) {
  AKT_SKIP_WITHOUT_ETCD();
  etcd_process etcd;
  auto connected = etcd::connect({{etcd.endpoint()}, 1000ms, 10000ms});
  ASSERT_TRUE(connected) << connected.error().message();
  auto& s = **connected;
  auto first = await<range_result>([&](auto cb) { s.get("/k", std::move(cb)); });
  ASSERT_TRUE(first && *first);
  recording_handler h;
  auto handle = s.watch("/", (*first)->header_revision + 1, h);

  // SIGSTOP: the connection stays open, nothing answers (a hung or partitioned member).
  ASSERT_EQ(::kill(etcd.pid(), SIGSTOP), 0);
  // kill() only sends the signal: an overloaded run once saw the get below answered (ok, after
  // 7 ms) by an etcd that had not stopped yet. The test asks once the kernel shows it stopped.
  ASSERT_TRUE(
      akt::test::eventually([&] { return akt::test::process_state(etcd.pid()) == 'T'; }, 5000ms))
      << "etcd did not stop on SIGSTOP";
  const auto stopped_at = std::chrono::steady_clock::now();
  const auto start = std::chrono::steady_clock::now();
  auto r = await<range_result>([&](auto cb) { s.get("/k", std::move(cb)); }, 15s);
  ASSERT_TRUE(r) << "no completion";
  EXPECT_EQ(r->error_or_ok(), errc::cluster_registry_timeout) << r->error_or_ok().message();
  // The call's deadline is call_timeout (1 s). The bound leaves 4 s for a loaded 2-core machine
  // under ASan, where this test failed a few times with a 3 s bound (the failing check was not
  // kept; this is the one that load moves, and both figures are printed now): what it checks is
  // that a hung store's call completes on its deadline, not how promptly.
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 5s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms";
  std::printf(
      "paused etcd: the get timed out after %lld ms\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  // The watch ends once an HTTP/2 keep-alive ping goes unanswered: within the ping interval
  // (10 s) plus its timeout (call_timeout, at least 1 s), with slack.
  ASSERT_TRUE(h.wait_end(30s));
  EXPECT_EQ(h.end(), errc::cluster_registry_timeout) << h.end().message();
  std::printf("paused etcd: the watch ended after %lld ms (%s)\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - stopped_at)
                                         .count()),
              h.end().message().c_str());
  // SIGKILL (the cluster's end) ends a stopped process too.
}

TEST(EtcdFaults, ThreeMembersKeepServingWithOneKilled) {
  AKT_SKIP_WITHOUT_ETCD();
  etcd_cluster etcd(3);
  auto connected = etcd::connect({etcd.endpoints(), 2000ms, 10000ms});
  ASSERT_TRUE(connected) << connected.error().message();
  auto& s = **connected;
  auto put = [&](const std::string& k) {
    return await<op_outcome>([&](auto cb) { s.put_if_absent(k, "v", 0, std::move(cb)); });
  };
  for (int i = 0; i < 10; ++i) {
    auto r = put("/before/" + std::to_string(i));
    ASSERT_TRUE(r && *r && (*r)->succeeded);
  }
  // The leader: the harder case (an election follows; calls fail until it is over).
  const int leader = etcd.leader();
  ASSERT_GE(leader, 0) << "no member reports itself leader";
  etcd.member(static_cast<std::size_t>(leader)).kill();
  const auto killed_at = std::chrono::steady_clock::now();
  // Calls that were in flight to the killed member may fail (possibly written); within a
  // bounded time every call succeeds again, on the two members left (a new leader if the
  // killed one led).
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  int consecutive = 0;
  int failures = 0;
  auto recovered_at = killed_at;
  for (int i = 0; consecutive < 20 && std::chrono::steady_clock::now() < deadline; ++i) {
    auto r = await<range_result>([&](auto cb) { s.get_prefix("/before/", std::move(cb)); });
    ASSERT_TRUE(r) << "no completion";
    if (*r) {
      EXPECT_EQ((*r)->kvs.size(), 10u);
      if (consecutive++ == 0) recovered_at = std::chrono::steady_clock::now();
    } else {
      EXPECT_EQ(r->error(), errc::cluster_registry_timeout) << r->error().message();
      consecutive = 0;
      ++failures;
    }
  }
  EXPECT_EQ(consecutive, 20) << failures << " failures";
  std::printf(
      "3 members, leader m%d SIGKILLed: %d calls failed, serving again after %lld ms\n", leader,
      failures,
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(recovered_at - killed_at).count()));
  EXPECT_GE(etcd.leader(), 0);  // the two left elected one
  auto after = put("/after");
  ASSERT_TRUE(after && *after) << (after ? after->error().message() : "no completion");
  EXPECT_TRUE((*after)->succeeded);
}

// A watch on a store that is down ends after a pause, not at once: a caller that watches
// again from on_end (as the membership, the grain registry and the actor names do) retries
// about ten times a second instead of spinning on the completion thread. Issue 20's store
// restart found nodes growing by hundreds of MiB during 1-3 s etcd outages so (the grain
// registry also kept every ended handle until it closed).
TEST(EtcdFaults, AWatchOnAStoreThatIsDownEndsAfterAPause) {
  AKT_SKIP_WITHOUT_ETCD();
  etcd_process etcd;
  auto connected = etcd::connect({{etcd.endpoint()}, 1000ms, 10000ms});
  ASSERT_TRUE(connected) << connected.error().message();
  auto& s = **connected;
  // Watches again from each on_end, on the store's completion thread, until told to stop.
  struct rewatching final : cluster::watch_handler {
    cluster::store& store;
    std::atomic<int> ends{0};
    std::atomic<bool> stop{false};
    std::vector<std::unique_ptr<cluster::watch_handle>> handles;  // completion thread only
    explicit rewatching(cluster::store& st) : store(st) {}
    void on_events(const std::vector<cluster::watch_event>&, cluster::revision) override {}
    void on_end(error, cluster::revision) override {
      ++ends;
      if (!stop.load()) handles.push_back(store.watch("/", 1, *this));
    }
  } h(s);
  etcd.kill();
  const auto start = std::chrono::steady_clock::now();
  auto first = s.watch("/", 1, h);
  ASSERT_TRUE(eventually([&] { return h.ends.load() >= 1; }, 15s));
  // Five more ends take at least four pauses: a spin would take a few milliseconds. A wait on a
  // condition (bounded generously), so a loaded machine only makes it slower, never failing.
  const int at_first = h.ends.load();
  const auto first_end = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return h.ends.load() - at_first >= 5; }, 30s))
      << "it keeps ending (and so is watched again)";
  const auto five_more = std::chrono::steady_clock::now() - first_end;
  h.stop = true;
  std::printf("a watch on a stopped etcd: first end after %lld ms, then 5 more ends in %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(first_end - start).count()),
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(five_more).count()));
  EXPECT_GE(five_more, 350ms) << "a watch on a store that is down ends at once: a spin";
  connected->reset();  // cancels the last watch and waits for its completion: no callback after
}

// A member that answers while it has no leader (here: two of three members down; the same
// answer, UNAVAILABLE, as "leader changed" at an election) is asked again until connect_wait is
// up: a node started during an etcd election joins once it is over, instead of failing at the
// first answer (issue 20's etcd member loss found a node that exited so).
TEST(EtcdFaults, ConnectWaitsThroughALostQuorum) {
  AKT_SKIP_WITHOUT_ETCD();
  etcd_cluster etcd(3);
  etcd.member(1).kill();
  etcd.member(2).kill();
  const auto start = std::chrono::steady_clock::now();
  result<std::unique_ptr<cluster::store>> connected = error(errc::cluster_unavailable);
  std::thread connecting([&] { connected = etcd::connect({etcd.endpoints(), 1000ms, 30000ms}); });
  // etcd answers a linearizable read without a leader with "request timed out" after its
  // request timeout (5 s + 2 election timeouts: 7 s): the quorum returns after that answer.
  std::this_thread::sleep_for(9s);
  std::string why;
  const bool restarted = etcd.restart(1, why);
  connecting.join();
  ASSERT_TRUE(restarted) << why;
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(connected) << connected.error().message();
  EXPECT_GE(took, 9s);  // it waited for the quorum
  auto put = await<op_outcome>(
      [&](auto cb) { (*connected)->put_if_absent("/after", "v", 0, std::move(cb)); });
  ASSERT_TRUE(put && *put) << (put ? put->error().message() : "no completion");
  EXPECT_TRUE((*put)->succeeded);
}

}  // namespace
}  // namespace akt::test
