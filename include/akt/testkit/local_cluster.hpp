#pragma once
// A cluster of several systems in one process, for tests: each node is an actor_system with
// remoting on loopback and a cluster section on one shared in-process store (or a store
// provider the test gives, such as etcd). It stops, crashes, restarts and cuts off nodes:
//
//   akt::testkit::local_cluster_options o;
//   o.prepare = [](akt::actor_system& s, std::size_t) {
//     (void)akt::register_grain_kind<account>(s);
//   };
//   akt::testkit::local_cluster c(3, o);
//   ASSERT_TRUE(c.start());  // every node sees all three
//   c.crash(2);              // as kill -9 looks from the other nodes
//   c.cut_off(1, true);      // node 1 loses the store: it fences itself
//
// crash(sys) (also usable alone) stops a system the way a killed process looks to the others:
// no shutdown hooks, no on_deactivate, no claim release, no lease revoke (its keep-alives just
// stop, so the others see it leave when its lease expires), nothing queued is flushed to peers,
// and its connections are reset (SO_LINGER 0), as the kernel resets a killed process's.
//
// Contract: one thread drives a local_cluster (the test's); node(i) stays valid until that node
// is restarted or the cluster is destroyed. The destructor stops every node still running.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "akt/actor/actor_system.hpp"
#include "akt/cluster/inproc_store.hpp"
#include "akt/core/result.hpp"

namespace akt::testkit {

// Stops sys as a killed process looks from outside (see above).
result<void> crash(actor_system& sys);

struct local_cluster_options {
  std::string cluster = "test";
  std::chrono::seconds lease_ttl{2};  // etcd's minimum: fences and expiries come soon
  std::chrono::milliseconds fence_margin{300};
  std::chrono::milliseconds start_wait{std::chrono::seconds(10)};
  unsigned workers = 2;
  // Each node's blocking pool (system_config::blocking_threads): where a grain's first message
  // sent from a dispatcher worker is activated, so it bounds the claims such sends have in flight.
  unsigned blocking_threads = 4;
  // The in-process store's call timeout: how soon a cut-off node's calls fail.
  std::chrono::milliseconds store_call_timeout{300};
  // Another store for every node (etcd); null: the cluster's own in-process store.
  std::shared_ptr<cluster::store_provider> store;
  // The store of node i, when set (e.g. one node reaches etcd through a fault proxy); a null
  // answer falls back to `store`.
  std::function<std::shared_ptr<cluster::store_provider>(std::size_t)> store_for;
  // Called with each node's system before it starts (register grain kinds and messages).
  std::function<void(actor_system&, std::size_t)> prepare;
  // Called with each node's cluster section before its system is made (roles, grain kinds,
  // the activation barrier).
  std::function<void(cluster_config&, std::size_t)> configure;
};

class local_cluster {
 public:
  explicit local_cluster(std::size_t nodes, local_cluster_options options = {});
  ~local_cluster();
  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;

  // Starts every node, then waits until each lists them all (at most start_wait).
  result<void> start();
  std::size_t size() const noexcept { return nodes_.size(); }
  actor_system& node(std::size_t i) { return *nodes_.at(i); }
  // Node i's name in the cluster: "node-<i>".
  static std::string name(std::size_t i) { return "node-" + std::to_string(i); }

  result<void> stop(std::size_t i);   // a clean stop: the others see it leave at once
  result<void> crash(std::size_t i);  // see crash(sys)
  // A new system under node i's name (and the same prepare). After a crash it waits for the old
  // lease to expire, as a restarted process would.
  result<void> restart(std::size_t i);
  // Cuts node i off the store (in-process store only) or joins it again.
  void cut_off(std::size_t i, bool on);
  // Whether node i lists `count` members within timeout.
  bool wait_members(std::size_t i, std::size_t count, std::chrono::nanoseconds timeout);

  cluster::inproc_store& store() noexcept { return *store_; }

 private:
  class provider;
  std::unique_ptr<actor_system> make(std::size_t i);

  local_cluster_options options_;
  std::shared_ptr<cluster::inproc_store> store_;
  std::shared_ptr<provider> provider_;
  std::vector<std::unique_ptr<actor_system>> nodes_;
};

}  // namespace akt::testkit
