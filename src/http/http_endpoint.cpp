// The http module's extension of a system (actor/http_hooks.hpp): a cpp-httplib server on
// threads of its own that answers /metrics, /health, /ready, /api/... and the dashboard. The
// library stays in this file: no header of akt includes it.

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "actor/http_hooks.hpp"
#include "actor/system_core.hpp"
#include "akt/http/http.hpp"
#include "akt/metrics/prometheus.hpp"
#include "akt/metrics/registry.hpp"
#include "http/api.hpp"

namespace akt::http::detail {

extern const char k_dashboard_html[];  // generated from src/http/dashboard.html

namespace {

// What a route answers: its body and content type, and its status.
struct answer {
  int status = 200;
  std::string body;
  const char* type = "text/plain; charset=utf-8";
};

enum class route : unsigned char {
  none,
  dashboard,
  metrics,
  health,
  ready,
  node,
  cluster,
  peers,
  grains,
  overview,
  history,
  member
};

route route_of(std::string_view path) {
  if (path == "/" || path == "/index.html") return route::dashboard;
  if (path == "/metrics") return route::metrics;
  if (path == "/health") return route::health;
  if (path == "/ready") return route::ready;
  if (path == "/api/node") return route::node;
  if (path == "/api/cluster") return route::cluster;
  if (path == "/api/peers") return route::peers;
  if (path == "/api/grains") return route::grains;
  if (path == "/api/overview") return route::overview;
  if (path == "/api/history") return route::history;
  if (path == "/api/member") return route::member;
  return route::none;
}

// The most of a member's answer that /api/member relays: /api/node is a few hundred bytes,
// /api/history about 50 per sample (15 KB for the default 300); a member answering more than
// this is refused rather than held in memory.
constexpr std::size_t k_member_answer_limit = 256 * 1024;
// How long /api/member waits for a member's endpoint to accept and to answer: what one page
// refresh can hold a serving thread for when a member is down or stalled.
constexpr std::chrono::milliseconds k_member_connect_timeout{500};
constexpr std::chrono::milliseconds k_member_answer_timeout{1000};

// httplib takes seconds and microseconds.
std::pair<time_t, time_t> sec_usec(std::chrono::milliseconds d) {
  const auto ms = std::max<std::int64_t>(d.count(), 1);
  return {static_cast<time_t>(ms / 1000), static_cast<time_t>((ms % 1000) * 1000)};
}

// The endpoint.
//
// Contract (see actor/http_hooks.hpp for who calls what):
// - Threads: one accepting thread (listen_after_bind), http_config::threads serving threads
//   (httplib's pool) and one sampler thread (history_ when it keeps samples), all the endpoint's
//   own; handlers and the sampler call only what any thread may call on the system.
// - Progress: a request blocks its serving thread while it reads the system's figures (the locks
//   of stats(), peers(), membership and the grain directory, held briefly), never a dispatcher
//   worker; a slow client holds one serving thread up to read_timeout / write_timeout.
// - Lifetime: close() stops the listener and joins every thread before stop() goes on; the
//   system's parts the handlers read outlive it.
// - Memory: per request, its parsed form and its answer; connections wait in httplib's queue
//   while every serving thread is busy.
class http_endpoint final : public akt::detail::http_extension {
 public:
  http_endpoint(akt::detail::system_core* core, actor_system& sys, http_config cfg)
      : core_(core),
        sys_(sys),
        cfg_(std::move(cfg)),
        history_(cfg_.history_samples, cfg_.history_interval) {}

  ~http_endpoint() override {
    std::vector<std::string> ignored;
    close(ignored);
  }

  result<void> start() {
    if (cfg_.threads == 0) return error(errc::invalid_argument, "http.threads: at least 1");
    if (cfg_.max_request_bytes == 0)
      return error(errc::invalid_argument, "http.max_request_bytes: at least 1");
    if (cfg_.history_samples > 0 && cfg_.history_interval.count() <= 0)
      return error(errc::invalid_argument, "http.history_interval: at least 1 ms");
    configure();
    const int port = cfg_.port == 0 ? server_.bind_to_any_port(cfg_.bind_address)
                                    : (server_.bind_to_port(cfg_.bind_address, cfg_.port)
                                           ? static_cast<int>(cfg_.port)
                                           : -1);
    if (port <= 0) {
      return error(errc::invalid_argument,
                   "http: cannot bind " + cfg_.bind_address + ":" + std::to_string(cfg_.port));
    }
    port_.store(static_cast<std::uint16_t>(port), std::memory_order_release);
    listener_ = std::thread([this] { (void)server_.listen_after_bind(); });
    if (cfg_.history_samples > 0) sampler_ = std::thread([this] { sample_loop(); });
    // httplib's stop() does nothing before its accept loop marked itself running, which it does
    // just before it asks for its task queue (new_task_queue, below): wait for that, so that a
    // stop right after start still ends the loop.
    std::unique_lock<std::mutex> lock(mutex_);
    running_cv_.wait(lock, [this] { return running_; });
    return {};
  }

  std::uint16_t port() const noexcept override { return port_.load(std::memory_order_acquire); }

  void begin_stop() noexcept override { stopping_.store(true, std::memory_order_release); }

  void close(std::vector<std::string>&) noexcept override {
    stopping_.store(true, std::memory_order_release);
    if (sampler_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        sampler_stop_ = true;
      }
      sampler_cv_.notify_all();
      sampler_.join();
    }
    if (!listener_.joinable()) return;
    // Closes the listening socket; the accept loop ends and joins the serving threads, each
    // after its connection's current request (bounded by the read and keep-alive timeouts).
    server_.stop();
    listener_.join();
    port_.store(0, std::memory_order_release);
  }

 private:
  // The sampler thread: a sample at once, then one every history_interval until close(). The
  // figures it reads are the ones /api/node reads, under their own locks; the wait is on the
  // endpoint's condition variable, so close() ends it at once.
  void sample_loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!sampler_stop_) {
      lock.unlock();
      history_.add(sample_of(context()));
      lock.lock();
      sampler_cv_.wait_for(lock, cfg_.history_interval, [this] { return sampler_stop_; });
    }
  }

  void configure() {
    server_.new_task_queue = [this]() -> httplib::TaskQueue* {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        running_ = true;
      }
      running_cv_.notify_all();
      return new httplib::ThreadPool(cfg_.threads);
    };
    server_.set_payload_max_length(cfg_.max_request_bytes);
    const auto [rs, ru] = sec_usec(cfg_.read_timeout);
    server_.set_read_timeout(rs, ru);
    const auto [ws, wu] = sec_usec(cfg_.write_timeout);
    server_.set_write_timeout(ws, wu);
    server_.set_keep_alive_timeout(std::max<time_t>(cfg_.keep_alive_timeout.count(), 1));
    // One request per connection. Each connection holds a serving thread while it is open, so a
    // browser's idle keep-alive connections (its earlier page, a speculative preconnect) would
    // hold them all and make the next request wait; and a request whose body no route reads
    // leaves nothing behind to be parsed as the next one. A new connection per request costs
    // a loopback handshake, nothing next to a scrape or a page refresh.
    server_.set_keep_alive_max_count(1);
    server_.set_tcp_nodelay(true);
    server_.set_default_headers(
        {{"Cache-Control", "no-store"}, {"X-Content-Type-Options", "nosniff"}});
    // httplib's default socket options add SO_REUSEPORT, with which a second node binding the
    // same fixed port would share it silently: only SO_REUSEADDR (a restarted node may bind while
    // its old connections linger in TIME_WAIT).
    server_.set_socket_options([](int sock) {
      int yes = 1;
      (void)::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    // Every request is routed here, before httplib's own tables and before it reads a body:
    // httplib itself answers 400 to a request it cannot parse and 414 to a request line over
    // 8 KiB; here an unknown path is 404, a known one with a method other than GET or HEAD 405,
    // and a body announced over max_request_bytes 413. No route takes a body, so none is read
    // (the connection closes after its one request).
    server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      serve(req, res);
      return httplib::Server::HandlerResponse::Handled;
    });
    server_.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          res.status = 500;
          res.set_content("internal error\n", "text/plain; charset=utf-8");
        });
  }

  void serve(const httplib::Request& req, httplib::Response& res) {
    const route r = route_of(req.path);
    const std::string length = req.get_header_value("Content-Length");
    answer a;
    if (!length.empty() && std::strtoull(length.c_str(), nullptr, 10) > cfg_.max_request_bytes) {
      a = {413, "request too large (limit " + std::to_string(cfg_.max_request_bytes) + " bytes)\n"};
    } else if (r == route::none) {
      a = {404, "not found\n"};
    } else if (req.method != "GET" && req.method != "HEAD") {
      a = {405, "method not allowed: " + req.method + "\n"};
      res.set_header("Allow", "GET, HEAD");
    } else if (r == route::member) {
      a = member_answer(req.get_param_value("name"), req.get_param_value("view"));
    } else {
      a = answer_for(r);
    }
    res.status = a.status;
    res.set_content(std::move(a.body), a.type);
  }

  // What a route's answer reads: this system, and the endpoint's own state now.
  api_context context() const {
    return {sys_, core_, started_, port(), stopping_.load(std::memory_order_acquire)};
  }

  answer answer_for(route r) {
    const api_context c = context();
    constexpr const char* json = "application/json";
    switch (r) {
      case route::dashboard:
        return {200, k_dashboard_html, "text/html; charset=utf-8"};
      case route::metrics:
        return {200, metrics::to_prometheus_text(sys_.metrics().collect()),
                metrics::k_prometheus_content_type};
      case route::health:
        return {200, "ok\n"};
      case route::ready: {
        const readiness rd = ready_state(c);
        return {rd.ready ? 200 : 503, std::string(rd.reason) + "\n"};
      }
      case route::node:
        return {200, node_json(c), json};
      case route::cluster:
        return {200, cluster_json(c), json};
      case route::peers:
        return {200, peers_json(c), json};
      case route::grains:
        return {200, grains_json(c), json};
      case route::overview:
        return {200, overview_json(c), json};
      case route::history:
        return {200, history_.json(), json};
      case route::member:
      case route::none:
        break;
    }
    return {404, "not found\n"};
  }

  // /api/member?name=N: member N's /api/node (or, with view=history, its /api/history), so that
  // the page served by one node shows every member's figures without asking another origin.
  // This node answers its own; another member's comes from the endpoint its record names,
  // within the timeouts above, and only when it is a JSON document within the size limit. 400
  // for a missing name or an unknown view, 404 for what is not a member with an endpoint, 502
  // when the member does not answer, or answers something else.
  answer member_answer(const std::string& name, const std::string& view) {
    const api_context c = context();
    constexpr const char* json = "application/json";
    if (name.empty()) return {400, "name: the member's name is missing\n"};
    const bool history = view == "history";
    if (!history && !view.empty() && view != "node")
      return {400, "view: node (the default) or history, not '" + view + "'\n"};
    const member_target t = member_endpoint(c, name);
    if (t.status != 200) return {t.status, t.why + "\n"};
    if (t.self) return {200, history ? history_.json() : node_json(c), json};
    httplib::Client client(t.host, t.port);
    const auto [cs, cu] = sec_usec(k_member_connect_timeout);
    client.set_connection_timeout(cs, cu);
    const auto [rs, ru] = sec_usec(k_member_answer_timeout);
    client.set_read_timeout(rs, ru);
    client.set_write_timeout(rs, ru);
    client.set_keep_alive(false);
    std::string body;
    bool too_large = false;
    httplib::Result res =
        client.Get(history ? "/api/history" : "/api/node", [&](const char* data, std::size_t n) {
          if (body.size() + n > k_member_answer_limit) {
            too_large = true;
            return false;
          }
          body.append(data, n);
          return true;
        });
    const std::string where = "member " + name + " (" + t.host + ":" + std::to_string(t.port) + ")";
    if (too_large) return {502, where + " answered more than the limit\n"};
    if (!res) return {502, where + " did not answer: " + httplib::to_string(res.error()) + "\n"};
    if (res->status != 200)
      return {502, where + " answered status " + std::to_string(res->status) + "\n"};
    if (res->get_header_value("Content-Type").rfind("application/json", 0) != 0 || body.empty() ||
        body.front() != '{')
      return {502, where + " did not answer a JSON document\n"};
    return {200, std::move(body), json};
  }

  akt::detail::system_core* const core_;
  actor_system& sys_;
  const http_config cfg_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  node_history history_;
  httplib::Server server_;
  std::thread listener_;  // start() and close() only (the stopping thread)
  std::thread sampler_;   // start() and close() only
  // The bound port; 0 once closed. Writer: start() and close() (release); readers: port() from
  // any thread (acquire).
  std::atomic<std::uint16_t> port_{0};
  // Set by begin_stop() (release); read by every /ready and /api answer (acquire): a stale read
  // answers "ready" for one more request.
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable running_cv_;
  bool running_ = false;  // guarded by mutex_: the accept loop asked for its task queue
  std::condition_variable sampler_cv_;
  bool sampler_stop_ = false;  // guarded by mutex_: close() ends the sampler
};

result<std::unique_ptr<akt::detail::http_extension>> make(akt::detail::system_core* core,
                                                          actor_system& sys) {
  auto e = std::make_unique<http_endpoint>(core, sys, *core->config_.http);
  if (result<void> r = e->start(); !r) return r.error();
  return std::unique_ptr<akt::detail::http_extension>(std::move(e));
}

const bool factory_installed = (akt::detail::install_http_factory(&make), true);

}  // namespace
}  // namespace akt::http::detail

namespace akt::http {

const char* dashboard_html() noexcept { return detail::k_dashboard_html; }

namespace detail {
bool module_linked() noexcept { return factory_installed; }
}  // namespace detail

}  // namespace akt::http
