#pragma once
// The one implementation of connection (transport.hpp): a TCP socket, or a TLS stream over
// one, behind a std::variant, driven on a strand of the io_pool. Private to the transport
// (transport.cpp, transport_setup.cpp).
//
// Contract: as connection's. Besides, the setup calls (handshake_server, handshake_client,
// confirm_tls_accept) are made by the transport itself before the connection is handed out,
// and run on the connection's strand. Every member not guarded by connection::out_mutex_ is
// touched on the strand only (the strand is the socket's executor, so every completion
// handler and every posted function of this connection runs there, one at a time).
//
// TLS accept confirmation: in TLS 1.3 a client finishes its handshake before the server has
// checked the client's certificate, so a refused client would only learn of it on its first
// read. To report that refusal from async_connect, a TLS listener sends one pong with
// correlation k_tls_accepted as the first frame after its handshake succeeded, and the
// client waits for it before it calls done. The pong is consumed by the transport (and bytes
// that follow it stay buffered for start()); it costs 16 bytes and half a round trip per TLS
// connection, once.

#include <asio.hpp>
#include <asio/ssl.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "remote/transport.hpp"
#include "remote/wire.hpp"

namespace akt::remote::detail {

using tcp = asio::ip::tcp;
using tls_stream = asio::ssl::stream<tcp::socket>;

// The correlation of the TLS accept confirmation pong ("akt-tls\0" read as a little-endian
// number): a peer's pong never matches it by chance before any ping was sent.
inline constexpr std::uint64_t k_tls_accepted = 0x00736c742d746b61ull;

std::string format_endpoint(const tcp::endpoint& ep);

class stream_connection final : public connection {
 public:
  // A plain connection over a connected socket whose executor is a strand.
  stream_connection(tcp::socket socket, const io_limits& limits);
  // A TLS connection over a connected socket whose executor is a strand; the handshake is
  // still to be done (handshake_server or handshake_client).
  stream_connection(tcp::socket socket, std::shared_ptr<asio::ssl::context> ctx,
                    const io_limits& limits);
  ~stream_connection() override;

  void start(std::shared_ptr<handler> h) override;
  void set_heartbeat(std::chrono::milliseconds interval, unsigned misses) override;
  std::string remote_endpoint() const override { return endpoint_; }

  // Setup, TLS only. Server: the handshake, bounded by `timeout`; done(ok) or the reason.
  void handshake_server(std::chrono::milliseconds timeout, std::function<void(error)> done);
  // Client: the handshake, then the wait for the listener's accept confirmation; done(ok) or
  // protocol_error with the reason. The caller bounds the time (closing the socket on timeout).
  void handshake_client(const std::string& host, bool verify_name, std::function<void(error)> done);
  // Server: queue the accept confirmation (the first frame out).
  void confirm_tls_accept() { send_internal(frame_type::pong, k_tls_accepted); }
  // Closes the socket without any callback (setup timeouts); on the strand.
  void abort_socket();

  asio::any_io_executor executor() { return lowest().get_executor(); }

 private:
  tcp::socket::lowest_layer_type& lowest();
  std::shared_ptr<stream_connection> self() {
    return std::static_pointer_cast<stream_connection>(shared_from_this());
  }

  void request_write() override;
  bool write_now_locked(bool urgent) override;
  void request_close() override;

  void do_start(std::shared_ptr<handler> h);
  void do_close();
  void write_next();  // takes what is pending into the in-flight buffer and writes it
  void on_written(const std::error_code& ec, std::size_t n);
  void read_next();
  void on_read(const std::error_code& ec, std::size_t n);
  // Delivers every whole frame buffered; false when the connection closed meanwhile.
  bool deliver_frames();
  void arm_heartbeat(std::uint64_t generation);
  void on_heartbeat(std::uint64_t generation);
  void await_confirmation(std::function<void(error)> done);

  // Declared before stream_: the TLS stream refers to the context for its whole life.
  std::shared_ptr<asio::ssl::context> ssl_;
  std::variant<tcp::socket, tls_stream> stream_;
  const std::string endpoint_;  // cached: the socket may not be read while another thread uses it
  asio::steady_timer timer_;    // the server handshake's bound, then the heartbeat

  // Writer and reader: start(), any thread, by one exchange (a second start() is asserted
  // against). Relaxed: it only detects a double call; the handler travels by the post.
  std::atomic<bool> started_{false};
  // The socket's descriptor for write_now_locked (plain connections), -1 once closing. Guarded
  // by out_mutex_: do_close clears it under that mutex before it closes the socket, so a direct
  // write never reaches a descriptor that was closed (or reused).
  int direct_fd_ = -1;
  // When a write last started (steady-clock ns): a direct one, or the strand's. Writers: senders
  // under out_mutex_, the strand; readers: the same and the heartbeat (relaxed: it only decides
  // whether a write may go direct, or a ping is due).
  std::atomic<std::int64_t> direct_write_ns_{0};
  // Strand only from here on.
  std::shared_ptr<handler> handler_;  // from do_start until on_closed
  bool closing_ = false;              // do_close ran: no more callbacks, I/O or timers
  bool handshake_done_ = false;
  std::vector<unsigned char> in_flight_;  // being written; swapped with pending_
  std::uint64_t in_flight_frames_ = 0;
  std::size_t in_flight_partial_ = 0;  // pending_partial_ of what in_flight_ took over
  frame_reader reader_;                // inbound bytes, cut into frames (wire.hpp)
  std::chrono::steady_clock::time_point last_read_, last_write_, last_ping_;
  std::chrono::milliseconds hb_interval_{0};
  unsigned hb_misses_ = 0;
  std::uint64_t hb_generation_ = 0;  // a timer wait of an older generation does nothing
  std::uint64_t ping_sequence_ = 0;
};

}  // namespace akt::remote::detail
