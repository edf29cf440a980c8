#pragma once
// The etcd store: akt::cluster::store over etcd's v3 gRPC API (library akt::etcd, CMake
// component `etcd`: find_package(akt COMPONENTS etcd)). This header includes no gRPC or
// protobuf header; a program that links akt::akt alone never links gRPC.
//
// connect() checks that an endpoint answers (an etcd Range) within connect_wait and returns the
// store, or cluster_unavailable saying which endpoints did not answer. The store then keeps
// one gRPC channel over all endpoints (round-robin across the members that are up, reconnecting
// by itself) and one completion thread, on which every completion and watch delivery runs; the
// contract is akt::cluster::store's (akt/cluster/store.hpp). Served by etcd 3.4 and later.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "akt/cluster/store.hpp"
#include "akt/core/result.hpp"

namespace akt::etcd {

struct etcd_options {
  // host:port of etcd's client URL, e.g. "127.0.0.1:2379" (plain TCP; no TLS, no auth). With
  // more than one endpoint every one must be a numeric IPv4 address (gRPC's "ipv4:" target),
  // so a member that is down is skipped; one endpoint may also be a host name.
  std::vector<std::string> endpoints;
  // How long one store call may take before it completes with cluster_registry_timeout.
  std::chrono::milliseconds call_timeout = cluster::store_defaults::call_timeout;
  // How long connect() waits for an endpoint to answer before cluster_unavailable (a member that
  // answers "unavailable", e.g. during an election, is asked again meanwhile).
  std::chrono::milliseconds connect_wait{5000};
};

// A connected store, or: invalid_cluster_config (the detail names the field) for bad options,
// cluster_unavailable when no endpoint answered within connect_wait. Blocks the calling thread
// for at most connect_wait (plus thread start-up).
result<std::unique_ptr<cluster::store>> connect(etcd_options options);

// A store provider for a cluster node's config (cluster_config::store): each node that opens it
// gets a connection of its own, connect(options); the options are checked then, not here.
std::shared_ptr<cluster::store_provider> provider(etcd_options options);

}  // namespace akt::etcd
