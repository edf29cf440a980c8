// The OTLP exporter over HTTPS, with headers: it verifies the collector's certificate against
// the configured CA (and the host name), sends the configured headers with every batch, and
// sends nothing to a collector it cannot verify (the batch counts as an export failure).

#include <gtest/gtest.h>
#include <httplib.h>

#include <akt/akt.hpp>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;

const std::string k_certs = std::string(AKT_SOURCE_DIR) + "/tests/remote/certs/";

// An OTLP collector on HTTPS (the test server certificate: localhost and 127.0.0.1).
struct tls_collector {
  httplib::SSLServer server{(k_certs + "server.pem").c_str(), (k_certs + "server.key").c_str()};
  std::thread thread;
  int port = 0;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::string> bodies;
  std::vector<std::string> authorizations;

  tls_collector() {
    server.Post("/v1/traces", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        bodies.push_back(req.body);
        authorizations.push_back(req.get_header_value("Authorization"));
      }
      cv.notify_all();
      res.set_content("{}", "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~tls_collector() {
    server.stop();
    thread.join();
  }
  std::size_t wait_for(std::size_t n, std::chrono::milliseconds within = 10s) {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait_for(lock, within, [&] { return bodies.size() >= n; });
    return bodies.size();
  }
};

struct answering final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (ctx.expects_reply()) ctx.reply(1);
  }
};

// Traces one ask through a system exporting to `ep`, stops it (the last batch goes out at the
// stop) and returns its tracing figures.
akt::tracing_stats trace_one(const akt::otlp_endpoint& ep, const std::string& name) {
  akt::system_config cfg;
  cfg.workers = 1;
  akt::tracing_config t;
  t.otlp = ep;
  t.flush_interval = 10ms;
  cfg.tracing = t;
  akt::actor_system sys(name, cfg);
  EXPECT_TRUE(sys.start());
  auto p = sys.spawn<answering>("a");
  EXPECT_TRUE(p);
  {
    akt::trace_scope scope(sys, "one");
    EXPECT_TRUE(p->ask<int>(0, 5s));
  }
  EXPECT_TRUE(sys.stop());
  return sys.trace_stats();
}

TEST(Trace_OtlpTls, TheExporterVerifiesTheCollectorAndSendsItsHeaders) {
  tls_collector col;
  ASSERT_TRUE(col.server.is_valid());
  ASSERT_GT(col.port, 0);
  akt::otlp_endpoint ep{"127.0.0.1", static_cast<std::uint16_t>(col.port), "/v1/traces"};
  ep.tls = true;
  ep.ca_file = k_certs + "ca.pem";
  ep.headers = {{"Authorization", "Bearer test-token"}};
  const akt::tracing_stats ok = trace_one(ep, "otlp-tls");
  ASSERT_GE(col.wait_for(1), 1u);
  EXPECT_EQ(ok.export_failures, 0u);
  EXPECT_EQ(ok.exported, 2u) << "the scope's span and the handler's";
  {
    std::lock_guard<std::mutex> lock(col.mutex);
    for (const std::string& a : col.authorizations) EXPECT_EQ(a, "Bearer test-token");
    std::string all;
    for (const std::string& b : col.bodies) all += b;
    EXPECT_NE(all.find("\"name\":\"one\""), std::string::npos) << all;
  }

  // A CA that did not sign the collector's certificate: nothing reaches it.
  const std::size_t before = col.wait_for(0, 0ms);
  ep.ca_file = k_certs + "client.pem";  // a leaf, not the collector's CA
  const akt::tracing_stats refused = trace_one(ep, "otlp-tls-wrong-ca");
  EXPECT_GE(refused.export_failures, 1u);
  EXPECT_EQ(refused.exported, 0u);
  EXPECT_EQ(col.wait_for(0, 0ms), before);

  // Plain HTTP to the HTTPS port fails the same way, counted.
  ep.tls = false;
  const akt::tracing_stats plain = trace_one(ep, "otlp-plain-to-tls");
  EXPECT_GE(plain.export_failures, 1u);
  EXPECT_EQ(col.wait_for(0, 0ms), before);
}

}  // namespace
