#pragma once
// The tests of the store conformance suite; included by store_conformance.hpp only (which
// defines the fixture and explains how to instantiate the suite).

namespace akt::cluster::testing::conformance_detail {
using namespace std::chrono_literals;

inline std::vector<store_op> puts(const std::vector<std::string>& keys, lease_id lease) {
  std::vector<store_op> ops;
  for (const auto& k : keys) ops.push_back(store_op::put_if_absent(k, "v:" + k, lease));
  return ops;
}
}  // namespace akt::cluster::testing::conformance_detail

// ---- leases ----

TEST_P(StoreConformance, LeaseGrant_RaisesATtlBelowTwoSecondsToTwo) {
  auto g = akt::cluster::testing::grant_lease(main(), std::chrono::seconds(1));
  ASSERT_TRUE(g);
  EXPECT_NE(g->id, 0);
  EXPECT_EQ(g->ttl, akt::cluster::store_limits::min_lease_ttl);
  (void)akt::cluster::testing::revoke_lease(main(), g->id);
}

TEST_P(StoreConformance, LeaseGrant_KeepsATtlAboveTheMinimum) {
  auto g = akt::cluster::testing::grant_lease(main(), std::chrono::seconds(7));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->ttl, std::chrono::seconds(7));
  (void)akt::cluster::testing::revoke_lease(main(), g->id);
}

TEST_P(StoreConformance, KeepAlive_RenewsTheLeaseToItsFullTtl) {
  const lease_id lease = grant(std::chrono::seconds(2));
  create(key("k"), "v", lease);
  // Three renewals a second apart: 3 s in all, past the 2 s TTL, with a second to spare each.
  for (int i = 0; i < 3; ++i) {
    sut().advance(std::chrono::seconds(1));
    auto ack = akt::cluster::testing::keep_alive(main(), lease);
    ASSERT_TRUE(ack) << akt::to_string(ack.code());
    EXPECT_EQ(ack->ttl, std::chrono::seconds(2));
  }
  auto r = akt::cluster::testing::get(main(), key("k"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kvs.size(), 1u);
}

TEST_P(StoreConformance, KeepAlive_OfARevokedLeaseIsLeaseNotFound) {
  const lease_id lease = grant();
  ASSERT_TRUE(akt::cluster::testing::revoke_lease(main(), lease));
  EXPECT_EQ(akt::cluster::testing::keep_alive(main(), lease).code(), akt::errc::lease_not_found);
  EXPECT_EQ(akt::cluster::testing::revoke_lease(main(), lease).code(), akt::errc::lease_not_found);
}

TEST_P(StoreConformance, KeepAlive_OfAnExpiredLeaseIsLeaseNotFound) {
  const lease_id lease = grant(std::chrono::seconds(2));
  sut().advance(std::chrono::seconds(3));
  EXPECT_TRUE(akt::cluster::testing::eventually([&] {
    return akt::cluster::testing::keep_alive(main(), lease).code() == akt::errc::lease_not_found;
  }));
}

TEST_P(StoreConformance, Revoke_DeletesTheLeasesKeysInOneRevisionAndWatchersSeeThem) {
  const lease_id lease = grant();
  const lease_id other = grant();
  create(key("a"), "v", lease);
  create(key("b"), "v", lease);
  create(key("c"), "v", other);
  akt::cluster::testing::watch_recorder rec;
  auto h = main().watch(prefix(), header() + 1, rec);
  ASSERT_TRUE(akt::cluster::testing::revoke_lease(main(), lease));
  // At once: the read after the revoke's completion no longer finds them.
  auto r = akt::cluster::testing::get_prefix(main(), prefix());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, key("c"));
  ASSERT_TRUE(rec.wait_for_events(2));
  auto events = rec.events();
  ASSERT_EQ(events.size(), 2u);
  std::set<std::string> deleted;
  for (const auto& e : events) {
    EXPECT_EQ(e.what, akt::cluster::watch_event::kind::del);
    deleted.insert(e.kv.key);
  }
  EXPECT_EQ(deleted, (std::set<std::string>{key("a"), key("b")}));
  EXPECT_EQ(events[0].kv.mod_revision, events[1].kv.mod_revision) << "one revision for both";
  EXPECT_FALSE(rec.ended());
}

TEST_P(StoreConformance, LeaseExpiry_DeletesTheLeasesKeysAndWatchersSeeTheDeletes) {
  const lease_id lease = grant(std::chrono::seconds(2));
  create(key("a"), "v", lease);
  create(key("b"), "v", lease);
  create(key("kept"), "v", 0);
  akt::cluster::testing::watch_recorder rec;
  auto h = main().watch(prefix(), header() + 1, rec);
  sut().advance(std::chrono::seconds(3));
  ASSERT_TRUE(rec.wait_for_events(2)) << "the expiry's deletes were not seen";
  auto events = rec.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].what, akt::cluster::watch_event::kind::del);
  EXPECT_EQ(events[1].what, akt::cluster::watch_event::kind::del);
  EXPECT_EQ(events[0].kv.mod_revision, events[1].kv.mod_revision);
  auto r = akt::cluster::testing::get_prefix(main(), prefix());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, key("kept"));
}

// ---- put-if-absent ----

TEST_P(StoreConformance, PutIfAbsent_CreatesTheKeyOnce) {
  const lease_id lease = grant();
  auto o = akt::cluster::testing::put_if_absent(main(), key("g"), "owner-a", lease);
  ASSERT_TRUE(o);
  ASSERT_TRUE(o->succeeded);
  EXPECT_GT(o->applied_revision, 0);
  auto r = akt::cluster::testing::get(main(), key("g"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  const auto& kv = r->kvs[0];
  EXPECT_EQ(kv.key, key("g"));
  EXPECT_EQ(kv.value, "owner-a");
  EXPECT_EQ(kv.create_revision, o->applied_revision);
  EXPECT_EQ(kv.mod_revision, o->applied_revision);
  EXPECT_EQ(kv.version, 1);
  EXPECT_EQ(kv.lease, lease);
  EXPECT_GE(r->header_revision, o->applied_revision);
}

TEST_P(StoreConformance, PutIfAbsent_OnAnExistingKeyReportsTheOwner) {
  const lease_id lease_a = grant();
  auto other = connect();
  const revision cr = create(key("g"), "owner-a", lease_a);
  auto second = akt::cluster::testing::put_if_absent(*other, key("g"), "owner-b", 0);
  ASSERT_TRUE(second);
  EXPECT_FALSE(second->succeeded);
  EXPECT_EQ(second->applied_revision, 0);
  EXPECT_EQ(second->current.value, "owner-a");
  EXPECT_EQ(second->current.create_revision, cr);
  EXPECT_EQ(second->current.lease, lease_a);
  auto r = akt::cluster::testing::get(main(), key("g"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "owner-a");
}

TEST_P(StoreConformance, PutIfAbsent_OnAnUnknownLeaseFailsWithLeaseNotFound) {
  const lease_id gone = grant();
  ASSERT_TRUE(akt::cluster::testing::revoke_lease(main(), gone));
  const revision before = header();
  auto o = akt::cluster::testing::put_if_absent(main(), key("g"), "v", gone);
  EXPECT_EQ(o.code(), akt::errc::lease_not_found);
  auto r = akt::cluster::testing::get(main(), key("g"));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->kvs.empty());
  EXPECT_EQ(r->header_revision, before) << "a refused write took a revision";
}

// ---- reads ----

TEST_P(StoreConformance, Get_OfAMissingKeyIsEmptyWithTheHeaderRevision) {
  const revision cr = create(key("present"));
  auto r = akt::cluster::testing::get(main(), key("missing"));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->kvs.empty());
  EXPECT_GE(r->header_revision, cr);
}

TEST_P(StoreConformance, GetPrefix_ReturnsTheKeysUnderThePrefixSortedByKey) {
  for (const char* k : {"d/b", "d/a", "e/a", "d", "d/c", "dd/a"}) create(key(k));
  auto r = akt::cluster::testing::get_prefix(main(), key("d/"));
  ASSERT_TRUE(r);
  std::vector<std::string> keys;
  for (const auto& kv : r->kvs) keys.push_back(kv.key);
  EXPECT_EQ(keys, (std::vector<std::string>{key("d/a"), key("d/b"), key("d/c")}));
  auto empty = akt::cluster::testing::get_prefix(main(), key("none/"));
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->kvs.empty());
  EXPECT_EQ(empty->header_revision, r->header_revision);
}

// ---- watches ----

TEST_P(StoreConformance, Watch_FromTheReadRevisionPlusOneSeesExactlyTheLaterChangesInOrder) {
  const revision cr1 = create(key("w/one"), "1");
  create(key("other/x"));  // outside the watched prefix
  auto read = akt::cluster::testing::get_prefix(main(), key("w/"));
  ASSERT_TRUE(read);
  akt::cluster::testing::watch_recorder rec;
  auto h = main().watch(key("w/"), read->header_revision + 1, rec);
  const revision cr2 = create(key("w/two"), "2");
  create(key("other/y"));
  auto upd = akt::cluster::testing::update_if_created_at(main(), key("w/one"), "1b", 0, cr1);
  ASSERT_TRUE(upd && upd->succeeded);
  auto del = akt::cluster::testing::delete_if_created_at(main(), key("w/two"), cr2);
  ASSERT_TRUE(del && del->succeeded);
  const revision cr3 = create(key("w/three"), "3");
  ASSERT_TRUE(rec.wait_for_events(4));
  auto events = rec.events();
  ASSERT_EQ(events.size(), 4u) << "an event missed or doubled";
  using kind = akt::cluster::watch_event::kind;
  EXPECT_EQ(events[0].what, kind::put);
  EXPECT_EQ(events[0].kv.key, key("w/two"));
  EXPECT_EQ(events[0].kv.create_revision, cr2);
  EXPECT_EQ(events[1].what, kind::put);
  EXPECT_EQ(events[1].kv.key, key("w/one"));
  EXPECT_EQ(events[1].kv.value, "1b");
  EXPECT_EQ(events[1].kv.version, 2);
  EXPECT_EQ(events[1].kv.mod_revision, upd->applied_revision);
  EXPECT_EQ(events[2].what, kind::del);
  EXPECT_EQ(events[2].kv.key, key("w/two"));
  EXPECT_EQ(events[2].kv.mod_revision, del->applied_revision);
  EXPECT_EQ(events[3].kv.key, key("w/three"));
  EXPECT_EQ(events[3].kv.mod_revision, cr3);
  // Nothing more comes: a write after them shows up alone.
  create(key("w/four"));
  ASSERT_TRUE(rec.wait_for_events(5));
  EXPECT_EQ(rec.event_count(), 5u);
  EXPECT_FALSE(rec.ended());
}

TEST_P(StoreConformance, Watch_FromAnOldRevisionReplaysTheHistory) {
  const revision cr_a = create(key("a"), "1");
  create(key("b"), "2");
  ASSERT_TRUE(akt::cluster::testing::delete_if_created_at(main(), key("a"), cr_a));
  akt::cluster::testing::watch_recorder rec;
  auto h = main().watch(prefix(), cr_a, rec);
  ASSERT_TRUE(rec.wait_for_events(3));
  auto events = rec.events();
  ASSERT_EQ(events.size(), 3u);
  using kind = akt::cluster::watch_event::kind;
  EXPECT_EQ(events[0].what, kind::put);
  EXPECT_EQ(events[0].kv.key, key("a"));
  EXPECT_EQ(events[0].kv.mod_revision, cr_a);
  EXPECT_EQ(events[1].what, kind::put);
  EXPECT_EQ(events[1].kv.key, key("b"));
  EXPECT_EQ(events[2].what, kind::del);
  EXPECT_EQ(events[2].kv.key, key("a"));
}

TEST_P(StoreConformance, Watch_FromACompactedRevisionEndsWithClusterCompacted) {
  const revision r1 = create(key("a"));
  create(key("b"));
  const revision r3 = create(key("c"));
  ASSERT_TRUE(sut().compact(r3));
  akt::cluster::testing::watch_recorder rec;
  auto h = main().watch(prefix(), r1, rec);
  ASSERT_TRUE(rec.wait_for_end());
  EXPECT_EQ(rec.end_reason().code(), akt::errc::cluster_compacted);
  EXPECT_GE(rec.end_compact_revision(), r3);
  EXPECT_EQ(rec.event_count(), 0u);
  // The way back: read in full, watch from the read's revision + 1.
  auto read = akt::cluster::testing::get_prefix(main(), prefix());
  ASSERT_TRUE(read);
  EXPECT_EQ(read->kvs.size(), 3u);
  akt::cluster::testing::watch_recorder again;
  auto h2 = main().watch(prefix(), read->header_revision + 1, again);
  const revision r4 = create(key("d"));
  ASSERT_TRUE(again.wait_for_events(1));
  EXPECT_EQ(again.events()[0].kv.mod_revision, r4);
  EXPECT_FALSE(again.ended());
}

TEST_P(StoreConformance, Watch_FromAFutureRevisionStartsThere) {
  akt::cluster::testing::watch_recorder rec;
  const revision from = header() + 3;
  auto h = main().watch(prefix(), from, rec);
  std::vector<std::string> expected;  // the keys created at `from` or later
  for (const char* k : {"a", "b", "c", "d"}) {
    if (create(key(k)) >= from) expected.push_back(key(k));
  }
  ASSERT_FALSE(expected.empty());
  ASSERT_TRUE(rec.wait_for_events(expected.size()));
  std::vector<std::string> seen;
  for (const auto& e : rec.events()) seen.push_back(e.kv.key);
  EXPECT_EQ(seen, expected);
}

TEST_P(StoreConformance, Watch_CancelStopsTheEvents) {
  akt::cluster::testing::watch_recorder rec;
  akt::cluster::testing::watch_recorder witness;
  auto h = main().watch(prefix(), header() + 1, rec);
  auto w = main().watch(prefix(), header() + 1, witness);
  create(key("a"));
  ASSERT_TRUE(rec.wait_for_events(1));
  h->cancel();
  create(key("b"));
  ASSERT_TRUE(witness.wait_for_events(2));
  // Give a wrongly delivered batch time to show up before looking.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(rec.event_count(), 1u);
  EXPECT_FALSE(rec.ended()) << "on_end after cancel";
  h.reset();  // destroying a cancelled handle is fine
}

TEST_P(StoreConformance, Watch_HandleDestroyedFromItsOwnBatchStopsTheWatch) {
  struct self_cancelling : akt::cluster::watch_handler {
    std::unique_ptr<akt::cluster::watch_handle> handle;
    std::atomic<int> batches{0};
    void on_events(const std::vector<akt::cluster::watch_event>&, revision) override {
      ++batches;
      handle.reset();  // cancel from inside the delivery: must neither wait for itself nor crash
    }
    void on_end(akt::error, revision) override { ADD_FAILURE() << "on_end after cancel"; }
  } h;
  akt::cluster::testing::watch_recorder witness;
  const revision from = header() + 1;
  auto w = main().watch(prefix(), from, witness);
  h.handle = main().watch(prefix(), from, h);
  create(key("a"));
  create(key("b"));
  ASSERT_TRUE(witness.wait_for_events(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(h.batches.load(), 1);
}

// ---- compare-and-delete, compare-and-update ----

TEST_P(StoreConformance, DeleteIfCreatedAt_DeletesTheKeyItCreated) {
  const revision cr = create(key("g"));
  auto d = akt::cluster::testing::delete_if_created_at(main(), key("g"), cr);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->succeeded);
  EXPECT_GT(d->applied_revision, cr);
  auto r = akt::cluster::testing::get(main(), key("g"));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->kvs.empty());
}

TEST_P(StoreConformance, DeleteIfCreatedAt_WithAStaleCreateRevisionLeavesTheNewerKey) {
  const revision first = create(key("g"), "owner-a");
  ASSERT_TRUE(akt::cluster::testing::delete_if_created_at(main(), key("g"), first));
  const revision second = create(key("g"), "owner-b");
  EXPECT_GT(second, first) << "a re-created key needs a new create revision (the fencing token)";
  auto stale = akt::cluster::testing::delete_if_created_at(main(), key("g"), first);
  ASSERT_TRUE(stale);
  EXPECT_FALSE(stale->succeeded);
  EXPECT_EQ(stale->current.create_revision, second);
  EXPECT_EQ(stale->current.value, "owner-b");
  auto r = akt::cluster::testing::get(main(), key("g"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "owner-b");
}

TEST_P(StoreConformance, DeleteIfCreatedAt_OfAMissingKeyReportsItAbsent) {
  auto d = akt::cluster::testing::delete_if_created_at(main(), key("never"), 5);
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->succeeded);
  EXPECT_EQ(d->current.create_revision, 0);
}

TEST_P(StoreConformance, UpdateIfCreatedAt_OverwritesOnlyTheSameCreation) {
  const lease_id lease = grant();
  const revision cr = create(key("g"), "v1", lease);
  auto u = akt::cluster::testing::update_if_created_at(main(), key("g"), "v2", lease, cr);
  ASSERT_TRUE(u);
  ASSERT_TRUE(u->succeeded);
  auto stale = akt::cluster::testing::update_if_created_at(main(), key("g"), "v3", lease, cr + 1);
  ASSERT_TRUE(stale);
  EXPECT_FALSE(stale->succeeded);
  EXPECT_EQ(stale->current.value, "v2");
  auto r = akt::cluster::testing::get(main(), key("g"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "v2");
  EXPECT_EQ(r->kvs[0].create_revision, cr);
  EXPECT_EQ(r->kvs[0].mod_revision, u->applied_revision);
  EXPECT_EQ(r->kvs[0].version, 2);
  EXPECT_EQ(r->kvs[0].lease, lease);
  auto missing = akt::cluster::testing::update_if_created_at(main(), key("none"), "v", 0, cr);
  ASSERT_TRUE(missing);
  EXPECT_FALSE(missing->succeeded);
  EXPECT_EQ(missing->current.create_revision, 0);
}

TEST_P(StoreConformance, UpdateIfCreatedAt_MovesTheKeyToTheLeaseGiven) {
  const lease_id first = grant();
  const lease_id second = grant();
  const revision cr = create(key("g"), "v1", first);
  auto u = akt::cluster::testing::update_if_created_at(main(), key("g"), "v2", second, cr);
  ASSERT_TRUE(u && u->succeeded);
  ASSERT_TRUE(akt::cluster::testing::revoke_lease(main(), first));
  auto r = akt::cluster::testing::get(main(), key("g"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->kvs.size(), 1u) << "the key went with the lease it left";
  EXPECT_EQ(r->kvs[0].lease, second);
  ASSERT_TRUE(akt::cluster::testing::revoke_lease(main(), second));
  r = akt::cluster::testing::get(main(), key("g"));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->kvs.empty()) << "the key stayed after the lease it moved to was revoked";
}

// ---- batches ----

TEST_P(StoreConformance, Commit_OfThreeHundredPutsCompletesWithAnOutcomePerOp) {
  const lease_id lease = grant();
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back(key("g/" + std::to_string(1000 + i)));
  auto r = akt::cluster::testing::commit(
      main(), akt::cluster::testing::conformance_detail::puts(keys, lease));
  ASSERT_TRUE(r) << akt::to_string(r.code());
  ASSERT_EQ(r->size(), keys.size());
  constexpr std::size_t round = akt::cluster::store_limits::max_ops_per_round;
  for (std::size_t i = 0; i < r->size(); ++i) {
    const auto& o = (*r)[i];
    ASSERT_TRUE(o.succeeded) << i;
    if (i % round != 0) {
      EXPECT_EQ(o.applied_revision, (*r)[i - 1].applied_revision) << "one round, one revision";
    } else if (i > 0) {
      EXPECT_GT(o.applied_revision, (*r)[i - 1].applied_revision) << "rounds in order";
    }
  }
  auto read = akt::cluster::testing::get_prefix(main(), key("g/"));
  ASSERT_TRUE(read);
  ASSERT_EQ(read->kvs.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(read->kvs[i].key, keys[i]);
    EXPECT_EQ(read->kvs[i].create_revision, (*r)[i].applied_revision);
    EXPECT_EQ(read->kvs[i].lease, lease);
  }
}

TEST_P(StoreConformance, Commit_WhereSomeKeysExistReportsPerOp) {
  const revision cr1 = create(key("k1"), "old1");
  const revision cr3 = create(key("k3"), "old3");
  auto r =
      akt::cluster::testing::commit(main(), akt::cluster::testing::conformance_detail::puts(
                                                {key("k0"), key("k1"), key("k2"), key("k3")}, 0));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 4u);
  EXPECT_TRUE((*r)[0].succeeded);
  EXPECT_FALSE((*r)[1].succeeded);
  EXPECT_TRUE((*r)[2].succeeded);
  EXPECT_FALSE((*r)[3].succeeded);
  EXPECT_EQ((*r)[0].applied_revision, (*r)[2].applied_revision);
  EXPECT_GT((*r)[0].applied_revision, cr3);
  EXPECT_EQ((*r)[1].current.create_revision, cr1);
  EXPECT_EQ((*r)[1].current.value, "old1");
  EXPECT_EQ((*r)[3].current.create_revision, cr3);
  EXPECT_EQ((*r)[3].applied_revision, 0);
}

TEST_P(StoreConformance, Commit_WhereNoConditionHoldsDoesNotAdvanceTheRevision) {
  const revision cr = create(key("k"));
  const revision before = header();
  std::vector<akt::cluster::store_op> ops;
  ops.push_back(akt::cluster::store_op::put_if_absent(key("k"), "again", 0));
  ops.push_back(akt::cluster::store_op::delete_if_created_at(key("missing"), cr));
  auto r = akt::cluster::testing::commit(main(), std::move(ops));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 2u);
  EXPECT_FALSE((*r)[0].succeeded);
  EXPECT_FALSE((*r)[1].succeeded);
  EXPECT_EQ(header(), before);
}

TEST_P(StoreConformance, Commit_ARoundThatPutsOneKeyTwiceIsRefused) {
  const revision before = header();
  std::vector<akt::cluster::store_op> ops;
  ops.push_back(akt::cluster::store_op::put_if_absent(key("dup"), "1", 0));
  ops.push_back(akt::cluster::store_op::put_if_absent(key("dup"), "2", 0));
  EXPECT_EQ(akt::cluster::testing::commit(main(), std::move(ops)).code(),
            akt::errc::invalid_argument);
  auto r = akt::cluster::testing::get(main(), key("dup"));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->kvs.empty());
  EXPECT_EQ(r->header_revision, before);
}

TEST_P(StoreConformance, Commit_AFailingConditionIsReportedBeforeItsLeaseIsChecked) {
  // The cluster claims with put-if-absent on its lease: a claim that finds an owner reports it,
  // even when the claimant's lease has just gone.
  const lease_id owner = grant();
  const lease_id gone = grant();
  ASSERT_TRUE(akt::cluster::testing::revoke_lease(main(), gone));
  const revision cr = create(key("g"), "owner", owner);
  auto o = akt::cluster::testing::put_if_absent(main(), key("g"), "late", gone);
  ASSERT_TRUE(o) << akt::to_string(o.code());
  EXPECT_FALSE(o->succeeded);
  EXPECT_EQ(o->current.create_revision, cr);
  EXPECT_EQ(o->current.lease, owner);
}

// ---- completions ----

TEST_P(StoreConformance, Completions_NeverRunInsideTheCall) {
  // Every helper call checks this too (t_inside_call); here the thread is compared as well, and
  // a call made from inside a completion completes later, on the store's thread.
  const auto caller = std::this_thread::get_id();
  std::atomic<int> on_caller{0};
  auto slot =
      std::make_shared<akt::cluster::testing::completion_slot<akt::cluster::range_result>>();
  auto nested =
      std::make_shared<akt::cluster::testing::completion_slot<akt::cluster::range_result>>();
  auto cb = slot->callback();
  akt::cluster::testing::t_inside_call = true;
  main().get(key("x"), [&, cb, nested](akt::result<akt::cluster::range_result> r) {
    if (std::this_thread::get_id() == caller) ++on_caller;
    akt::cluster::testing::t_inside_call = true;
    main().get(key("y"), nested->callback());
    akt::cluster::testing::t_inside_call = false;
    cb(std::move(r));
  });
  akt::cluster::testing::t_inside_call = false;
  EXPECT_TRUE(slot->wait());
  EXPECT_TRUE(nested->wait());
  EXPECT_EQ(on_caller.load(), 0);
}

TEST_P(StoreConformance, Stress_ManyCallersOnSeveralThreadsClaimEachKeyOnce) {
  constexpr int k_threads = 4;
  constexpr int k_keys = 40;
  constexpr int k_clients = 2;
  // Declared before the clients, so a client destroyed early (a failed assertion) still finds
  // them when it completes what is pending.
  struct shared_state {
    std::mutex m;
    std::condition_variable cv;
    int completed = 0;
    std::map<std::string, std::vector<revision>> winners;   // key -> revisions that won it
    std::map<std::string, std::set<revision>> seen_owners;  // key -> create revisions reported
  } st;
  std::atomic<int> running[k_clients] = {};  // per client: completions running now
  std::atomic<int> overlaps{0};
  auto record = [&](int client, const std::string& k, akt::result<akt::cluster::op_outcome> r) {
    if (running[client].fetch_add(1) != 0) ++overlaps;
    {
      std::lock_guard lk(st.m);
      if (r && r->succeeded) {
        st.winners[k].push_back(r->applied_revision);
      } else if (r) {
        st.seen_owners[k].insert(r->current.create_revision);
      }
      ++st.completed;
      st.cv.notify_all();
    }
    running[client].fetch_sub(1);
  };
  std::vector<std::unique_ptr<akt::cluster::store>> clients;
  for (int i = 0; i < k_clients; ++i) clients.push_back(connect());
  akt::cluster::testing::watch_recorder rec;
  auto h = main().watch(key("c/"), header() + 1, rec);

  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      const int c = t % k_clients;
      for (int i = 0; i < k_keys; ++i) {
        std::string k = key("c/" + std::to_string((i + t * 7) % k_keys));
        clients[c]->put_if_absent(k, "t" + std::to_string(t), 0,
                                  [&record, c, k](akt::result<akt::cluster::op_outcome> r) {
                                    record(c, k, std::move(r));
                                  });
      }
    });
  }
  for (auto& th : threads) th.join();
  {
    std::unique_lock lk(st.m);
    ASSERT_TRUE(st.cv.wait_for(lk, akt::cluster::testing::k_bound,
                               [&] { return st.completed == k_threads * k_keys; }));
    ASSERT_EQ(st.winners.size(), static_cast<std::size_t>(k_keys));
    for (const auto& [k, wins] : st.winners) {
      ASSERT_EQ(wins.size(), 1u) << k << " claimed twice";
      for (revision owner : st.seen_owners[k]) EXPECT_EQ(owner, wins[0]) << k;
    }
  }
  EXPECT_EQ(overlaps.load(), 0) << "completions of one store ran at the same time";
  ASSERT_TRUE(rec.wait_for_events(k_keys));
  auto read = akt::cluster::testing::get_prefix(main(), key("c/"));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->kvs.size(), static_cast<std::size_t>(k_keys));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(rec.event_count(), static_cast<std::size_t>(k_keys)) << "a claim seen twice";
}

TEST_P(StoreConformance, Stress_WatchesOpenedAndCancelledWhileWritersRun) {
  // Writers on two clients; a watcher thread keeps opening a watch from the revision it read,
  // checks that it sees a write made after that read, and cancels it (handle destroyed).
  constexpr int k_writers = 2;
  constexpr int k_writes = 150;
  constexpr int k_watches = 40;
  std::vector<std::unique_ptr<akt::cluster::store>> clients;
  for (int i = 0; i < k_writers; ++i) clients.push_back(connect());
  auto watching = connect();
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < k_writers; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < k_writes && !stop; ++i) {
        auto r = akt::cluster::testing::put_if_absent(
            *clients[w], key("s/" + std::to_string(w) + "/" + std::to_string(i)), "v", 0);
        EXPECT_TRUE(r && r->succeeded);
      }
    });
  }
  for (int i = 0; i < k_watches; ++i) {
    auto read = akt::cluster::testing::get_prefix(*watching, key("s/"));
    ASSERT_TRUE(read);
    akt::cluster::testing::watch_recorder rec;
    auto h = watching->watch(key("s/"), read->header_revision + 1, rec);
    const revision mine = create(key("s/mark/" + std::to_string(i)));
    ASSERT_TRUE(akt::cluster::testing::eventually([&] {
      for (const auto& e : rec.events()) {
        if (e.kv.mod_revision == mine) return true;
      }
      return false;
    })) << "a write after the read was not seen";
    for (const auto& e : rec.events()) EXPECT_GT(e.kv.mod_revision, read->header_revision);
    h.reset();
    EXPECT_FALSE(rec.ended());
  }
  stop = true;
  for (auto& th : writers) th.join();
}
