#pragma once
// The actor layer's seam to the cluster module, which sits above it (as remote_hooks.hpp is to
// the remote module): the cluster module installs its factory before main (including
// <akt/cluster/cluster.hpp> links it); actor_system::start builds the extension after remoting
// started when the config has a cluster section, and stop() calls it at three points.
//
// Contract: one extension per system; start() builds it and calls nothing else on it before it
// returns; begin_leave(), leave() and shut_down() are called at most once each, by stop(), in
// that order, from the stopping thread; claim_name() and release_name() by the spawn and stop paths
// of top-level actors whose name claims_cluster_name() accepts, from any thread, until the core is
// destroyed (after leave() they only refuse or do nothing). Destroyed with the system's core.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "akt/core/result.hpp"

namespace akt {
class actor_system;
namespace detail {

class system_core;

class cluster_extension {
 public:
  virtual ~cluster_extension() = default;
  // stop(), first (before the shutdown hooks): the node takes no new grains from now on and
  // tells the others it is leaving (its member record says so, without waiting for the store),
  // so that their placements stop choosing it while its grains deactivate.
  virtual void begin_leave() noexcept {}
  // stop(), after the grains deactivated and before the actors stop and remoting closes: leave
  // the cluster (revoke the lease, so that the node's keys vanish at once and the others see it
  // leave while its connections still answer).
  virtual void leave(std::chrono::steady_clock::time_point deadline,
                     std::vector<std::string>& problems) noexcept = 0;
  // stop(), after remoting closed: end the cluster's threads and the store connection.
  virtual void shut_down(std::chrono::steady_clock::time_point deadline,
                         std::vector<std::string>& problems) noexcept = 0;

  // Cluster-wide actor names. The spawn of a top-level actor named `name` claims it for `owner`
  // (its cell: an opaque key, unique among live cells) before the actor is registered locally,
  // so nothing finds it by name before the claim committed. Blocks on the store (bounded); the
  // spawn path never calls it on a dispatcher worker. Errors: actor_already_exists (the name is
  // held on any node, this one included), not_owner (fenced: no lease), cluster_registry_timeout,
  // system_shutting_down.
  virtual error claim_name(std::string_view name, const void* owner) = 0;
  // The actor `owner` stopped, or its start failed after the claim: releases the name if
  // `owner` holds it (compare-and-delete on the claim's create revision, sent asynchronously).
  // Never blocks (a worker calls it); does nothing for a name `owner` does not hold.
  virtual void release_name(std::string_view name, const void* owner) noexcept = 0;
};

// Whether a top-level actor's name is claimed cluster-wide on a cluster node: every name but
// the framework's own, "akt." and below (akt.cluster.probe, ...), which each node has one of.
// Children are never claimed: their path is unique once their top-level ancestor's name is.
inline bool claims_cluster_name(std::string_view name) noexcept {
  return name.substr(0, 4) != "akt.";
}

// Builds (and starts: joins the cluster) the extension of a starting system; an error refuses
// the start.
using cluster_factory = result<std::unique_ptr<cluster_extension>> (*)(system_core* core,
                                                                       actor_system& sys);
// Written once, before main, by the cluster module (a release store read with acquire).
void install_cluster_factory(cluster_factory f) noexcept;
cluster_factory installed_cluster_factory() noexcept;

}  // namespace detail
}  // namespace akt
