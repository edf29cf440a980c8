// The in-process store: the conformance suite on a manual clock, then what only it has (fault
// injection, its clocks, destruction with work pending, compaction).

#include "akt/cluster/inproc_store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "akt/actor/actor_system.hpp"
#include "akt/testkit/manual_time.hpp"
#include "cluster/store_conformance.hpp"
#include "cluster/store_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::errc;
using akt::cluster::inproc_client;
using akt::cluster::inproc_client_options;
using akt::cluster::inproc_store;
using akt::cluster::inproc_store_options;
using akt::cluster::manual_clock;
using akt::cluster::revision;
namespace t = akt::cluster::testing;

// The conformance suite's view of an in-process store on a manual clock.
class inproc_under_test final : public t::store_under_test {
 public:
  inproc_under_test() : store_(options(clock_)) {}
  std::unique_ptr<akt::cluster::store> connect() override {
    return store_.connect("node-" + std::to_string(++clients_));
  }
  akt::result<void> compact(revision r) override { return store_.compact(r); }
  void advance(std::chrono::milliseconds d) override { clock_->advance(d); }

 private:
  static inproc_store_options options(const std::shared_ptr<manual_clock>& clock) {
    inproc_store_options o;
    o.clock = clock;
    return o;
  }
  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  inproc_store store_;
  int clients_ = 0;
};

}  // namespace

AKT_INSTANTIATE_STORE_CONFORMANCE(InProcess, "inproc",
                                  [] { return std::make_unique<inproc_under_test>(); });

namespace {

inproc_client_options quick() {
  inproc_client_options o;
  o.call_timeout = 200ms;
  return o;
}

// A store on a manual clock and two clients whose unanswered calls time out after 200 ms.
class InprocStore : public ::testing::Test {
 protected:
  InprocStore()
      : store_(manual()), a_(store_.connect("a", quick())), b_(store_.connect("b", quick())) {}

  inproc_store_options manual() {
    inproc_store_options o;
    o.clock = clock_;
    return o;
  }
  revision create(akt::cluster::store& s, const std::string& k, akt::cluster::lease_id lease = 0) {
    auto r = t::put_if_absent(s, k, "v", lease);
    EXPECT_TRUE(r && r->succeeded);
    return r && r->succeeded ? r->applied_revision : 0;
  }
  bool exists(akt::cluster::store& s, const std::string& k) {
    auto r = t::get(s, k);
    EXPECT_TRUE(r);
    return r && !r->kvs.empty();
  }

  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  inproc_store store_;
  std::unique_ptr<inproc_client> a_, b_;
};

// Runs f and returns how long it took.
template <class F>
std::chrono::milliseconds timed(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

TEST_F(InprocStore, CutOff_CallsCompleteWithRegistryTimeoutAfterTheCallTimeout) {
  a_->cut_off(true);
  akt::result<akt::cluster::op_outcome> put = errc::dead;
  const auto took = timed([&] { put = t::put_if_absent(*a_, "/k", "v", 0); });
  EXPECT_EQ(put.code(), errc::cluster_registry_timeout);
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 10s);
  EXPECT_EQ(t::get(*a_, "/k").code(), errc::cluster_registry_timeout);
  EXPECT_EQ(t::grant_lease(*a_, 5s).code(), errc::cluster_registry_timeout);
  EXPECT_FALSE(exists(*b_, "/k")) << "a cut-off write reached the store";
  a_->cut_off(false);
  EXPECT_TRUE(t::put_if_absent(*a_, "/k", "v", 0));
  EXPECT_TRUE(exists(*b_, "/k"));
}

TEST_F(InprocStore, CutOff_EndsTheWatchesWithRegistryTimeout) {
  t::watch_recorder before, during, other;
  auto h1 = a_->watch("/", 1, before);
  auto h3 = b_->watch("/", 1, other);
  a_->cut_off(true);
  ASSERT_TRUE(before.wait_for_end());
  EXPECT_EQ(before.end_reason().code(), errc::cluster_registry_timeout);
  auto h2 = a_->watch("/", 1, during);
  ASSERT_TRUE(during.wait_for_end());
  EXPECT_EQ(during.end_reason().code(), errc::cluster_registry_timeout);
  create(*b_, "/x");
  ASSERT_TRUE(other.wait_for_events(1));
  EXPECT_FALSE(other.ended()) << "another client's watch was ended";
}

TEST_F(InprocStore, CutOff_LosesKeepAlivesSoTheLeaseExpires) {
  auto g = t::grant_lease(*a_, 2s);
  ASSERT_TRUE(g);
  create(*a_, "/owned", g->id);
  a_->cut_off(true);
  EXPECT_EQ(t::keep_alive(*a_, g->id).code(), errc::cluster_registry_timeout);
  clock_->advance(3s);
  EXPECT_FALSE(exists(*b_, "/owned"));
  a_->cut_off(false);
  EXPECT_EQ(t::keep_alive(*a_, g->id).code(), errc::lease_not_found);
}

TEST_F(InprocStore, DropKeepAlives_TimesThemOutAndTheLeaseExpires) {
  auto g = t::grant_lease(*a_, 2s);
  ASSERT_TRUE(g);
  create(*a_, "/owned", g->id);
  t::watch_recorder rec;
  auto h = b_->watch("/", store_.current_revision() + 1, rec);
  a_->drop_keep_alives(true);
  EXPECT_EQ(t::keep_alive(*a_, g->id).code(), errc::cluster_registry_timeout);
  EXPECT_TRUE(exists(*a_, "/owned")) << "other calls still work";
  clock_->advance(3s);
  ASSERT_TRUE(rec.wait_for_events(1));
  EXPECT_EQ(rec.events()[0].what, akt::cluster::watch_event::kind::del);
  a_->drop_keep_alives(false);
  EXPECT_EQ(t::keep_alive(*a_, g->id).code(), errc::lease_not_found);
}

TEST_F(InprocStore, SeverWatches_EndsThemWithRegistryTimeoutAndNewOnesWork) {
  t::watch_recorder w1, w2, w3, other;
  auto h1 = a_->watch("/", 1, w1);
  auto h2 = a_->watch("/p/", 1, w2);
  auto h4 = b_->watch("/", 1, other);
  a_->sever_watches();
  ASSERT_TRUE(w1.wait_for_end());
  ASSERT_TRUE(w2.wait_for_end());
  EXPECT_EQ(w1.end_reason().code(), errc::cluster_registry_timeout);
  EXPECT_EQ(w2.end_reason().code(), errc::cluster_registry_timeout);
  auto h3 = a_->watch("/", store_.current_revision() + 1, w3);
  create(*b_, "/after");
  ASSERT_TRUE(w3.wait_for_events(1));
  ASSERT_TRUE(other.wait_for_events(1));
  EXPECT_FALSE(other.ended());
  EXPECT_EQ(w1.event_count(), 0u);
}

TEST_F(InprocStore, DelayReplies_TheWriteAppliesAtOnceAndTheReplyComesLater) {
  a_->delay_replies(150ms);
  auto slot = std::make_shared<t::completion_slot<akt::cluster::op_outcome>>();
  const auto start = std::chrono::steady_clock::now();
  a_->put_if_absent("/d", "v", 0, slot->callback());
  EXPECT_TRUE(exists(*b_, "/d")) << "the write waits for the reply";
  auto r = slot->wait();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->succeeded);
  // Watch batches are delayed too, and keep their order.
  t::watch_recorder rec;
  auto h = a_->watch("/", 1, rec);
  create(*b_, "/e");
  ASSERT_TRUE(rec.wait_for_events(2));
  EXPECT_EQ(rec.events()[0].kv.key, "/d");
  EXPECT_EQ(rec.events()[1].kv.key, "/e");
}

TEST_F(InprocStore, DelayReplies_PastTheCallTimeoutTimesOutButTheWriteIsApplied) {
  a_->delay_replies(500ms);  // call_timeout is 200 ms
  EXPECT_EQ(t::put_if_absent(*a_, "/maybe", "v", 0).code(), errc::cluster_registry_timeout);
  EXPECT_TRUE(exists(*b_, "/maybe")) << "a timed-out write is possibly written: here, written";
  a_->delay_replies(0ms);
  EXPECT_TRUE(exists(*a_, "/maybe"));
}

TEST_F(InprocStore, Commit_ADeleteAfterAnUpdateOfTheKeyRunsBothInOrder) {
  // Allowed by etcd's duplicate-key rule (a delete may follow a put of its key), and both
  // conditions are read before the round: the update applies, then the delete.
  const revision cr = create(*a_, "/u");
  t::watch_recorder rec;
  auto h = b_->watch("/", store_.current_revision() + 1, rec);
  std::vector<akt::cluster::store_op> ops;
  ops.push_back(akt::cluster::store_op::update_if_created_at("/u", "v2", 0, cr));
  ops.push_back(akt::cluster::store_op::delete_if_created_at("/u", cr));
  ops.push_back(akt::cluster::store_op::delete_if_created_at("/u", cr));
  auto r = t::commit(*a_, std::move(ops));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 3u);
  for (const auto& o : *r) EXPECT_TRUE(o.succeeded);
  EXPECT_FALSE(exists(*b_, "/u"));
  ASSERT_TRUE(rec.wait_for_events(2));
  auto events = rec.events();
  ASSERT_EQ(events.size(), 2u) << "the second delete deletes nothing";
  EXPECT_EQ(events[0].what, akt::cluster::watch_event::kind::put);
  EXPECT_EQ(events[1].what, akt::cluster::watch_event::kind::del);
  EXPECT_EQ(events[0].kv.mod_revision, events[1].kv.mod_revision);
}

TEST_F(InprocStore, Compact_RefusesRevisionsAtOrBelowThePointAndAboveTheCurrent) {
  const revision r = create(*a_, "/c");
  EXPECT_EQ(store_.compact(r + 1).code(), errc::invalid_argument);
  ASSERT_TRUE(store_.compact(r));
  EXPECT_EQ(store_.compact_revision(), r);
  EXPECT_EQ(store_.compact(r).code(), errc::cluster_compacted);
}

TEST(InprocStoreHistory, HistoryRevisions_CompactsByItself) {
  inproc_store_options o;
  o.history_revisions = 5;
  inproc_store store(o);
  auto c = store.connect("a");
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(t::put_if_absent(*c, "/k" + std::to_string(i), "v", 0));
  EXPECT_EQ(store.current_revision(), 11);
  EXPECT_EQ(store.compact_revision(), 6);
  t::watch_recorder old, kept;
  auto h1 = c->watch("/", 2, old);
  auto h2 = c->watch("/", 6, kept);
  ASSERT_TRUE(old.wait_for_end());
  EXPECT_EQ(old.end_reason().code(), errc::cluster_compacted);
  EXPECT_EQ(old.end_compact_revision(), 6);
  ASSERT_TRUE(kept.wait_for_events(6));
  EXPECT_FALSE(kept.ended());
}

TEST(InprocStoreClock, FunctionClock_DrivesLeaseExpiry) {
  auto now = std::make_shared<std::atomic<std::int64_t>>(0);
  inproc_store_options o;
  o.clock = std::make_shared<akt::cluster::function_clock>([now] {
    return akt::cluster::store_clock::time_point(std::chrono::nanoseconds(now->load()));
  });
  inproc_store store(o);
  auto c = store.connect("a");
  auto g = t::grant_lease(*c, 2s);
  ASSERT_TRUE(g);
  ASSERT_TRUE(t::put_if_absent(*c, "/f", "v", g->id));
  t::watch_recorder rec;
  auto h = c->watch("/", store.current_revision() + 1, rec);
  *now += std::chrono::nanoseconds(1900ms).count();
  std::this_thread::sleep_for(50ms);  // several polls: not due yet
  EXPECT_EQ(rec.event_count(), 0u);
  *now += std::chrono::nanoseconds(200ms).count();
  ASSERT_TRUE(rec.wait_for_events(1)) << "the store's poll did not expire the lease";
  EXPECT_EQ(store.lease_count(), 0u);
}

TEST(InprocStoreClock, FunctionClock_FollowsATestkitVirtualTime) {
  akt::actor_system sys("store-clock", {.workers = 1, .manual_time = true});
  ASSERT_TRUE(sys.start());
  {
    inproc_store_options o;
    o.clock =
        std::make_shared<akt::cluster::function_clock>([&sys] { return akt::testkit::now(sys); });
    inproc_store store(o);
    auto c = store.connect("a");
    auto g = t::grant_lease(*c, 5s);
    ASSERT_TRUE(g);
    ASSERT_TRUE(t::put_if_absent(*c, "/v", "v", g->id));
    ASSERT_TRUE(akt::testkit::advance(sys, 6s));
    EXPECT_TRUE(t::eventually([&] { return t::get(*c, "/v")->kvs.empty(); }));
  }
  (void)sys.stop();
}

TEST(InprocStoreClock, SteadyClock_ExpiresALeaseOnItsOwn) {
  inproc_store store;
  auto c = store.connect("a");
  const auto start = std::chrono::steady_clock::now();
  auto g = t::grant_lease(*c, 1s);  // raised to 2 s
  ASSERT_TRUE(g);
  ASSERT_TRUE(t::put_if_absent(*c, "/s", "v", g->id));
  t::watch_recorder rec;
  auto h = c->watch("/", store.current_revision() + 1, rec);
  ASSERT_TRUE(rec.wait_for_events(1));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2s);
}

TEST_F(InprocStore, Destructor_CompletesPendingCallsAndEndsWatchesWithShuttingDown) {
  inproc_client_options slow;
  slow.call_timeout = 60s;
  auto c = store_.connect("slow", slow);
  c->delay_replies(30s);  // below the call timeout: the replies wait in the queue
  auto get = std::make_shared<t::completion_slot<akt::cluster::range_result>>();
  auto put = std::make_shared<t::completion_slot<akt::cluster::op_outcome>>();
  auto grant = std::make_shared<t::completion_slot<akt::cluster::lease_grant>>();
  c->get("/k", get->callback());
  c->put_if_absent("/k", "v", 0, put->callback());
  c->grant_lease(2s, grant->callback());
  c->cut_off(true);
  auto timeout = std::make_shared<t::completion_slot<akt::cluster::range_result>>();
  c->get("/k", timeout->callback());  // would time out after 60 s
  c->cut_off(false);
  t::watch_recorder rec;
  auto h = c->watch("/", 1, rec);  // its replay is delayed too
  c.reset();
  // Everything ran before the destructor returned.
  ASSERT_TRUE(get->done() && put->done() && grant->done() && timeout->done());
  EXPECT_EQ(get->wait().code(), errc::system_shutting_down);
  EXPECT_EQ(put->wait().code(), errc::system_shutting_down);
  EXPECT_EQ(grant->wait().code(), errc::system_shutting_down);
  EXPECT_EQ(timeout->wait().code(), errc::system_shutting_down);
  ASSERT_TRUE(rec.ended());
  EXPECT_EQ(rec.end_reason().code(), errc::system_shutting_down);
  EXPECT_EQ(rec.event_count(), 0u);
  h->cancel();  // a handle may outlive its client
  h.reset();
}

TEST_F(InprocStore, Cancel_WaitsForTheBatchBeingDeliveredOnAnotherThread) {
  struct slow_handler : akt::cluster::watch_handler {
    std::mutex m;
    std::condition_variable cv;
    bool entered = false, release = false, returned = false;
    void on_events(const std::vector<akt::cluster::watch_event>&, revision) override {
      std::unique_lock lk(m);
      entered = true;
      cv.notify_all();
      cv.wait_for(lk, t::k_bound, [&] { return release; });
      returned = true;
    }
    void on_end(akt::error, revision) override {}
  } h;
  auto handle = a_->watch("/", 1, h);
  create(*b_, "/x");
  {
    std::unique_lock lk(h.m);
    ASSERT_TRUE(h.cv.wait_for(lk, t::k_bound, [&] { return h.entered; }));
  }
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    handle->cancel();
    cancelled = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(cancelled.load()) << "cancel returned while a batch was being delivered";
  {
    std::lock_guard lk(h.m);
    h.release = true;
    h.cv.notify_all();
  }
  canceller.join();
  std::lock_guard lk(h.m);
  EXPECT_TRUE(h.returned);
}

// A handler that holds its first batch until released.
struct held_handler : akt::cluster::watch_handler {
  std::mutex m;
  std::condition_variable cv;
  bool entered = false, release = false;
  std::vector<akt::cluster::watch_event> events;
  bool ended = false;
  akt::error why;
  revision compact_revision = 0;
  void on_events(const std::vector<akt::cluster::watch_event>& batch, revision) override {
    std::unique_lock lk(m);
    entered = true;
    cv.notify_all();
    cv.wait_for(lk, t::k_bound, [&] { return release; });
    events.insert(events.end(), batch.begin(), batch.end());
  }
  void on_end(akt::error e, revision cr) override {
    std::lock_guard lk(m);
    ended = true;
    why = std::move(e);
    compact_revision = cr;
    cv.notify_all();
  }
};

TEST_F(InprocStore, Watch_ThatFellBehindACompactionEndsWithClusterCompacted) {
  held_handler h;
  auto handle = a_->watch("/", store_.current_revision() + 1, h);
  create(*b_, "/a");
  {
    std::unique_lock lk(h.m);
    ASSERT_TRUE(h.cv.wait_for(lk, t::k_bound, [&] { return h.entered; }));
  }
  create(*b_, "/b");
  create(*b_, "/c");
  ASSERT_TRUE(store_.compact(store_.current_revision()));
  std::unique_lock lk(h.m);
  h.release = true;
  h.cv.notify_all();
  ASSERT_TRUE(h.cv.wait_for(lk, t::k_bound, [&] { return h.ended; }));
  EXPECT_EQ(h.why.code(), errc::cluster_compacted);
  EXPECT_EQ(h.compact_revision, store_.compact_revision());
  ASSERT_EQ(h.events.size(), 1u) << "only the batch delivered before the compaction";
  EXPECT_EQ(h.events[0].kv.key, "/a");
}

TEST_F(InprocStore, Watch_DeliversALongHistoryInBoundedBatchesInOrder) {
  constexpr int k_rounds = 12;
  constexpr std::size_t k_round = akt::cluster::store_limits::max_ops_per_round;
  for (int r = 0; r < k_rounds; ++r) {
    std::vector<akt::cluster::store_op> ops;
    for (std::size_t i = 0; i < k_round; ++i) {
      ops.push_back(akt::cluster::store_op::put_if_absent(
          "/h/" + std::to_string(r) + "/" + std::to_string(i), "v", 0));
    }
    ASSERT_TRUE(t::commit(*a_, std::move(ops)));
  }
  t::watch_recorder rec;
  auto h = b_->watch("/h/", 1, rec);
  ASSERT_TRUE(rec.wait_for_events(k_rounds * k_round));
  EXPECT_GE(rec.batch_count(), 2u);
  EXPECT_LE(rec.largest_batch(), akt::cluster::inproc_store_defaults::max_watch_batch + k_round);
  EXPECT_FALSE(rec.ended());
}

TEST_F(InprocStore, Stress_ClockAdvancedWhileKeepAlivesAndReadsRun) {
  // One thread moves the clock in 100 ms steps, one renews the lease, one reads: the lease
  // lives while it is renewed; once it is reported gone it stays gone, with its key.
  auto g = t::grant_lease(*a_, 2s);
  ASSERT_TRUE(g);
  create(*a_, "/r", g->id);
  std::atomic<bool> stop{false};
  std::atomic<bool> gone{false};
  std::thread mover([&] {
    for (int i = 0; i < 200 && !stop; ++i) {
      clock_->advance(100ms);
      std::this_thread::sleep_for(1ms);
    }
  });
  std::thread renewer([&] {
    while (!stop) {
      auto ack = t::keep_alive(*a_, g->id);
      if (!ack) {
        EXPECT_EQ(ack.code(), errc::lease_not_found);
        gone = true;
        return;
      }
    }
  });
  std::thread reader([&] {
    while (!stop) {
      const bool was_gone = gone;
      auto r = t::get(*b_, "/r");
      ASSERT_TRUE(r);
      if (was_gone && !r->kvs.empty()) {
        // The lease was reported gone before this read began: its key must be gone too.
        ADD_FAILURE() << "a key outlived its lease";
        return;
      }
    }
  });
  mover.join();
  stop = true;
  renewer.join();
  reader.join();
  if (!gone) {
    EXPECT_TRUE(t::keep_alive(*a_, g->id));
  }
}

TEST(InprocStoreLifetime, Client_OutlivesTheStoreObject) {
  auto clock = std::make_shared<manual_clock>();
  std::unique_ptr<inproc_client> c;
  {
    inproc_store_options o;
    o.clock = clock;
    inproc_store store(o);
    c = store.connect("a");
  }
  auto g = t::grant_lease(*c, 2s);
  ASSERT_TRUE(g);
  ASSERT_TRUE(t::put_if_absent(*c, "/k", "v", g->id));
  clock->advance(3s);
  auto r = t::get(*c, "/k");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->kvs.empty());
}

}  // namespace
