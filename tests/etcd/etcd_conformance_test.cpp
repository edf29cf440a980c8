// The store conformance suite (tests/cluster/store_conformance.hpp) against a real etcd: one
// etcd per test program, shared by every test (each writes under its own random prefix).

#include <thread>

#include "cluster/store_conformance.hpp"
#include "etcd/etcd_test_support.hpp"

namespace akt::test {
namespace {

class etcd_under_test final : public cluster::testing::store_under_test {
 public:
  std::unique_ptr<cluster::store> connect() override {
    std::string why;
    auto* etcd = shared_etcd(&why);
    if (!etcd) {
      ADD_FAILURE() << "etcd did not start: " << why;
      return nullptr;
    }
    auto s = etcd::connect({{etcd->endpoint()}, 5000ms, 10000ms});
    if (!s) {
      ADD_FAILURE() << s.error().message();
      return nullptr;
    }
    return std::move(*s);
  }
  // etcd's Compact RPC, through etcdctl.
  result<void> compact(cluster::revision r) override {
    auto* etcd = shared_etcd();
    if (!etcd) return error(errc::cluster_unavailable, "no etcd");
    const int rc = etcd->etcdctl({"compact", std::to_string(r)});
    if (rc != 0) {
      return error(errc::protocol_error,
                   "etcdctl compact " + std::to_string(r) + " exited " + std::to_string(rc));
    }
    return {};
  }
  // etcd's leases run on real time: let it pass.
  void advance(std::chrono::milliseconds d) override { std::this_thread::sleep_for(d); }
};

}  // namespace
}  // namespace akt::test

AKT_INSTANTIATE_STORE_CONFORMANCE(Etcd, "etcd",
                                  [] { return std::make_unique<akt::test::etcd_under_test>(); });
