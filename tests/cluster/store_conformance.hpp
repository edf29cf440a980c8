#pragma once
// The conformance suite of akt::cluster::store (akt/cluster/store.hpp): one set of tests that
// every implementation passes, so the in-process store and etcd mean the same thing.
//
// To run it against a store, implement store_under_test and instantiate the suite in exactly
// one .cpp file of the test program (this header defines the tests):
//
//   #include "cluster/store_conformance.hpp"
//   class my_store_under_test : public akt::cluster::testing::store_under_test { ... };
//   AKT_INSTANTIATE_STORE_CONFORMANCE(Etcd, "etcd",
//                                     [] { return std::make_unique<my_store_under_test>(); });
//
// The tests are then named e.g. Etcd/StoreConformance.PutIfAbsent_OnAnExistingKeyReportsTheOwner
// /etcd. The factory runs once per test; it may return a view of one store shared by all the
// tests (one etcd per test program): every test writes only under its own random prefix
// (/t/<test>/<random>/), revokes the leases it granted when it ends, and compacts only at
// revisions it wrote itself. Tests run one at a time; each bounds every wait (k_bound). A few
// check that a write-less operation leaves the store's revision unchanged, so no other writer
// may share the store while one runs (run the programs sharing one etcd one after another).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "akt/cluster/store.hpp"
#include "cluster/store_support.hpp"

namespace akt::cluster::testing {

// What the suite needs from a store besides the store interface.
class store_under_test {
 public:
  virtual ~store_under_test() = default;
  // A new client of the store under test (as one node would connect). Each test connects one
  // or more and destroys them before the store_under_test.
  virtual std::unique_ptr<store> connect() = 0;
  // Compacts the store's history at r (etcd: the Compact RPC), r at most the current revision.
  virtual result<void> compact(revision r) = 0;
  // Lets at least d of lease time pass: a manual clock moves at once; a store on real time
  // sleeps d. Tests wait for expiries with a bound (k_bound) after it, never assume them done.
  virtual void advance(std::chrono::milliseconds d) = 0;
};

struct store_param {
  std::string name;  // the tests' suffix: letters, digits and '_' only
  std::function<std::unique_ptr<store_under_test>()> make;
};

inline void PrintTo(const store_param& p, std::ostream* os) { *os << p.name; }

inline std::string store_param_name(const ::testing::TestParamInfo<store_param>& info) {
  return info.param.name;
}

}  // namespace akt::cluster::testing

// Instantiates the suite for one store: prefix names the instantiation (an identifier), name
// the store (a string of letters, digits and '_'), and the rest is the factory that makes a
// store_under_test per test (a lambda; commas in its captures are fine).
#define AKT_INSTANTIATE_STORE_CONFORMANCE(prefix, name, ...)                      \
  INSTANTIATE_TEST_SUITE_P(                                                       \
      prefix, StoreConformance,                                                   \
      ::testing::Values(::akt::cluster::testing::store_param{name, __VA_ARGS__}), \
      ::akt::cluster::testing::store_param_name)

// The fixture: a store under test, a unique key prefix, the clients and leases to clean up.
class StoreConformance : public ::testing::TestWithParam<akt::cluster::testing::store_param> {
 protected:
  using store = akt::cluster::store;
  using revision = akt::cluster::revision;
  using lease_id = akt::cluster::lease_id;

  void SetUp() override {
    sut_ = GetParam().make();
    ASSERT_TRUE(sut_);
    std::random_device rd;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    prefix_ = std::string("/t/") + info->name() + "/" + std::to_string(rd()) + "/";
    main_ = connect();
  }
  void TearDown() override {
    if (main_) {
      for (lease_id id : leases_) (void)akt::cluster::testing::revoke_lease(*main_, id);
    }
    main_.reset();
    sut_.reset();
  }

  std::unique_ptr<store> connect() {
    auto s = sut_->connect();
    EXPECT_TRUE(s);
    return s;
  }
  store& main() { return *main_; }
  std::string key(const std::string& name) const { return prefix_ + name; }
  const std::string& prefix() const { return prefix_; }
  akt::cluster::testing::store_under_test& sut() { return *sut_; }

  // A lease revoked when the test ends.
  lease_id grant(std::chrono::seconds ttl = std::chrono::seconds(10)) {
    auto g = akt::cluster::testing::grant_lease(main(), ttl);
    EXPECT_TRUE(g) << akt::to_string(g.code());
    if (!g) return 0;
    leases_.push_back(g->id);
    return g->id;
  }
  // Creates key on lease (0: none) and returns its create revision.
  revision create(const std::string& k, const std::string& value = "v", lease_id lease = 0) {
    auto r = akt::cluster::testing::put_if_absent(main(), k, value, lease);
    EXPECT_TRUE(r && r->succeeded);
    return r && r->succeeded ? r->applied_revision : 0;
  }
  revision header() {
    auto r = akt::cluster::testing::get(main(), key("header-probe"));
    EXPECT_TRUE(r);
    return r ? r->header_revision : 0;
  }

 private:
  std::unique_ptr<akt::cluster::testing::store_under_test> sut_;
  std::unique_ptr<store> main_;
  std::string prefix_;
  std::vector<lease_id> leases_;
};

#include "cluster/store_conformance_tests.hpp"  // IWYU pragma: keep
