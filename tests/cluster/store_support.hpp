#pragma once
// Test helpers for akt::cluster::store implementations: a bounded wait for one completion (which
// also checks that it did not run inside its call and ran exactly once), and a watch handler
// that records what it receives and checks the watch contract as it goes. Used by the
// conformance suite (store_conformance.hpp) and by each store's own tests.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "akt/cluster/store.hpp"

namespace akt::cluster::testing {

// How long a test waits for anything a store owes it: far above any real answer (etcd's lease
// expiry takes up to TTL + about 1 s), so only a lost completion waits this long.
inline constexpr std::chrono::seconds k_bound{15};

// True on a thread while it is inside a store call made through await(): a completion that
// finds it set ran inside its call.
inline thread_local bool t_inside_call = false;

// One completion's result, waited for with a bound.
template <class T>
class completion_slot : public std::enable_shared_from_this<completion_slot<T>> {
 public:
  store_callback<T> callback() {
    return [self = this->shared_from_this()](result<T> r) { self->complete(std::move(r)); };
  }
  // The result, or errc::request_timeout (and a test failure) when none came within bound.
  result<T> wait(std::chrono::milliseconds bound = k_bound) {
    std::unique_lock lk(mutex_);
    if (!cv_.wait_for(lk, bound, [&] { return value_.has_value(); })) {
      ADD_FAILURE() << "a store call did not complete within " << bound.count() << " ms";
      return error(errc::request_timeout);
    }
    return *value_;
  }
  bool done() {
    std::lock_guard lk(mutex_);
    return value_.has_value();
  }

 private:
  void complete(result<T> r) {
    EXPECT_FALSE(t_inside_call) << "a completion ran inside its call";
    std::lock_guard lk(mutex_);
    EXPECT_FALSE(value_.has_value()) << "a call completed twice";
    if (!value_) value_.emplace(std::move(r));
    cv_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<result<T>> value_;  // guarded by mutex_
};

// Starts a call with start(callback) and waits for its completion.
template <class T, class Start>
result<T> await(Start&& start, std::chrono::milliseconds bound = k_bound) {
  auto slot = std::make_shared<completion_slot<T>>();
  t_inside_call = true;
  start(slot->callback());
  t_inside_call = false;
  return slot->wait(bound);
}

// Waits until pred() holds, looking every 10 ms, for at most bound; returns whether it held.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds bound = k_bound) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The revision of a watched change (a put's mod_revision is its write's; so is a delete's).
inline revision revision_of(const watch_event& e) { return e.kv.mod_revision; }

// Records one watch, checking as it goes: batches in revision order, each header at least its
// last event's revision, nothing after on_end, on_end at most once.
class watch_recorder final : public watch_handler {
 public:
  void on_events(const std::vector<watch_event>& events, revision header) override {
    EXPECT_FALSE(t_inside_call) << "a watch batch was delivered inside a call";
    std::lock_guard lk(mutex_);
    EXPECT_FALSE(ended_) << "events after on_end";
    EXPECT_FALSE(events.empty()) << "an empty batch";
    for (const watch_event& e : events) {
      EXPECT_GE(revision_of(e), last_) << "events out of revision order";
      last_ = revision_of(e);
      events_.push_back(e);
    }
    EXPECT_GE(header, last_) << "a header revision below the batch's last event";
    ++batches_;
    largest_batch_ = std::max(largest_batch_, events.size());
    cv_.notify_all();
  }
  void on_end(error why, revision compact_revision) override {
    std::lock_guard lk(mutex_);
    EXPECT_FALSE(ended_) << "on_end twice";
    ended_ = true;
    why_ = std::move(why);
    compact_revision_ = compact_revision;
    cv_.notify_all();
  }

  // Waits until at least n events arrived; false (no failure recorded) after bound.
  bool wait_for_events(std::size_t n, std::chrono::milliseconds bound = k_bound) {
    std::unique_lock lk(mutex_);
    return cv_.wait_for(lk, bound, [&] { return events_.size() >= n; });
  }
  bool wait_for_end(std::chrono::milliseconds bound = k_bound) {
    std::unique_lock lk(mutex_);
    return cv_.wait_for(lk, bound, [&] { return ended_; });
  }
  std::vector<watch_event> events() const {
    std::lock_guard lk(mutex_);
    return events_;
  }
  std::size_t event_count() const {
    std::lock_guard lk(mutex_);
    return events_.size();
  }
  std::size_t batch_count() const {
    std::lock_guard lk(mutex_);
    return batches_;
  }
  std::size_t largest_batch() const {
    std::lock_guard lk(mutex_);
    return largest_batch_;
  }
  bool ended() const {
    std::lock_guard lk(mutex_);
    return ended_;
  }
  error end_reason() const {
    std::lock_guard lk(mutex_);
    return why_;
  }
  revision end_compact_revision() const {
    std::lock_guard lk(mutex_);
    return compact_revision_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  // All guarded by mutex_:
  std::vector<watch_event> events_;
  std::size_t batches_ = 0;
  std::size_t largest_batch_ = 0;
  revision last_ = 0;
  bool ended_ = false;
  error why_;
  revision compact_revision_ = 0;
};

// Synchronous wrappers, each bounded by k_bound.
inline result<lease_grant> grant_lease(store& s, std::chrono::seconds ttl) {
  return await<lease_grant>([&](auto cb) { s.grant_lease(ttl, std::move(cb)); });
}
inline result<keep_alive_ack> keep_alive(store& s, lease_id id) {
  return await<keep_alive_ack>([&](auto cb) { s.keep_alive(id, std::move(cb)); });
}
inline result<void> revoke_lease(store& s, lease_id id) {
  return await<void>([&](auto cb) { s.revoke_lease(id, std::move(cb)); });
}
inline result<range_result> get(store& s, const std::string& key) {
  return await<range_result>([&](auto cb) { s.get(key, std::move(cb)); });
}
inline result<range_result> get_prefix(store& s, const std::string& prefix) {
  return await<range_result>([&](auto cb) { s.get_prefix(prefix, std::move(cb)); });
}
inline result<std::vector<op_outcome>> commit(store& s, std::vector<store_op> ops) {
  return await<std::vector<op_outcome>>([&](auto cb) { s.commit(std::move(ops), std::move(cb)); });
}
inline result<op_outcome> put_if_absent(store& s, const std::string& key, const std::string& value,
                                        lease_id lease) {
  return await<op_outcome>([&](auto cb) { s.put_if_absent(key, value, lease, std::move(cb)); });
}
inline result<op_outcome> delete_if_created_at(store& s, const std::string& key, revision cr) {
  return await<op_outcome>([&](auto cb) { s.delete_if_created_at(key, cr, std::move(cb)); });
}
inline result<op_outcome> update_if_created_at(store& s, const std::string& key,
                                               const std::string& value, lease_id lease,
                                               revision cr) {
  std::vector<store_op> ops;
  ops.push_back(store_op::update_if_created_at(key, value, lease, cr));
  auto r = commit(s, std::move(ops));
  if (!r) return r.error();
  if (r->size() != 1) return error(errc::protocol_error);
  return std::move(r->front());
}

}  // namespace akt::cluster::testing
