// The testkit's local cluster: several nodes of one process on one in-process store, stopped,
// crashed, restarted and cut off by the test.
#include <gtest/gtest.h>

#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/testkit/local_cluster.hpp>

#include <atomic>

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
  akt::testkit::local_cluster_options o;
  o.prepare = [](akt::actor_system& s, std::size_t) { (void)akt::register_grain_kind<kept>(s); };
  akt::testkit::local_cluster c(3, o);
  ASSERT_TRUE(c.start());
  g_deactivated = 0;
  ASSERT_TRUE(akt::ask_grain<int>(c.node(2), {"test.kept", "k"}, 0, 5s));

  ASSERT_TRUE(c.crash(2));
  EXPECT_EQ(g_deactivated.load(), 0) << "a crash runs no on_deactivate";
  EXPECT_EQ(akt::cluster::members(c.node(0)).size(), 3u)
      << "no revoke: the crashed node is listed until its lease expires";
  EXPECT_TRUE(c.wait_members(0, 2, 10s)) << "then it leaves";

  ASSERT_TRUE(c.restart(2));  // its old lease is gone by now: it joins at once
  EXPECT_TRUE(c.wait_members(0, 3, 10s));

  // A clean stop revokes the lease: with a lease of 60 s, a node seen leaving within the wait
  // left by its revoke.
  akt::testkit::local_cluster_options long_lease;
  long_lease.lease_ttl = 60s;
  akt::testkit::local_cluster d(2, long_lease);
  ASSERT_TRUE(d.start());
  ASSERT_TRUE(d.stop(1));
  EXPECT_TRUE(d.wait_members(0, 1, 10s)) << "seen at the revoke";
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
