// claim_batcher (src/cluster/claim_batcher.hpp) against the in-process store: a lone op goes out
// at once, a burst leaves in few commits, never two ops on one key in a commit, a failed commit
// fails only its ops, and destruction refuses what was never sent.
//
// Determinism: held_store forwards to an in-process client and can hold commit completions on
// the client's completion thread, so a test queues a burst behind a commit it knows is in
// flight, then lets it go.

#include "cluster/claim_batcher.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "akt/cluster/inproc_store.hpp"
#include "cluster/store_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::errc;
using akt::result;
using akt::cluster::inproc_client;
using akt::cluster::inproc_client_options;
using akt::cluster::inproc_store;
using akt::cluster::lease_id;
using akt::cluster::op_outcome;
using akt::cluster::revision;
using akt::cluster::store;
using akt::cluster::store_callback;
using akt::cluster::store_op;
using akt::cluster::detail::claim_batcher;
namespace t = akt::cluster::testing;

// True on a thread while it is inside claim_batcher::submit (through submit_op below).
thread_local bool t_inside_submit = false;

// A store that forwards to another and records each commit's keys; while held, each commit's
// completion waits on the inner store's completion thread until released.
class held_store final : public store {
 public:
  explicit held_store(store& inner) : inner_(inner) {}
  ~held_store() override { release(); }

  // Holds completions until release() or until the guard goes (declare it after the batcher,
  // so that a failed ASSERT releases before the batcher's destructor waits for its commit).
  class hold_guard {
   public:
    explicit hold_guard(held_store& s) : s_(s) {}
    hold_guard(const hold_guard&) = delete;
    hold_guard& operator=(const hold_guard&) = delete;
    ~hold_guard() { s_.release(); }

   private:
    held_store& s_;
  };
  [[nodiscard]] std::unique_ptr<hold_guard> hold() {
    std::lock_guard lk(mutex_);
    held_ = true;
    return std::make_unique<hold_guard>(*this);
  }
  void release() {
    std::lock_guard lk(mutex_);
    held_ = false;
    cv_.notify_all();
  }
  // Waits until n completions are waiting to be released.
  bool wait_held(std::size_t n) {
    std::unique_lock lk(mutex_);
    return cv_.wait_for(lk, t::k_bound, [&] { return waiting_ >= n; });
  }
  // The keys of every commit made so far, in the order of the calls.
  std::vector<std::vector<std::string>> commits() {
    std::lock_guard lk(mutex_);
    return commits_;
  }

  void commit(std::vector<store_op> ops, store_callback<std::vector<op_outcome>> done) override {
    {
      std::lock_guard lk(mutex_);
      std::vector<std::string> keys;
      for (const store_op& op : ops) keys.push_back(op.key);
      commits_.push_back(std::move(keys));
    }
    inner_.commit(std::move(ops), [this, done = std::move(done)](auto r) {
      {
        std::unique_lock lk(mutex_);
        ++waiting_;
        cv_.notify_all();
        cv_.wait(lk, [&] { return !held_; });
        --waiting_;
      }
      done(std::move(r));
    });
  }
  void grant_lease(std::chrono::seconds ttl, store_callback<akt::cluster::lease_grant> d) override {
    inner_.grant_lease(ttl, std::move(d));
  }
  void keep_alive(lease_id id, store_callback<akt::cluster::keep_alive_ack> d) override {
    inner_.keep_alive(id, std::move(d));
  }
  void revoke_lease(lease_id id, store_callback<void> d) override {
    inner_.revoke_lease(id, std::move(d));
  }
  void get(std::string key, store_callback<akt::cluster::range_result> d) override {
    inner_.get(std::move(key), std::move(d));
  }
  void get_prefix(std::string prefix, store_callback<akt::cluster::range_result> d) override {
    inner_.get_prefix(std::move(prefix), std::move(d));
  }
  std::unique_ptr<akt::cluster::watch_handle> watch(std::string prefix, revision from,
                                                    akt::cluster::watch_handler& h) override {
    return inner_.watch(std::move(prefix), from, h);
  }

 private:
  store& inner_;
  std::mutex mutex_;
  std::condition_variable cv_;
  // Guarded by mutex_:
  bool held_ = false;
  std::size_t waiting_ = 0;
  std::vector<std::vector<std::string>> commits_;
};

// The outcomes of n ops, each recorded once, in the order they completed.
class outcomes {
 public:
  explicit outcomes(std::size_t n) : slots_(n) {}

  store_callback<op_outcome> slot(std::size_t i) {
    return [this, i](result<op_outcome> r) { record(i, std::move(r)); };
  }
  bool wait(std::size_t n) {
    std::unique_lock lk(mutex_);
    return cv_.wait_for(lk, t::k_bound, [&] { return order_.size() >= n; });
  }
  bool wait_all() { return wait(slots_.size()); }
  result<op_outcome> at(std::size_t i) {
    std::lock_guard lk(mutex_);
    if (!slots_[i]) return akt::error(errc::request_timeout, "not completed");
    return *slots_[i];
  }
  bool done(std::size_t i) {
    std::lock_guard lk(mutex_);
    return slots_[i].has_value();
  }
  std::vector<std::size_t> order() {
    std::lock_guard lk(mutex_);
    return order_;
  }

 private:
  void record(std::size_t i, result<op_outcome> r) {
    EXPECT_FALSE(t_inside_submit) << "op " << i << " completed inside submit";
    std::lock_guard lk(mutex_);
    EXPECT_FALSE(slots_[i].has_value()) << "op " << i << " completed twice";
    if (!slots_[i]) {
      slots_[i].emplace(std::move(r));
      order_.push_back(i);
    }
    cv_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  // Guarded by mutex_:
  std::vector<std::optional<result<op_outcome>>> slots_;
  std::vector<std::size_t> order_;
};

void submit_op(claim_batcher& b, store_op op, store_callback<op_outcome> done) {
  t_inside_submit = true;
  b.submit(std::move(op), std::move(done));
  t_inside_submit = false;
}

// The indexes of the commits (in held_store's record) that hold `key`; fails the test when one
// holds it twice.
std::vector<std::size_t> commits_with(const std::vector<std::vector<std::string>>& commits,
                                      const std::string& key) {
  std::vector<std::size_t> at;
  for (std::size_t c = 0; c < commits.size(); ++c) {
    std::size_t n = 0;
    for (const std::string& k : commits[c]) n += k == key ? 1 : 0;
    EXPECT_LE(n, 1u) << "key " << key << " twice in commit " << c;
    if (n != 0) at.push_back(c);
  }
  return at;
}

inproc_client_options quick() {
  inproc_client_options o;
  o.call_timeout = 200ms;
  return o;
}

class Cluster_ClaimBatcher : public ::testing::Test {
 protected:
  Cluster_ClaimBatcher() : client_(data_.connect("node-a", quick())), held_(*client_) {
    auto g = t::grant_lease(*client_, 30s);
    EXPECT_TRUE(g.has_value());
    if (g) lease_ = g->id;
  }
  ~Cluster_ClaimBatcher() override { held_.release(); }

  revision create(const std::string& key) {
    auto r = t::put_if_absent(*client_, key, "v", lease_);
    EXPECT_TRUE(r.has_value() && r->succeeded) << key;
    return r ? r->applied_revision : 0;
  }
  bool exists(const std::string& key) {
    auto r = t::get(*client_, key);
    return r && !r->kvs.empty();
  }

  inproc_store data_;
  std::unique_ptr<inproc_client> client_;
  held_store held_;
  lease_id lease_ = 0;
};

TEST_F(Cluster_ClaimBatcher, ALoneOpGoesOutAtOnceAsACommitOfOne) {
  outcomes out(1);
  claim_batcher b(held_);
  submit_op(b, store_op::put_if_absent("/g/k", "v", lease_), out.slot(0));
  // Sent inside submit: nothing waits for more.
  EXPECT_EQ(held_.commits().size(), 1u);
  EXPECT_EQ(b.commits(), 1u);
  EXPECT_EQ(b.ops(), 1u);
  ASSERT_TRUE(out.wait_all());
  auto r = out.at(0);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->succeeded);
  EXPECT_GT(r->applied_revision, 0);
  // Nothing in flight now: the next lone op goes out at once too.
  outcomes second(1);
  submit_op(b, store_op::delete_if_created_at("/g/k", r->applied_revision), second.slot(0));
  EXPECT_EQ(b.commits(), 2u);
  ASSERT_TRUE(second.wait_all());
  EXPECT_TRUE(second.at(0).has_value() && second.at(0)->succeeded);
}

// 8 threads queue 500 claims each behind a held commit: every op completes once, succeeds, and
// the burst leaves in full batches of 127.
TEST_F(Cluster_ClaimBatcher, ABurstFromManyThreadsLeavesInFullBatchesEachOpOnce) {
  constexpr std::size_t threads = 8, per_thread = 500, n = threads * per_thread;
  outcomes out(n + 1);
  claim_batcher b(held_);
  const auto holding = held_.hold();
  submit_op(b, store_op::put_if_absent("/g/first", "v", lease_), out.slot(n));
  ASSERT_TRUE(held_.wait_held(1));
  std::vector<std::thread> submitters;
  for (std::size_t th = 0; th < threads; ++th) {
    submitters.emplace_back([&, th] {
      for (std::size_t i = 0; i < per_thread; ++i) {
        const std::size_t id = th * per_thread + i;
        submit_op(b, store_op::put_if_absent("/g/" + std::to_string(id), "v", lease_),
                  out.slot(id));
      }
    });
  }
  for (auto& s : submitters) s.join();
  EXPECT_EQ(b.commits(), 1u) << "a commit went out while one was in flight";
  held_.release();
  ASSERT_TRUE(out.wait_all());
  for (std::size_t i = 0; i <= n; ++i) {
    auto r = out.at(i);
    ASSERT_TRUE(r.has_value()) << i << ": " << r.error().message();
    EXPECT_TRUE(r->succeeded) << i;
  }
  // 4000 = 31 * 127 + 63: the lone first commit, then 32 of the queue.
  EXPECT_EQ(b.commits(), 1u + (n + 126) / 127);
  EXPECT_EQ(b.ops(), n + 1);
  const auto commits = held_.commits();
  ASSERT_EQ(commits.size(), b.commits());
  for (std::size_t c = 1; c + 1 < commits.size(); ++c) EXPECT_EQ(commits[c].size(), 127u) << c;
  EXPECT_TRUE(exists("/g/3999"));
}

// A burst on one key: each op in a commit of its own, applied and completed in submission order,
// while ops on other keys behind them still go in the first commit they fit.
TEST_F(Cluster_ClaimBatcher, OpsOnOneKeyNeverShareACommitAndApplyInOrder) {
  const revision first = create("/g/k");
  outcomes out(5);
  claim_batcher b(held_);
  const auto holding = held_.hold();
  submit_op(b, store_op::put_if_absent("/g/filler", "v", lease_), out.slot(0));
  ASSERT_TRUE(held_.wait_held(1));
  submit_op(b, store_op::delete_if_created_at("/g/k", first), out.slot(1));
  submit_op(b, store_op::put_if_absent("/g/k", "again", lease_), out.slot(2));
  submit_op(b, store_op::delete_if_created_at("/g/k", first), out.slot(3));
  submit_op(b, store_op::put_if_absent("/g/other", "v", lease_), out.slot(4));
  held_.release();
  ASSERT_TRUE(out.wait_all());

  auto del = out.at(1), put = out.at(2), stale = out.at(3), other = out.at(4);
  ASSERT_TRUE(del.has_value() && put.has_value() && stale.has_value() && other.has_value());
  EXPECT_TRUE(del->succeeded);
  EXPECT_TRUE(put->succeeded);  // after the delete, in a later commit
  EXPECT_GT(put->applied_revision, del->applied_revision);
  EXPECT_FALSE(stale->succeeded);  // the key was created again meanwhile
  EXPECT_EQ(stale->current.create_revision, put->applied_revision);
  EXPECT_TRUE(other->succeeded);

  const auto commits = held_.commits();
  EXPECT_EQ(commits_with(commits, "/g/k"), (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(commits_with(commits, "/g/other"), (std::vector<std::size_t>{1}));
  EXPECT_EQ(commits.size(), 4u);
  const auto order = out.order();
  std::vector<std::size_t> on_k;
  for (std::size_t i : order) {
    if (i >= 1 && i <= 3) on_k.push_back(i);
  }
  EXPECT_EQ(on_k, (std::vector<std::size_t>{1, 2, 3}));
}

// A put on a revoked lease fails its whole commit with lease_not_found, that commit's other op
// included; the commits around it are unaffected.
TEST_F(Cluster_ClaimBatcher, LeaseNotFoundFailsOnlyThatCommitsOps) {
  auto dead = t::grant_lease(*client_, 30s);
  ASSERT_TRUE(dead.has_value());
  ASSERT_TRUE(t::revoke_lease(*client_, dead->id).has_value());
  outcomes out(4);
  claim_batcher b(held_);
  const auto holding = held_.hold();
  submit_op(b, store_op::put_if_absent("/g/before", "v", lease_), out.slot(0));
  ASSERT_TRUE(held_.wait_held(1));
  submit_op(b, store_op::put_if_absent("/g/a", "v", dead->id), out.slot(1));
  submit_op(b, store_op::put_if_absent("/g/b", "v", lease_), out.slot(2));
  submit_op(b, store_op::put_if_absent("/g/a", "v", lease_), out.slot(3));  // the next commit
  held_.release();
  ASSERT_TRUE(out.wait_all());

  EXPECT_TRUE(out.at(0).has_value() && out.at(0)->succeeded);
  EXPECT_EQ(out.at(1).code(), errc::lease_not_found);
  EXPECT_EQ(out.at(2).code(), errc::lease_not_found);
  auto after = out.at(3);
  ASSERT_TRUE(after.has_value()) << after.error().message();
  EXPECT_TRUE(after->succeeded);
  EXPECT_FALSE(exists("/g/b"));
  EXPECT_TRUE(exists("/g/a"));
  EXPECT_EQ(b.commits(), 3u);
}

// A commit the store did not answer completes each of its ops with the error; the ops queued
// behind it go out in the next commit as usual.
TEST_F(Cluster_ClaimBatcher, AStoreErrorCompletesEachOpOfThatCommitOnly) {
  outcomes out(4);
  claim_batcher b(held_);
  const auto holding = held_.hold();
  client_->cut_off(true);
  submit_op(b, store_op::put_if_absent("/g/lost-1", "v", lease_), out.slot(0));
  ASSERT_TRUE(held_.wait_held(1));  // timed out after call_timeout, held
  client_->cut_off(false);
  submit_op(b, store_op::put_if_absent("/g/x", "v", lease_), out.slot(1));
  submit_op(b, store_op::put_if_absent("/g/y", "v", lease_), out.slot(2));
  submit_op(b, store_op::put_if_absent("/g/z", "v", lease_), out.slot(3));
  held_.release();
  ASSERT_TRUE(out.wait_all());
  EXPECT_EQ(out.at(0).code(), errc::cluster_registry_timeout);
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_TRUE(out.at(i).has_value() && out.at(i)->succeeded) << i;
  }
  EXPECT_EQ(b.commits(), 2u);
}

// The destructor refuses the queued ops at once, then waits for the in-flight commit's
// completion, whose callbacks may still submit (refused too).
TEST_F(Cluster_ClaimBatcher, DestructionRefusesQueuedOpsAndWaitsForTheCommitInFlight) {
  outcomes out(4);
  auto b = std::make_unique<claim_batcher>(held_);
  const auto holding = held_.hold();
  claim_batcher* raw = b.get();
  // Op 0's completion submits op 3 while the destructor waits for it.
  submit_op(*b, store_op::put_if_absent("/g/flying", "v", lease_),
            [&, raw, first = out.slot(0)](result<op_outcome> r) {
              first(std::move(r));
              raw->submit(store_op::put_if_absent("/g/late", "v", lease_), out.slot(3));
            });
  ASSERT_TRUE(held_.wait_held(1));
  submit_op(*b, store_op::put_if_absent("/g/queued-1", "v", lease_), out.slot(1));
  submit_op(*b, store_op::put_if_absent("/g/queued-2", "v", lease_), out.slot(2));

  std::atomic<bool> destroyed{false};
  std::thread destroyer([&] {
    b.reset();
    destroyed.store(true);
  });
  // The queued ops are refused while the commit is still held.
  const bool refused = out.wait(2);
  EXPECT_TRUE(refused);
  EXPECT_EQ(out.at(1).code(), errc::system_shutting_down);
  EXPECT_EQ(out.at(2).code(), errc::system_shutting_down);
  EXPECT_FALSE(out.done(0));
  EXPECT_FALSE(destroyed.load()) << "the destructor returned with a commit in flight";

  held_.release();
  EXPECT_TRUE(out.wait_all());
  destroyer.join();  // bounded: the completion it waited for has run
  EXPECT_TRUE(destroyed.load());
  EXPECT_TRUE(out.at(0).has_value() && out.at(0)->succeeded);
  EXPECT_EQ(out.at(3).code(), errc::system_shutting_down);
  EXPECT_FALSE(exists("/g/queued-1"));
  EXPECT_FALSE(exists("/g/late"));
  EXPECT_EQ(held_.commits().size(), 1u);
}

// For ThreadSanitizer: submitters racing the completions, each claim's completion releasing it
// again through the batcher (a submit from inside a completion, on the key of an op just done).
TEST_F(Cluster_ClaimBatcher, StressClaimsAndReleasesFromThreadsAndCompletions) {
  constexpr std::size_t threads = 8, per_thread = 500, n = threads * per_thread;
  outcomes claims(n), releases(n);
  claim_batcher b(*client_);
  std::vector<std::thread> submitters;
  for (std::size_t th = 0; th < threads; ++th) {
    submitters.emplace_back([&, th] {
      for (std::size_t i = 0; i < per_thread; ++i) {
        const std::size_t id = th * per_thread + i;
        const std::string key = "/g/s" + std::to_string(id);
        submit_op(b, store_op::put_if_absent(key, "v", lease_),
                  [&, id, key, claimed = claims.slot(id)](result<op_outcome> r) {
                    const revision at = r && r->succeeded ? r->applied_revision : 0;
                    claimed(std::move(r));
                    b.submit(store_op::delete_if_created_at(key, at), releases.slot(id));
                  });
      }
    });
  }
  for (auto& s : submitters) s.join();
  ASSERT_TRUE(claims.wait_all());
  ASSERT_TRUE(releases.wait_all());
  for (std::size_t i = 0; i < n; ++i) {
    auto c = claims.at(i), r = releases.at(i);
    ASSERT_TRUE(c.has_value() && r.has_value()) << i;
    EXPECT_TRUE(c->succeeded) << i;
    EXPECT_TRUE(r->succeeded) << i;
  }
  EXPECT_EQ(b.ops(), 2 * n);
  EXPECT_LE(b.commits(), b.ops());
  auto left = t::get_prefix(*client_, "/g/");
  ASSERT_TRUE(left.has_value());
  EXPECT_TRUE(left->kvs.empty());
  std::printf("[ stress   ] %zu ops in %llu commits\n", 2 * n,
              static_cast<unsigned long long>(b.commits()));
}

}  // namespace
