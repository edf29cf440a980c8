// io_pool, connection and its implementation stream_connection (transport.hpp,
// stream_connection.hpp). Making connections (TLS contexts, async_connect, listener) is in
// transport_setup.cpp. Inbound bytes are cut into frames by wire.hpp's frame_reader: asio reads
// straight into its buffer and frames are handed to the handler as views, without a copy.

#include "remote/stream_connection.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

namespace akt::remote::detail {

namespace {
// The pool whose thread this is (writer and reader: the thread itself).
thread_local const io_pool* current_pool = nullptr;
}  // namespace

// ---- io_pool ----

struct io_pool::guard {
  asio::executor_work_guard<asio::io_context::executor_type> work;
};

namespace {

// run(), except that after each completion the thread polls (without blocking) for `poll`
// before it blocks again, so that the next event usually finds it awake. Returns when the
// context stops.
void run_polling(asio::io_context& ctx, std::chrono::microseconds poll) {
  while (!ctx.stopped()) {
    if (ctx.poll() != 0) continue;
    const auto until = std::chrono::steady_clock::now() + poll;
    bool ran = false;
    while (!ran && !ctx.stopped() && std::chrono::steady_clock::now() < until) {
      ran = ctx.poll() != 0;
    }
    if (!ran) (void)ctx.run_one();  // nothing came: sleep until something does
  }
}

}  // namespace

io_pool::io_pool(unsigned threads, std::chrono::microseconds poll)
    : context_(std::make_unique<asio::io_context>(static_cast<int>(threads))),
      work_(std::make_unique<guard>(guard{asio::make_work_guard(*context_)})) {
  AKT_ASSERT(threads >= 1);
  threads_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) {
    threads_.emplace_back([this, poll] {
      current_pool = this;
      // A callback that throws (the node's handlers are user-facing code) is logged and the
      // thread goes back to work: one bad callback must not take the transport down.
      for (;;) {
        try {
          if (poll.count() > 0)
            run_polling(*context_, poll);
          else
            context_->run();
          return;
        } catch (const std::exception& e) {
          log(std::string("an I/O callback threw: ") + e.what());
        } catch (...) {
          log("an I/O callback threw a non-exception");
        }
      }
    });
  }
}

io_pool::~io_pool() { stop(); }

void io_pool::stop() {
  AKT_ASSERT(!on_pool_thread());
  std::lock_guard lock(stop_mutex_);
  if (threads_.empty()) return;
  work_.reset();
  context_->stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void io_pool::set_log(std::function<void(std::string_view)> sink) {
  std::lock_guard lock(log_mutex_);
  log_ = std::move(sink);
}

void io_pool::log(std::string_view text) const {
  std::lock_guard lock(log_mutex_);
  if (log_) log_(text);
}

bool io_pool::on_pool_thread() const noexcept { return current_pool == this; }

// ---- connection ----

connection::~connection() = default;

std::uint64_t connection::count_frames(const std::vector<unsigned char>& out, std::size_t from) {
  std::uint64_t frames = 0;
  std::size_t at = from;
  while (at + k_header_bytes <= out.size()) {
    at += k_header_bytes + load_u32(&out[at]);
    ++frames;
  }
  AKT_ASSERT(at == out.size());  // fill() appended whole frames
  return frames;
}

bool connection::send_internal(frame_type type, std::uint64_t correlation) {
  std::unique_lock lock(out_mutex_);
  if (closed_.load(std::memory_order_relaxed)) return false;
  frame_header h;
  h.type = type;
  h.on = lane::control;
  h.correlation = correlation;
  const std::size_t at = pending_.size();
  pending_.resize(at + k_header_bytes);
  encode_header(h, &pending_[at]);
  ++pending_frames_;
  if (writing_) return true;
  writing_ = true;
  lock.unlock();
  request_write();
  return true;
}

void connection::close(const error& why) {
  {
    std::lock_guard lock(out_mutex_);
    if (closed_.load(std::memory_order_relaxed)) return;
    close_reason_ = why;
    closed_.store(true, std::memory_order_release);
  }
  request_close();
}

void connection::abort(const error& why) {
  {
    std::lock_guard lock(out_mutex_);
    if (closed_.load(std::memory_order_relaxed)) return;
    close_reason_ = why;
    reset_on_close_ = true;
    closed_.store(true, std::memory_order_release);
  }
  request_close();
}

void connection::close_after_flush(const error& why) {
  {
    std::lock_guard lock(out_mutex_);
    if (closed_.load(std::memory_order_relaxed) || flush_then_close_) return;
    close_reason_ = why;
    flush_then_close_ = true;
    if (writing_) return;  // the write loop closes once pending_ and the write in flight drain
    closed_.store(true, std::memory_order_release);
  }
  request_close();
}

connection::figures connection::stats() const noexcept {
  constexpr auto r = std::memory_order_relaxed;
  return {frames_out_.load(r), bytes_out_.load(r), writes_.load(r),
          frames_in_.load(r),  bytes_in_.load(r),  reads_.load(r)};
}

void connection::take_leftovers(std::vector<unsigned char>& unsent,
                                std::vector<unsigned char>& uncertain) {
  std::lock_guard lock(out_mutex_);
  unsent = std::exchange(unsent_, {});
  uncertain = std::exchange(uncertain_, {});
}

std::size_t connection::pending_bytes() const {
  std::lock_guard lock(out_mutex_);
  return pending_.size() + in_flight_bytes_;
}

// ---- stream_connection ----

std::string format_endpoint(const tcp::endpoint& ep) {
  const auto address = ep.address();
  std::string host = address.to_string();
  if (address.is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(ep.port());
}

namespace {
std::string peer_of(const tcp::socket& s) {
  std::error_code ec;
  const auto ep = s.remote_endpoint(ec);
  return ec ? std::string() : format_endpoint(ep);
}
}  // namespace

stream_connection::stream_connection(tcp::socket socket, const io_limits& limits)
    : connection(limits, false),
      stream_(std::in_place_index<0>, std::move(socket)),
      endpoint_(peer_of(std::get<0>(stream_))),
      timer_(lowest().get_executor()),
      reader_(limits.max_frame_bytes, limits.read_chunk) {
  direct_fd_ = std::get<0>(stream_).native_handle();
}

stream_connection::stream_connection(tcp::socket socket, std::shared_ptr<asio::ssl::context> ctx,
                                     const io_limits& limits)
    : connection(limits, true),
      ssl_(std::move(ctx)),
      stream_(std::in_place_index<1>, std::move(socket), *ssl_),
      endpoint_(peer_of(std::get<1>(stream_).next_layer())),
      timer_(lowest().get_executor()),
      reader_(limits.max_frame_bytes, limits.read_chunk) {}

stream_connection::~stream_connection() = default;

tcp::socket::lowest_layer_type& stream_connection::lowest() {
  return std::visit([](auto& s) -> tcp::socket::lowest_layer_type& { return s.lowest_layer(); },
                    stream_);
}

void stream_connection::abort_socket() {
  std::error_code ignored;
  std::lock_guard lock(out_mutex_);
  direct_fd_ = -1;
  lowest().close(ignored);
}

void stream_connection::start(std::shared_ptr<handler> h) {
  AKT_ASSERT(h != nullptr);
  const bool was_started = started_.exchange(true, std::memory_order_relaxed);
  AKT_ASSERT(!was_started);
  (void)was_started;
  asio::post(executor(), [self = self(), h = std::move(h)]() mutable { self->do_start(h); });
}

void stream_connection::do_start(std::shared_ptr<handler> h) {
  if (closing_) {  // closed before start: the handler still hears of it, once
    error why;
    {
      std::lock_guard lock(out_mutex_);
      why = close_reason_;
    }
    h->on_closed(*this, why);
    return;
  }
  handler_ = std::move(h);
  last_read_ = std::chrono::steady_clock::now();
  // Bytes that arrived with the TLS accept confirmation are frames already.
  if (!deliver_frames()) return;
  read_next();
}

// An idle plain connection writes on the sending thread: a send() system call that either
// takes everything (the common case for a small frame on an idle socket) or not all of it, the
// rest going by the strand as usual. This saves the hand-off to the I/O thread (a post and a
// wake-up) on every message of an idle connection: each remote round trip had two of them.
// A connection that wrote less than k_direct_gap ago is busy, not idle: its frames go by the
// strand, whose write takes everything that accumulated meanwhile in one system call, so a
// stream of messages never costs a system call each. An urgent frame (a blocked thread waits
// for its answer) skips the gap: such frames come at most one per blocked thread per round
// trip, so they cannot become a system call per message of a stream, and with several blocked
// askers on one connection the gap sent every other ask through the I/O thread (a hand-off on
// each side of the round trip; RemoteAskPairwise lost 15-25 %).
namespace {
constexpr std::int64_t k_direct_gap_ns = 50'000;  // bounds how often direct writes may happen
}

bool stream_connection::write_now_locked(bool urgent) {
  if (direct_fd_ < 0 || pending_.empty() || flush_then_close_) return false;
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  if (!urgent && now - direct_write_ns_.load(std::memory_order_relaxed) < k_direct_gap_ns) {
    return false;
  }
  direct_write_ns_.store(now, std::memory_order_relaxed);  // also for the strand's writes
  const ssize_t n =
      ::send(direct_fd_, pending_.data(), pending_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n <= 0) return false;  // would block, or an error the strand's write will meet and report
  constexpr auto r = std::memory_order_relaxed;
  bytes_out_.fetch_add(static_cast<std::uint64_t>(n), r);
  writes_.fetch_add(1, r);
  if (static_cast<std::size_t>(n) == pending_.size()) {
    frames_out_.fetch_add(pending_frames_, r);
    pending_.clear();
    pending_frames_ = 0;
    return true;
  }
  // Partly written: the rest goes by the strand; its frames are counted when they complete.
  // Note where the frame that was cut ends, for the leftovers of a close. pending_ holds whole
  // frames and `written` is short of its end, so the walk stops inside it, at the frame
  // [at, end) that holds byte `written`.
  const std::size_t written = static_cast<std::size_t>(n);
  std::size_t at = 0;
  std::size_t end = k_header_bytes + load_u32(&pending_[0]);
  while (end <= written) {
    at = end;
    end = at + k_header_bytes + load_u32(&pending_[at]);
  }
  if (at < written) {
    pending_partial_ = end - written;
    // Kept whole until its tail is written: if the connection closes first, the frame is one
    // the peer may or may not have (uncertain), like those of a write in flight.
    cut_frame_.assign(pending_.begin() + static_cast<std::ptrdiff_t>(at),
                      pending_.begin() + static_cast<std::ptrdiff_t>(end));
  } else {
    pending_partial_ = 0;
  }
  pending_.erase(pending_.begin(), pending_.begin() + n);
  return false;
}

void stream_connection::request_write() {
  asio::post(executor(), [self = self()] { self->write_next(); });
}

void stream_connection::request_close() {
  asio::post(executor(), [self = self()] { self->do_close(); });
}

void stream_connection::do_close() {
  if (closing_) return;
  closing_ = true;
  error why;
  {
    std::lock_guard lock(out_mutex_);
    why = close_reason_;
    // What it held goes to the owner (take_leftovers), whole frames only: a write in flight may
    // have arrived; what waited behind it never left.
    // Copied, not moved: an aborted write may still refer to in_flight_'s bytes until it
    // completes, and in_flight_ lives as long as this connection.
    // A frame that a direct write cut, and whose tail has not been written, comes first.
    if (pending_partial_ != 0 || in_flight_partial_ != 0) uncertain_ = std::move(cut_frame_);
    uncertain_.insert(uncertain_.end(),
                      in_flight_.begin() + std::min(in_flight_partial_, in_flight_.size()),
                      in_flight_.end());
    cut_frame_ = {};
    unsent_ = std::move(pending_);
    unsent_.erase(unsent_.begin(), unsent_.begin() + std::min(pending_partial_, unsent_.size()));
    pending_ = {};
    pending_frames_ = 0;
    pending_partial_ = 0;
  }
  ++hb_generation_;
  timer_.cancel();
  std::error_code ignored;
  {
    std::lock_guard lock(out_mutex_);  // no direct write is inside send() past this point
    direct_fd_ = -1;
    if (reset_on_close_) {
      lowest().set_option(asio::socket_base::linger(true, 0), ignored);  // RST, not FIN
    } else {
      lowest().shutdown(tcp::socket::shutdown_both, ignored);
    }
    lowest().close(ignored);
  }
  // Pending reads and writes complete with operation_aborted and find closing_ set.
  if (handler_) {
    auto h = std::move(handler_);  // dropped after the call: breaks a handler->connection cycle
    h->on_closed(*this, why);
  }
}

void stream_connection::write_next() {
  if (closing_) return;
  bool close_now = false;
  {
    std::lock_guard lock(out_mutex_);
    in_flight_bytes_ = 0;
    if (pending_.empty()) {
      writing_ = false;
      if (flush_then_close_ && !closed_.load(std::memory_order_relaxed)) {
        closed_.store(true, std::memory_order_release);
        close_now = true;
      }
    } else {
      in_flight_.swap(pending_);  // pending_ takes the drained buffer back: double buffering
      in_flight_frames_ = pending_frames_;
      pending_frames_ = 0;
      in_flight_partial_ = pending_partial_;
      pending_partial_ = 0;
      in_flight_bytes_ = in_flight_.size();
    }
  }
  if (close_now) {
    do_close();
    return;
  }
  if (in_flight_.empty()) return;
  last_write_ = std::chrono::steady_clock::now();
  // A busy connection: senders keep batching behind this write (write_now_locked).
  direct_write_ns_.store(last_write_.time_since_epoch().count(), std::memory_order_relaxed);
  std::visit(
      [this](auto& s) {
        asio::async_write(
            s, asio::buffer(in_flight_),
            [self = self()](const std::error_code& ec, std::size_t n) { self->on_written(ec, n); });
      },
      stream_);
}

void stream_connection::on_written(const std::error_code& ec, std::size_t n) {
  if (closing_) return;
  if (ec) {
    close(error(errc::connection_lost, "write failed: " + ec.message()));
    return;
  }
  constexpr auto r = std::memory_order_relaxed;
  writes_.fetch_add(1, r);
  bytes_out_.fetch_add(n, r);
  frames_out_.fetch_add(in_flight_frames_, r);
  in_flight_frames_ = 0;
  if (in_flight_partial_ != 0) {  // the tail of a cut frame is out: the frame is whole there
    std::lock_guard lock(out_mutex_);
    cut_frame_ = {};
  }
  in_flight_partial_ = 0;
  in_flight_.clear();
  if (in_flight_.capacity() > std::max(k_keep_capacity, limits_.read_chunk)) {
    std::vector<unsigned char>().swap(in_flight_);
  }
  write_next();
}

void stream_connection::read_next() {
  const std::span<unsigned char> space = reader_.prepare(limits_.read_chunk);
  std::visit(
      [&](auto& s) {
        s.async_read_some(
            asio::buffer(space.data(), space.size()),
            [self = self()](const std::error_code& ec, std::size_t n) { self->on_read(ec, n); });
      },
      stream_);
}

void stream_connection::on_read(const std::error_code& ec, std::size_t n) {
  if (closing_) return;
  if (ec) {
    close(error(errc::connection_lost, ec == asio::error::eof
                                           ? std::string("the peer closed the connection")
                                           : "read failed: " + ec.message()));
    return;
  }
  constexpr auto r = std::memory_order_relaxed;
  reads_.fetch_add(1, r);
  bytes_in_.fetch_add(n, r);
  reader_.commit(n);
  last_read_ = std::chrono::steady_clock::now();
  if (!deliver_frames()) return;
  read_next();
}

bool stream_connection::deliver_frames() {
  reader_.set_max_body(max_frame_bytes_.load(std::memory_order_relaxed));
  for (;;) {
    // close() from a callback, or from another thread, stops delivery at the next frame.
    if (closed_.load(std::memory_order_acquire)) return false;
    frame_header h;
    byte_span body;
    switch (reader_.next(h, body)) {
      case frame_reader::status::partial:
        return true;
      case frame_reader::status::failed:
        close(error(errc::protocol_error, std::string(reader_.failure())));
        return false;
      case frame_reader::status::frame:
        break;
    }
    // body stays valid until the next prepare(), which only read_next() calls.
    frames_in_.fetch_add(1, std::memory_order_relaxed);
    if (h.type == frame_type::ping) {
      send_internal(frame_type::pong, h.correlation);
    } else if (h.type != frame_type::pong) {
      try {
        handler_->on_frame(*this, h, body);
      } catch (const std::exception& e) {
        // A throwing handler is a bug above this layer; it costs its connection, not the
        // process nor the I/O thread (which would otherwise leave this connection unread).
        close(error(errc::handler_failed, std::string("on_frame threw: ") + e.what()));
        return false;
      } catch (...) {
        close(error(errc::handler_failed, "on_frame threw a non-exception"));
        return false;
      }
    }
  }
}

// ---- heartbeat ----

void stream_connection::set_heartbeat(std::chrono::milliseconds interval, unsigned misses) {
  asio::post(executor(), [self = self(), interval, misses] {
    if (self->closing_) return;
    self->hb_interval_ = interval;
    self->hb_misses_ = std::max(1u, misses);
    const auto now = std::chrono::steady_clock::now();
    self->last_read_ = now;  // the silence is counted from here
    self->last_ping_ = now;
    self->arm_heartbeat(++self->hb_generation_);
  });
}

void stream_connection::arm_heartbeat(std::uint64_t generation) {
  if (hb_interval_.count() <= 0) {
    timer_.cancel();
    return;
  }
  // Checking twice per interval keeps both the ping and the verdict within half an interval
  // of their due time.
  const auto tick = std::max(std::chrono::milliseconds(1), hb_interval_ / 2);
  timer_.expires_after(tick);
  timer_.async_wait(
      [self = self(), generation](const std::error_code&) { self->on_heartbeat(generation); });
}

void stream_connection::on_heartbeat(std::uint64_t generation) {
  if (closing_ || generation != hb_generation_) return;  // closed, or re-armed since
  const auto now = std::chrono::steady_clock::now();
  const auto limit = hb_interval_ * hb_misses_;
  if (now - last_read_ >= limit) {
    close(error(errc::node_lost, "no heartbeat for " + std::to_string(limit.count()) + " ms"));
    return;
  }
  // Ping when nothing went out for an interval, and also when nothing came in for one: a peer
  // that only receives (connections carry data one way) answers pings, and its pongs are
  // what keeps a busy sender from declaring it lost. At most one ping per interval.
  const auto direct = std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(direct_write_ns_.load(std::memory_order_relaxed)));
  const auto wrote = std::max(last_write_, direct);
  if ((now - wrote >= hb_interval_ || now - last_read_ >= hb_interval_) &&
      now - last_ping_ >= hb_interval_) {
    last_ping_ = now;
    send_internal(frame_type::ping, ++ping_sequence_);
  }
  arm_heartbeat(generation);
}

// ---- TLS setup ----

void stream_connection::handshake_server(std::chrono::milliseconds timeout,
                                         std::function<void(error)> done) {
  asio::post(executor(), [self = self(), timeout, done = std::move(done)]() mutable {
    self->timer_.expires_after(timeout);
    self->timer_.async_wait([self](const std::error_code& ec) {
      if (!ec && !self->handshake_done_) self->abort_socket();
    });
    std::get<tls_stream>(self->stream_)
        .async_handshake(asio::ssl::stream_base::server, [self, timeout, done = std::move(done)](
                                                             const std::error_code& ec) {
          const bool timed_out = !self->lowest().is_open();
          self->handshake_done_ = true;
          self->timer_.cancel();
          if (!ec) return done({});
          done(error(errc::protocol_error, timed_out ? "TLS handshake not done within " +
                                                           std::to_string(timeout.count()) + " ms"
                                                     : "TLS handshake failed: " + ec.message()));
        });
  });
}

void stream_connection::handshake_client(const std::string& host, bool verify_name,
                                         std::function<void(error)> done) {
  asio::post(executor(), [self = self(), host, verify_name, done = std::move(done)]() mutable {
    auto& s = std::get<tls_stream>(self->stream_);
    std::error_code ignored;
    if (verify_name) s.set_verify_callback(asio::ssl::host_name_verification(host), ignored);
    // SNI for a name (not for an address literal): lets a server pick its certificate.
    asio::ip::make_address(host, ignored);
    if (ignored) SSL_set_tlsext_host_name(s.native_handle(), host.c_str());
    s.async_handshake(asio::ssl::stream_base::client, [self, done = std::move(done)](
                                                          const std::error_code& ec) mutable {
      self->handshake_done_ = true;
      if (ec) {
        return done(error(errc::protocol_error, "TLS handshake failed: " + ec.message()));
      }
      self->await_confirmation(std::move(done));
    });
  });
}

void stream_connection::await_confirmation(std::function<void(error)> done) {
  frame_header h;
  byte_span body;
  switch (reader_.next(h, body)) {
    case frame_reader::status::failed:
      return done(error(errc::protocol_error, "the server did not confirm the TLS connection: " +
                                                  std::string(reader_.failure())));
    case frame_reader::status::frame:
      if (h.type != frame_type::pong || h.correlation != k_tls_accepted || !body.empty()) {
        return done(error(errc::protocol_error, "the server did not confirm the TLS connection"));
      }
      // What follows the confirmation stays in the reader: the peer's first frames, for start().
      frames_in_.fetch_add(1, std::memory_order_relaxed);
      return done({});
    case frame_reader::status::partial:
      break;
  }
  const std::span<unsigned char> space = reader_.prepare(limits_.read_chunk);
  std::get<tls_stream>(stream_).async_read_some(
      asio::buffer(space.data(), space.size()),
      [self = self(), done = std::move(done)](const std::error_code& ec, std::size_t n) mutable {
        if (ec) {
          // The server refused this client (its certificate) with an alert, or went away.
          return done(error(errc::protocol_error,
                            ec == asio::error::eof || ec == asio::ssl::error::stream_truncated
                                ? std::string("the server closed the connection during the TLS "
                                              "handshake")
                                : "TLS handshake refused: " + ec.message()));
        }
        self->reads_.fetch_add(1, std::memory_order_relaxed);
        self->bytes_in_.fetch_add(n, std::memory_order_relaxed);
        self->reader_.commit(n);
        self->await_confirmation(std::move(done));
      });
}

}  // namespace akt::remote::detail
