#include "actor/tracer.hpp"

#include <httplib.h>

#include <cxxabi.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <typeinfo>
#include <unordered_map>

#include "actor/cell_extras.hpp"
#include "actor/system_core.hpp"
#include "akt/actor/actor_system.hpp"
#include "akt/actor/detail/actor_cell.hpp"
#include "akt/actor/receive_context.hpp"
#include "akt/core/thread.hpp"

namespace akt {

namespace {

constexpr char k_hex[] = "0123456789abcdef";

void put_hex(std::string& out, const std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    out += k_hex[p[i] >> 4];
    out += k_hex[p[i] & 15];
  }
}

std::string hex_of_id(const std::array<std::uint8_t, 16>& id) {
  std::string s;
  s.reserve(32);
  put_hex(s, id.data(), id.size());
  return s;
}

// Span ids are written big-endian, so the hex reads as the number does.
std::string hex_of_span(std::uint64_t v) {
  std::uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
  std::string s;
  s.reserve(16);
  put_hex(s, b, 8);
  return s;
}

bool nonzero(const std::array<std::uint8_t, 16>& id) noexcept {
  for (std::uint8_t b : id)
    if (b != 0) return true;
  return false;
}

// A thread's id generator: splitmix64 seeded once per thread from random_device and the
// thread's address space (ids need to be unique, not secret).
std::uint64_t next_random() noexcept {
  thread_local std::uint64_t state = [] {
    std::uint64_t seed = 0;
    try {
      std::random_device rd;
      seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    } catch (...) {
    }
    int local = 0;
    seed ^= reinterpret_cast<std::uintptr_t>(&local);
    seed ^= static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return seed;
  }();
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

// ---- span_context, span_data ----

bool span_context::valid() const noexcept { return nonzero(trace_id) && span_id != 0; }

std::string span_context::trace_id_hex() const {
  return nonzero(trace_id) ? hex_of_id(trace_id) : std::string();
}

std::string span_context::span_id_hex() const { return hex_of_span(span_id); }

std::string span_context::traceparent() const {
  if (!valid()) return {};
  std::string s = "00-" + hex_of_id(trace_id) + "-" + hex_of_span(span_id) + "-";
  put_hex(s, &flags, 1);
  return s;
}

std::string span_data::trace_id_hex() const { return hex_of_id(trace_id); }
std::string span_data::span_id_hex() const { return hex_of_span(span_id); }
std::string span_data::parent_span_id_hex() const {
  return parent_span_id == 0 ? std::string() : hex_of_span(parent_span_id);
}
std::string_view span_data::attribute(std::string_view key) const noexcept {
  for (const auto& [k, v] : attributes)
    if (k == key) return v;
  return {};
}

// ---- the thread's current context ----

namespace detail {

std::atomic<int> g_tracing_systems{0};
std::atomic<int> g_root_sampling_systems{0};
constinit thread_local trace_frame* t_current_trace_frame = nullptr;

bool& handler_failed_here() noexcept {
  thread_local bool failed = false;
  return failed;
}

std::int64_t unix_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void trace_outgoing(receive_context& env, actor_cell* to) noexcept {
  std::uint32_t& flags = context_access::flags(env);
  // Already traced (a delivery retried, a forwarded envelope) or from another node (the sender
  // decided): nothing to add.
  if ((flags & (envelope::flag_traced | envelope::flag_remote_origin)) != 0) return;
  // The tests run cheapest first, and nothing is built before one passes: a send that is not
  // traced (the common case, e.g. every send at ratio 0 from outside a trace) costs a few
  // loads and no more.
  const trace_frame* f = current_trace_frame();
  tracer* t = to->system()->tracer();
  if (t == nullptr) return;
  // A root only for a message from outside any actor (an untraced handler's messages stay
  // untraced: the root's decision covers the whole trace), and only when the draw samples it.
  if (f == nullptr &&
      (context_access::sender(env) != nullptr || on_worker_thread() || !t->sample_root()))
    return;
  span_context ctx;
  if (f != nullptr) {
    ctx = f->ctx;
  } else {
    ctx.trace_id = tracer::new_trace_id();
    ctx.span_id = 0;
    ctx.flags = span_context::k_trace_sampled;
  }
  auto* s = new (std::nothrow) trace_state{ctx, 0, 0};
  if (s == nullptr) return;
  context_access::trace(env) = s;
  flags |= envelope::flag_traced;
}

void finish_open_span(open_span* s, bool failed) noexcept {
  if (s == nullptr) return;
  s->data.end_unix_ns = unix_now_ns();
  s->data.error = failed;
  s->owner->finish(std::move(s->data));
  delete s;
}

// ---- tracer ----

namespace {
std::uint64_t threshold_of(double ratio) noexcept {
  if (!(ratio > 0.0)) return 0;
  if (ratio >= 1.0) return ~std::uint64_t{0};
  return static_cast<std::uint64_t>(ratio * 18446744073709551616.0);
}
}  // namespace

tracer::tracer(tracing_config cfg, std::string node)
    : cfg_(std::move(cfg)),
      node_(std::move(node)),
      sample_threshold_(threshold_of(cfg_.sampling_ratio)) {
  queue_.reserve(std::min<std::size_t>(cfg_.queue_capacity, 1024));
  thread_ = std::thread([this] { run(); });
  g_tracing_systems.fetch_add(1, std::memory_order_relaxed);
  if (samples_roots()) g_root_sampling_systems.fetch_add(1, std::memory_order_relaxed);
}

tracer::~tracer() {
  stop();
  if (samples_roots()) g_root_sampling_systems.fetch_sub(1, std::memory_order_relaxed);
  g_tracing_systems.fetch_sub(1, std::memory_order_relaxed);
}

void tracer::stop() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool tracer::sample_root() noexcept {
  if (sample_threshold_ == 0) return false;
  if (sample_threshold_ == ~std::uint64_t{0}) return true;
  return next_random() < sample_threshold_;
}

std::uint64_t tracer::new_span_id() noexcept {
  std::uint64_t v = 0;
  while (v == 0) v = next_random();
  return v;
}

std::array<std::uint8_t, 16> tracer::new_trace_id() noexcept {
  std::array<std::uint8_t, 16> id{};
  const std::uint64_t a = new_span_id(), b = next_random();
  for (int i = 0; i < 8; ++i) {
    id[i] = static_cast<std::uint8_t>(a >> (8 * i));
    id[8 + i] = static_cast<std::uint8_t>(b >> (8 * i));
  }
  return id;
}

void tracer::finish(span_data&& s) noexcept {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (stopping_ || queue_.size() >= cfg_.queue_capacity) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    try {
      queue_.push_back(std::move(s));
    } catch (...) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    wake = queue_.size() == std::max<std::size_t>(cfg_.max_batch, 1);
  }
  finished_.fetch_add(1, std::memory_order_relaxed);
  if (wake) queue_cv_.notify_one();
}

tracing_stats tracer::stats() const noexcept {
  tracing_stats s;
  s.finished = finished_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.exported = exported_.load(std::memory_order_relaxed);
  s.export_failures = failures_.load(std::memory_order_relaxed);
  return s;
}

void tracer::run() {
  std::vector<span_data> batch;
  std::unique_lock<std::mutex> lock(queue_mutex_);
  for (;;) {
    const std::size_t full = std::max<std::size_t>(cfg_.max_batch, 1);
    queue_cv_.wait_for(lock, cfg_.flush_interval,
                       [&] { return stopping_ || queue_.size() >= full; });
    const bool last = stopping_;
    batch.clear();
    if (!last && queue_.size() > full) {
      // Full batches go at once; the rest waits to fill up or for the interval.
      batch.assign(std::make_move_iterator(queue_.begin()),
                   std::make_move_iterator(queue_.begin() + static_cast<std::ptrdiff_t>(full)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(full));
    } else {
      batch.swap(queue_);
    }
    lock.unlock();
    if (!batch.empty()) export_batch(batch);
    lock.lock();
    if (last && queue_.empty()) return;
  }
}

void tracer::export_batch(std::vector<span_data>& batch) {
  if (cfg_.sink) {
    for (const span_data& s : batch) {
      try {
        cfg_.sink(s);
      } catch (...) {  // a sink's failure is its own; the other spans still go out
      }
    }
  }
  if (cfg_.otlp) {
    const std::size_t step = std::max<std::size_t>(cfg_.max_batch, 1);
    for (std::size_t i = 0; i < batch.size(); i += step) {
      const std::size_t end = std::min(batch.size(), i + step);
      if (post_otlp(batch, i, end))
        exported_.fetch_add(end - i, std::memory_order_relaxed);
      else
        failures_.fetch_add(1, std::memory_order_relaxed);
    }
  } else {
    exported_.fetch_add(batch.size(), std::memory_order_relaxed);
  }
}

bool tracer::post_otlp(const std::vector<span_data>& batch, std::size_t from, std::size_t to) {
  try {
    const otlp_endpoint& ep = *cfg_.otlp;
    // The scheme picks plain HTTP or HTTPS (cpp-httplib's client, built with OpenSSL); an IPv6
    // address goes in brackets.
    const bool v6 = ep.host.find(':') != std::string::npos && ep.host.front() != '[';
    httplib::Client client(std::string(ep.tls ? "https://" : "http://") + (v6 ? "[" : "") +
                           ep.host + (v6 ? "]" : "") + ":" + std::to_string(ep.port));
    if (!client.is_valid()) return false;
    if (ep.tls) {
      client.enable_server_certificate_verification(true);
      if (!ep.ca_file.empty()) client.set_ca_cert_path(ep.ca_file);
    }
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(ep.timeout);
    const auto usecs = std::chrono::duration_cast<std::chrono::microseconds>(ep.timeout - secs);
    client.set_connection_timeout(secs.count(), usecs.count());
    client.set_read_timeout(secs.count(), usecs.count());
    client.set_write_timeout(secs.count(), usecs.count());
    const std::string body = otlp_json(
        batch, from, to, cfg_.service_name.empty() ? std::string_view(node_) : cfg_.service_name);
    const httplib::Headers headers(ep.headers.begin(), ep.headers.end());
    auto res = client.Post(ep.path, headers, body, "application/json");
    return res && res->status >= 200 && res->status < 300;
  } catch (...) {
    return false;
  }
}

// ---- OTLP/JSON ----

namespace {
void put_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += k_hex[u >> 4];
      out += k_hex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

void put_attribute(std::string& out, std::string_view key, std::string_view value) {
  out += "{\"key\":";
  put_json_string(out, key);
  out += ",\"value\":{\"stringValue\":";
  put_json_string(out, value);
  out += "}}";
}
}  // namespace

std::string otlp_json(const std::vector<span_data>& spans, std::size_t from, std::size_t to,
                      std::string_view service_name) {
  // The OTLP/JSON mapping: ids are hex strings (not base64), 64-bit times decimal strings, enums
  // their numbers.
  std::string out;
  out.reserve(256 + (to - from) * 384);
  out += "{\"resourceSpans\":[{\"resource\":{\"attributes\":[";
  put_attribute(out, "service.name", service_name);
  out += "]},\"scopeSpans\":[{\"scope\":{\"name\":\"akt\"},\"spans\":[";
  for (std::size_t i = from; i < to; ++i) {
    const span_data& s = spans[i];
    if (i != from) out += ',';
    out += "{\"traceId\":\"" + s.trace_id_hex() + "\",\"spanId\":\"" + s.span_id_hex() + "\"";
    if (s.parent_span_id != 0) out += ",\"parentSpanId\":\"" + s.parent_span_id_hex() + "\"";
    out += ",\"name\":";
    put_json_string(out, s.name);
    out += ",\"kind\":" + std::to_string(static_cast<int>(s.kind));
    out += ",\"startTimeUnixNano\":\"" + std::to_string(s.start_unix_ns) + "\"";
    out += ",\"endTimeUnixNano\":\"" + std::to_string(s.end_unix_ns) + "\"";
    out += ",\"attributes\":[";
    for (std::size_t a = 0; a < s.attributes.size(); ++a) {
      if (a != 0) out += ',';
      put_attribute(out, s.attributes[a].first, s.attributes[a].second);
    }
    out += "],\"status\":{\"code\":";
    out += s.error ? "2" : "0";
    out += "}}";
  }
  out += "]}]}]}";
  return out;
}

}  // namespace detail

// ---- the user's API ----

trace_scope::trace_scope(actor_system& sys, std::string_view name) { begin(sys, name, nullptr); }

trace_scope::trace_scope(actor_system& sys, std::string_view name, const span_context& parent) {
  begin(sys, name, parent.valid() ? &parent : nullptr);
}

void trace_scope::begin(actor_system& sys, std::string_view name, const span_context* parent) {
  detail::tracer* t = detail::core_of(sys)->tracer();
  if (t == nullptr) return;
  ctx_.trace_id = parent != nullptr ? parent->trace_id : detail::tracer::new_trace_id();
  ctx_.span_id = detail::tracer::new_span_id();
  ctx_.flags = span_context::k_trace_sampled;
  parent_span_ = parent != nullptr ? parent->span_id : 0;
  name_ = std::string(name);
  start_ns_ = detail::unix_now_ns();
  detail::trace_frame*& cur = detail::current_trace_frame();
  auto* f = new detail::trace_frame{ctx_, t, cur};
  cur = f;
  frame_ = f;
  tracer_ = t;
}

trace_scope::~trace_scope() {
  if (tracer_ == nullptr) return;
  auto* f = static_cast<detail::trace_frame*>(frame_);
  detail::current_trace_frame() = f->prev;
  delete f;
  span_data s;
  s.trace_id = ctx_.trace_id;
  s.span_id = ctx_.span_id;
  s.parent_span_id = parent_span_;
  s.name = std::move(name_);
  s.kind = span_kind::internal;
  s.start_unix_ns = start_ns_;
  s.end_unix_ns = detail::unix_now_ns();
  auto* t = static_cast<detail::tracer*>(tracer_);
  s.attributes.emplace_back("akt.node", t->node());
  t->finish(std::move(s));
}

span_context trace_scope::context() const noexcept { return ctx_; }

std::optional<span_context> current_trace_context() noexcept {
  const detail::trace_frame* f = detail::current_trace_frame();
  if (f == nullptr) return std::nullopt;
  return f->ctx;
}

std::string current_trace_id() {
  const detail::trace_frame* f = detail::current_trace_frame();
  return f == nullptr ? std::string() : f->ctx.trace_id_hex();
}

}  // namespace akt

// ---- the handler span (the turn's traced branch) ----

namespace akt::detail {

namespace {
// The span name of an actor: its C++ type, demangled once per type and thread.
std::string actor_kind(const actor* a) {
  thread_local std::unordered_map<const std::type_info*, std::string> names;
  const std::type_info& t = typeid(*a);
  auto it = names.find(&t);
  if (it != names.end()) return it->second;
  int status = 0;
  char* d = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string name = (status == 0 && d != nullptr) ? d : t.name();
  std::free(d);
  return names.emplace(&t, std::move(name)).first->second;
}
}  // namespace

void actor_cell::invoke_traced(receive_context& env) noexcept {
  tracer* t = system_->tracer();
  trace_state* ts = context_access::trace(env);
  if (t == nullptr || ts == nullptr) {
    invoke(env);
    return;
  }
  // Copied out: the handler may move the message (and its trace) into the stash.
  const trace_state in = *ts;
  trace_frame frame{span_context{in.ctx.trace_id, tracer::new_span_id(), in.ctx.flags}, t,
                    current_trace_frame()};
  const bool encoded = (context_access::flags(env) & envelope::flag_encoded) != 0;
  std::string_view type = encoded ? std::string_view() : env.message().type_name();
  current_trace_frame() = &frame;
  handler_failed_here() = false;
  const std::int64_t start = unix_now_ns();
  invoke(env);
  const std::int64_t end = unix_now_ns();
  current_trace_frame() = frame.prev;
  if (encoded) type = env.message().type_name();  // decoded by invoke (unless moved away)
  try {
    span_data s;
    s.trace_id = in.ctx.trace_id;
    s.span_id = frame.ctx.span_id;
    s.parent_span_id = in.server_span != 0 ? in.server_span : in.ctx.span_id;
    if (grain_) {
      const std::string_view p = path_;
      s.name = std::string(p.substr(0, p.find('/')));
    } else {
      s.name = instance() != nullptr ? actor_kind(instance()) : std::string(name());
    }
    s.kind = span_kind::internal;
    s.start_unix_ns = start;
    s.end_unix_ns = end;
    s.error = handler_failed_here();
    s.attributes.reserve(3);
    s.attributes.emplace_back("akt.node", t->node());
    s.attributes.emplace_back(grain_ ? "akt.grain.identity" : "akt.actor.path", std::string(path_));
    s.attributes.emplace_back("akt.message.type", type.empty() ? "unknown" : std::string(type));
    if (in.server_span != 0) {
      span_data server;
      server.trace_id = in.ctx.trace_id;
      server.span_id = in.server_span;
      server.parent_span_id = in.ctx.span_id;
      server.name = "receive " + s.name;
      server.kind = span_kind::server;
      server.start_unix_ns = in.server_start_ns;
      server.end_unix_ns = end;
      server.error = s.error;
      server.attributes = s.attributes;
      t->finish(std::move(server));
    }
    t->finish(std::move(s));
  } catch (...) {  // an allocation: the span is lost, the message was handled
  }
}

}  // namespace akt::detail
