#pragma once
// A fault-injecting TCP proxy for tests: put it between a node and its store (etcd), or between
// two nodes, and switch what the link between them does while the test runs.
//
//   akt::testkit::tcp_proxy proxy("127.0.0.1", etcd_port);  // listens on 127.0.0.1:<free>
//   connect_the_node_to(proxy.address());                   // "127.0.0.1:<proxy.port()>"
//   proxy.blackhole();  // a partition: nothing crosses, connections stay open
//   proxy.pass();       // healed: what was held goes through, in order
//   proxy.reset();      // every connection closed with RST, new ones reset at once
//   proxy.delay(50ms);  // each chunk forwarded 50 ms after it arrived, in order
//
// Modes (one per proxy; the last call wins; each takes effect before the call returns):
// - pass: every accepted connection is joined to a new connection to the target; bytes are
//   forwarded both ways as they arrive. A side that ends (FIN) is ended on the other side too;
//   a side that fails (RST, error) closes both sides with RST.
// - blackhole: nothing is forwarded in either direction, FINs included; connections stay open
//   and new ones are accepted but not connected to the target. Like a partition where packets
//   vanish and TCP keeps retrying: the proxy keeps reading up to limits::max_held_bytes per
//   direction and holds it (then stops reading, so the sender's buffers fill), and pass() or
//   delay() delivers what was held, in order, and connects the connections accepted meanwhile.
//   A write the proxy had already handed to the kernel when blackhole() was called completes.
// - reset: every connection (both sides) is closed now with SO_LINGER 0, so its peers see
//   ECONNRESET; connections accepted while it is set are reset at once. What was held is
//   dropped. pass() or delay() afterwards serves new connections.
// - delay(d): as pass, but each chunk read is written no earlier than d after it was read;
//   chunks keep their order (a chunk waits for the one before it). d applies to chunks read
//   from then on; pass() is delay(0).
//
// Contract
// - Callers: any thread may call every member function, except from the proxy's own I/O thread
//   (there are no callbacks, so no user code runs there). The mode switches wait for the I/O
//   thread to apply them (a post and a wait): when one returns, the new mode holds for every
//   byte the proxy has not yet handed to the kernel.
// - Threads: one I/O thread per proxy, running its own asio::io_context; every socket, timer
//   and the mode live on it.
// - Ordering: per connection and direction, bytes leave in the order they arrived.
// - Memory: per connection, two sockets and up to 2 * limits::max_held_bytes of held bytes
//   (plus one read chunk per direction); connections are freed when both sides have closed.
// - Statistics: counters updated by the I/O thread, read by stats() from any thread; each is
//   exact on its own, the set is not one snapshot.
// - Lifetime: the constructor binds and starts the thread (throws std::system_error when the
//   port cannot be bound); the destructor closes every socket (plainly, not with RST) and joins
//   the thread. Not copyable or movable.
// - Network: listens on 127.0.0.1 only; the target is any host the resolver knows (tests use
//   loopback).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace akt::testkit {

struct tcp_proxy_limits {
  // Bytes held per connection and direction (blackholed, delayed or waiting for the target's
  // connect) before the proxy stops reading that side: bounds a proxy's memory per connection,
  // and is how a held link pushes back on its sender (like a peer's full receive window).
  static constexpr std::size_t max_held_bytes = 4u << 20;
  // Bytes per read: bounds the size of one forwarded chunk.
  static constexpr std::size_t read_chunk = 64u << 10;
};

struct tcp_proxy_stats {
  std::uint64_t accepted = 0;  // connections accepted since construction, in every mode
  std::uint64_t open = 0;      // connections open now (accepted and not yet closed)
  std::uint64_t reset = 0;     // connections closed with RST (reset(), failures, reset mode)
  // Client -> target: bytes read from clients, bytes written to the target.
  std::uint64_t bytes_from_clients = 0, bytes_to_target = 0;
  // Target -> client: bytes read from the target, bytes written to clients.
  std::uint64_t bytes_from_target = 0, bytes_to_clients = 0;
};

enum class tcp_proxy_mode { pass, blackhole, reset, delay };

class tcp_proxy {
 public:
  // Listens on 127.0.0.1:0 and forwards to target_host:target_port. A target port of 0 means
  // "not known yet" (set_target() later): connections accepted meanwhile are reset.
  tcp_proxy(std::string target_host, std::uint16_t target_port);
  ~tcp_proxy();
  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  std::uint16_t port() const noexcept;  // the port it listens on
  std::string address() const;          // "127.0.0.1:<port()>"

  // Where connections accepted from now on are forwarded (those open keep their target): for a
  // server that must be told the proxy's port before its own is known.
  void set_target(std::string host, std::uint16_t port);

  void pass();
  void blackhole();
  void reset();
  void delay(std::chrono::nanoseconds d);  // d >= 0

  tcp_proxy_mode mode() const;
  tcp_proxy_stats stats() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace akt::testkit
