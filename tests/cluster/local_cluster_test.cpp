// The testkit's local cluster: several nodes of one process on one in-process store, stopped,
// crashed, restarted and cut off by the test.
#include <gtest/gtest.h>

#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/testkit/local_cluster.hpp>

#include <atomic>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::test::eventually;

std::atomic<int> g_deactivated{0};

struct kept final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.kept";
  akt::error on_deactivate(akt::grain_props&) override {
    g_deactivated++;
    return {};
  }
  void on_receive(akt::grain_context& ctx) override { ctx.reply(1); }
};

TEST(Testkit_LocalCluster, ACleanStopIsSeenAtOnceACrashOnlyWhenTheLeaseExpires) {
  // Leases of 60 s: nothing expires during the test, so what leaves was revoked.
  akt::testkit::local_cluster_options o;
  o.lease_ttl = 60s;
  o.prepare = [](akt::actor_system& s, std::size_t) { (void)akt::register_grain_kind<kept>(s); };
  akt::testkit::local_cluster c(3, o);
  ASSERT_TRUE(c.start());
  g_deactivated = 0;
  ASSERT_TRUE(akt::ask_grain<int>(c.node(2), {"test.kept", "k"}, 0, 5s));
  ASSERT_TRUE(c.crash(2));
  EXPECT_EQ(g_deactivated.load(), 0) << "a crash runs no on_deactivate";
  // node-1 stops cleanly after node-2's crash: once node-0 has seen node-1 go, it has seen every
  // earlier change (the watch delivers in revision order), so a revoke by the crash would show.
  ASSERT_TRUE(c.stop(1));
  ASSERT_TRUE(c.wait_members(0, 2, 10s)) << "node-1's revoke is seen";
  std::vector<std::string> names;
  for (const auto& m : akt::cluster::members(c.node(0))) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"node-0", "node-2"}))
      << "no revoke: the crashed node is listed until its lease expires";

  // With a 2 s lease the crashed node leaves when it expires, and a restart joins again.
  akt::testkit::local_cluster d(2);
  ASSERT_TRUE(d.start());
  ASSERT_TRUE(d.crash(1));
  EXPECT_TRUE(d.wait_members(0, 1, 10s)) << "gone when its lease expired";
  ASSERT_TRUE(d.restart(1));
  EXPECT_TRUE(d.wait_members(0, 2, 10s));
}

TEST(Testkit_LocalCluster, ANodeCutOffTheStoreFencesAndRejoins) {
  akt::testkit::local_cluster c(2);
  ASSERT_TRUE(c.start());
  const auto epoch = akt::cluster::self(c.node(1))->epoch;
  c.cut_off(1, true);
  ASSERT_TRUE(eventually([&] { return akt::cluster::fenced(c.node(1)); }, 10s));
  EXPECT_TRUE(c.wait_members(0, 1, 10s)) << "its lease expired in the store";
  c.cut_off(1, false);
  EXPECT_TRUE(eventually([&] { return !akt::cluster::fenced(c.node(1)); }, 10s));
  EXPECT_TRUE(c.wait_members(0, 2, 10s));
  EXPECT_NE(akt::cluster::self(c.node(1))->epoch, epoch);
}

}  // namespace
