// Two cluster nodes on a real etcd (the endpoint is the first argument; scripts/etcd.sh starts a
// throw-away one): they find each other, one leaves, the other hears of it. Built with akt::etcd
// (find_package(akt COMPONENTS etcd)).
#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/etcd/etcd_store.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: %s <etcd host:port>   (scripts/etcd.sh prints one)\n", argv[0]);
    return 2;
  }
  // [provider]
  akt::etcd::etcd_options etcd;
  etcd.endpoints = {argv[1]};  // every member's client address, for a cluster of etcd members
  auto store = akt::etcd::provider(etcd);
  // [/provider]
  auto config = [&](const char* node) {
    akt::system_config cfg;
    cfg.remote = akt::remote_config{};
    akt::cluster_config cluster;
    cluster.cluster_name = "etcd-example";
    cluster.node_name = node;
    cluster.store = store;
    cfg.cluster = cluster;
    return cfg;
  };
  akt::actor_system a("a", config("a"));
  akt::actor_system b("b", config("b"));
  std::atomic<bool> b_left{false};
  auto sub = a.events().subscribe<akt::cluster::node_left>(
      [&](const akt::cluster::node_left& e) { b_left = e.node.name == "b"; });
  for (akt::actor_system* s : {&a, &b}) {
    if (akt::result<void> r = s->start(); !r) {
      std::printf("start: %s\n", r.error().message().c_str());
      return 1;
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (akt::cluster::members(a).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  std::printf("a sees %zu members\n", akt::cluster::members(a).size());
  (void)b.stop();
  while (!b_left.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  std::printf("b left: %s\n", b_left.load() ? "yes" : "no");
  const bool ok = b_left.load();
  (void)a.stop();
  return ok ? 0 : 1;
}
