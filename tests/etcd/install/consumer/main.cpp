// Links akt::etcd from the installed package and calls it: connect() refuses empty options
// without needing an etcd, which proves the library, its gRPC dependency and the public header
// all resolve.
#include <akt/etcd/etcd_store.hpp>

#include <cstdio>

int main() {
  auto r = akt::etcd::connect({});
  if (r || r.error() != akt::errc::invalid_cluster_config) return 1;
  std::printf("etcd component: %s\n", r.error().message().c_str());
  return 0;
}
