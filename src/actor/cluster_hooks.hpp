#pragma once
// The actor layer's seam to the cluster module, which sits above it (as remote_hooks.hpp is to
// the remote module): the cluster module installs its factory before main (including
// <akt/cluster/cluster.hpp> links it); actor_system::start builds the extension after remoting
// started when the config has a cluster section, and stop() calls it at two points.
//
// Contract: one extension per system; start() builds it and calls nothing else on it before it
// returns; leave() and shut_down() are called once each, by stop(), in that order, from the
// stopping thread. Destroyed with the system's core.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "akt/core/result.hpp"

namespace akt {
class actor_system;
namespace detail {

class system_core;

class cluster_extension {
 public:
  virtual ~cluster_extension() = default;
  // stop(), after the grains deactivated and before the actors stop and remoting closes: leave
  // the cluster (revoke the lease, so that the node's keys vanish at once and the others see it
  // leave while its connections still answer).
  virtual void leave(std::chrono::steady_clock::time_point deadline,
                     std::vector<std::string>& problems) noexcept = 0;
  // stop(), after remoting closed: end the cluster's threads and the store connection.
  virtual void shut_down(std::chrono::steady_clock::time_point deadline,
                         std::vector<std::string>& problems) noexcept = 0;
};

// Builds (and starts: joins the cluster) the extension of a starting system; an error refuses
// the start.
using cluster_factory = result<std::unique_ptr<cluster_extension>> (*)(system_core* core,
                                                                       actor_system& sys);
// Written once, before main, by the cluster module (a release store read with acquire).
void install_cluster_factory(cluster_factory f) noexcept;
cluster_factory installed_cluster_factory() noexcept;

}  // namespace detail
}  // namespace akt
