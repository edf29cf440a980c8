#pragma once
// A member of the cluster as its record in the store says (akt/cluster/cluster.hpp). Its own
// header so that the record's codec (and its fuzzer) need nothing but this.

#include <cstdint>
#include <string>
#include <vector>

#include "akt/cluster/store.hpp"

namespace akt::cluster {

// One member of the cluster, as its record in the store says.
struct member {
  std::string name;               // node name (cluster_config::node_name)
  std::string address;            // remoting address: akt://system@host:port
  std::uint64_t incarnation = 0;  // the process's remoting incarnation
  lease_id epoch = 0;             // membership epoch: the lease the record lives on
  std::vector<std::string> roles;
  std::vector<std::string> grain_kinds;
  std::uint64_t load = 0;  // active grains when the record was written
  // host:port of the node's HTTP endpoint (system_config::http), where its /api and dashboard
  // answer; empty when it runs none. The dashboard of any member reads the others through it.
  std::string http;
  // The node is stopping cleanly: its grains are released, and it still answers what reaches it
  // until its remoting closes (so the others do not fail its calls when it leaves).
  bool leaving = false;
};

}  // namespace akt::cluster
