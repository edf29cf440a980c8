// local_cluster and crash (akt/testkit/local_cluster.hpp).

#include "akt/testkit/local_cluster.hpp"

#include <map>
#include <mutex>
#include <thread>

#include "actor/system_core.hpp"
#include "akt/cluster/cluster.hpp"

namespace akt::testkit {

result<void> crash(actor_system& sys) {
  detail::core_of(sys)->crash_requested_.store(true, std::memory_order_release);
  return sys.stop();
}

// Hands each node a client of the in-process store with the cluster's call timeout, and keeps
// the clients by node name for cut_off.
class local_cluster::provider final : public cluster::store_provider {
 public:
  provider(std::shared_ptr<cluster::inproc_store> s, std::chrono::milliseconds timeout)
      : store_(std::move(s)), timeout_(timeout) {}

  result<std::unique_ptr<cluster::store>> open_store(std::string_view node) override {
    cluster::inproc_client_options o;
    o.call_timeout = timeout_;
    std::unique_ptr<cluster::inproc_client> c = store_->connect(std::string(node), o);
    std::lock_guard<std::mutex> lock(mutex_);
    clients_[std::string(node)] = c.get();
    return std::unique_ptr<cluster::store>(std::move(c));
  }
  void cut_off(const std::string& node, bool on) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = clients_.find(node); it != clients_.end()) it->second->cut_off(on);
  }
  void forget(const std::string& node) {
    std::lock_guard<std::mutex> lock(mutex_);
    clients_.erase(node);
  }

 private:
  const std::shared_ptr<cluster::inproc_store> store_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  // The client of each running node (it lives as long as that node's membership; forgotten
  // before the node's system is destroyed).
  std::map<std::string, cluster::inproc_client*> clients_;
};

local_cluster::local_cluster(std::size_t nodes, local_cluster_options options)
    : options_(std::move(options)),
      store_(std::make_shared<cluster::inproc_store>()),
      provider_(std::make_shared<provider>(store_, options_.store_call_timeout)) {
  for (std::size_t i = 0; i < nodes; ++i) nodes_.push_back(make(i));
}

local_cluster::~local_cluster() {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]) (void)nodes_[i]->stop();
    provider_->forget(name(i));
  }
}

std::unique_ptr<actor_system> local_cluster::make(std::size_t i) {
  system_config cfg;
  cfg.workers = options_.workers;
  cfg.blocking_threads = options_.blocking_threads;
  cfg.shutdown_timeout = std::chrono::seconds(10);
  remote_config rc;
  // Pings every 100 ms, lost after 1 s of silence: three or more nodes in one TSan process on
  // two loaded cores stall a sound connection for over 300 ms (3 misses), and a call in flight
  // then fails with connection_lost. A crashed node's sockets close at once, so no test waits
  // on this bound to see a node go.
  rc.heartbeat_interval = std::chrono::milliseconds(100);
  rc.heartbeat_misses = 10;
  rc.reconnect_min = std::chrono::milliseconds(10);
  rc.reconnect_max = std::chrono::milliseconds(200);
  cfg.remote = rc;
  cluster_config cc;
  cc.cluster_name = options_.cluster;
  cc.node_name = name(i);
  cc.store = options_.store_for ? options_.store_for(i) : nullptr;
  if (!cc.store) cc.store = options_.store ? options_.store : provider_;
  cc.lease_ttl = options_.lease_ttl;
  cc.fence_margin = options_.fence_margin;
  cc.start_wait = options_.start_wait;
  if (options_.configure) options_.configure(cc, i);
  cfg.cluster = cc;
  auto sys = std::make_unique<actor_system>(name(i), cfg);
  if (options_.prepare) options_.prepare(*sys, i);
  return sys;
}

result<void> local_cluster::start() {
  for (auto& n : nodes_) {
    if (result<void> r = n->start(); !r) return r;
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!wait_members(i, nodes_.size(), options_.start_wait))
      return error(errc::request_timeout, name(i) + " did not see every node in time");
  }
  return {};
}

result<void> local_cluster::stop(std::size_t i) {
  result<void> r = nodes_.at(i)->stop();
  provider_->forget(name(i));  // its client went with its membership
  return r;
}

result<void> local_cluster::crash(std::size_t i) {
  result<void> r = testkit::crash(*nodes_.at(i));
  provider_->forget(name(i));
  return r;
}

result<void> local_cluster::restart(std::size_t i) {
  (void)nodes_.at(i)->stop();
  provider_->forget(name(i));
  nodes_[i] = make(i);
  return nodes_[i]->start();
}

void local_cluster::cut_off(std::size_t i, bool on) { provider_->cut_off(name(i), on); }

bool local_cluster::wait_members(std::size_t i, std::size_t count,
                                 std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (cluster::members(*nodes_.at(i)).size() == count) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling a condition, bounded
  }
}

}  // namespace akt::testkit
