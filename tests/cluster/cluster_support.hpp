#pragma once
// Shared by the cluster tests: nodes of one process on an in-process store, each with a handle
// on its own store client for fault injection, and event recorders.

#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/cluster/inproc_store.hpp>
#include <akt/remote/remote.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace akt::cluster_test {

using namespace std::chrono_literals;

// An in-process store whose clients the test can reach by node name (to cut one off).
class test_store final : public akt::cluster::store_provider {
 public:
  akt::result<std::unique_ptr<akt::cluster::store>> open_store(std::string_view node) override {
    akt::cluster::inproc_client_options o;
    o.call_timeout = 300ms;  // a cut-off node notices within this
    auto c = data.connect(std::string(node), o);
    std::lock_guard<std::mutex> lock(mutex_);
    clients_[std::string(node)] = c.get();  // lives as long as the node's membership
    return std::unique_ptr<akt::cluster::store>(std::move(c));
  }
  // The client of the node's current system (valid while that system runs).
  akt::cluster::inproc_client* client(const std::string& node) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = clients_.find(node);
    return it == clients_.end() ? nullptr : it->second;
  }
  akt::cluster::inproc_store data;

 private:
  std::mutex mutex_;
  std::map<std::string, akt::cluster::inproc_client*> clients_;
};

inline akt::system_config cluster_node_config(std::shared_ptr<akt::cluster::store_provider> store,
                                              std::string node, std::string cluster = "test") {
  akt::system_config cfg;
  cfg.workers = 2;
  cfg.shutdown_timeout = 10s;
  akt::remote_config rc;
  rc.heartbeat_interval = 100ms;
  rc.heartbeat_misses = 10;  // 1 s: a loaded TSan run stalls sound connections past 300 ms
  rc.node_lost_after = 2s;
  rc.reconnect_min = 10ms;
  rc.reconnect_max = 200ms;
  cfg.remote = rc;
  akt::cluster_config cc;
  cc.cluster_name = std::move(cluster);
  cc.node_name = std::move(node);
  cc.store = std::move(store);
  cc.lease_ttl = 2s;  // etcd's minimum: the fence and the expiry come soon
  cc.fence_margin = 300ms;
  cc.start_wait = 5s;
  cfg.cluster = cc;
  return cfg;
}

// Records the cluster events one system publishes.
struct cluster_events {
  std::mutex mutex;
  std::vector<std::string> joined, left;
  std::atomic<int> fenced{0}, rejoined{0};
  std::vector<akt::subscription> subs;
  explicit cluster_events(akt::actor_system& sys) {
    auto& ev = sys.events();
    subs.push_back(ev.subscribe<akt::cluster::node_joined>([this](const auto& e) {
      std::lock_guard<std::mutex> lock(mutex);
      joined.push_back(e.node.name);
    }));
    subs.push_back(ev.subscribe<akt::cluster::node_left>([this](const auto& e) {
      std::lock_guard<std::mutex> lock(mutex);
      left.push_back(e.node.name);
    }));
    subs.push_back(ev.subscribe<akt::cluster::node_fenced>([this](const auto&) { fenced++; }));
    subs.push_back(ev.subscribe<akt::cluster::node_rejoined>([this](const auto&) { rejoined++; }));
  }
  bool saw_left(const std::string& n) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& x : left)
      if (x == n) return true;
    return false;
  }
  bool saw_joined(const std::string& n) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& x : joined)
      if (x == n) return true;
    return false;
  }
};

inline std::vector<std::string> member_names(akt::actor_system& sys) {
  std::vector<std::string> out;
  for (const auto& m : akt::cluster::members(sys)) out.push_back(m.name);
  return out;
}

}  // namespace akt::cluster_test
