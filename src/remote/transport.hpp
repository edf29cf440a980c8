#pragma once
// The transport of the remote module: TCP (optionally TLS) connections that carry frames
// (frame.hpp), independent of actors. The node logic (associations, handshake, routing) sits
// on top of this API; nothing here knows what a frame's body means, except ping and pong,
// which a connection answers and consumes itself.
//
// Pieces:
//   io_pool     threads running one asio::io_context; every completion below runs on them.
//   connection  one socket: frames in through a handler, whole frames out through send(),
//               batched without timers, with heartbeats.
//   async_connect / listener  make connections, with TLS and mutual TLS when asked.
//
// Lifetime rule for all of them: the io_pool outlives every listener and every connection the
// caller holds (destroy those first), as with any asio I/O object.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "akt/core/assert.hpp"
#include "akt/core/error.hpp"
#include "akt/core/result.hpp"
#include "remote/frame.hpp"

namespace asio {
class io_context;
}

namespace akt::remote::detail {

struct tls_settings {
  bool enabled = false;
  std::string certificate_file, private_key_file, ca_file;  // PEM
  // Mutual TLS: the listener refuses a client without a certificate signed by ca_file. A
  // client always verifies the server's chain (against ca_file, or the system's CAs when
  // ca_file is empty) and presents certificate_file when it is set.
  bool require_peer_certificate = false;
  // Client side: also check that the server's certificate names the host that was dialled
  // (SAN DNS or IP). Off by default: cluster nodes are usually reached by addresses their
  // certificates do not list, and the private CA is the trust boundary.
  bool verify_peer_name = false;
};

struct io_limits {
  std::uint32_t max_frame_bytes = 4u << 20;   // a larger header length closes the connection
  std::size_t read_chunk = 64u << 10;         // bytes per read
  std::size_t max_pending_bytes = 64u << 20;  // outbound bytes buffered before send() refuses
  // Bounds how long an accepted socket may take to finish its TLS handshake before it is
  // dropped, so a peer that connects and stays silent cannot hold a socket for ever.
  std::chrono::milliseconds handshake_timeout{10000};
};

// Threads running one asio::io_context.
//
// Contract: constructed and destroyed by one owner thread; context(), set_log() and log() may
// be called from any thread; stop() from any thread except one of the pool's own (it joins
// them; asserted). Threads run until stop(): the context keeps a work guard, so an idle pool
// waits instead of returning. Memory: one std::thread per requested thread.
class io_pool {
 public:
  // threads >= 1. poll > 0: after its last completion a thread polls for that long before it
  // blocks in the kernel (remote_config::io_poll).
  explicit io_pool(unsigned threads, std::chrono::microseconds poll = {});
  ~io_pool();  // stop() + join
  io_pool(const io_pool&) = delete;
  io_pool& operator=(const io_pool&) = delete;

  asio::io_context& context() noexcept { return *context_; }
  void stop();  // idempotent; pending completions are dropped, not run

  // Where this layer reports what it does not return to anyone: a failed TLS handshake on an
  // accepted socket, a dropped accept. Called on an I/O thread; must not block. Empty: silent.
  void set_log(std::function<void(std::string_view)> sink);
  void log(std::string_view text) const;

  // Whether the calling thread is one of this pool's.
  bool on_pool_thread() const noexcept;

 private:
  std::unique_ptr<asio::io_context> context_;
  struct guard;
  std::unique_ptr<guard> work_;  // keeps run() from returning while idle; reset by stop()
  std::vector<std::thread> threads_;
  std::mutex stop_mutex_;  // one stop() joins; later ones find threads_ empty
  mutable std::mutex log_mutex_;
  std::function<void(std::string_view)> log_;  // guarded by log_mutex_
};

// One TCP or TLS connection carrying frames.
//
// Contract:
// - send(), close(), close_after_flush(), set_heartbeat(), open(), stats(), pending_bytes(),
//   remote_endpoint() and tls() may be called from any thread, concurrently. start() once,
//   from any thread.
// - The handler's callbacks run on an I/O thread, one at a time per connection (a strand),
//   and must not block. on_closed runs exactly once if start() was called, after which
//   on_frame is never called again; a connection whose io_pool stops first gets no callback.
//   An exception from on_frame closes that connection with handler_failed.
// - Ordering: frames go out in the order their send() calls took the write lock, and are
//   delivered to on_frame in the order they arrived.
// - Progress: send() takes a mutex for the duration of fill() only (no I/O under it, no
//   waiting for the socket); it never blocks on the peer: a full window is an error value.
// - Memory: outbound, a pending buffer (below max_pending_bytes plus the last accepted send)
//   and the buffer being written, each released when it empties with a capacity above
//   k_keep_capacity; inbound, wire.hpp's frame_reader: one read_chunk, grown to hold one
//   whole frame of at most max_frame_bytes plus one read, shrunk back once that frame went.
// - Lifetime: callbacks and pending operations hold the connection (shared_from_this); the
//   connection holds the handler until on_closed has run, then drops it, so a handler may
//   hold its connection without a leak.
class connection : public std::enable_shared_from_this<connection> {
 public:
  struct handler {  // callbacks run on an I/O thread; must not block
    virtual ~handler() = default;
    // body is valid during the call only; never called for ping/pong (handled inside).
    virtual void on_frame(connection& c, const frame_header& h,
                          std::span<const unsigned char> body) = 0;
    virtual void on_closed(connection& c, const error& why) = 0;  // exactly once, then no on_frame
  };

  struct figures {
    std::uint64_t frames_out, bytes_out, writes, frames_in, bytes_in, reads;
  };  // writes/reads = completed socket operations

  virtual ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Begins reading (call once). A connection closed before start() reports on_closed at start.
  virtual void start(std::shared_ptr<handler> h) = 0;

  // Appends whole frames to the outbound buffer: fill(std::vector<unsigned char>& out) appends
  // one or more complete frames (header + body) and runs under the write lock, so keep it
  // short. If no write is in flight one is started on the I/O thread; while one is, producers
  // only append, and its completion writes everything that accumulated in one system call
  // (batching without timers). Returns ok, window_full (buffered bytes, pending and in flight,
  // at or above max_pending_bytes: nothing appended, fill not called) or connection_lost
  // (closed, or closing after a flush). If fill throws, what it appended is removed.
  // `urgent`: a thread sleeps until the peer answers this frame (reply_route::caller_blocked),
  // so an idle connection writes it on the calling thread even right after another write (see
  // write_now_locked); at most one such write per blocked thread per round trip.
  template <class F>
  error send(F&& fill, bool urgent = false);

  // Closes at once (buffered frames are dropped); idempotent, any thread. on_closed(why) runs
  // once, on an I/O thread. The first reason wins.
  void close(const error& why);
  // Refuses further sends, writes out everything already buffered, then closes with why (as
  // close() does). For a last frame (a rejection) that must reach the peer before the close.
  // (If bytes from the peer are still unread at the close, the kernel resets the connection,
  // and the peer may lose what it had not read yet: use it where the peer waits for an answer.)
  void close_after_flush(const error& why);
  // As close(), but the socket is reset (SO_LINGER 0, no FIN): the peer sees ECONNRESET, as
  // from a killed process (akt::testkit::crash).
  void abort(const error& why);
  bool open() const noexcept { return !closed_.load(std::memory_order_acquire); }

  // Liveness: when nothing was written for `interval`, or nothing received for `interval`,
  // send a ping (at most one per interval: a busy sender whose peer only receives still gets
  // pongs back); when nothing (any bytes, pongs included) was received for interval * misses,
  // close with node_lost ("no heartbeat for N ms"). The clock is checked every interval / 2.
  // Pings from the peer are answered with pongs whether or not this is set. An interval of
  // zero turns the heartbeat off. Any thread; takes effect on the I/O thread. A ping queues
  // behind the bytes already buffered, so interval * misses must exceed the time to drain
  // max_pending_bytes to the peer.
  virtual void set_heartbeat(std::chrono::milliseconds interval, unsigned misses) = 0;

  // Raises or lowers the largest body accepted from the peer (after a handshake negotiated
  // it); frames not yet delivered are judged by the new limit. Any thread.
  void set_max_frame_bytes(std::uint32_t bytes) noexcept {
    max_frame_bytes_.store(bytes, std::memory_order_relaxed);
  }

  figures stats() const noexcept;
  // Bytes buffered for sending: pending plus the write in flight.
  std::size_t pending_bytes() const;
  // After on_closed: the frames the connection held when it closed, moved out (once).
  // `unsent`: whole frames never written (safe to send again on another connection);
  // `uncertain`: whole frames of a write that was in flight or cut by a partial write (they may
  // have arrived).
  void take_leftovers(std::vector<unsigned char>& unsent, std::vector<unsigned char>& uncertain);
  // "host:port" of the peer (IPv6 as "[addr]:port"), read when the connection was made.
  virtual std::string remote_endpoint() const = 0;
  bool tls() const noexcept { return tls_; }

  // Buffers whose capacity is above this are released when they empty: bounds what an idle
  // connection keeps after a burst (each burst may grow a buffer to max_pending_bytes).
  static constexpr std::size_t k_keep_capacity = 1u << 20;

 protected:
  connection(const io_limits& limits, bool tls)
      : limits_(limits), tls_(tls), max_frame_bytes_(limits.max_frame_bytes) {}

  // Starts a write on the I/O thread (asio::post); called once writing_ was set by the caller.
  virtual void request_write() = 0;
  // Called by send() with out_mutex_ held when no write is in flight: writes what is pending on
  // the calling thread if it can do so at once (all of it: true, nothing left pending), else
  // leaves the rest for request_write. `urgent` as for send(). The default writes nothing.
  virtual bool write_now_locked(bool /*urgent*/) { return false; }
  // Posts the close to the I/O thread; called once, after closed_ was set.
  virtual void request_close() = 0;
  // Counts the frames in out[from, out.size()): fill() must append whole frames (asserted).
  static std::uint64_t count_frames(const std::vector<unsigned char>& out, std::size_t from);
  // Appends a ping or pong to pending regardless of the window (tiny, and the liveness of the
  // connection depends on it); false once closed.
  bool send_internal(frame_type type, std::uint64_t correlation);

  const io_limits limits_;
  const bool tls_;
  // Writer: set_max_frame_bytes(), any thread. Reader: the read loop on the I/O thread.
  // Relaxed: a lone value that publishes nothing; the new limit applies from the next header
  // the reader decodes after it sees the store.
  std::atomic<std::uint32_t> max_frame_bytes_;

  // Outbound state, all guarded by out_mutex_.
  mutable std::mutex out_mutex_;
  std::vector<unsigned char> pending_;  // producers append here
  std::uint64_t pending_frames_ = 0;    // frames in pending_
  // Bytes at the start of pending_ that end a frame a direct write sent in part (so pending_
  // starts mid-frame): they are neither unsent nor whole.
  std::size_t pending_partial_ = 0;
  // The whole frame of which pending_partial_ (or the stream's in-flight write) holds the tail,
  // until that tail is written; empty otherwise. For take_leftovers.
  std::vector<unsigned char> cut_frame_;
  std::vector<unsigned char> unsent_, uncertain_;  // at close: see take_leftovers
  std::size_t in_flight_bytes_ = 0;                // bytes the write in flight covers
  bool writing_ = false;                           // a write is in flight or posted
  bool flush_then_close_ = false;  // close_after_flush(): close when the buffers drain
  error close_reason_;             // the first reason given to close()
  // Writer: close() and close_after_flush(), under out_mutex_ (release). Readers: open() and
  // the read loop on the I/O thread (acquire), which stop delivering once it is set; send()
  // reads it under the mutex.
  std::atomic<bool> closed_{false};
  bool reset_on_close_ = false;  // guarded by out_mutex_; set by abort() before closed_

  // Statistics. Writer: the connection's strand (one I/O thread at a time). Reader: stats()
  // from any thread. Relaxed: independent counters, nothing is published through them.
  std::atomic<std::uint64_t> frames_out_{0}, bytes_out_{0}, writes_{0};
  std::atomic<std::uint64_t> frames_in_{0}, bytes_in_{0}, reads_{0};
};

template <class F>
error connection::send(F&& fill, bool urgent) {
  std::unique_lock lock(out_mutex_);
  if (closed_.load(std::memory_order_relaxed) || flush_then_close_) return errc::connection_lost;
  if (pending_.size() + in_flight_bytes_ >= limits_.max_pending_bytes) return errc::window_full;
  const std::size_t before = pending_.size();
  try {
    std::forward<F>(fill)(pending_);
  } catch (...) {
    pending_.resize(before);
    throw;
  }
  pending_frames_ += count_frames(pending_, before);
  if (writing_) return {};  // the completion of the write in flight takes these bytes too
  if (write_now_locked(urgent)) return {};  // idle: written by this thread, no hand-off
  writing_ = true;
  lock.unlock();
  request_write();
  return {};
}

// Connects (TCP_NODELAY on), does the TLS client handshake when enabled, and calls done once
// (on an I/O thread) with the connection (not yet started) or an error: unreachable (refused,
// timeout, DNS), protocol_error (TLS handshake failed or refused by the server; the detail from
// OpenSSL), invalid_argument (a certificate, key or CA file that does not load). The timeout
// covers resolution, connection and handshake.
void async_connect(io_pool& io, std::string host, std::uint16_t port, const tls_settings& tls,
                   const io_limits& limits, std::chrono::milliseconds timeout,
                   std::function<void(result<std::shared_ptr<connection>>)> done);

// Accepts connections on one address.
//
// Contract: open(), port(), close() and the destructor from any thread but not concurrently
// with each other on one listener (the owner's calls). `accepted` runs on an I/O thread, once
// per connection whose TLS handshake succeeded, never after close() returned (unless close()
// was called from inside it). A failed handshake or a failed accept is logged through the
// pool's log sink and never reaches `accepted`.
class listener {
 public:
  // Binds host:port (host: an address, or a name: its first address; port 0 = any free
  // port), listens, and calls accepted(conn) for each connection
  // whose TLS handshake succeeded (TCP_NODELAY on). Errors: invalid_argument (bad host, or TLS
  // files that do not load), unreachable (bind failed: detail says why).
  static result<std::unique_ptr<listener>> open(
      io_pool& io, const std::string& host, std::uint16_t port, const tls_settings& tls,
      const io_limits& limits, std::function<void(std::shared_ptr<connection>)> accepted);
  std::uint16_t port() const noexcept { return port_; }
  void close();  // stops accepting; existing connections stay
  ~listener();

  struct state;  // shared with the accept loop's completions

 private:
  listener(std::shared_ptr<state> s, std::uint16_t port) : state_(std::move(s)), port_(port) {}
  std::shared_ptr<state> state_;
  std::uint16_t port_;
};

}  // namespace akt::remote::detail
