// Remoting's runtime metrics (remote_node::collect, association's ask timing): two nodes on
// TCP loopback, a known number of asks, and the per-peer series on both sides.

#include <gtest/gtest.h>

#include "remote/remote_support.hpp"
#include "support/metrics_reading.hpp"

namespace {

using namespace akt::remote_test;
using akt::errc;
using akt::test::eventually;
using akt::test::histogram_count;
using akt::test::metric_value;

akt::system_config metrics_node() {
  akt::system_config cfg = node_config();
  cfg.metrics.enabled = true;
  return cfg;
}

double peer_value(akt::actor_system& sys, std::string_view family, const std::string& peer) {
  return metric_value(sys, family, {{"peer", peer}}).value_or(-1);
}

TEST(RemoteMetrics, PerPeerCountersAndTheAskHistogramFollowTheTraffic) {
  register_test_messages();
  akt::actor_system a("m-alpha", metrics_node()), b("m-beta", metrics_node());
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(b.start());
  const std::string a_at = node_of(a), b_at = node_of(b);
  auto j = std::make_shared<journal>();
  ASSERT_TRUE(b.spawn<echo>("echo", j));
  auto p = a.lookup(b_at, "echo");  // a control call: no ask of the histogram
  ASSERT_TRUE(p) << p.error().message();

  constexpr int k_asks = 20;
  for (int i = 0; i < k_asks; ++i) {
    auto r = p->ask<ping>(ping{i}, 10s);
    ASSERT_TRUE(r) << r.error().message();
  }
  // Each ask's round trip is observed before its caller wakes: exact now.
  EXPECT_EQ(histogram_count(a, "akt_remote_ask_seconds", {{"peer", b_at}}).value_or(0),
            static_cast<std::uint64_t>(k_asks));
  EXPECT_EQ(peer_value(a, "akt_remote_messages_sent_total", b_at), k_asks);
  EXPECT_GE(peer_value(a, "akt_remote_frames_sent_total", b_at), k_asks);
  EXPECT_GT(peer_value(a, "akt_remote_bytes_sent_total", b_at), 0);
  EXPECT_EQ(peer_value(a, "akt_remote_peer_connected", b_at), 1);
  EXPECT_EQ(peer_value(a, "akt_remote_reconnects_total", b_at), 0);
  EXPECT_EQ(peer_value(a, "akt_remote_refusals_total", b_at), 0);
  // The other side counts what came from a, under a's address.
  EXPECT_TRUE(eventually([&] {
    return peer_value(b, "akt_remote_messages_received_total", a_at) >= k_asks;
  })) << peer_value(b, "akt_remote_messages_received_total", a_at);
  EXPECT_GE(peer_value(b, "akt_remote_frames_received_total", a_at), k_asks);
  EXPECT_GT(peer_value(b, "akt_remote_bytes_received_total", a_at), 0);
  EXPECT_FALSE(histogram_count(b, "akt_remote_ask_seconds", {{"peer", a_at}}).value_or(0))
      << "b asked nothing";

  // A tell the serializers refuse counts as a refusal of that peer, and as no message.
  EXPECT_EQ(p->tell(unregistered{1}).code(), errc::not_serializable);
  EXPECT_EQ(peer_value(a, "akt_remote_refusals_total", b_at), 1);
  EXPECT_EQ(peer_value(a, "akt_remote_messages_sent_total", b_at), k_asks);
  // Tells are no asks.
  ASSERT_FALSE(p->tell(ping{100}));
  EXPECT_TRUE(eventually([&] { return j->received.load() == k_asks + 1; }));
  EXPECT_EQ(peer_value(a, "akt_remote_messages_sent_total", b_at), k_asks + 1);
  EXPECT_EQ(histogram_count(a, "akt_remote_ask_seconds", {{"peer", b_at}}).value_or(0),
            static_cast<std::uint64_t>(k_asks));
}

TEST(RemoteMetrics, OffTheNodeRegistersNothing) {
  register_test_messages();
  node a{"m-off-alpha"}, b{"m-off-beta"};
  ASSERT_TRUE(a.started) << a.started.error().message();
  ASSERT_TRUE(b.started) << b.started.error().message();
  auto j = std::make_shared<journal>();
  ASSERT_TRUE(b.sys.spawn<echo>("echo", j));
  auto p = a.sys.lookup(b.where(), "echo");
  ASSERT_TRUE(p) << p.error().message();
  ASSERT_TRUE(p->ask<ping>(ping{1}, 10s));
  EXPECT_FALSE(akt::test::has_family(a.sys, "akt_remote_messages_sent_total"));
  EXPECT_FALSE(akt::test::has_family(a.sys, "akt_remote_ask_seconds"));
}

}  // namespace
