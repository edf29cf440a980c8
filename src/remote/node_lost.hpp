#pragma once
// The entry point by which membership (the cluster module, above remote) tells remoting that a
// node left, so that what waits for it fails at once instead of after node_lost_after.

#include <cstdint>
#include <string>
#include <string_view>

#include "akt/actor/actor_system.hpp"
#include "akt/core/error.hpp"
#include "akt/core/result.hpp"
#include "akt/grain/grains.hpp"

namespace akt::remote::detail {

// Declares the node at `node` ("host:port" or "akt://system@host:port") lost now, with
// `reason` (a text for the errors; "" for a default): its calls written to it fail with
// connection_lost, those not yet written with unreachable, its queued tells are dead-lettered
// (unreachable, with the reason), watchers of its actors get terminated with node_lost, its
// pids answer dead, peer_disconnected is published, and connections still open to it are
// closed. Later sends to that address are refused at once with unreachable until a handshake
// with it succeeds again (a restarted process, a new incarnation, connects as a new peer).
// Any thread; does not block on the network. Errors: remoting_disabled, invalid_address,
// invalid_argument (this node's own address), system_shutting_down.
error declare_node_lost(actor_system& sys, std::string_view node, std::string reason);

// The stand-in through which messages reach grain `id` on the node at `node` (an akt:// address
// or host:port), each carrying claim_token (the cluster claim it is routed by; 0: none).
// Errors: remoting_disabled, invalid_address. Any thread.
result<pid> grain_proxy_on(actor_system& sys, std::string_view node, const grain_identity& id,
                           std::int64_t claim_token);

// This process's remoting incarnation (the member record carries it); 0 without remoting.
std::uint64_t local_incarnation(actor_system& sys) noexcept;

}  // namespace akt::remote::detail
