// The HTTP endpoint: a node that serves /metrics, /health, /ready, /api/... and its dashboard.
//
//   example_http_endpoint            starts, prints the URLs, stops
//   example_http_endpoint 60         serves for 60 seconds (open the dashboard in a browser)
#include <akt/akt.hpp>
#include <akt/metrics/registry.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

struct work {
  int n;
};

struct worker final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<work>()) ++done_;
  }
  long done_ = 0;
};

int main(int argc, char** argv) {
  const int serve_seconds = argc > 1 ? std::atoi(argv[1]) : 0;

  // [config]
  akt::system_config cfg;
  cfg.metrics.enabled = true;            // the runtime's metrics at /metrics (off by default)
  cfg.http = akt::http_config{};         // the endpoint (off by default)
  cfg.http->port = 0;                    // 0: any free port; a fixed one for Prometheus (e.g. 9464)
  cfg.http->bind_address = "127.0.0.1";  // the default: this machine only
  akt::actor_system sys("shop", cfg);
  if (!sys.start()) return 1;
  std::printf("dashboard: http://127.0.0.1:%u/\n", static_cast<unsigned>(sys.http_port()));
  // [/config]

  // [user-metric]
  auto orders = sys.metrics().add_counter("shop_orders_total", "Orders taken.", {"channel"});
  if (!orders) return 1;
  auto web_orders = orders->with({"web"});  // keep the handle: with() takes a lock
  web_orders.inc();
  // [/user-metric]

  auto w = sys.spawn<worker>("worker");
  if (!w) return 1;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(serve_seconds);
  do {
    for (int i = 0; i < 1000; ++i) (void)w->tell(work{i});
    web_orders.inc();
    if (serve_seconds > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < until);

  return sys.stop() ? 0 : 1;
}
