// Metrics: the runtime's own (system_config::metrics) and one of the program's, scraped as
// Prometheus text. Quoted by docs/guide/08-observability-metrics.md.

#include <akt/akt.hpp>

#include <chrono>
#include <cstdio>
#include <string>

struct order {
  std::string kind;
  double amount;
};

// [actor]
// An actor that counts orders by kind and observes their amounts. The histogram's series is
// looked up once (with() takes a lock); updates take no lock and share no cache line.
class shop : public akt::actor {
 public:
  explicit shop(akt::metrics::registry* reg)
      : orders_(reg->add_counter("shop_orders_total", "Orders taken, by kind.", {"kind"}).value()),
        amounts_(reg->add_histogram("shop_order_amount_euros", "Order amounts.",
                                    akt::metrics::exponential_bounds(1, 4, 6))
                     .value()
                     .with()) {}

  void receive(akt::receive_context& ctx) override {
    if (auto* o = ctx.get_if<order>()) {
      orders_.with({o->kind}).inc();  // with() per message: a short lock, fine here
      amounts_.observe(o->amount);
      if (ctx.expects_reply()) ctx.reply(true);
    }
  }

 private:
  akt::metrics::counter_family orders_;
  akt::metrics::histogram amounts_;
};
// [/actor]

int main() {
  // [config]
  akt::system_config cfg;
  cfg.metrics.enabled = true;             // the runtime's metrics: akt_actors, ...
  cfg.metrics.handler_sample_every = 64;  // time one handler in 64 per worker (the default)
  akt::actor_system sys("metrics-demo", cfg);
  if (!sys.start()) return 1;
  // [/config]

  auto s = sys.spawn<shop>("shop", &sys.metrics());
  if (!s) return 1;
  for (int i = 0; i < 10; ++i) {
    (void)s->tell(order{i % 3 == 0 ? "book" : "lamp", 3.5 * i});
  }
  if (!s->ask<bool>(order{"book", 12}, std::chrono::seconds(5))) return 1;

  // [scrape]
  // What an HTTP endpoint would serve at /metrics (Content-Type:
  // akt::metrics::k_prometheus_content_type).
  std::string text = akt::metrics::to_prometheus_text(sys.metrics().collect());
  std::fputs(text.c_str(), stdout);
  // [/scrape]

  const bool ok = text.find("shop_orders_total{kind=\"book\"} 5") != std::string::npos &&
                  text.find("akt_actors{kind=\"shop\"} 1") != std::string::npos;
  sys.stop();
  return ok ? 0 : 1;
}
