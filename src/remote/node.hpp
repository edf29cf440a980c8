#pragma once
// remote_node: the remote module's extension of one actor system (src/actor/remote_hooks.hpp).
// It owns the I/O threads, the listener, the associations (one per peer this node sends to),
// the inbound links (one per connection a peer opened to this node) and the export table.
//
// Contract
// - Built by actor_system::start (remote settings present) and destroyed with the system's
//   core; shut_down() (from stop(), after the actors stopped) closes everything, after which
//   every send is refused with system_shutting_down. Proxies may outlive it and still call it.
// - Every member may be called from any thread. The I/O threads run only framing, routing and
//   the handshake: no user code (spawn and stop requests from peers go to the blocking pool,
//   messages are decoded on the receiver's turn).
// - Timers here run in real time (asio), never on the system's (possibly manual) clock:
//   heartbeats and reconnects are about the network, not about the actors' time.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "actor/remote_hooks.hpp"
#include "actor/system_core.hpp"
#include "akt/metrics/registry.hpp"
#include "akt/metrics/snapshot.hpp"
#include "remote/exports.hpp"
#include "remote/peer_services.hpp"
#include "remote/transport.hpp"

namespace google::protobuf {
class MessageLite;
}

namespace akt::remote::detail {

class association;
class inbound_link;

// A node's address parsed: "host:port" (IPv6 as "[addr]:port"), or the form
// actor_system::address() gives, "akt://system@host:port". Every API that names a node takes
// either, through this one function.
struct node_address {
  std::string host;
  std::uint16_t port = 0;
  std::string system;  // from the akt:// form; empty for host:port
};
result<node_address> parse_node(std::string_view text);
// akt://system@host:port/path parsed (path without the leading '/').
struct actor_address {
  std::string system;
  node_address node;
  std::string path;
};
result<actor_address> parse_address(std::string_view text);

// Bounds the associations (peer table entries, with their proxies, calls and, once used,
// connections) that inbound handshakes may create over a node's life: anyone who reaches the
// port can claim any port in a hello. Past it, a hello from an address this node has no
// association with yet is refused. Associations this node made by sending do not count.
inline constexpr std::size_t k_max_inbound_peers = 1024;

class remote_node final : public akt::detail::remote_extension, public peer_services {
 public:
  static result<std::unique_ptr<akt::detail::remote_extension>> make(akt::detail::system_core* core,
                                                                     actor_system& sys);
  ~remote_node() override;

  // remote_extension
  error deliver(akt::detail::actor_cell* to, receive_context* env) noexcept override;
  void post_system(akt::detail::actor_cell* to, message& msg,
                   akt::detail::actor_cell* from) noexcept override;
  bool decode(receive_context& env) noexcept override;
  void decode_for_dead_letter(message& m) noexcept override;
  void on_actor_stopped(akt::detail::actor_cell* c) noexcept override;
  bool alive(const akt::detail::actor_cell* proxy) const noexcept override;
  bool can_send(const akt::detail::actor_cell* proxy) const noexcept override;
  std::string address() const override { return address_; }
  std::string address_of(const akt::detail::actor_cell* c) const override;
  result<pid> lookup(std::string_view address, std::chrono::nanoseconds timeout) override;
  result<pid> lookup(std::string_view node, std::string_view name,
                     std::chrono::nanoseconds timeout) override;
  result<pid> spawn_on(std::string_view node, std::string_view kind, std::string_view name,
                       std::chrono::nanoseconds timeout) override;
  result<void> stop_remote(akt::detail::actor_cell* proxy,
                           std::chrono::nanoseconds timeout) override;
  std::vector<peer_stats> peers() const override;
  // See node_lost.hpp.
  error declare_lost(std::string_view node, std::string reason);
  void shut_down(std::chrono::steady_clock::time_point deadline,
                 std::vector<std::string>& problems) noexcept override;

  // For inbound links (associations use peer_services only).
  actor_system& system() const noexcept { return sys_; }
  bool closing() const noexcept { return closing_.load(std::memory_order_acquire); }
  // The association to the peer at host:port (made on first use).
  std::shared_ptr<association> association_for(const std::string& host, std::uint16_t port);
  // The same for the address an inbound handshake claims, which a stranger chooses: null when
  // making it would pass k_max_inbound_peers.
  std::shared_ptr<association> association_for_inbound(const std::string& host, std::uint16_t port);
  // Whether this node may take `claimed`, the host an inbound handshake on `c` says it is
  // reached at, and dial it: under mutual TLS yes (the certificate vouches for the peer), else
  // only when it is the address the connection came from.
  bool claim_verified(const connection& c, const std::string& claimed) const;
  // peer_services
  void after(std::chrono::milliseconds delay, std::function<void()> fn) override;
  void log(log_level level, std::string_view text) const override;
  void publish_connected(const std::string& address, std::uint64_t incarnation) override;
  void publish_disconnected(const std::string& address, const error& why) override;
  void forget_link(inbound_link* l);

 private:
  remote_node(akt::detail::system_core* core, actor_system& sys, const remote_config& cfg);
  error open();
  // Expires calls and forgets peers lost for remote_config::forget_lost_peer_after with nothing
  // of them held (association::forgettable); re-armed every k_sweep_interval while open.
  void sweep();
  result<pid> lookup_on(const node_address& node, std::string_view system, std::string_view name,
                        std::chrono::nanoseconds timeout);
  // The metrics' collector (system_config::metrics): akt_remote_*_total{peer} from each
  // association's figures at the scrape (the scraping thread; takes mutex_, then each
  // association's, as peers() does).
  void collect(akt::metrics::snapshot& out) const;
  // Sends a control request and waits for its answer (blocking; not on a worker).
  result<message> control_call(const node_address& node,
                               const google::protobuf::MessageLite& request,
                               std::chrono::nanoseconds timeout);

  actor_system& sys_;
  std::unique_ptr<listener> listener_;
  std::string address_;  // akt://system@host:port
  std::atomic<bool> closing_{false};

  mutable std::mutex mutex_;  // associations_, links_
  std::unordered_map<std::string, std::shared_ptr<association>> associations_;
  // The keys of the associations that association_for_inbound made (at most
  // k_max_inbound_peers); a forgotten one leaves the set.
  std::unordered_set<std::string> inbound_keys_;
  std::vector<std::shared_ptr<inbound_link>> links_;
  // The collector's registration while metrics are on; reset first by the destructor, which
  // waits out a scrape in progress.
  akt::metrics::collector_handle collector_;
};

remote_node& node_of(akt::detail::system_core* core) noexcept;

}  // namespace akt::remote::detail
