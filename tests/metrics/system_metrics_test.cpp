// Tests for the actor system's metrics registry (actor_system::metrics()) and its config.

#include <gtest/gtest.h>
#include <akt/actor/actor_system.hpp>
#include <akt/metrics/prometheus.hpp>

#include <string>

namespace {

TEST(SystemMetrics_Registry, UserMetricsWorkWithRuntimeMetricsOff) {
  akt::system_config cfg;
  cfg.workers = 1;
  EXPECT_FALSE(cfg.metrics.enabled);  // off by default
  EXPECT_EQ(cfg.metrics.handler_sample_every, 64u);
  akt::actor_system sys("metrics-off", cfg);
  ASSERT_TRUE(sys.start());
  auto orders = sys.metrics().add_counter("shop_orders_total", "Orders.", {"kind"});
  ASSERT_TRUE(orders);
  orders->with({"book"}).inc(2);
  const std::string text = akt::metrics::to_prometheus_text(sys.metrics().collect());
  EXPECT_NE(text.find("shop_orders_total{kind=\"book\"} 2\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("akt_"), std::string::npos) << text;  // no runtime metric when off
  sys.stop();
}

}  // namespace
