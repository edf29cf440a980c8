#pragma once
// Traces across actors and nodes: W3C trace context carried by messages, a span per handler
// invocation and per remote hop, exported to a user sink and/or over OTLP/HTTP (JSON).
// docs/guide/08-observability-tracing.md is the user's page.
//
// Off by default (system_config::tracing unset): no span, no byte on the wire, and the send and
// turn paths pay one predictable test of a global flag.
//
//   akt::system_config cfg;
//   cfg.tracing = akt::tracing_config{};
//   cfg.tracing->sampling_ratio = 0.01;                       // 1 % of root messages
//   cfg.tracing->sink = [](const akt::span_data& s) { ... };  // and/or
//   cfg.tracing->otlp = akt::otlp_endpoint{"127.0.0.1", 4318};
//
// Thread safety: everything here may be used from any thread. trace_scope is owned by the thread
// that made it (it sets that thread's current context) and must end on that thread.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace akt {

class actor_system;

// A W3C trace context (traceparent): the trace, the span that is the parent of whatever
// continues it, and the flags (bit 0: sampled). Only sampled contexts travel: an unsampled
// message carries none.
struct span_context {
  std::array<std::uint8_t, 16> trace_id{};  // all zero: no trace
  std::uint64_t span_id = 0;                // the parent span for what continues it
  std::uint8_t flags = 0;                   // k_trace_sampled

  static constexpr std::uint8_t k_trace_sampled = 1;
  bool valid() const noexcept;
  bool sampled() const noexcept { return (flags & k_trace_sampled) != 0; }
  // 32 lower-case hex digits; "" for an invalid context.
  std::string trace_id_hex() const;
  // 16 lower-case hex digits.
  std::string span_id_hex() const;
  // "00-<trace id>-<span id>-<flags>", the traceparent header's value; "" when invalid.
  std::string traceparent() const;
};

// OTLP's span kinds (the numbers are the protocol's).
enum class span_kind : std::uint8_t { internal = 1, server = 2, client = 3 };

// One finished span, as the sink receives it.
struct span_data {
  std::array<std::uint8_t, 16> trace_id{};
  std::uint64_t span_id = 0;
  std::uint64_t parent_span_id = 0;  // 0: a root span
  std::string name;
  span_kind kind = span_kind::internal;
  std::int64_t start_unix_ns = 0;  // system clock, nanoseconds since the Unix epoch
  std::int64_t end_unix_ns = 0;
  bool error = false;  // the handler threw or failed, or the remote call failed
  std::vector<std::pair<std::string, std::string>> attributes;

  std::string trace_id_hex() const;
  std::string span_id_hex() const;
  std::string parent_span_id_hex() const;  // "" for a root span
  // The attribute's value, or "" when absent.
  std::string_view attribute(std::string_view key) const noexcept;
};

// Where the OTLP/HTTP exporter posts (JSON encoding, POST http[s]://host:port/path).
struct otlp_endpoint {
  std::string host = "127.0.0.1";
  std::uint16_t port = 4318;
  std::string path = "/v1/traces";
  // The HTTP request's timeout; a batch that fails is dropped (and counted).
  std::chrono::milliseconds timeout = std::chrono::seconds(2);
  // HTTPS: the collector's certificate must chain to ca_file (PEM; empty: the system's trust
  // store) and name `host`; a collector that fails either gets nothing (the batch counts as an
  // export failure).
  bool tls = false;
  std::string ca_file = {};
  // Sent with every request, e.g. {"Authorization", "Bearer <token>"} or a vendor's API key.
  std::vector<std::pair<std::string, std::string>> headers = {};
};

struct tracing_config {
  // The share (0..1) of root messages the runtime traces: a message sent from outside any
  // handler and outside any trace_scope starts a new trace with this probability. Messages sent
  // from a traced handler always continue its trace; from an untraced one, never.
  double sampling_ratio = 1.0;
  // Called with every finished span, on the exporter's thread (never on a dispatcher worker).
  // Must not block for long: spans wait in the bounded queue meanwhile.
  std::function<void(const span_data&)> sink;
  // Spans also go to an OTLP/HTTP collector.
  std::optional<otlp_endpoint> otlp;
  // The service.name resource attribute; empty: the system's name.
  std::string service_name;
  // Bounds the spans waiting for the exporter's thread; when full, new spans are dropped and
  // counted (tracing_stats::dropped), never waited for.
  std::size_t queue_capacity = 8192;
  // The most spans one OTLP request carries.
  std::size_t max_batch = 512;
  // How long a span may wait before its batch is sent (a full batch goes at once).
  std::chrono::milliseconds flush_interval = std::chrono::milliseconds(200);
};

// Counters of one system's tracer (actor_system::tracing_stats).
struct tracing_stats {
  std::uint64_t finished = 0;         // spans finished and queued
  std::uint64_t dropped = 0;          // spans dropped because the queue was full
  std::uint64_t exported = 0;         // spans handed to the sink / accepted by the collector
  std::uint64_t export_failures = 0;  // OTLP requests that failed (their spans are dropped)
};

// Starts a trace (or continues `parent`) on the calling thread: messages sent from this thread
// while the scope lives carry its context, so their handler spans are children of the scope's
// span. The scope is itself a span (kind internal, named `name`), exported when it ends. Always
// sampled when the system traces at all (an explicit scope is never subject to the ratio); does
// nothing on a system without tracing. Scopes nest.
class trace_scope {
 public:
  trace_scope(actor_system& sys, std::string_view name);
  trace_scope(actor_system& sys, std::string_view name, const span_context& parent);
  ~trace_scope();
  trace_scope(const trace_scope&) = delete;
  trace_scope& operator=(const trace_scope&) = delete;

  // The scope's own context (its span as the parent); invalid on a system without tracing.
  span_context context() const noexcept;

 private:
  void begin(actor_system& sys, std::string_view name, const span_context* parent);
  void* tracer_ = nullptr;  // detail::tracer, when tracing is on
  void* frame_ = nullptr;   // detail::trace_frame: this scope's, on the thread's frame chain
  span_context ctx_;
  std::uint64_t parent_span_ = 0;
  std::int64_t start_ns_ = 0;
  std::string name_;
};

// The calling thread's current trace context: inside a traced handler, its span; inside a
// trace_scope, the scope's; else nullopt. For logs and for carrying a trace over other channels.
std::optional<span_context> current_trace_context() noexcept;
// Its trace id in hex (32 digits); "" when the thread is in no trace.
std::string current_trace_id();

}  // namespace akt
