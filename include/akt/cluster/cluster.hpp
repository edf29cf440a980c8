#pragma once
// The cluster: membership over a coordination store (etcd, or the in-process store), with lease
// fencing. A system whose config has a cluster section (system_config::cluster, with remote
// settings) joins the cluster at start() and leaves it at stop():
//
//   auto store = std::make_shared<akt::cluster::inproc_store>();   // or akt::etcd::provider(...)
//   akt::system_config cfg;
//   cfg.remote = akt::remote_config{};
//   cfg.cluster = akt::cluster_config{.cluster_name = "shop", .store = store};
//   akt::actor_system sys("node-a", cfg);
//   sys.start();                                        // joined: its lease and member record
//   akt::cluster::wait_ready(sys, std::chrono::seconds(5));
//   for (const auto& m : akt::cluster::members(sys)) ...
//
// Membership. Each node holds a lease (TTL cluster_config::lease_ttl) and, on it, its member
// record at /akt/<cluster>/v1/members/<node>: remoting address, process incarnation, membership
// epoch (the lease id), roles, grain kinds, load. A node reads the member prefix at revision R,
// then watches from R + 1 (resuming from the last revision it saw after a lost watch, reading in
// full again after a compaction), and publishes node_joined / node_left on its event stream.
// When a node leaves (a clean stop revokes its lease; a crashed node's lease expires), remoting
// is told at once: calls to it fail and its queued tells are dead letters.
//
// Fencing. A node is valid until the send time of its last acknowledged keep-alive + TTL -
// fence_margin, read on the steady clock before every grain handler starts. Past it the node is
// fenced: no grain handler starts, its grains are dropped without on_deactivate (as a crashed
// node's), grain messages are refused with errc::not_owner and new activations too; node_fenced
// is published. It rejoins with a new lease (a new epoch) when the store answers again, with no
// grains, and publishes node_rejoined. Keep-alives are sent by the cluster's own thread, and
// only while a probe message sent through the dispatcher keeps being handled within TTL / 2: a
// node whose workers are all stuck stops renewing and fences itself, and rejoins only once the
// probe is handled again (a stuck node takes no new lease: the others place nothing on it).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "akt/actor/actor_system.hpp"
#include "akt/cluster/member.hpp"
#include "akt/cluster/store.hpp"
#include "akt/core/result.hpp"
#include "akt/remote/remote.hpp"  // a cluster node needs remoting: this links its module

namespace akt::cluster {

// Events (actor_system::events()).
struct node_joined {  // another node became a member (or was found at the first read)
  member node;
};
struct node_left {  // another node's record vanished: it stopped, or its lease expired
  member node;
};
struct node_fenced {  // this node can no longer prove its membership: its grains are dropped
  std::string node;
  lease_id epoch = 0;
};
struct node_rejoined {  // this node is a member again, under a new epoch, with no grains
  std::string node;
  lease_id epoch = 0;
};

// The members as this node knows them (itself included), sorted by name. Empty for a system
// without a cluster section.
std::vector<member> members(actor_system& sys);
// Waits until the node has read the member list once (at most timeout). Errors:
// invalid_argument (no cluster section), request_timeout, system_shutting_down.
result<void> wait_ready(actor_system& sys, std::chrono::nanoseconds timeout);
// This node's own record as it last wrote it; invalid_argument without a cluster section.
result<member> self(actor_system& sys);
// Whether this node is fenced now (see above).
bool fenced(actor_system& sys);

// ---- Actor names in a cluster ----
//
// On a cluster node, spawning a top-level actor (actor_system::spawn) claims its name in the
// whole cluster: a put-if-absent of /akt/<cluster>/v1/actors/<name> on the node's lease, made
// before the actor is reachable by that name. A second spawn of the name on any node, this one
// included, fails with errc::actor_already_exists while the first lives. The claim waits for the
// store, so such a spawn is refused on a dispatcher worker (errc::blocking_on_worker: spawn from
// outside the system, or spawn a child, or use spawn_on from outside); a fenced node's spawn
// fails with errc::not_owner, a store that does not answer with cluster_registry_timeout. Not
// claimed: children (their path is unique once their top-level ancestor's name is) and the
// framework's own actors, named "akt." and below. When the actor stops its name is released
// (a compare-and-delete on the claim's create revision, sent as it stops: other nodes can spawn
// the name one store round trip later; this node at once); a node that stops leaves with its
// names, and a crashed node's names vanish when its lease expires.

// The actor named `name` (or at path "name/child/...") on whichever node runs it: this node's
// actor if it has one, else the node the cluster's record names, through remoting (a round trip
// to it, as actor_system::lookup). Waits at most `timeout` in all. Errors: actor_not_found,
// blocking_on_worker (not from a dispatcher worker: it waits), invalid_actor_name,
// decode_failed (the name's record cannot be read: another version's), and lookup's errors
// (unreachable, ...). Without a cluster section it is actor_system::find.
result<pid> find_actor(actor_system& sys, std::string_view name,
                       std::chrono::nanoseconds timeout = std::chrono::seconds(5));

// Where spawn_on places an actor among the members (with the role, if one is asked for).
enum class spawn_placement : std::uint8_t {
  round_robin,  // the members in turn (per node: each node keeps its own turn)
  random,       // any, uniformly
  least_load,   // the lowest load in its member record (its active grains); ties in turn
};
struct spawn_on_options {
  spawn_placement placement = spawn_placement::round_robin;
  std::string role;  // only members with this role (cluster_config::roles); empty: any member
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);
};
// Spawns an actor of kind `kind` (registered on the chosen node with register_actor_kind or
// register_actor_factory) named `name` on a member chosen by options.placement (this node
// included), and returns its pid. Its name is claimed in the cluster as any spawn's. Blocking:
// not from a dispatcher worker. Errors: invalid_argument (no cluster section; no member with the
// role; the chosen node has no such kind), invalid_actor_name, actor_already_exists, and the
// spawn's and remoting's errors.
result<pid> spawn_on(actor_system& sys, std::string_view kind, std::string_view name,
                     const spawn_on_options& options = {});

namespace detail {
// Defined in the module; referenced below so that every program including this header links
// the module, whose static initialiser installs the cluster factory.
bool module_linked() noexcept;
inline const bool linked = module_linked();
}  // namespace detail

}  // namespace akt::cluster
