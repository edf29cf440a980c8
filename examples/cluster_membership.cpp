// Three cluster nodes in one process on the in-process store: they find each other, one leaves
// cleanly, and the others hear of it at once. The same program runs against etcd by giving the
// nodes akt::etcd's store instead (docs/guide/07-cluster.md).
#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/cluster/inproc_store.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

// [config]
akt::system_config node_config(std::shared_ptr<akt::cluster::store_provider> store,
                               std::string node) {
  akt::system_config cfg;
  cfg.remote = akt::remote_config{};  // a cluster node talks to the others over remoting
  akt::cluster_config cluster;
  cluster.cluster_name = "shop";
  cluster.node_name = std::move(node);  // unique in the cluster; default: host:port
  cluster.store = std::move(store);     // in-process here; akt::etcd::provider for etcd
  cluster.lease_ttl = 5s;               // a node that stops renewing is gone after this
  cluster.roles = {"frontend"};
  cfg.cluster = cluster;
  return cfg;
}
// [/config]

int main() {
  // [join]
  auto store = std::make_shared<akt::cluster::inproc_store>();
  akt::actor_system a("a", node_config(store, "a"));
  akt::actor_system b("b", node_config(store, "b"));
  akt::actor_system c("c", node_config(store, "c"));
  std::atomic<int> left{0};
  auto sub = a.events().subscribe<akt::cluster::node_left>([&](const akt::cluster::node_left& e) {
    std::printf("a: %s left (%s)\n", e.node.name.c_str(), e.node.address.c_str());
    left++;
  });
  for (akt::actor_system* s : {&a, &b, &c}) {
    if (akt::result<void> r = s->start(); !r) {  // joins: lease, member record, first read
      std::printf("start: %s\n", r.error().message().c_str());
      return 1;
    }
  }
  // [/join]
  // Each node learns of the others through its watch; wait until a lists all three.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (akt::cluster::members(a).size() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  // [members]
  for (const akt::cluster::member& m : akt::cluster::members(a))
    std::printf("member %s at %s, epoch %lld\n", m.name.c_str(), m.address.c_str(),
                static_cast<long long>(m.epoch));
  // [/members]
  if (akt::cluster::members(a).size() != 3) return 1;
  // [leave]
  (void)c.stop();  // revokes c's lease: its record vanishes and the others see it leave at once
  // [/leave]
  while (left.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  const bool ok = left.load() == 1 && akt::cluster::members(a).size() == 2;
  (void)b.stop();
  (void)a.stop();
  return ok ? 0 : 1;
}
