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
// node whose workers are all stuck stops renewing and fences itself.

#include <chrono>
#include <cstdint>
#include <string>
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

namespace detail {
// Defined in the module; referenced below so that every program including this header links
// the module, whose static initialiser installs the cluster factory.
bool module_linked() noexcept;
inline const bool linked = module_linked();
}  // namespace detail

}  // namespace akt::cluster
