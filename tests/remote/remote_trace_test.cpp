// Traces across nodes: W3C trace context carried by envelopes and frames, the spans of handlers
// and remote hops, the user sink and the OTLP/HTTP exporter (src/actor/tracer.hpp).

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "remote/remote_support.hpp"
#include "remote/wire.hpp"
#include "support/span_log.hpp"

namespace {

using namespace akt::remote_test;
using akt::span_data;
using akt::span_kind;
using akt::test::describe;
using akt::test::span_log;
using akt::test::tracing_into;

// A node with tracing.
struct traced_node {
  traced_node(const std::string& name, std::optional<akt::tracing_config> tracing)
      : sys(name, [&] {
          akt::system_config cfg = node_config();
          cfg.tracing = std::move(tracing);
          // No pings in the byte counts below (nothing here loses a node).
          cfg.remote->heartbeat_interval = std::chrono::seconds(60);
          return cfg;
        }()) {
    register_test_messages();
    started = sys.start();
  }
  akt::actor_system sys;
  akt::result<void> started;
  std::string where() const { return node_of(sys); }
};

// The actor on C the grain asks (set before the grain's first message).
akt::pid g_on_c;  // NOLINT: one test at a time uses it

// A grain on B whose handler asks the actor on C, and answers with its reply.
struct relay_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.relay";
  void on_receive(akt::grain_context& ctx) override {
    akt::match(ctx, [&](const ping& p, auto& c) {
      auto r = c.template ask_actor<ping>(g_on_c, ping{p.n * 10}, 5s);
      if (r)
        c.reply(*r);
      else
        c.reply_error(r.error());
    });
  }
};

const span_data* find_span(const std::vector<span_data>& spans, const std::string& node,
                           span_kind kind) {
  for (const span_data& s : spans)
    if (s.attribute("akt.node") == node && s.kind == kind) return &s;
  return nullptr;
}

TEST(Trace_AcrossNodes, AnAskToAGrainThatAsksAnActorOnAThirdNodeIsOneTrace) {
  span_log log;
  traced_node a{"alpha", tracing_into(log)}, b{"beta", tracing_into(log)},
      c{"gamma", tracing_into(log)};
  ASSERT_TRUE(a.started && b.started && c.started);
  ASSERT_FALSE(akt::register_grain_kind<relay_grain>(b.sys));
  auto j = std::make_shared<journal>();
  auto target = c.sys.spawn<echo>("target", j);
  ASSERT_TRUE(target);
  auto seen_from_b = b.sys.lookup(c.sys.address() + "/user/target", 5s);
  ASSERT_TRUE(seen_from_b) << seen_from_b.error().message();
  g_on_c = *seen_from_b;

  // From outside any handler on A: the runtime starts the trace (ratio 1).
  const akt::grain_identity id{"test.relay", "r1"};
  auto got = akt::remote::ask_grain_on<ping>(a.sys, b.where(), id, ping{4}, 10s);
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(got->n, 41);

  // A's client span is the root; its trace id names the trace.
  std::string trace;
  ASSERT_TRUE(akt::test::eventually(
      [&] {
        for (const span_data& s : log.all()) {
          if (s.attribute("akt.node") == "alpha" && s.kind == span_kind::client &&
              s.name.find("test.relay/r1") != std::string::npos) {
            trace = s.trace_id_hex();
            return true;
          }
        }
        return false;
      },
      10s));
  // A client; B server, handler, client; C server, handler.
  const std::vector<span_data> spans = log.wait_for(trace, 6);
  ASSERT_EQ(spans.size(), 6u) << describe(spans);

  const span_data* a_client = find_span(spans, "alpha", span_kind::client);
  const span_data* b_server = find_span(spans, "beta", span_kind::server);
  const span_data* b_handler = find_span(spans, "beta", span_kind::internal);
  const span_data* b_client = find_span(spans, "beta", span_kind::client);
  const span_data* c_server = find_span(spans, "gamma", span_kind::server);
  const span_data* c_handler = find_span(spans, "gamma", span_kind::internal);
  ASSERT_TRUE(a_client && b_server && b_handler && b_client && c_server && c_handler)
      << describe(spans);
  EXPECT_EQ(a_client->parent_span_id, 0u);
  EXPECT_EQ(b_server->parent_span_id, a_client->span_id);
  EXPECT_EQ(b_handler->parent_span_id, b_server->span_id);
  EXPECT_EQ(b_client->parent_span_id, b_handler->span_id);
  EXPECT_EQ(c_server->parent_span_id, b_client->span_id);
  EXPECT_EQ(c_handler->parent_span_id, c_server->span_id);

  // Names and attributes: the grain's kind, the actor's type; identity, path, message type.
  EXPECT_EQ(b_handler->name, "test.relay");
  EXPECT_EQ(b_handler->attribute("akt.grain.identity"), "test.relay/r1");
  EXPECT_EQ(b_handler->attribute("akt.message.type"), "akt.test.ping");
  EXPECT_NE(c_handler->name.find("echo"), std::string::npos) << c_handler->name;
  EXPECT_EQ(c_handler->attribute("akt.actor.path"), "target");
  // Times: unix nanoseconds, each child inside the hop that carried it.
  for (const span_data& s : spans) {
    EXPECT_GT(s.start_unix_ns, 1'600'000'000'000'000'000) << s.name;
    EXPECT_LE(s.start_unix_ns, s.end_unix_ns) << s.name;
  }
  EXPECT_LE(a_client->start_unix_ns, b_server->start_unix_ns + 1'000'000'000);
  EXPECT_GE(a_client->end_unix_ns, a_client->start_unix_ns);
  EXPECT_LE(b_client->start_unix_ns, b_client->end_unix_ns);
  EXPECT_GE(b_handler->end_unix_ns, b_client->end_unix_ns);

  g_on_c = akt::pid();
  (void)a.sys.stop();
  (void)b.sys.stop();
  (void)c.sys.stop();
}

// Records the trace context its handler sees, then answers.
class context_probe final : public akt::actor {
 public:
  explicit context_probe(std::shared_ptr<std::vector<std::string>> seen) : seen_(std::move(seen)) {}
  void receive(akt::receive_context& ctx) override {
    seen_->push_back(akt::current_trace_id());
    if (ctx.expects_reply()) ctx.reply(ping{1});
  }

 private:
  std::shared_ptr<std::vector<std::string>> seen_;
};

TEST(Trace_AcrossNodes, AnUnsampledMessageCarriesNoContextOnTheWire) {
  span_log log;
  // Tracing on everywhere, but A samples nothing.
  traced_node a{"alpha", tracing_into(log, 0.0)}, b{"beta", tracing_into(log)};
  ASSERT_TRUE(a.started && b.started);
  auto seen = std::make_shared<std::vector<std::string>>();
  ASSERT_TRUE(b.sys.spawn<context_probe>("probe", seen));
  auto probe = a.sys.lookup(b.sys.address() + "/user/probe", 5s);
  ASSERT_TRUE(probe) << probe.error().message();

  auto bytes_out = [&] {
    for (const akt::peer_stats& p : a.sys.peers())
      if (p.address == b.sys.address()) return p.bytes_out;
    return std::uint64_t{0};
  };
  // The same ask, unsampled and then inside a trace scope: the frame differs by exactly the
  // trace context, so the unsampled one carried none. (bytes_out grows when the write
  // completes, which may come just after the answer.)
  auto ask_and_count = [&]() -> std::uint64_t {
    const std::uint64_t before = bytes_out();
    EXPECT_TRUE(probe->ask<ping>(ping{1}, 5s));
    EXPECT_TRUE(akt::test::eventually([&] { return bytes_out() != before; }, 5s));
    return bytes_out() - before;
  };
  const std::uint64_t unsampled = ask_and_count();
  EXPECT_EQ(ask_and_count(), unsampled);
  std::string scope_trace;
  std::uint64_t sampled = 0;
  {
    akt::trace_scope scope(a.sys, "outside");
    scope_trace = scope.context().trace_id_hex();
    sampled = ask_and_count();
  }
  EXPECT_EQ(sampled, unsampled + akt::remote::detail::k_trace_context_bytes);
  ASSERT_EQ(seen->size(), 3u);
  EXPECT_EQ((*seen)[0], "");
  EXPECT_EQ((*seen)[1], "");
  EXPECT_EQ((*seen)[2], scope_trace);
  (void)a.sys.stop();
  (void)b.sys.stop();
  // B made spans only for the traced message.
  for (const span_data& s : log.all()) EXPECT_EQ(s.trace_id_hex(), scope_trace) << s.name;
}

TEST(Trace_Wire, TheContextRoundTripsAndOnlyTracedEnvelopesCarryIt) {
  namespace rd = akt::remote::detail;
  rd::envelope_fields f;
  f.target_uid = 7;
  f.type_id = 99;
  akt::remote::byte_writer plain;
  ASSERT_FALSE(rd::encode_envelope_bytes(plain, rd::frame_type::tell, 0, f, {}));
  f.trace_id[0] = 0xab;
  f.trace_id[15] = 0xcd;
  f.trace_span_id = 0x1122334455667788ull;
  f.trace_flags = 1;
  akt::remote::byte_writer traced;
  ASSERT_FALSE(rd::encode_envelope_bytes(traced, rd::frame_type::tell, 0, f, {}));
  EXPECT_EQ(traced.size(), plain.size() + rd::k_trace_context_bytes);

  rd::envelope_fields back;
  akt::remote::byte_span payload;
  const akt::remote::byte_span body(plain.data() + rd::k_header_bytes,
                                    plain.size() - rd::k_header_bytes);
  ASSERT_EQ(rd::decode_envelope(body, back, payload), "");
  EXPECT_EQ(back.trace_span_id, 0u);
  EXPECT_EQ(back.flags & rd::k_envelope_traced, 0);
  const akt::remote::byte_span tbody(traced.data() + rd::k_header_bytes,
                                     traced.size() - rd::k_header_bytes);
  ASSERT_EQ(rd::decode_envelope(tbody, back, payload), "");
  EXPECT_EQ(back.trace_id, f.trace_id);
  EXPECT_EQ(back.trace_span_id, f.trace_span_id);
  EXPECT_EQ(back.trace_flags, 1);
  EXPECT_EQ(back.type_id, 99u);
  // Cut anywhere inside the context: refused with a reason, never read past the body.
  for (std::size_t cut = 1; cut <= rd::k_trace_context_bytes + 8; ++cut) {
    const akt::remote::byte_span shorter(tbody.data(), tbody.size() - cut);
    EXPECT_NE(rd::decode_envelope(shorter, back, payload), "") << cut;
  }
}

// A tiny OTLP collector: records the bodies POSTed to /v1/traces.
struct collector {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::string> bodies;

  collector() {
    server.Post("/v1/traces", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        bodies.push_back(req.body);
      }
      cv.notify_all();
      res.set_content("{}", "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    // bind_to_any_port listens already: a request made before the thread runs waits in the
    // backlog.
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~collector() {
    server.stop();
    thread.join();
  }
  std::vector<std::string> wait_for(std::size_t n, std::chrono::milliseconds within = 10s) {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait_for(lock, within, [&] { return bodies.size() >= n; });
    return bodies;
  }
};

std::size_t count_of(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

class silent final : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    if (ctx.expects_reply()) ctx.reply(ping{2});
  }
};

TEST(Trace_Otlp, TheExporterPostsBatchesOfOtlpJson) {
  collector col;
  ASSERT_GT(col.port, 0);
  akt::system_config cfg;
  cfg.workers = 2;
  akt::tracing_config t;
  t.otlp = akt::otlp_endpoint{"127.0.0.1", static_cast<std::uint16_t>(col.port), "/v1/traces"};
  t.max_batch = 4;
  t.flush_interval = 30s;  // only full batches go out before stop()
  t.service_name = "trace-test";
  cfg.tracing = t;
  akt::actor_system sys("otlp", cfg);
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<silent>("silent");
  ASSERT_TRUE(p);
  std::string trace, scope_span;
  {
    akt::trace_scope scope(sys, "batch");
    trace = scope.context().trace_id_hex();
    scope_span = scope.context().span_id_hex();
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(p->ask<ping>(ping{i}, 5s));
  }
  // Eight handler spans: two full batches of four, posted without waiting for the interval.
  std::vector<std::string> bodies = col.wait_for(2);
  ASSERT_EQ(bodies.size(), 2u);
  for (const std::string& b : bodies) {
    EXPECT_EQ(count_of(b, "\"spanId\""), 4u) << b;
    EXPECT_EQ(count_of(b, "\"traceId\":\"" + trace + "\""), 4u) << b;
    EXPECT_EQ(count_of(b, "\"parentSpanId\":\"" + scope_span + "\""), 4u) << b;
    EXPECT_NE(b.find("\"service.name\",\"value\":{\"stringValue\":\"trace-test\"}"),
              std::string::npos)
        << b;
    EXPECT_NE(b.find("\"kind\":1"), std::string::npos) << b;
    EXPECT_NE(b.find("\"startTimeUnixNano\":\""), std::string::npos) << b;
    EXPECT_NE(b.find("\"key\":\"akt.actor.path\",\"value\":{\"stringValue\":\"silent\"}"),
              std::string::npos)
        << b;
  }
  // The scope's own span (the root) goes out with the last flush, at stop.
  ASSERT_TRUE(sys.stop());
  bodies = col.wait_for(3);
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_NE(bodies[2].find("\"spanId\":\"" + scope_span + "\""), std::string::npos) << bodies[2];
  EXPECT_NE(bodies[2].find("\"name\":\"batch\""), std::string::npos) << bodies[2];
  EXPECT_EQ(bodies[2].find("parentSpanId"), std::string::npos) << bodies[2];
  const akt::tracing_stats st = sys.trace_stats();
  EXPECT_EQ(st.exported, 9u);
  EXPECT_EQ(st.dropped, 0u);
  EXPECT_EQ(st.export_failures, 0u);
}

TEST(Trace_Local, SendsFromATracedHandlerAreItsChildren) {
  span_log log;
  akt::system_config cfg;
  cfg.workers = 2;
  akt::tracing_config t = tracing_into(log, 0.0);  // the runtime samples no root itself
  t.queue_capacity = 1000;
  cfg.tracing = t;
  akt::actor_system sys("local", cfg);
  ASSERT_TRUE(sys.start());
  auto leaf = sys.spawn<silent>("leaf");
  ASSERT_TRUE(leaf);
  // An actor that asks the leaf from its handler (a request with a continuation).
  struct middle final : akt::actor {
    akt::pid leaf;
    explicit middle(akt::pid l) : leaf(std::move(l)) {}
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<ping>()) (void)ctx.tell(leaf, ping{3});
    }
  };
  auto mid = sys.spawn<middle>("middle", *leaf);
  ASSERT_TRUE(mid);
  ASSERT_FALSE(mid->tell(ping{0}));  // unsampled: no spans
  std::string trace;
  std::uint64_t root = 0;
  {
    akt::trace_scope scope(sys, "root");
    trace = scope.context().trace_id_hex();
    root = scope.context().span_id;
    EXPECT_EQ(akt::current_trace_id(), trace);
    ASSERT_FALSE(mid->tell(ping{1}));
  }
  EXPECT_EQ(akt::current_trace_id(), "");
  const std::vector<span_data> spans = log.wait_for(trace, 3);
  ASSERT_EQ(spans.size(), 3u) << describe(spans);
  const span_data* mid_span = nullptr;
  const span_data* leaf_span = nullptr;
  for (const span_data& s : spans) {
    if (s.attribute("akt.actor.path") == "middle") mid_span = &s;
    if (s.attribute("akt.actor.path") == "leaf") leaf_span = &s;
  }
  ASSERT_TRUE(mid_span && leaf_span) << describe(spans);
  EXPECT_EQ(mid_span->parent_span_id, root);
  EXPECT_EQ(leaf_span->parent_span_id, mid_span->span_id);
  EXPECT_FALSE(mid_span->error);
  EXPECT_FALSE(leaf_span->error);

  // A handler that throws: its span is marked failed.
  struct thrower final : akt::actor {
    void receive(akt::receive_context&) override { throw std::runtime_error("no"); }
  };
  auto bad = sys.spawn<thrower>("thrower");
  ASSERT_TRUE(bad);
  std::string failed_trace;
  {
    akt::trace_scope scope(sys, "failing");
    failed_trace = scope.context().trace_id_hex();
    ASSERT_FALSE(bad->tell(ping{1}));
  }
  const std::vector<span_data> failed = log.wait_for(failed_trace, 2);
  ASSERT_EQ(failed.size(), 2u) << describe(failed);
  for (const span_data& s : failed) EXPECT_EQ(s.error, s.name != "failing") << s.name;
  (void)sys.stop();
  EXPECT_EQ(log.all().size(), 5u) << describe(log.all());
}

// A send's inline test asks whether any system in the process samples roots; the receiving
// system's own ratio still decides. Here one system samples every root and one none, side by
// side, and then the sampling one is gone.
TEST(Trace_Local, EachSystemsRatioDecidesItsRootsWhateverTheOthersSample) {
  span_log none_log, all_log;
  akt::system_config none_cfg, all_cfg;
  none_cfg.workers = 1;
  all_cfg.workers = 1;
  none_cfg.tracing = tracing_into(none_log, 0.0);
  all_cfg.tracing = tracing_into(all_log, 1.0);
  akt::actor_system none_sys("ratio-0", none_cfg);
  ASSERT_TRUE(none_sys.start());
  auto quiet = none_sys.spawn<silent>("quiet");
  ASSERT_TRUE(quiet);
  std::string all_trace;
  {
    akt::actor_system all_sys("ratio-1", all_cfg);
    ASSERT_TRUE(all_sys.start());
    auto loud = all_sys.spawn<silent>("loud");
    ASSERT_TRUE(loud);
    ASSERT_TRUE(quiet->ask<ping>(ping{1}, 5s));
    ASSERT_TRUE(loud->ask<ping>(ping{1}, 5s));
    ASSERT_TRUE(all_sys.stop());  // flushes its spans
    const std::vector<span_data> spans = all_log.all();
    ASSERT_EQ(spans.size(), 1u) << describe(spans);
    EXPECT_EQ(spans[0].attribute("akt.actor.path"), "loud");
  }
  // The sampling system is gone: the inline test now answers for ratio 0 alone.
  ASSERT_TRUE(quiet->ask<ping>(ping{2}, 5s));
  ASSERT_TRUE(none_sys.stop());
  EXPECT_TRUE(none_log.all().empty()) << describe(none_log.all());
}

TEST(Trace_Local, AFullQueueDropsSpansAndCountsThem) {
  // A sink that blocks until released: the queue (capacity 4) fills behind it.
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> sunk{0};
  akt::system_config cfg;
  cfg.workers = 2;
  akt::tracing_config t;
  t.queue_capacity = 4;
  t.max_batch = 1;
  t.flush_interval = 1ms;
  t.sink = [&](const span_data&) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return release; });
    ++sunk;
  };
  cfg.tracing = t;
  akt::actor_system sys("drops", cfg);
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<silent>("silent");
  ASSERT_TRUE(p);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(p->ask<ping>(ping{i}, 5s));  // never blocked
  EXPECT_GT(sys.trace_stats().dropped, 0u);
  {
    std::lock_guard<std::mutex> lock(m);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(sys.stop());
  const akt::tracing_stats st = sys.trace_stats();
  EXPECT_EQ(st.finished + st.dropped, 50u);
  EXPECT_EQ(static_cast<std::uint64_t>(sunk.load()), st.finished);
}

}  // namespace
