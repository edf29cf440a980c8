// Fencing: a node that can no longer prove its lease runs no grain handler, drops its grains
// without on_deactivate, refuses grain messages with a marked not_owner, and rejoins under a new
// epoch once the store answers. Also: a node whose workers are all stuck fences itself, and
// membership tells remoting when a node leaves.
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <thread>

#include "cluster/cluster_support.hpp"

namespace {

using namespace akt::cluster_test;
using akt::errc;
using akt::test::eventually;

struct grain_counts {
  std::atomic<int> activations{0}, deactivations{0}, handled{0};
};
grain_counts g_counts;

struct fenced_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.fenced";
  akt::error on_activate(akt::grain_props&) override {
    g_counts.activations++;
    return {};
  }
  akt::error on_deactivate(akt::grain_props&) override {
    g_counts.deactivations++;
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    g_counts.handled++;
    ctx.reply(g_counts.handled.load());
  }
};

TEST(Cluster_Fencing, ANodeCutOffTheStoreFencesDropsItsGrainsAndRejoinsUnderANewEpoch) {
  g_counts.activations = 0;
  g_counts.deactivations = 0;
  auto store = std::make_shared<test_store>();
  akt::actor_system a("a", cluster_node_config(store, "a"));
  akt::actor_system b("b", cluster_node_config(store, "b"));
  cluster_events a_events(a), b_events(b);
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(b.start());
  ASSERT_FALSE(akt::register_grain_kind<fenced_grain>(a));
  const akt::grain_identity id{"test.fenced", "g"};
  ASSERT_TRUE(akt::ask_grain<int>(a, id, 0, 5s));
  ASSERT_EQ(g_counts.activations.load(), 1);
  const akt::cluster::lease_id first_epoch = akt::cluster::self(a)->epoch;

  store->client("a")->cut_off(true);  // a partition between a and the store
  ASSERT_TRUE(eventually([&] { return akt::cluster::fenced(a); }, 10s));
  ASSERT_TRUE(eventually([&] { return a_events.fenced.load() == 1; }, 10s));
  akt::result<int> refused = akt::ask_grain<int>(a, id, 0, 5s);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), errc::not_owner) << refused.error().message();
  EXPECT_TRUE(akt::detail::error_access::refused(refused.error()));
  EXPECT_TRUE(eventually([&] { return akt::active_grains(a).empty(); }))
      << "dropped, as a crashed node's";
  EXPECT_EQ(g_counts.deactivations.load(), 0) << "no on_deactivate on a fenced node";
  EXPECT_EQ(g_counts.activations.load(), 1) << "no activation while fenced";
  // The store expires a's lease: b sees a leave.
  EXPECT_TRUE(eventually([&] { return b_events.saw_left("a"); }, 10s));

  store->client("a")->cut_off(false);
  ASSERT_TRUE(eventually([&] { return a_events.rejoined.load() == 1; }, 10s));
  EXPECT_FALSE(akt::cluster::fenced(a));
  EXPECT_NE(akt::cluster::self(a)->epoch, first_epoch) << "a new epoch";
  auto again = akt::ask_grain<int>(a, id, 0, 5s);
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_EQ(g_counts.activations.load(), 2) << "a fresh activation under the new epoch";
  EXPECT_TRUE(eventually(
      [&] {
        int n = 0;
        std::lock_guard<std::mutex> lock(b_events.mutex);
        for (const auto& j : b_events.joined) n += j == "a" ? 1 : 0;
        return n >= 2;
      },
      10s))
      << "b saw a join again";
}

// A store whose first read of the grain registry's prefix waits until the test releases it: a
// node's start then stops after its join (the fence installed) and before its registry started
// (the activation gate installed), the window in which it must still activate nothing.
class registry_read_held final : public akt::cluster::store_provider {
 public:
  explicit registry_read_held(std::string prefix) : prefix_(std::move(prefix)) {}
  akt::result<std::unique_ptr<akt::cluster::store>> open_store(std::string_view node) override {
    return std::unique_ptr<akt::cluster::store>(
        std::make_unique<held>(*this, data_.connect(std::string(node))));
  }
  bool wait_held(std::chrono::milliseconds within) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, within, [&] { return waiting_ != nullptr; });
  }
  void release() {
    std::function<void()> go;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
      go = std::move(waiting_);
    }
    if (go) go();
  }

 private:
  class held final : public akt::cluster::store {
   public:
    held(registry_read_held& owner, std::unique_ptr<akt::cluster::inproc_client> inner)
        : owner_(owner), inner_(std::move(inner)) {}
    void grant_lease(std::chrono::seconds ttl,
                     akt::cluster::store_callback<akt::cluster::lease_grant> done) override {
      inner_->grant_lease(ttl, std::move(done));
    }
    void keep_alive(akt::cluster::lease_id id,
                    akt::cluster::store_callback<akt::cluster::keep_alive_ack> done) override {
      inner_->keep_alive(id, std::move(done));
    }
    void revoke_lease(akt::cluster::lease_id id, akt::cluster::store_callback<void> done) override {
      inner_->revoke_lease(id, std::move(done));
    }
    void get(std::string key,
             akt::cluster::store_callback<akt::cluster::range_result> done) override {
      {
        std::lock_guard<std::mutex> lock(owner_.mutex_);
        if (key == owner_.prefix_ && !owner_.released_ && !owner_.waiting_) {
          owner_.waiting_ = [this, key, done = std::move(done)]() mutable {
            inner_->get(std::move(key), std::move(done));
          };
          owner_.cv_.notify_all();
          return;
        }
      }
      inner_->get(std::move(key), std::move(done));
    }
    void get_prefix(std::string prefix,
                    akt::cluster::store_callback<akt::cluster::range_result> done) override {
      inner_->get_prefix(std::move(prefix), std::move(done));
    }
    void commit(std::vector<akt::cluster::store_op> ops,
                akt::cluster::store_callback<std::vector<akt::cluster::op_outcome>> done) override {
      inner_->commit(std::move(ops), std::move(done));
    }
    std::unique_ptr<akt::cluster::watch_handle> watch(std::string prefix,
                                                      akt::cluster::revision from,
                                                      akt::cluster::watch_handler& h) override {
      return inner_->watch(std::move(prefix), from, h);
    }

   private:
    registry_read_held& owner_;
    std::unique_ptr<akt::cluster::inproc_client> inner_;
  };

  const std::string prefix_;
  akt::cluster::inproc_store data_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> waiting_;  // guarded by mutex_
  bool released_ = false;          // guarded by mutex_
};

// The fault harness's restart under the same name found six grains activated with no claim
// (token 0) on a node that had joined but whose registry had not started: peers still routed
// there. Such a node refuses every activation, marked, until both the fence and the gate are in.
TEST(Cluster_Fencing, AJoinedNodeWhoseRegistryHasNotStartedActivatesNoGrain) {
  g_counts.activations = 0;
  auto store = std::make_shared<registry_read_held>("/akt/test/v1/grains/");
  akt::actor_system a("a", cluster_node_config(store, "a"));
  ASSERT_FALSE(akt::register_grain_kind<fenced_grain>(a));
  akt::result<void> started = akt::error(errc::system_not_started);
  std::thread starter([&] { started = a.start(); });
  const bool held = store->wait_held(10s);
  if (!held) store->release();
  if (!held) starter.join();
  ASSERT_TRUE(held) << "the registry's first read never came";

  const akt::grain_identity id{"test.fenced", "early"};
  akt::result<int> early = akt::ask_grain<int>(a, id, 0, 5s);
  if (early) store->release();
  if (early) starter.join();
  ASSERT_FALSE(early) << "activated with no claim (activations: " << g_counts.activations.load()
                      << ")";
  EXPECT_EQ(early.code(), errc::not_owner) << early.error().message();
  EXPECT_TRUE(akt::detail::error_access::refused(early.error())) << "marked: safe to resend";
  EXPECT_EQ(g_counts.activations.load(), 0) << "no activation without a claim";

  store->release();
  starter.join();
  ASSERT_TRUE(started) << started.error().message();
  akt::result<int> later = akt::ask_grain<int>(a, id, 0, 5s);
  ASSERT_TRUE(later) << later.error().message();
  EXPECT_EQ(g_counts.activations.load(), 1);
  ASSERT_TRUE(a.stop());
}

// Every dispatcher worker of the node is stuck in a handler: the probe cannot run, so the node
// stops renewing its lease and fences itself, like a partitioned one.
struct stuck final : akt::actor {
  std::shared_ptr<std::atomic<bool>> release;
  std::shared_ptr<std::atomic<int>> inside;
  stuck(std::shared_ptr<std::atomic<bool>> r, std::shared_ptr<std::atomic<int>> i)
      : release(std::move(r)), inside(std::move(i)) {}
  void receive(akt::receive_context& ctx) override {
    if (!ctx.is<int>()) return;
    (*inside)++;
    (void)eventually([&] { return release->load(); }, 30s);  // bounded, released by the test
  }
};

TEST(Cluster_Fencing, ANodeWhoseWorkersAreAllStuckStopsRenewingAndFencesItself) {
  auto store = std::make_shared<test_store>();
  akt::actor_system a("a", cluster_node_config(store, "a"));
  cluster_events events(a);
  ASSERT_TRUE(a.start());
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto inside = std::make_shared<std::atomic<int>>(0);
  std::vector<akt::pid> blockers;
  for (unsigned i = 0; i < a.worker_count(); ++i) {
    auto p = a.spawn<stuck>("stuck-" + std::to_string(i), release, inside);
    ASSERT_TRUE(p);
    blockers.push_back(*p);
  }
  for (auto& p : blockers) ASSERT_FALSE(p.tell(1));
  ASSERT_TRUE(eventually([&] { return inside->load() == static_cast<int>(blockers.size()); }));
  EXPECT_TRUE(eventually([&] { return akt::cluster::fenced(a); }, 10s));
  release->store(true);
  EXPECT_TRUE(eventually([&] { return events.rejoined.load() >= 1; }, 15s));
  EXPECT_FALSE(akt::cluster::fenced(a));
}

// Stuck workers keep the node out: fenced, it takes no new lease (no record the others would
// place grains on, only to see it expire again) until the probe is handled again. Issue 20's
// stalled node (tests/faults/stalled_node_test.cpp) found it rejoining twice in a 4.5 s stall.
TEST(Cluster_Fencing, ANodeWhoseWorkersAreAllStuckTakesNoNewLeaseUntilTheyAreFree) {
  auto store = std::make_shared<test_store>();
  akt::actor_system a("a", cluster_node_config(store, "a"));
  akt::actor_system b("b", cluster_node_config(store, "b"));
  cluster_events a_events(a), b_events(b);
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(b.start());
  ASSERT_TRUE(eventually([&] { return member_names(b).size() == 2; }));
  const akt::cluster::lease_id first_epoch = akt::cluster::self(a)->epoch;
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto inside = std::make_shared<std::atomic<int>>(0);
  std::vector<akt::pid> blockers;
  for (unsigned i = 0; i < a.worker_count(); ++i) {
    auto p = a.spawn<stuck>("stuck-" + std::to_string(i), release, inside);
    ASSERT_TRUE(p);
    blockers.push_back(*p);
  }
  for (auto& p : blockers) ASSERT_FALSE(p.tell(1));
  ASSERT_TRUE(eventually([&] { return inside->load() == static_cast<int>(blockers.size()); }));
  ASSERT_TRUE(eventually([&] { return akt::cluster::fenced(a); }, 10s));
  ASSERT_TRUE(eventually([&] { return b_events.saw_left("a"); }, 10s));
  // A node that rejoins while stuck does so one retry (200 ms) after its fence, and again after
  // every expiry (TTL): within twice the TTL it would have rejoined at least once.
  EXPECT_FALSE(eventually([&] { return a_events.rejoined.load() > 0; }, 4s))
      << "a rejoined while every worker was stuck";
  EXPECT_TRUE(akt::cluster::fenced(a));
  EXPECT_EQ(member_names(b), std::vector<std::string>{"b"});
  release->store(true);
  ASSERT_TRUE(eventually([&] { return a_events.rejoined.load() >= 1; }, 15s));
  EXPECT_FALSE(akt::cluster::fenced(a));
  EXPECT_NE(akt::cluster::self(a)->epoch, first_epoch) << "a new epoch";
  EXPECT_TRUE(eventually([&] { return member_names(b).size() == 2; }, 10s)) << "b sees a again";
}

// Membership tells remoting: once b's record is gone (its lease expired), a's sends to b's actor
// are refused at once instead of waiting in the lane for the transport to notice.
struct echo_actor final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<std::string>()) ctx.reply(std::string("pong"));
  }
};

TEST(Cluster_Membership, ANodeThatLeftIsUnreachableAtOnceThroughRemoting) {
  auto store = std::make_shared<test_store>();
  akt::actor_system a("a", cluster_node_config(store, "a"));
  akt::actor_system b("b", cluster_node_config(store, "b"));
  cluster_events a_events(a);
  ASSERT_TRUE(a.start());
  ASSERT_TRUE(b.start());
  ASSERT_TRUE(b.spawn<echo_actor>("echo"));
  auto remote = a.lookup(b.address() + "/user/echo", 5s);
  ASSERT_TRUE(remote) << remote.error().message();
  ASSERT_TRUE(remote->ask<std::string>(std::string("ping"), 5s));
  store->client("b")->cut_off(true);
  ASSERT_TRUE(eventually([&] { return a_events.saw_left("b"); }, 10s));
  akt::result<std::string> r = remote->ask<std::string>(std::string("ping"), 5s);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.code() == errc::unreachable || r.code() == errc::dead ||
              r.code() == errc::node_lost)
      << r.error().message();
  store->client("b")->cut_off(false);
}

}  // namespace
