// The HTTP endpoint of one system: off by default, its routes, and bad requests (oversized,
// malformed, unknown path, wrong method, slow clients) answered with the right status without
// disturbing the node. Every request goes over a raw TCP connection on 127.0.0.1.
#include <gtest/gtest.h>

#include <akt/akt.hpp>
#include <akt/http/http.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "http/history_rows.hpp"
#include "http/http_client.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::http_test::get;
using akt::http_test::header;
using akt::http_test::raw_connection;
using akt::http_test::request;

struct echo final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (int* v = ctx.get_if<int>()) ctx.reply(*v + 1);
  }
};

akt::system_config http_on(akt::http_config h = {}) {
  akt::system_config cfg;
  cfg.workers = 2;
  cfg.http = h;
  return cfg;
}

// The node still answers an ask at once: the endpoint never took a worker.
void expect_node_answers(const akt::pid& p) {
  auto r = p.ask<int>(41, 5s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 42);
}

TEST(Http_Endpoint, OffByDefaultOpensNoPort) {
  akt::actor_system sys("plain");
  ASSERT_TRUE(sys.start());
  EXPECT_EQ(sys.http_port(), 0);
  ASSERT_TRUE(sys.stop());
}

TEST(Http_Endpoint, PortZeroPicksOneServesHealthAndClosesAtStop) {
  akt::actor_system sys("h", http_on());
  EXPECT_EQ(sys.http_port(), 0) << "before start";
  ASSERT_TRUE(sys.start());
  const std::uint16_t port = sys.http_port();
  ASSERT_NE(port, 0);
  auto r = get(port, "/health");
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.body, "ok\n");
  auto ready = get(port, "/ready");
  EXPECT_EQ(ready.status, 200) << "a system without a cluster is ready at once: " << ready.body;
  ASSERT_TRUE(sys.stop());
  EXPECT_EQ(sys.http_port(), 0);
  raw_connection after(port);
  EXPECT_FALSE(after.connected()) << "the listener is closed";
}

TEST(Http_Endpoint, AFixedPortInUseRefusesTheStart) {
  akt::actor_system a("a", http_on());
  ASSERT_TRUE(a.start());
  akt::http_config h;
  h.port = a.http_port();
  akt::actor_system b("b", http_on(h));
  auto r = b.start();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("http"), std::string::npos) << r.error().message();
  EXPECT_FALSE(b.running());
  ASSERT_TRUE(a.stop());
}

TEST(Http_Endpoint, ApiAnswersJsonWithTheNodesFigures) {
  akt::actor_system sys("api-node", http_on());
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<echo>("echo");
  ASSERT_TRUE(p);
  expect_node_answers(*p);
  auto r = get(sys.http_port(), "/api/node");
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(header(r, "Content-Type"), "application/json");
  EXPECT_NE(r.body.find("\"name\":\"api-node\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"ready\":true"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"processed\":"), std::string::npos) << r.body;
  auto o = get(sys.http_port(), "/api/overview");
  ASSERT_EQ(o.status, 200);
  for (const char* part : {"\"node\":{", "\"cluster\":{\"enabled\":false",
                           "\"peers\":{\"peers\":[]", "\"grains\":{\"active\":0"}) {
    EXPECT_NE(o.body.find(part), std::string::npos) << part << " in " << o.body;
  }
  auto page = get(sys.http_port(), "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(header(page, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page.body, std::string(akt::http::dashboard_html()));
  ASSERT_TRUE(sys.stop());
}

// /api/history: samples taken every history_interval from the start, the last history_samples
// of them, oldest first; the messages the node processed show in them.
TEST(Http_Endpoint, ApiHistoryServesTheNodesLastSamplesOldestFirst) {
  akt::http_config h;
  h.history_interval = 20ms;
  h.history_samples = 5;
  akt::actor_system sys("history-node", http_on(h));
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<echo>("echo");
  ASSERT_TRUE(p);
  for (int i = 0; i < 10; ++i) expect_node_answers(*p);
  const std::uint64_t processed = sys.stats().processed;
  std::vector<akt::http_test::history_row> rows;
  std::string body;
  ASSERT_TRUE(akt::test::eventually([&] {
    auto r = get(sys.http_port(), "/api/history");
    if (r.status != 200) return false;
    body = r.body;
    rows = akt::http_test::history_rows(body);
    return rows.size() == 5 && rows.back()[1] >= processed;
  })) << body;
  EXPECT_EQ(header(get(sys.http_port(), "/api/history"), "Content-Type"), "application/json");
  EXPECT_NE(body.find("\"interval_ms\":20,\"capacity\":5,"), std::string::npos) << body;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_GE(rows[i][0], rows[i - 1][0]) << "time, oldest first: " << body;
    EXPECT_GE(rows[i][1], rows[i - 1][1]) << "processed never goes down: " << body;
  }
  EXPECT_GE(rows.back()[4], 1u) << "the echo actor is live: " << body;
  ASSERT_TRUE(sys.stop());

  // history_samples 0 keeps none; a zero interval with samples is refused.
  h.history_samples = 0;
  akt::actor_system none("no-history", http_on(h));
  ASSERT_TRUE(none.start());
  auto r = get(none.http_port(), "/api/history");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"samples\":[]"), std::string::npos) << r.body;
  ASSERT_TRUE(none.stop());
  h.history_samples = 5;
  h.history_interval = 0ms;
  akt::actor_system bad("bad-history", http_on(h));
  auto started = bad.start();
  ASSERT_FALSE(started);
  EXPECT_EQ(started.code(), akt::errc::invalid_argument) << started.error().message();
}

TEST(Http_Endpoint, MetricsServesTheRegistryInThePrometheusTextFormat) {
  akt::actor_system sys("m", http_on());
  ASSERT_TRUE(sys.start());
  auto family = sys.metrics().add_counter("shop_orders_total", "Orders taken.", {"route"});
  ASSERT_TRUE(family);
  family->with({"checkout"}).inc(3);
  auto r = get(sys.http_port(), "/metrics");
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(header(r, "Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r.body.find("# TYPE shop_orders_total counter\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("shop_orders_total{route=\"checkout\"} 3\n"), std::string::npos) << r.body;
  ASSERT_TRUE(sys.stop());
}

TEST(Http_Endpoint, UnknownPathIs404AndWrongMethodIs405) {
  akt::actor_system sys("h", http_on());
  ASSERT_TRUE(sys.start());
  const auto port = sys.http_port();
  EXPECT_EQ(get(port, "/nope").status, 404);
  EXPECT_EQ(get(port, "/api/nope").status, 404);
  auto post = request(port,
                      "POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                      "Connection: close\r\n\r\nhi");
  EXPECT_EQ(post.status, 405) << post.head;
  EXPECT_EQ(header(post, "Allow"), "GET, HEAD");
  auto del = request(port, "DELETE /api/node HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(del.status, 405) << del.head;
  auto head = request(port, "HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(head.status, 200) << head.head;
  ASSERT_TRUE(sys.stop());
}

TEST(Http_Endpoint, MalformedAndOversizedRequestsGetTheirStatusAndTheNodeRunsOn) {
  akt::http_config h;
  h.max_request_bytes = 1024;
  akt::actor_system sys("h", http_on(h));
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<echo>("echo");
  ASSERT_TRUE(p);
  const auto port = sys.http_port();
  auto garbage = request(port, "HELLO THERE\r\n\r\n");
  EXPECT_EQ(garbage.status, 400) << garbage.head;
  auto bad_version = request(port, "GET /health HTTP/9.9\r\n\r\n");
  EXPECT_EQ(bad_version.status, 400) << bad_version.head;
  static constexpr char tls_hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n";
  auto binary = request(port, std::string(tls_hello, sizeof tls_hello - 1));
  EXPECT_EQ(binary.status, 400) << "a TLS hello on the plain port: " << binary.head;
  // A body over the limit, announced: refused before it is read.
  auto big = request(port,
                     "GET /api/node HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"
                     "Connection: close\r\n\r\n");
  EXPECT_EQ(big.status, 413) << big.head;
  // A request line over 8 KiB.
  auto long_uri = request(port, "GET /" + std::string(10000, 'a') +
                                    " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(long_uri.status, 414) << long_uri.head;
  // A header line over 8 KiB.
  auto long_header =
      request(port, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(10000, 'b') +
                        "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(long_header.status, 400) << long_header.head;
  expect_node_answers(*p);
  EXPECT_EQ(get(port, "/health").status, 200) << "the endpoint serves on";
  // A request with a body (no route takes one) on a keep-alive connection: answered, then the
  // connection is closed (one request per connection): its unread body is never parsed.
  raw_connection keep(port);
  ASSERT_TRUE(keep.send("POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
  auto posted = keep.read();
  EXPECT_EQ(posted.status, 405) << posted.head;
  EXPECT_TRUE(keep.wait_closed(1s)) << "closed at once, not after the keep-alive timeout";
  ASSERT_TRUE(sys.stop());
}

TEST(Http_Endpoint, SlowClientsTimeOutWhileOthersAreServed) {
  akt::http_config h;
  h.read_timeout = 300ms;     // a request begun and stalled
  h.keep_alive_timeout = 1s;  // a connection with no request at all
  h.threads = 2;
  akt::actor_system sys("h", http_on(h));
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<echo>("echo");
  ASSERT_TRUE(p);
  const auto port = sys.http_port();
  // One client sends half a request and stalls; another sends nothing at all.
  raw_connection half(port), silent(port);
  ASSERT_TRUE(half.connected() && silent.connected());
  ASSERT_TRUE(half.send("GET /hea"));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(half.wait_closed(5s)) << "the stalled request is dropped after read_timeout";
  EXPECT_TRUE(silent.wait_closed(5s)) << "the silent one after keep_alive_timeout";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms) << "not before the timeout";
  // Both serving threads were held meanwhile; now they serve again, and the node never stopped.
  EXPECT_EQ(get(port, "/health").status, 200);
  expect_node_answers(*p);
  // A stalled client at stop: stop() waits at most read_timeout for it.
  raw_connection stalled(port);
  ASSERT_TRUE(stalled.send("GET /health HTTP/1.1\r\n"));
  const auto s0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(sys.stop());
  EXPECT_LT(std::chrono::steady_clock::now() - s0, 5s);
}

TEST(Http_Endpoint, ReadyAnswers503FromTheMomentStopBegins) {
  akt::actor_system sys("h", http_on());
  ASSERT_TRUE(sys.start());
  const auto port = sys.http_port();
  std::atomic<int> ready_status{0}, health_status{0};
  // Shutdown hooks run in stop()'s first step, while the system still runs and serves.
  sys.add_shutdown_hook("probe", [&]() -> akt::result<void> {
    ready_status = get(port, "/ready").status;
    health_status = get(port, "/health").status;
    return {};
  });
  ASSERT_TRUE(sys.stop());
  EXPECT_EQ(ready_status.load(), 503);
  EXPECT_EQ(health_status.load(), 200);
}

}  // namespace
