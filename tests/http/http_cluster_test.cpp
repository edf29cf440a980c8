// The endpoint of cluster nodes: /ready follows the join and the fence, /api/cluster lists the
// members as this node's membership view holds them.
#include <gtest/gtest.h>

#include <akt/http/http.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <string>

#include "cluster/cluster_support.hpp"
#include "http/history_rows.hpp"
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

// A member record planted in the store by hand, on a lease of its own (kept for the test): a
// member the nodes list, whose endpoint is whatever the test says.
std::shared_ptr<akt::cluster::store> plant_member(test_store& store, const std::string& node,
                                                  const std::string& http) {
  std::shared_ptr<akt::cluster::store> raw = store.data.connect("planted-" + node);
  auto done = std::make_shared<std::promise<bool>>();
  raw->grant_lease(30s, [&raw, done, node, http](akt::result<akt::cluster::lease_grant> g) {
    if (!g) return done->set_value(false);
    std::string record = "akt-member 1\naddress=akt://" + node +
                         "@127.0.0.1:1\nincarnation=1\nepoch=" + std::to_string(g->id) + "\n";
    if (!http.empty()) record += "http=" + http + "\n";
    raw->put_if_absent(
        "/akt/test/v1/members/" + node, record, g->id,
        [done](akt::result<akt::cluster::op_outcome> o) { done->set_value(o && o->succeeded); });
  });
  EXPECT_TRUE(done->get_future().get());
  return raw;
}

// Every member's record names its endpoint, and /api/member?name=N answers member N's /api/node
// through the node asked: its own, another's (relayed), and a clear status for what it cannot
// relay: no name, no such member, a member without an endpoint, one that never answers.
TEST(Http_Cluster, ApiMemberRelaysEachMembersNodeFiguresAndRefusesWhatItCannotReach) {
  auto store = std::make_shared<test_store>();
  akt::actor_system a("a", node(store, "a"));
  akt::actor_system b("b", node(store, "b"));
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(b.start());
  ASSERT_TRUE(eventually([&] { return akt::cluster::members(a).size() == 2; }));
  for (const akt::cluster::member& m : akt::cluster::members(a)) {
    const std::uint16_t port = m.name == "a" ? a.http_port() : b.http_port();
    EXPECT_EQ(m.http, "127.0.0.1:" + std::to_string(port)) << m.name;
  }
  EXPECT_NE(get(a.http_port(), "/api/cluster").body.find("\"http\":\"127.0.0.1:"),
            std::string::npos);

  auto own = get(a.http_port(), "/api/member?name=a");
  EXPECT_EQ(own.status, 200) << own.body;
  EXPECT_NE(own.body.find("\"name\":\"a\""), std::string::npos) << own.body;
  auto other = get(a.http_port(), "/api/member?name=b");
  EXPECT_EQ(other.status, 200) << other.body;
  EXPECT_EQ(akt::http_test::header(other, "Content-Type"), "application/json");
  EXPECT_NE(other.body.find("\"name\":\"b\""), std::string::npos) << other.body;
  EXPECT_NE(other.body.find("\"http_port\":" + std::to_string(b.http_port())), std::string::npos)
      << "b's own document, relayed: " << other.body;

  // view=history: the member's /api/history (its sampler took one sample as it started).
  for (const char* who : {"a", "b"}) {
    auto h = get(a.http_port(), std::string("/api/member?view=history&name=") + who);
    EXPECT_EQ(h.status, 200) << who << ": " << h.body;
    EXPECT_NE(h.body.find("\"fields\":[\"t\",\"processed\""), std::string::npos) << h.body;
    EXPECT_FALSE(akt::http_test::history_rows(h.body).empty()) << who << ": " << h.body;
  }
  EXPECT_EQ(get(a.http_port(), "/api/member?name=b&view=everything").status, 400);

  EXPECT_EQ(get(a.http_port(), "/api/member").status, 400);
  EXPECT_EQ(get(a.http_port(), "/api/member?name=nobody").status, 404);

  // A listening socket that accepts (the kernel completes the handshake) and never answers.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(silent, 8), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string silent_at = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto ghost = plant_member(*store, "ghost", silent_at);
  auto mute = plant_member(*store, "mute", "");
  ASSERT_TRUE(eventually([&] { return akt::cluster::members(a).size() == 4; }));
  EXPECT_EQ(get(a.http_port(), "/api/member?name=mute").status, 404) << "no endpoint";
  const auto before = std::chrono::steady_clock::now();
  auto stalled = get(a.http_port(), "/api/member?name=ghost");
  EXPECT_EQ(stalled.status, 502) << stalled.body;
  EXPECT_NE(stalled.body.find(silent_at), std::string::npos) << stalled.body;
  EXPECT_LT(std::chrono::steady_clock::now() - before, 4s) << "bounded by the relay's timeouts";
  ::close(silent);
  EXPECT_EQ(get(a.http_port(), "/api/member?name=ghost").status, 502) << "a closed port";
  EXPECT_EQ(get(a.http_port(), "/health").status, 200) << "the node answers on";
  EXPECT_EQ(get(a.http_port(), "/api/member?name=b").status, 200);

  // A node outside any cluster has no members to relay.
  akt::system_config solo;
  solo.workers = 1;
  solo.http = akt::http_config{};
  akt::actor_system s("solo", solo);
  ASSERT_TRUE(s.start());
  EXPECT_EQ(get(s.http_port(), "/api/member?name=solo").status, 404);
  ASSERT_TRUE(s.stop());
  ASSERT_TRUE(b.stop());
  ASSERT_TRUE(a.stop());
}

}  // namespace
