#pragma once
// peer_services: what an association needs of its node, and nothing more. remote_node
// implements it; association.cpp and its siblings (association_*.cpp) depend on this header, not
// on node.hpp, so the node uses its associations and an association uses only this narrow
// service (no include circle).
//
// Contract
// - The accessors read fields that are set before the first association exists (the node's
//   construction and open()) and never written again: any thread, no lock, no allocation. The
//   hot path (a send) uses only these.
// - after(), log(), publish_connected() and publish_disconnected(): any thread, never block on
//   the network (publish_* runs the event stream's subscribers, as any publish does).
// - Lifetime: the node outlives every use an association makes of it (its shutdown closes the
//   associations before it is destroyed).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "actor/system_core.hpp"
#include "akt/actor/remote_config.hpp"
#include "remote/exports.hpp"
#include "remote/transport.hpp"

namespace akt::remote::detail {

class peer_services {
 public:
  akt::detail::system_core* core() const noexcept { return core_; }
  const remote_config& config() const noexcept { return cfg_; }
  const std::string& system_name() const noexcept { return core_->name_; }
  std::uint64_t incarnation() const noexcept { return incarnation_; }
  const std::string& advertised_host() const noexcept { return advertised_host_; }
  std::uint16_t advertised_port() const noexcept { return advertised_port_; }
  io_pool& io() noexcept { return *io_; }
  const tls_settings& tls() const noexcept { return tls_; }
  const io_limits& limits() const noexcept { return limits_; }
  export_table& exports() noexcept { return exports_; }
  // The series of akt_remote_ask_seconds for the peer `key` (host:port); empty while metrics
  // are off. Takes the family's lock: once per association.
  akt::metrics::histogram ask_seconds_of(const std::string& key) const {
    return ask_seconds_ ? ask_seconds_.with({key}) : akt::metrics::histogram();
  }
  // The uid of a local actor sent as a sender or a watcher (0: none, or not alive).
  std::uint64_t export_sender(akt::detail::actor_cell* c) { return exports_.export_cell(c); }

  // Runs fn on an I/O thread after `delay` of real time (unless the node closed first).
  virtual void after(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
  // Logs through the system's logger.
  virtual void log(log_level level, std::string_view text) const = 0;
  virtual void publish_connected(const std::string& address, std::uint64_t incarnation) = 0;
  virtual void publish_disconnected(const std::string& address, const error& why) = 0;

 protected:
  peer_services(akt::detail::system_core* core, const remote_config& cfg, std::uint64_t incarnation)
      : core_(core), cfg_(cfg), incarnation_(incarnation), exports_(incarnation << 16) {}
  ~peer_services() = default;
  peer_services(const peer_services&) = delete;
  peer_services& operator=(const peer_services&) = delete;

  akt::detail::system_core* const core_;
  const remote_config cfg_;
  const std::uint64_t incarnation_;
  // Written by the node before any association exists (construction, open()), then only read.
  tls_settings tls_;
  io_limits limits_;
  std::unique_ptr<io_pool> io_;
  std::string advertised_host_;
  std::uint16_t advertised_port_ = 0;
  // From the incarnation's bits: two incarnations' uids overlap only by chance (export_table).
  export_table exports_;
  // akt_remote_ask_seconds{peer} while metrics are on (set by the node before any association
  // exists, as the fields above).
  akt::metrics::histogram_family ask_seconds_;
};

// The node whose message a serializer is encoding or decoding on this thread, for
// encode_pid / decode_pid (akt/remote/remote.hpp): set around every serializer call akt makes.
class codec_scope {
 public:
  explicit codec_scope(peer_services* n) noexcept;
  ~codec_scope();
  codec_scope(const codec_scope&) = delete;
  codec_scope& operator=(const codec_scope&) = delete;

 private:
  peer_services* previous_;
};

}  // namespace akt::remote::detail
