#pragma once
// remote_cell: the local stand-in for an actor on another node. A pid of it is told, asked,
// requested, watched and stopped like a local pid: its life state (life_state::remote) fails
// the local fast path, and actor_cell::deliver_slow / post_system hand what reaches it to the
// node (remote_node::deliver / post_system), which writes it to the peer.
//
// Contract: immutable after construction except `terminated_`; any thread. It never runs a turn
// (its dispatch state stays "processing" from construction, so no producer ever schedules it)
// and never holds a message. It keeps its association alive.

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "akt/actor/detail/actor_cell.hpp"

namespace akt::remote::detail {

class association;

class remote_cell final : public akt::detail::actor_cell {
 public:
  // address: the actor's full address (akt://system@host:port/path), its path and name here.
  remote_cell(akt::detail::system_core* core, std::string_view address,
              std::shared_ptr<association> peer, std::uint64_t uid, std::uint64_t incarnation)
      : actor_cell(core, nullptr, address, spawn_options{}),
        peer_(std::move(peer)),
        uid_(uid),
        incarnation_(incarnation) {
    mark_remote();
  }

  // The stand-in for the peer's grain `identity` (kind/name): what reaches it goes to that
  // grain's activation on the peer (activated there if needed), never to an actor by uid. It
  // never terminates: a grain is virtual, and a lost peer refuses sends (unreachable) instead.
  // claim_token: the cluster claim the sends through it are routed by (0: none), written into
  // each envelope so that an owner that no longer holds that claim refuses them.
  remote_cell(akt::detail::system_core* core, std::string_view address,
              std::shared_ptr<association> peer, std::string_view identity,
              std::int64_t claim_token = 0)
      : actor_cell(core, nullptr, address, spawn_options{}),
        peer_(std::move(peer)),
        uid_(0),
        incarnation_(0),
        claim_token_(claim_token),
        grain_(identity) {
    mark_remote();
  }

  association& peer() const noexcept { return *peer_; }
  // The grain identity this proxy stands for; empty for an actor's proxy.
  const std::string& grain() const noexcept { return grain_; }
  std::int64_t claim_token() const noexcept { return claim_token_; }
  const std::shared_ptr<association>& peer_ptr() const noexcept { return peer_; }
  std::uint64_t uid() const noexcept { return uid_; }
  // The incarnation of the node the actor lived on when this proxy was made (0: not known yet,
  // a sender seen on a connection whose handshake named it).
  std::uint64_t incarnation() const noexcept { return incarnation_; }

  // Set when the node reported the actor stopped, or lost its node. Writer: the node (release);
  // readers: alive() and senders (acquire).
  void mark_terminated() noexcept { terminated_.store(true, std::memory_order_release); }
  bool terminated() const noexcept { return terminated_.load(std::memory_order_acquire); }

 protected:
  void destroy_instance() noexcept override {}
  akt::actor* locate_instance() const noexcept override { return nullptr; }
  void rebuild_instance() override { throw std::logic_error("a remote actor is not restarted"); }

 private:
  const std::shared_ptr<association> peer_;
  const std::uint64_t uid_;
  const std::uint64_t incarnation_;
  const std::int64_t claim_token_ = 0;
  const std::string grain_;
  std::atomic<bool> terminated_{false};
};

}  // namespace akt::remote::detail
