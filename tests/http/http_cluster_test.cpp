// The endpoint of cluster nodes: /ready follows the join and the fence, /api/cluster lists the
// members as this node's membership view holds them.
#include <gtest/gtest.h>

#include <akt/http/http.hpp>

#include <string>

#include "cluster/cluster_support.hpp"
#include "http/http_client.hpp"

namespace {

using namespace akt::cluster_test;
using akt::http_test::get;
using akt::test::eventually;

akt::system_config node(std::shared_ptr<test_store> store, std::string name) {
  akt::system_config cfg = cluster_node_config(std::move(store), std::move(name));
  cfg.http = akt::http_config{};
  return cfg;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(Http_Cluster, ReadyOnceJoinedApiListsMembersAndAFencedNodeIsNotReady) {
  auto store = std::make_shared<test_store>();
  akt::actor_system a("a", node(store, "a"));
  akt::actor_system b("b", node(store, "b"));
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(b.start());
  ASSERT_TRUE(akt::cluster::wait_ready(a, 5s));
  EXPECT_EQ(get(a.http_port(), "/ready").status, 200);
  EXPECT_EQ(get(b.http_port(), "/ready").status, 200);
  ASSERT_TRUE(eventually(
      [&] { return count(get(a.http_port(), "/api/cluster").body, "\"state\":\"up\"") == 2; }));
  auto c = get(a.http_port(), "/api/cluster");
  EXPECT_NE(c.body.find("\"enabled\":true"), std::string::npos) << c.body;
  EXPECT_NE(c.body.find("\"self\":\"a\""), std::string::npos) << c.body;
  EXPECT_NE(c.body.find("\"name\":\"b\""), std::string::npos) << c.body;

  store->client("a")->cut_off(true);  // a loses the store: it fences itself
  ASSERT_TRUE(eventually([&] { return akt::cluster::fenced(a); }, 10s));
  auto fenced = get(a.http_port(), "/ready");
  EXPECT_EQ(fenced.status, 503);
  EXPECT_EQ(fenced.body, "fenced\n");
  EXPECT_EQ(get(a.http_port(), "/health").status, 200) << "alive, only not ready";
  EXPECT_EQ(get(b.http_port(), "/ready").status, 200);
  store->client("a")->cut_off(false);
  EXPECT_TRUE(eventually([&] { return get(a.http_port(), "/ready").status == 200; }, 10s))
      << "ready again once it rejoined";
  ASSERT_TRUE(b.stop());
  ASSERT_TRUE(a.stop());
}

}  // namespace
