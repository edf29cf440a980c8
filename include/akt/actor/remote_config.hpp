#pragma once
// Remoting settings (system_config::remote) and the figures a node reports per peer.
//
// They are plain data in the actor layer because the system carries them; the `remote` module
// (include/akt/remote/remote.hpp) implements them. A system whose config has no remote
// settings opens no socket, and its local path is unchanged.

#include <chrono>
#include <cstdint>
#include <string>

namespace akt {

struct tls_config {
  bool enabled = false;
  std::string certificate_file;  // PEM: this node's certificate chain
  std::string private_key_file;  // PEM
  std::string ca_file;           // PEM: the authority peers' certificates must chain to
  // Mutual TLS: both sides present a certificate signed by ca_file; a peer without one is
  // refused at the handshake.
  bool mutual = false;
};

struct remote_config {
  std::string host = "127.0.0.1";  // address to bind
  std::uint16_t port = 0;          // 0: any free port (actor_system::address() reports it)
  // What peers are told to connect back to (replies travel on this node's own connections to
  // the asker, so a peer must reach it there). Empty / 0: host and the bound port. Without
  // mutual TLS a peer takes it only when it is an IP address, the one this node's connections
  // to that peer come from (else the handshake is refused); under mutual TLS the certificate
  // vouches for it.
  std::string advertised_host;
  std::uint16_t advertised_port = 0;
  unsigned io_threads = 1;  // socket I/O, separate from the dispatcher's workers
  // How long an I/O thread keeps polling its sockets after its last event before it sleeps in
  // the kernel. 0 (the default): it sleeps at once, and each message that finds it asleep pays
  // a wake-up. On a machine with a core to spare per I/O thread, polling takes that wake-up
  // off every remote round trip (measured on 16 cores with 200 us: an ask's p50 from 36-44 to
  // 28-31 us) for up to a core per I/O thread while traffic flows. On a machine without spare
  // cores it starves the threads it waits for (on 2 cores the same p50 went from 51-68 to
  // 217 us): leave it 0 there.
  std::chrono::microseconds io_poll{0};
  tls_config tls;
  // The largest frame body this node accepts; the peers tell each other theirs at the handshake
  // and each sends at most the smaller one. A message that encodes above it is refused by its
  // sender at once (errc::message_too_large) and dead-lettered, the connection kept; one that
  // was queued before the handshake is judged when the peer's limit is known. (A frame that
  // arrives above it anyway breaks the protocol and closes its connection.)
  std::uint32_t max_frame_bytes = 4u << 20;
  // Bytes of user messages in flight to one peer (sent, not yet taken from the receivers'
  // mailboxes) before further sends are refused with errc::window_full: the outbound queue's
  // bound, and what a stalled receiver slows its senders with.
  std::uint64_t window_bytes = 8u << 20;
  // Liveness: a ping when a connection sent nothing for heartbeat_interval; closed when nothing
  // arrived for heartbeat_interval * heartbeat_misses.
  std::chrono::milliseconds heartbeat_interval{1000};
  unsigned heartbeat_misses = 3;
  std::chrono::milliseconds connect_timeout{3000};
  // Reconnection back-off, doubling from min to max.
  std::chrono::milliseconds reconnect_min{50};
  std::chrono::milliseconds reconnect_max{2000};
  // A peer that stays unreachable this long is lost: its watchers get terminated (reason
  // node_lost), its pending asks fail and what was queued for it is dead-lettered.
  std::chrono::milliseconds node_lost_after{5000};
  // A peer lost this long, with nothing of it held outside the node (no proxy a user keeps, no
  // watch, no call waiting), is forgotten: its table entry and memory are freed, and a later
  // send to its address starts afresh. Bounds the peer table of a long-lived node whose peers
  // restart on new ports (each restart is a new address).
  std::chrono::milliseconds forget_lost_peer_after{60000};
};

// One peer as this node sees it (actor_system::peers()).
struct peer_stats {
  std::string address;  // akt://system@host:port
  std::uint64_t incarnation = 0;
  bool connected = false;
  std::uint64_t messages_out = 0, bytes_out = 0, frames_out = 0, writes = 0;
  std::uint64_t messages_in = 0, bytes_in = 0, frames_in = 0;
  std::uint64_t reconnects = 0;
  std::uint64_t refused = 0;  // sends refused here (window full, not serializable, unreachable)
};

}  // namespace akt
