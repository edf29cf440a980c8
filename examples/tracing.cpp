// Traces across two nodes in one process: a trace_scope on node "front" asks an actor on node
// "back", whose handler asks a second actor there; every span goes to a sink that prints it
// (and, with `--otlp host:port`, to an OTLP/HTTP collector too). Quoted by
// docs/guide/08-observability-tracing.md.

#include <akt/akt.hpp>
#include <akt/remote/remote.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

using namespace std::chrono_literals;

// [handler]
// A handler reads its trace context, e.g. to put the trace id in its log lines; a message it
// sends continues the trace (its handler span is a child of this one).
class pricer : public akt::actor {
 public:
  explicit pricer(akt::pid tax) : tax_(std::move(tax)) {}
  void receive(akt::receive_context& ctx) override {
    if (const std::string* item = ctx.get_if<std::string>()) {
      std::printf("pricing %s in trace %s\n", item->c_str(), akt::current_trace_id().c_str());
      auto asked = std::make_shared<akt::reply_handle>(ctx.defer_reply());
      ctx.request(tax_, *item, 2s, [asked](akt::receive_context&, akt::result<akt::message> r) {
        if (r)
          asked->reply_message(std::move(*r));
        else
          asked->reply_error(r.error());
      });
    }
  }

 private:
  akt::pid tax_;
};
// [/handler]

class tax : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<std::string>()) ctx.reply(std::string("19%"));
  }
};

// [config]
akt::system_config traced_node(const std::string& otlp) {
  akt::system_config cfg;
  cfg.remote = akt::remote_config{};  // loopback, a free port
  akt::tracing_config t;
  t.sampling_ratio = 0.01;  // 1 % of the messages sent from outside any handler start a trace
  t.sink = [](const akt::span_data& s) {  // on the exporter's thread
    static std::mutex m;
    std::lock_guard<std::mutex> lock(m);
    std::printf("span %-28s node %-5s trace %s id %s parent %s %.3f ms\n", s.name.c_str(),
                std::string(s.attribute("akt.node")).c_str(), s.trace_id_hex().c_str(),
                s.span_id_hex().c_str(),
                s.parent_span_id == 0 ? "(root)" : s.parent_span_id_hex().c_str(),
                static_cast<double>(s.end_unix_ns - s.start_unix_ns) / 1e6);
  };
  if (!otlp.empty()) {  // host:port of an OpenTelemetry collector's OTLP/HTTP receiver
    const auto colon = otlp.rfind(':');
    t.otlp = akt::otlp_endpoint{otlp.substr(0, colon),
                                static_cast<std::uint16_t>(std::atoi(otlp.c_str() + colon + 1))};
  }
  cfg.tracing = t;
  return cfg;
}
// [/config]

int main(int argc, char** argv) {
  const std::string otlp = argc > 2 && std::string_view(argv[1]) == "--otlp" ? argv[2] : "";
  akt::actor_system front("front", traced_node(otlp)), back("back", traced_node(otlp));
  if (!front.start() || !back.start()) return 1;
  auto t = back.spawn<tax>("tax");
  if (!t || !back.spawn<pricer>("pricer", *t)) return 1;
  auto p = front.lookup(back.address() + "/user/pricer", 5s);
  if (!p) return 1;

  // [scope]
  // A trace started explicitly (always sampled): the ask's client span, and everything it
  // causes on the other node, are children of the scope's span.
  {
    akt::trace_scope scope(front, "checkout");
    std::printf("trace %s\n", scope.context().trace_id_hex().c_str());
    auto price = p->ask<std::string>(std::string("book"), 5s);
    std::printf("price: %s\n", price ? price->c_str() : price.error().message().c_str());
  }
  // [/scope]

  // Stopping flushes the spans still queued.
  (void)front.stop();
  (void)back.stop();
  const akt::tracing_stats f = front.trace_stats(), b = back.trace_stats();
  std::printf("spans: front %llu, back %llu (dropped %llu)\n",
              static_cast<unsigned long long>(f.finished),
              static_cast<unsigned long long>(b.finished),
              static_cast<unsigned long long>(f.dropped + b.dropped));
  // front: the scope and the ask's client span; back: the server span, pricer's and tax's.
  return f.finished == 2 && b.finished == 3 ? 0 : 1;
}
