// The fault-injecting TCP proxy (include/akt/testkit/tcp_proxy.hpp).
//
// Everything below runs on the proxy's I/O thread, except the public members, which post a
// job there and wait for it (run_on_io), and stats()/mode(), which read atomics.
//
// A connection is a `link`: the accepted client socket, the socket to the target and two
// `lane`s, client -> target (up) and target -> client (down). A lane reads its source into a
// queue of chunks, each with the time it may leave (read time + the delay then in force), and a
// pump writes the queue's head to the lane's destination when the mode allows and the time has
// come (a timer waits for it otherwise). An end of stream is queued as a chunk too, so a FIN
// keeps its place behind the bytes before it and is held by a blackhole like them.

#include "akt/testkit/tcp_proxy.hpp"

#include <asio.hpp>

#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "akt/core/assert.hpp"

namespace akt::testkit {

namespace {

using asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

// Closes a socket so that its peer sees RST (SO_LINGER on, 0 s) or plainly.
void close_socket(tcp::socket& s, bool rst) {
  std::error_code ec;
  if (!s.is_open()) return;
  if (rst) s.set_option(asio::socket_base::linger(true, 0), ec);
  s.close(ec);
}

}  // namespace

struct tcp_proxy::impl {
  struct link;

  struct chunk {
    clock_type::time_point due;
    std::vector<char> bytes;  // empty: the source's end of stream
  };

  // One direction of a link.
  struct lane {
    lane(asio::io_context& io, tcp::socket& from, tcp::socket& to, bool up)
        : source(from), sink(to), timer(io), up(up) {}
    tcp::socket& source;
    tcp::socket& sink;
    asio::steady_timer timer;
    const bool up;  // client -> target
    std::vector<char> buffer = std::vector<char>(tcp_proxy_limits::read_chunk);
    std::deque<chunk> queue;
    std::size_t held = 0;  // bytes in queue
    bool reading = false, writing = false, timing = false;
    bool source_ended = false;  // end of stream read (queued)
    bool sink_ended = false;    // end of stream written (shutdown(send) done)
  };

  struct link : std::enable_shared_from_this<link> {
    explicit link(asio::io_context& io, tcp::socket accepted)
        : client(std::move(accepted)),
          target(io),
          resolver(io),
          up(io, client, target, true),
          down(io, target, client, false) {}
    tcp::socket client, target;
    tcp::resolver resolver;
    lane up, down;
    std::string target_host;
    std::uint16_t target_port = 0;
    bool connecting = false, connected = false, closed = false;
  };

  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::uint16_t port = 0;

  // I/O thread only.
  tcp_proxy_mode mode_now = tcp_proxy_mode::pass;
  std::chrono::nanoseconds delay_now{0};
  std::string target_host;
  std::uint16_t target_port = 0;
  std::map<link*, std::shared_ptr<link>> links;
  bool stopping = false;

  // Mirror of mode_now for mode(). Writer: the I/O thread (set_mode); readers: any thread;
  // relaxed: it publishes nothing else, and the switch that wrote it has returned before a
  // caller that made it reads it.
  std::atomic<tcp_proxy_mode> mode_seen{tcp_proxy_mode::pass};
  // Counters (tcp_proxy_stats). Writer: the I/O thread; readers: stats(), any thread; relaxed:
  // each is a count on its own, nothing is published with it.
  std::atomic<std::uint64_t> accepted{0}, open{0}, resets{0};
  std::atomic<std::uint64_t> from_clients{0}, to_target{0}, from_target{0}, to_clients{0};

  void count(std::atomic<std::uint64_t>& c, std::uint64_t n) {
    c.fetch_add(n, std::memory_order_relaxed);
  }

  // Runs fn on the I/O thread and waits for it. Never from the I/O thread itself.
  void run_on_io(std::function<void()> fn) {
    AKT_ASSERT(std::this_thread::get_id() != thread.get_id());
    std::promise<void> done;
    auto finished = done.get_future();
    asio::post(io, [&] {
      fn();
      done.set_value();
    });
    finished.wait();
  }

  // ---- accepting ----

  void accept() {
    acceptor.async_accept([this](std::error_code ec, tcp::socket s) {
      if (stopping || !acceptor.is_open()) return;
      if (!ec) on_accepted(std::move(s));
      accept();  // an accept error (EMFILE, a peer gone) drops that one connection only
    });
  }

  void on_accepted(tcp::socket s) {
    count(accepted, 1);
    if (mode_now == tcp_proxy_mode::reset || target_port == 0) {
      count(resets, 1);  // before the RST its client may see
      close_socket(s, true);
      return;
    }
    std::error_code ec;
    s.set_option(tcp::no_delay(true), ec);
    auto l = std::make_shared<link>(io, std::move(s));
    l->target_host = target_host;
    l->target_port = target_port;
    links.emplace(l.get(), l);
    count(open, 1);
    read(l, l->up);  // held until the target is connected
    if (mode_now != tcp_proxy_mode::blackhole) connect(l);
  }

  void connect(const std::shared_ptr<link>& l) {
    if (l->closed || l->connecting || l->connected) return;
    l->connecting = true;
    l->resolver.async_resolve(
        l->target_host, std::to_string(l->target_port),
        [this, l](std::error_code ec, const tcp::resolver::results_type& results) {
          if (l->closed) return;
          if (ec) {
            close(l, true);
            return;
          }
          asio::async_connect(l->target, results, [this, l](std::error_code ec2, const auto&) {
            if (l->closed) return;
            l->connecting = false;
            if (ec2) {  // as if the target refused: the client sees RST
              close(l, true);
              return;
            }
            std::error_code ignored;
            l->target.set_option(tcp::no_delay(true), ignored);
            l->connected = true;
            read(l, l->down);
            pump(l, l->up);
          });
        });
  }

  // ---- a lane: reading ----

  void read(const std::shared_ptr<link>& l, lane& ln) {
    if (l->closed || ln.reading || ln.source_ended) return;
    if (ln.held >= tcp_proxy_limits::max_held_bytes) return;  // pump() reads again
    ln.reading = true;
    ln.source.async_read_some(
        asio::buffer(ln.buffer), [this, l, &ln](std::error_code ec, std::size_t n) {
          ln.reading = false;
          if (l->closed) return;
          const auto due = clock_type::now() + delay_now;
          if (ec == asio::error::eof) {
            ln.source_ended = true;
            ln.queue.push_back(chunk{due, {}});
            pump(l, ln);
            return;
          }
          if (ec) {  // the source failed (RST, error): so does the other side
            close(l, true);
            return;
          }
          count(ln.up ? from_clients : from_target, n);
          ln.queue.push_back(
              chunk{due, std::vector<char>(ln.buffer.begin(),
                                           ln.buffer.begin() + static_cast<std::ptrdiff_t>(n))});
          ln.held += n;
          pump(l, ln);
          read(l, ln);
        });
  }

  // ---- a lane: writing ----

  void pump(const std::shared_ptr<link>& l, lane& ln) {
    if (l->closed || ln.writing || ln.queue.empty() || !l->connected) return;
    if (mode_now == tcp_proxy_mode::blackhole || mode_now == tcp_proxy_mode::reset) return;
    chunk& head = ln.queue.front();
    const auto now = clock_type::now();
    if (head.due > now) {
      if (ln.timing) return;  // armed for this head already
      ln.timing = true;
      ln.timer.expires_at(head.due);
      ln.timer.async_wait([this, l, &ln](std::error_code) {
        ln.timing = false;
        pump(l, ln);
      });
      return;
    }
    if (head.bytes.empty()) {  // the end of stream
      ln.queue.pop_front();
      std::error_code ec;
      ln.sink.shutdown(tcp::socket::shutdown_send, ec);
      ln.sink_ended = true;
      if (l->up.sink_ended && l->down.sink_ended) close(l, false);
      return;
    }
    ln.writing = true;
    asio::async_write(ln.sink, asio::buffer(head.bytes),
                      [this, l, &ln](std::error_code ec, std::size_t n) {
                        ln.writing = false;
                        if (l->closed) return;
                        if (ec) {
                          close(l, true);
                          return;
                        }
                        count(ln.up ? to_target : to_clients, n);
                        ln.held -= ln.queue.front().bytes.size();
                        ln.queue.pop_front();
                        pump(l, ln);
                        read(l, ln);  // when it had stopped at the limit
                      });
  }

  // ---- closing ----

  void close(const std::shared_ptr<link>& l, bool rst) {
    if (l->closed) return;
    l->closed = true;
    l->resolver.cancel();
    l->up.timer.cancel();
    l->down.timer.cancel();
    // Counted before the sockets close, so a test that saw the close sees the counts.
    if (rst) count(resets, 1);
    open.fetch_sub(1, std::memory_order_relaxed);
    close_socket(l->client, rst);
    close_socket(l->target, rst);
    // The queues stay until the link is freed: an aborted write may still name its chunk.
    links.erase(l.get());  // pending handlers hold their own reference
  }

  void close_all(bool rst) {
    std::vector<std::shared_ptr<link>> all;
    all.reserve(links.size());
    for (auto& [p, l] : links) all.push_back(l);
    for (auto& l : all) close(l, rst);
  }

  // ---- modes ----

  void set_mode(tcp_proxy_mode m, std::chrono::nanoseconds d) {
    mode_now = m;
    delay_now = d;
    mode_seen.store(m, std::memory_order_relaxed);
    if (m == tcp_proxy_mode::reset) {
      close_all(true);
      return;
    }
    if (m == tcp_proxy_mode::blackhole) return;
    std::vector<std::shared_ptr<link>> all;
    all.reserve(links.size());
    for (auto& [p, l] : links) all.push_back(l);
    for (auto& l : all) {
      connect(l);
      pump(l, l->up);
      pump(l, l->down);
    }
  }
};

tcp_proxy::tcp_proxy(std::string target_host, std::uint16_t target_port)
    : impl_(std::make_unique<impl>()) {
  impl& s = *impl_;
  s.target_host = std::move(target_host);
  s.target_port = target_port;
  const tcp::endpoint where(asio::ip::make_address("127.0.0.1"), 0);
  s.acceptor.open(where.protocol());  // these throw std::system_error
  s.acceptor.bind(where);
  s.acceptor.listen();
  s.port = s.acceptor.local_endpoint().port();
  s.accept();
  s.thread = std::thread([&s] { s.io.run(); });
}

tcp_proxy::~tcp_proxy() {
  impl& s = *impl_;
  s.run_on_io([&s] {
    s.stopping = true;
    std::error_code ec;
    s.acceptor.close(ec);
    s.close_all(false);
  });
  // Every socket and timer is closed: their handlers complete (aborted) and run() returns.
  s.thread.join();
}

std::uint16_t tcp_proxy::port() const noexcept { return impl_->port; }

std::string tcp_proxy::address() const { return "127.0.0.1:" + std::to_string(impl_->port); }

void tcp_proxy::set_target(std::string host, std::uint16_t port) {
  impl& s = *impl_;
  s.run_on_io([&s, &host, port] {
    s.target_host = std::move(host);
    s.target_port = port;
  });
}

void tcp_proxy::pass() {
  impl& s = *impl_;
  s.run_on_io([&s] { s.set_mode(tcp_proxy_mode::pass, {}); });
}

void tcp_proxy::blackhole() {
  impl& s = *impl_;
  s.run_on_io([&s] { s.set_mode(tcp_proxy_mode::blackhole, {}); });
}

void tcp_proxy::reset() {
  impl& s = *impl_;
  s.run_on_io([&s] { s.set_mode(tcp_proxy_mode::reset, {}); });
}

void tcp_proxy::delay(std::chrono::nanoseconds d) {
  AKT_ASSERT(d.count() >= 0);
  impl& s = *impl_;
  s.run_on_io(
      [&s, d] { s.set_mode(d.count() == 0 ? tcp_proxy_mode::pass : tcp_proxy_mode::delay, d); });
}

tcp_proxy_mode tcp_proxy::mode() const { return impl_->mode_seen.load(std::memory_order_relaxed); }

tcp_proxy_stats tcp_proxy::stats() const {
  const impl& s = *impl_;
  auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  tcp_proxy_stats out;
  out.accepted = get(s.accepted);
  out.open = get(s.open);
  out.reset = get(s.resets);
  out.bytes_from_clients = get(s.from_clients);
  out.bytes_to_target = get(s.to_target);
  out.bytes_from_target = get(s.from_target);
  out.bytes_to_clients = get(s.to_clients);
  return out;
}

}  // namespace akt::testkit
