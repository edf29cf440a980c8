#pragma once
// The backend of the cluster rules (tests/cluster/cluster_*_rules.hpp) on the etcd tests' shared
// etcd: each call a cluster name of its own (prefix + a random number), so that tests and runs
// never see each other's keys. An empty backend (the in-process store) when etcd did not start.
#include <akt/etcd/etcd_store.hpp>

#include <random>
#include <string>

#include "cluster/cluster_grains_rules.hpp"
#include "etcd/etcd_test_support.hpp"

namespace akt::test {

inline akt::grain_rules::grain_backend etcd_backend(const std::string& prefix) {
  using namespace std::chrono_literals;
  static std::mt19937_64 rng{std::random_device{}()};
  akt::grain_rules::grain_backend b;
  auto* etcd = shared_etcd();
  if (etcd == nullptr) return b;
  b.provider = akt::etcd::provider({{etcd->endpoint()}, 1000ms, 10000ms});
  b.cluster = prefix + std::to_string(rng() % 1'000'000'000);
  return b;
}

}  // namespace akt::test

// A test of `fixture` (an etcd_test) running the cluster rule `rule` on the shared etcd under a
// cluster name starting with `prefix`; skipped without etcd.
#define AKT_CLUSTER_RULE_ON_ETCD(fixture, prefix, rule)                   \
  TEST_F(fixture, rule) {                                                 \
    AKT_SKIP_WITHOUT_ETCD();                                              \
    ASSERT_NE(akt::test::shared_etcd(), nullptr) << "etcd did not start"; \
    rule(akt::test::etcd_backend(prefix));                                \
  }
