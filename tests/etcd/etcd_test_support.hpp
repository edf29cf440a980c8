#pragma once
// What the etcd tests share: one etcd per test program (started on first use, SIGKILLed when
// the program's tests end), a key prefix per test, and bounded waits for store completions.

#include <gtest/gtest.h>

#include <akt/etcd/etcd_store.hpp>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "support/etcd_process.hpp"

namespace akt::test {

using namespace std::chrono_literals;

// The program's shared etcd, started on first use; null (and the reason in *why) when it
// cannot start (no etcd installed).
inline etcd_process* shared_etcd(std::string* why = nullptr) {
  static std::unique_ptr<etcd_process> etcd;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    if (etcd_binary().empty()) {
      failure = "etcd is not installed (scripts/deps.sh installs etcd-server)";
      return;
    }
    try {
      etcd = std::make_unique<etcd_process>();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  if (why) *why = failure;
  return etcd.get();
}

// Skips the test when there is no etcd; else connects a store to the shared one.
#define AKT_ETCD_STORE_OR_SKIP(store_var)                                         \
  std::unique_ptr<akt::cluster::store> store_var;                                 \
  do {                                                                            \
    std::string why_;                                                             \
    auto* etcd_ = akt::test::shared_etcd(&why_);                                  \
    if (!etcd_) {                                                                 \
      if (akt::test::etcd_binary().empty()) GTEST_SKIP() << why_;                 \
      FAIL() << "etcd did not start: " << why_;                                   \
    }                                                                             \
    auto connected_ = akt::etcd::connect({{etcd_->endpoint()}, 5000ms, 10000ms}); \
    ASSERT_TRUE(connected_) << connected_.error().message();                      \
    store_var = std::move(*connected_);                                           \
  } while (false)

// The key prefix of the running test: /akt-test/<suite>.<name>/<run>/, where run counts the
// tests of this program, so a test repeated (--gtest_repeat) against the same etcd starts
// from no keys again. Set by etcd_test's constructor.
inline std::string& current_test_prefix() {
  static std::string prefix;
  return prefix;
}
inline std::string test_prefix() { return current_test_prefix(); }

// The fixture of the tests that use the shared etcd: a fresh key prefix per test run.
class etcd_test : public ::testing::Test {
 protected:
  etcd_test() {
    static int runs = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    current_test_prefix() = std::string("/akt-test/") + info->test_suite_name() + "." +
                            info->name() + "/" + std::to_string(++runs) + "/";
  }
};

// Runs start(callback) and waits up to `timeout` for the callback; nullopt if it did not come.
template <class T, class Start>
std::optional<result<T>> await(Start start, std::chrono::milliseconds timeout = 15s) {
  auto p = std::make_shared<std::promise<result<T>>>();
  auto f = p->get_future();
  start(cluster::store_callback<T>([p](result<T> r) { p->set_value(std::move(r)); }));
  if (f.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  return f.get();
}

// Collects a watch's deliveries.
class recording_handler final : public cluster::watch_handler {
 public:
  void on_events(const std::vector<cluster::watch_event>& events,
                 cluster::revision header_revision) override {
    std::lock_guard lock(mutex_);
    for (const auto& e : events) events_.push_back(e);
    last_header_ = header_revision;
    changed_.notify_all();
  }
  void on_end(error why, cluster::revision compact_revision) override {
    std::lock_guard lock(mutex_);
    ++ends_;
    end_ = why;
    compact_revision_ = compact_revision;
    changed_.notify_all();
  }
  // Waits up to timeout for pred (called under the lock).
  template <class Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = 15s) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return pred(*this); });
  }
  bool wait_events(std::size_t n, std::chrono::milliseconds timeout = 15s) {
    return wait([n](const recording_handler& h) { return h.events_.size() >= n; }, timeout);
  }
  bool wait_end(std::chrono::milliseconds timeout = 15s) {
    return wait([](const recording_handler& h) { return h.ends_ > 0; }, timeout);
  }
  std::vector<cluster::watch_event> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  int ends() const {
    std::lock_guard lock(mutex_);
    return ends_;
  }
  error end() const {
    std::lock_guard lock(mutex_);
    return end_;
  }
  cluster::revision compact_revision() const {
    std::lock_guard lock(mutex_);
    return compact_revision_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<cluster::watch_event> events_;
  cluster::revision last_header_ = 0;
  int ends_ = 0;
  error end_;
  cluster::revision compact_revision_ = 0;
};

}  // namespace akt::test
