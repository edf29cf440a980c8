// The etcd store's operations against a real etcd (one per test program, a key prefix per test).

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "etcd/etcd_test_support.hpp"

namespace akt::test {
namespace {

using cluster::key_value;
using cluster::lease_grant;
using cluster::op_outcome;
using cluster::range_result;
using cluster::store_op;
using cluster::watch_event;

class EtcdStore : public etcd_test {};

result<lease_grant> grant(cluster::store& s, std::chrono::seconds ttl) {
  auto r = await<lease_grant>([&](auto cb) { s.grant_lease(ttl, std::move(cb)); });
  if (!r) return error(errc::request_timeout, "no completion");
  return *r;
}

result<op_outcome> put_if_absent(cluster::store& s, const std::string& k, const std::string& v,
                                 cluster::lease_id l) {
  auto r = await<op_outcome>([&](auto cb) { s.put_if_absent(k, v, l, std::move(cb)); });
  if (!r) return error(errc::request_timeout, "no completion");
  return *r;
}

result<range_result> get(cluster::store& s, const std::string& k) {
  auto r = await<range_result>([&](auto cb) { s.get(k, std::move(cb)); });
  if (!r) return error(errc::request_timeout, "no completion");
  return *r;
}

result<range_result> get_prefix(cluster::store& s, const std::string& k) {
  auto r = await<range_result>([&](auto cb) { s.get_prefix(k, std::move(cb)); });
  if (!r) return error(errc::request_timeout, "no completion");
  return *r;
}

result<std::vector<op_outcome>> commit(cluster::store& s, std::vector<store_op> ops) {
  auto r =
      await<std::vector<op_outcome>>([&](auto cb) { s.commit(std::move(ops), std::move(cb)); });
  if (!r) return error(errc::request_timeout, "no completion");
  return *r;
}

TEST_F(EtcdStore, GrantKeepAliveRevoke) {
  AKT_ETCD_STORE_OR_SKIP(s);
  auto g = grant(*s, 5s);
  ASSERT_TRUE(g) << g.error().message();
  EXPECT_NE(g->id, 0);
  EXPECT_EQ(g->ttl, 5s);
  auto ka = await<cluster::keep_alive_ack>([&](auto cb) { s->keep_alive(g->id, std::move(cb)); });
  ASSERT_TRUE(ka && *ka) << (ka ? ka->error().message() : "no completion");
  EXPECT_EQ((*ka)->ttl, 5s);
  // The keep-alive round trip (a stream per round trip), measured.
  constexpr int rounds = 50;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) {
    auto again =
        await<cluster::keep_alive_ack>([&](auto cb) { s->keep_alive(g->id, std::move(cb)); });
    ASSERT_TRUE(again && *again);
  }
  std::printf("keep-alive round trip: %lld us (mean of %d)\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                         std::chrono::steady_clock::now() - start)
                                         .count() /
                                     rounds),
              rounds);
  auto rv = await<void>([&](auto cb) { s->revoke_lease(g->id, std::move(cb)); });
  ASSERT_TRUE(rv && *rv) << (rv ? rv->error().message() : "no completion");
  ka = await<cluster::keep_alive_ack>([&](auto cb) { s->keep_alive(g->id, std::move(cb)); });
  ASSERT_TRUE(ka);
  EXPECT_EQ(ka->error_or_ok(), errc::lease_not_found);
  rv = await<void>([&](auto cb) { s->revoke_lease(g->id, std::move(cb)); });
  ASSERT_TRUE(rv);
  EXPECT_EQ(rv->error(), errc::lease_not_found) << rv->error().message();
}

TEST_F(EtcdStore, GrantRaisesTtlBelowTwoSecondsToTwo) {
  AKT_ETCD_STORE_OR_SKIP(s);
  auto g = grant(*s, 1s);
  ASSERT_TRUE(g) << g.error().message();
  EXPECT_EQ(g->ttl, cluster::store_limits::min_lease_ttl);
}

TEST_F(EtcdStore, PutIfAbsentThenGet) {
  AKT_ETCD_STORE_OR_SKIP(s);
  const auto key = test_prefix() + "a";
  auto missing = get(*s, key);
  ASSERT_TRUE(missing) << missing.error().message();
  EXPECT_TRUE(missing->kvs.empty());
  EXPECT_GT(missing->header_revision, 0);

  auto first = put_if_absent(*s, key, "v1", 0);
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_TRUE(first->succeeded);
  EXPECT_GT(first->applied_revision, missing->header_revision);

  auto second = put_if_absent(*s, key, "v2", 0);
  ASSERT_TRUE(second) << second.error().message();
  EXPECT_FALSE(second->succeeded);
  EXPECT_EQ(second->applied_revision, 0);
  EXPECT_EQ(second->current.key, key);
  EXPECT_EQ(second->current.value, "v1");
  EXPECT_EQ(second->current.create_revision, first->applied_revision);

  auto read = get(*s, key);
  ASSERT_TRUE(read) << read.error().message();
  ASSERT_EQ(read->kvs.size(), 1u);
  EXPECT_EQ(read->kvs[0].value, "v1");
  EXPECT_EQ(read->kvs[0].create_revision, first->applied_revision);
  EXPECT_EQ(read->kvs[0].mod_revision, first->applied_revision);
  EXPECT_EQ(read->kvs[0].version, 1);
  EXPECT_GE(read->header_revision, first->applied_revision);
}

TEST_F(EtcdStore, UpdateAndDeleteOnlyAtTheCreateRevision) {
  AKT_ETCD_STORE_OR_SKIP(s);
  const auto key = test_prefix() + "k";
  auto created = put_if_absent(*s, key, "v1", 0);
  ASSERT_TRUE(created && created->succeeded);
  const auto cr = created->applied_revision;

  auto outcomes = commit(*s, {store_op::update_if_created_at(key, "v2", 0, cr + 1000),
                              store_op::delete_if_created_at(test_prefix() + "absent", 0)});
  ASSERT_TRUE(outcomes) << outcomes.error().message();
  ASSERT_EQ(outcomes->size(), 2u);
  EXPECT_FALSE((*outcomes)[0].succeeded);
  EXPECT_EQ((*outcomes)[0].current.create_revision, cr);
  EXPECT_FALSE((*outcomes)[1].succeeded);
  EXPECT_EQ((*outcomes)[1].current.create_revision, 0);

  outcomes = commit(*s, {store_op::update_if_created_at(key, "v2", 0, cr)});
  ASSERT_TRUE(outcomes) << outcomes.error().message();
  ASSERT_TRUE((*outcomes)[0].succeeded);
  auto read = get(*s, key);
  ASSERT_TRUE(read && read->kvs.size() == 1);
  EXPECT_EQ(read->kvs[0].value, "v2");
  EXPECT_EQ(read->kvs[0].create_revision, cr);
  EXPECT_EQ(read->kvs[0].version, 2);

  auto del =
      await<op_outcome>([&](auto cb) { s->delete_if_created_at(key, cr + 1, std::move(cb)); });
  ASSERT_TRUE(del && *del);
  EXPECT_FALSE((*del)->succeeded);
  del = await<op_outcome>([&](auto cb) { s->delete_if_created_at(key, cr, std::move(cb)); });
  ASSERT_TRUE(del && *del);
  EXPECT_TRUE((*del)->succeeded);
  read = get(*s, key);
  ASSERT_TRUE(read);
  EXPECT_TRUE(read->kvs.empty());

  // Created again: a new, higher create revision (the fencing token).
  auto again = put_if_absent(*s, key, "v3", 0);
  ASSERT_TRUE(again && again->succeeded);
  EXPECT_GT(again->applied_revision, cr);
}

TEST_F(EtcdStore, CommitSplitsLargeBatchesIntoRoundsOf127) {
  AKT_ETCD_STORE_OR_SKIP(s);
  std::vector<store_op> ops;
  constexpr std::size_t n = 300;
  for (std::size_t i = 0; i < n; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "%04zu", i);
    ops.push_back(store_op::put_if_absent(test_prefix() + name, "v", 0));
  }
  const auto start = std::chrono::steady_clock::now();
  auto outcomes = commit(*s, ops);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(outcomes) << outcomes.error().message();
  ASSERT_EQ(outcomes->size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE((*outcomes)[i].succeeded) << i;
    // One revision per round of 127.
    EXPECT_EQ((*outcomes)[i].applied_revision, (*outcomes)[(i / 127) * 127].applied_revision);
  }
  EXPECT_LT((*outcomes)[0].applied_revision, (*outcomes)[127].applied_revision);
  EXPECT_LT((*outcomes)[127].applied_revision, (*outcomes)[254].applied_revision);
  std::printf(
      "commit of %zu put_if_absent in 3 rounds: %lld us\n", n,
      static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(took).count()));

  auto all = get_prefix(*s, test_prefix());
  ASSERT_TRUE(all) << all.error().message();
  ASSERT_EQ(all->kvs.size(), n);
  for (std::size_t i = 1; i < n; ++i) EXPECT_LT(all->kvs[i - 1].key, all->kvs[i].key);

  // The same keys again: every op fails, reporting the key as found.
  outcomes = commit(*s, ops);
  ASSERT_TRUE(outcomes) << outcomes.error().message();
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_FALSE((*outcomes)[i].succeeded);
    EXPECT_EQ((*outcomes)[i].current.key, ops[i].key);
    EXPECT_GT((*outcomes)[i].current.create_revision, 0);
  }
}

TEST_F(EtcdStore, OneOpCommitRoundTrip) {
  AKT_ETCD_STORE_OR_SKIP(s);
  constexpr int rounds = 50;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) {
    auto r = put_if_absent(*s, test_prefix() + std::to_string(i), "v", 0);
    ASSERT_TRUE(r && r->succeeded) << (r ? "" : r.error().message());
  }
  std::printf("one-op commit (put_if_absent) round trip: %lld us (mean of %d)\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                         std::chrono::steady_clock::now() - start)
                                         .count() /
                                     rounds),
              rounds);
}

TEST_F(EtcdStore, CommitOfLargeValuesIsSplitBelowEtcdsRequestLimit) {
  AKT_ETCD_STORE_OR_SKIP(s);
  // 4 x 600 KiB: far over etcd's default 1.5 MiB request limit in one txn.
  std::vector<store_op> ops;
  for (int i = 0; i < 4; ++i) {
    ops.push_back(store_op::put_if_absent(test_prefix() + std::to_string(i),
                                          std::string(600 * 1024, 'x'), 0));
  }
  auto outcomes = commit(*s, ops);
  ASSERT_TRUE(outcomes) << outcomes.error().message();
  ASSERT_EQ(outcomes->size(), 4u);
  for (const auto& o : *outcomes) EXPECT_TRUE(o.succeeded);
  auto all = get_prefix(*s, test_prefix());
  ASSERT_TRUE(all) << all.error().message();
  ASSERT_EQ(all->kvs.size(), 4u);
  EXPECT_EQ(all->kvs[3].value.size(), 600u * 1024);
}

TEST_F(EtcdStore, CommitPuttingAKeyTwiceInARoundIsInvalidArgument) {
  AKT_ETCD_STORE_OR_SKIP(s);
  const auto key = test_prefix() + "twice";
  auto outcomes =
      commit(*s, {store_op::put_if_absent(key, "a", 0), store_op::put_if_absent(key, "b", 0)});
  EXPECT_EQ(outcomes.error_or_ok(), errc::invalid_argument) << outcomes.error_or_ok().message();
  auto read = get(*s, key);
  ASSERT_TRUE(read);
  EXPECT_TRUE(read->kvs.empty());  // the round was refused whole
}

TEST_F(EtcdStore, EmptyCommitCompletesWithNoOutcomes) {
  AKT_ETCD_STORE_OR_SKIP(s);
  auto outcomes = commit(*s, {});
  ASSERT_TRUE(outcomes) << outcomes.error().message();
  EXPECT_TRUE(outcomes->empty());
}

TEST_F(EtcdStore, PutOnARevokedLeaseFailsTheRoundWithLeaseNotFound) {
  AKT_ETCD_STORE_OR_SKIP(s);
  auto g = grant(*s, 5s);
  ASSERT_TRUE(g);
  auto rv = await<void>([&](auto cb) { s->revoke_lease(g->id, std::move(cb)); });
  ASSERT_TRUE(rv && *rv);
  auto put = put_if_absent(*s, test_prefix() + "x", "v", g->id);
  EXPECT_EQ(put.error_or_ok(), errc::lease_not_found) << put.error_or_ok().message();
}

TEST_F(EtcdStore, WatchSeesPutsAndTheDeletesOfARevokedLease) {
  AKT_ETCD_STORE_OR_SKIP(s);
  auto start = get_prefix(*s, test_prefix());
  ASSERT_TRUE(start);
  recording_handler h;
  auto handle = s->watch(test_prefix(), start->header_revision + 1, h);
  auto g = grant(*s, 5s);
  ASSERT_TRUE(g);
  auto outcomes = commit(*s, {store_op::put_if_absent(test_prefix() + "a", "1", g->id),
                              store_op::put_if_absent(test_prefix() + "b", "2", g->id)});
  ASSERT_TRUE(outcomes && (*outcomes)[0].succeeded && (*outcomes)[1].succeeded);
  auto rv = await<void>([&](auto cb) { s->revoke_lease(g->id, std::move(cb)); });
  ASSERT_TRUE(rv && *rv);
  ASSERT_TRUE(h.wait_events(4));
  auto events = h.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].what, watch_event::kind::put);
  EXPECT_EQ(events[0].kv.key, test_prefix() + "a");
  EXPECT_EQ(events[0].kv.lease, g->id);
  EXPECT_EQ(events[1].kv.key, test_prefix() + "b");
  EXPECT_EQ(events[0].kv.mod_revision, (*outcomes)[0].applied_revision);
  EXPECT_EQ(events[2].what, watch_event::kind::del);
  EXPECT_EQ(events[3].what, watch_event::kind::del);
  EXPECT_EQ(events[2].kv.mod_revision, events[3].kv.mod_revision);  // one revision
  EXPECT_GT(events[2].kv.mod_revision, events[1].kv.mod_revision);
  handle->cancel();
  EXPECT_EQ(h.ends(), 0);
}

TEST_F(EtcdStore, WatchFromAnOldRevisionReplaysAndOtherPrefixesStayOut) {
  AKT_ETCD_STORE_OR_SKIP(s);
  auto a = put_if_absent(*s, test_prefix() + "in/1", "x", 0);
  auto b = put_if_absent(*s, test_prefix() + "out", "y", 0);
  auto c = put_if_absent(*s, test_prefix() + "in/2", "z", 0);
  ASSERT_TRUE(a && b && c && a->succeeded && c->succeeded);
  recording_handler h;
  auto handle = s->watch(test_prefix() + "in/", a->applied_revision, h);
  ASSERT_TRUE(h.wait_events(2));
  auto events = h.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kv.key, test_prefix() + "in/1");
  EXPECT_EQ(events[1].kv.key, test_prefix() + "in/2");
  EXPECT_EQ(events[1].kv.create_revision, c->applied_revision);
}

TEST_F(EtcdStore, WatchFromACompactedRevisionEndsCompacted) {
  AKT_ETCD_STORE_OR_SKIP(s);
  auto* etcd = shared_etcd();
  auto a = put_if_absent(*s, test_prefix() + "1", "x", 0);
  auto b = put_if_absent(*s, test_prefix() + "2", "x", 0);
  ASSERT_TRUE(a && b && a->succeeded && b->succeeded);
  const int rc = etcd->etcdctl({"compact", std::to_string(b->applied_revision)});
  if (rc == -1) GTEST_SKIP() << "etcdctl is not installed";
  ASSERT_EQ(rc, 0);
  recording_handler h;
  auto handle = s->watch(test_prefix(), a->applied_revision, h);
  ASSERT_TRUE(h.wait_end());
  EXPECT_EQ(h.end(), errc::cluster_compacted) << h.end().message();
  EXPECT_GE(h.compact_revision(), b->applied_revision);
  EXPECT_TRUE(h.events().empty());
}

TEST_F(EtcdStore, CanceledWatchDeliversNothingMore) {
  AKT_ETCD_STORE_OR_SKIP(s);
  auto start = get_prefix(*s, test_prefix());
  ASSERT_TRUE(start);
  recording_handler h;
  auto handle = s->watch(test_prefix(), start->header_revision + 1, h);
  ASSERT_TRUE(put_if_absent(*s, test_prefix() + "1", "x", 0));
  ASSERT_TRUE(h.wait_events(1));
  handle->cancel();
  ASSERT_TRUE(put_if_absent(*s, test_prefix() + "2", "x", 0));
  // A second watch from the same revision sees both: the first one had its chance.
  recording_handler h2;
  auto handle2 = s->watch(test_prefix(), start->header_revision + 1, h2);
  ASSERT_TRUE(h2.wait_events(2));
  EXPECT_EQ(h.events().size(), 1u);
  EXPECT_EQ(h.ends(), 0);
}

TEST_F(EtcdStore, CompletionsRunOnTheStoreThreadNeverInsideTheCall) {
  AKT_ETCD_STORE_OR_SKIP(s);
  std::mutex held;
  std::atomic<int> done{0};
  std::atomic<bool> inside_call{false};
  std::thread::id completion_thread;
  {
    std::lock_guard lock(held);  // a completion that takes it must wait until the calls return
    inside_call = true;
    for (int i = 0; i < 20; ++i) {
      s->get(test_prefix() + "k", [&](result<range_result> r) {
        std::lock_guard l(held);
        EXPECT_FALSE(inside_call.load());
        EXPECT_TRUE(r);
        completion_thread = std::this_thread::get_id();
        ++done;
      });
    }
    inside_call = false;
  }
  ASSERT_TRUE(akt::test::eventually([&] { return done.load() == 20; }, 15s));
  std::lock_guard l(held);
  EXPECT_NE(completion_thread, std::this_thread::get_id());
}

TEST_F(EtcdStore, CallsFromACompletionWork) {
  AKT_ETCD_STORE_OR_SKIP(s);
  std::promise<result<range_result>> p;
  const auto key = test_prefix() + "k";
  s->put_if_absent(key, "v", 0, [&](result<op_outcome> r) {
    ASSERT_TRUE(r && r->succeeded);
    s->get(key, [&](result<range_result> g) { p.set_value(std::move(g)); });
  });
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(15s), std::future_status::ready);
  auto g = f.get();
  ASSERT_TRUE(g && g->kvs.size() == 1);
}

TEST_F(EtcdStore, DestructorCompletesEverythingPendingAndEndsWatches) {
  AKT_ETCD_STORE_OR_SKIP(s);
  constexpr int n = 200;
  std::atomic<int> completed{0};
  std::atomic<int> shutting_down{0};
  std::atomic<int> other{0};
  auto start_rev = get_prefix(*s, test_prefix());
  ASSERT_TRUE(start_rev);
  recording_handler h;
  auto handle = s->watch(test_prefix(), start_rev->header_revision + 1, h);
  for (int i = 0; i < n; ++i) {
    s->get(test_prefix() + "k", [&](result<range_result> r) {
      if (r) {
        ++completed;
      } else if (r.error() == errc::system_shutting_down) {
        ++shutting_down;
      } else {
        ++other;
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  s.reset();  // every completion has run when it returns
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(completed + shutting_down, n);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(h.ends(), 1);
  EXPECT_EQ(h.end(), errc::system_shutting_down) << h.end().message();
  handle.reset();  // a handle that outlives its store
}

TEST_F(EtcdStore, BadOptionsAreInvalidClusterConfig) {
  auto r = etcd::connect({});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::invalid_cluster_config);
  EXPECT_NE(r.error().detail().find("endpoints"), std::string_view::npos);
  r = etcd::connect({{"127.0.0.1:1"}, 0ms, 1000ms});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().detail().find("call_timeout"), std::string_view::npos);
  r = etcd::connect({{"localhost:1", "127.0.0.1:2"}, 1000ms, 1000ms});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::invalid_cluster_config);
  r = etcd::connect({{"https://127.0.0.1:2379"}, 1000ms, 1000ms});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::invalid_cluster_config);
}

}  // namespace
}  // namespace akt::test
