#pragma once
// Cluster settings (system_config::cluster). Plain data in the actor layer because the system
// carries them; the `cluster` module (include/akt/cluster/cluster.hpp) implements them. A system
// without a cluster section starts no membership and pays nothing for it.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace akt {

namespace cluster {
class store_provider;  // include/akt/cluster/store.hpp
}  // namespace cluster

struct cluster_config {
  // The cluster this node joins: the key prefix /akt/<cluster_name>/v1/. Required; the
  // characters of an actor name.
  std::string cluster_name;
  // This node's name, unique in the cluster; empty: its remoting address "host:port". A second
  // live node of the same name is refused at start (invalid_cluster_config); a node restarted
  // under its old name waits until the old process's lease expired (see old_process_gone).
  std::string node_name;
  // The coordination store: akt::cluster::inproc_store (one process, no etcd; the embedded
  // default for a first cluster and for tests) or akt::etcd::provider({.endpoints = ...}).
  // Required.
  std::shared_ptr<cluster::store_provider> store;
  // How long the node stays a member without renewing its lease. 5 s by default: at 3 s an
  // ordinary etcd restart (leader election, then every lease renewed) would fence every node;
  // 2 s is etcd's minimum, and shorter is refused.
  std::chrono::seconds lease_ttl{5};
  // Subtracted from the lease's validity as the node computes it (send time of its last
  // acknowledged keep-alive + TTL - margin), so that it stops serving grains before the store
  // can have expired its lease even when the clocks of the two tick apart. Below lease_ttl / 2.
  std::chrono::milliseconds fence_margin{500};
  // How long start() waits for the store to answer (a node that cannot reach it fails with
  // errc::cluster_unavailable) and for an earlier process of the same name to let go.
  std::chrono::milliseconds start_wait{std::chrono::seconds(10)};
  // Set when the operator knows that the earlier process of this node name is gone (it was
  // killed): start revokes its lease at once instead of waiting for it to expire.
  bool old_process_gone = false;
  // What this node offers: roles (placement by role, next) and the grain kinds it hosts. Names
  // with the characters of an actor name.
  std::vector<std::string> roles;
  std::vector<std::string> grain_kinds;
  // The grain activation barrier: while fewer than min_peers members (this node included) are
  // known, grain activations on this node wait (never on a dispatcher worker: a send made there
  // waits in its delivery queue); past barrier_timeout they fail with
  // errc::cluster_quorum_timeout. Once reached, the barrier stays open. 0: no barrier.
  std::size_t min_peers = 0;
  std::chrono::milliseconds barrier_timeout{std::chrono::seconds(30)};
  // How many grain activations started from inside the system (a grain's first message sent
  // from a handler, which must not wait on a dispatcher worker) may wait for their claims at
  // once on this node: they run on the system's blocking pool, each waiting for its claim, and
  // the claims in flight are batched into few store commits. A cluster node's blocking pool has
  // at least this many threads (system_config::blocking_threads; started on first use).
  unsigned activation_threads = 32;
};

}  // namespace akt
