// The checking decoders of etcd's answers (src/etcd/etcd_decode.hpp): an unexpected shape is
// errc::protocol_error, never a crash. No etcd needed.

#include "etcd/etcd_decode.hpp"

#include <gtest/gtest.h>

namespace akt::etcd::detail {
namespace {

using cluster::store_op;

mvccpb::KeyValue kv(const std::string& key, std::int64_t create, std::int64_t mod,
                    std::int64_t version = 1) {
  mvccpb::KeyValue k;
  k.set_key(key);
  k.set_value("v");
  k.set_create_revision(create);
  k.set_mod_revision(mod);
  k.set_version(version);
  return k;
}

etcdserverpb::RangeResponse range_at(std::int64_t rev) {
  etcdserverpb::RangeResponse r;
  r.mutable_header()->set_revision(rev);
  return r;
}

TEST(EtcdDecode, PrefixEnd) {
  EXPECT_EQ(prefix_end("/a/"), "/a0");
  EXPECT_EQ(prefix_end("ab\xff"), "ac");
  EXPECT_EQ(prefix_end(""), std::string(1, '\0'));
  EXPECT_EQ(prefix_end("\xff\xff"), std::string(1, '\0'));
}

TEST(EtcdDecode, RangeChecksTheShape) {
  auto ok = range_at(10);
  *ok.add_kvs() = kv("/p/a", 3, 4);
  *ok.add_kvs() = kv("/p/b", 5, 5);
  auto r = decode_range(ok, "/p/", prefix_end("/p/"));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->header_revision, 10);
  ASSERT_EQ(r->kvs.size(), 2u);

  EXPECT_EQ(decode_range(etcdserverpb::RangeResponse{}, "/p/", "/p0").error(),
            errc::protocol_error);  // no header
  auto unordered = range_at(10);
  *unordered.add_kvs() = kv("/p/b", 3, 4);
  *unordered.add_kvs() = kv("/p/a", 5, 5);
  EXPECT_EQ(decode_range(unordered, "/p/", "/p0").error(), errc::protocol_error);
  auto outside = range_at(10);
  *outside.add_kvs() = kv("/q", 3, 4);
  EXPECT_EQ(decode_range(outside, "/p/", "/p0").error(), errc::protocol_error);
  auto other_key = range_at(10);
  *other_key.add_kvs() = kv("/p/x", 3, 4);
  EXPECT_EQ(decode_range(other_key, "/p/y", "").error(), errc::protocol_error);
  auto bad_revisions = range_at(10);
  *bad_revisions.add_kvs() = kv("/p/a", 5, 4);
  EXPECT_EQ(decode_range(bad_revisions, "/p/", "/p0").error(), errc::protocol_error);
  auto future = range_at(10);
  *future.add_kvs() = kv("/p/a", 5, 11);
  EXPECT_EQ(decode_range(future, "/p/", "/p0").error(), errc::protocol_error);
  auto more = range_at(10);
  more.set_more(true);
  EXPECT_EQ(decode_range(more, "/p/", "/p0").error(), errc::protocol_error);
}

TEST(EtcdDecode, LeaseAnswers) {
  etcdserverpb::LeaseGrantResponse g;
  EXPECT_EQ(decode_grant(g).error(), errc::protocol_error);
  g.set_id(7);
  g.set_ttl(2);
  ASSERT_TRUE(decode_grant(g));
  g.set_error("too large");
  EXPECT_EQ(decode_grant(g).error(), errc::protocol_error);

  etcdserverpb::LeaseKeepAliveResponse k;
  k.set_id(7);
  k.set_ttl(5);
  ASSERT_TRUE(decode_keep_alive(k, 7));
  EXPECT_EQ(decode_keep_alive(k, 8).error(), errc::protocol_error);
  k.set_ttl(0);
  EXPECT_EQ(decode_keep_alive(k, 7).error(), errc::lease_not_found);
}

TEST(EtcdDecode, CommitRoundChecksEveryResponse) {
  const std::vector<store_op> ops{store_op::put_if_absent("/a", "v", 0),
                                  store_op::delete_if_created_at("/b", 3)};
  // The request: one nested txn per op.
  auto req = commit_round_request(ops);
  ASSERT_EQ(req.success_size(), 2);
  EXPECT_EQ(req.compare_size(), 0);
  EXPECT_TRUE(req.success(0).has_request_txn());
  EXPECT_TRUE(req.success(1).request_txn().success(0).has_request_delete_range());

  etcdserverpb::TxnResponse r;
  r.mutable_header()->set_revision(9);
  r.set_succeeded(true);
  auto* put = r.add_responses()->mutable_response_txn();
  put->set_succeeded(true);
  put->add_responses()->mutable_response_put();
  auto* del = r.add_responses()->mutable_response_txn();
  del->set_succeeded(false);
  *del->add_responses()->mutable_response_range()->add_kvs() = kv("/b", 4, 4);
  auto out = decode_commit_round(r, ops);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_TRUE((*out)[0].succeeded);
  EXPECT_EQ((*out)[0].applied_revision, 9);
  EXPECT_FALSE((*out)[1].succeeded);
  EXPECT_EQ((*out)[1].current.create_revision, 4);

  auto short_answer = r;
  short_answer.mutable_responses()->RemoveLast();
  EXPECT_EQ(decode_commit_round(short_answer, ops).error(), errc::protocol_error);
  auto wrong_kind = r;
  wrong_kind.mutable_responses(0)->mutable_response_range();
  EXPECT_EQ(decode_commit_round(wrong_kind, ops).error(), errc::protocol_error);
  auto wrong_key = r;
  wrong_key.mutable_responses(1)
      ->mutable_response_txn()
      ->mutable_responses(0)
      ->mutable_response_range()
      ->mutable_kvs(0)
      ->set_key("/c");
  EXPECT_EQ(decode_commit_round(wrong_key, ops).error(), errc::protocol_error);
  auto failed_outer = r;
  failed_outer.set_succeeded(false);
  EXPECT_EQ(decode_commit_round(failed_outer, ops).error(), errc::protocol_error);
  EXPECT_EQ(decode_commit_round(etcdserverpb::TxnResponse{}, ops).error(), errc::protocol_error);
}

TEST(EtcdDecode, WatchEventsChecked) {
  etcdserverpb::WatchResponse w;
  w.mutable_header()->set_revision(12);
  auto* put = w.add_events();
  put->set_type(mvccpb::Event::PUT);
  *put->mutable_kv() = kv("/p/a", 10, 10);
  auto* del = w.add_events();
  del->set_type(mvccpb::Event::DELETE);
  del->mutable_kv()->set_key("/p/a");
  del->mutable_kv()->set_mod_revision(11);
  auto out = decode_watch_events(w, "/p/", "/p0", 5);
  ASSERT_TRUE(out) << out.error().message();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[1].what, cluster::watch_event::kind::del);
  EXPECT_EQ((*out)[1].kv.mod_revision, 11);

  EXPECT_EQ(decode_watch_events(w, "/p/", "/p0", 11).error(), errc::protocol_error);  // old
  EXPECT_EQ(decode_watch_events(w, "/q/", "/q0", 5).error(), errc::protocol_error);   // outside
  auto beyond = w;
  beyond.mutable_header()->set_revision(10);
  EXPECT_EQ(decode_watch_events(beyond, "/p/", "/p0", 5).error(), errc::protocol_error);
  auto unknown = w;
  unknown.mutable_events(0)->set_type(static_cast<mvccpb::Event::EventType>(7));
  EXPECT_EQ(decode_watch_events(unknown, "/p/", "/p0", 5).error(), errc::protocol_error);
  auto no_kv = w;
  no_kv.mutable_events(0)->clear_kv();
  EXPECT_EQ(decode_watch_events(no_kv, "/p/", "/p0", 5).error(), errc::protocol_error);
}

// Arbitrary bytes parsed as any answer decode to a value or an error, never a crash.
TEST(EtcdDecode, GarbageNeverCrashes) {
  std::uint32_t x = 12345;
  const std::vector<store_op> ops{store_op::put_if_absent("/a", "v", 0)};
  for (int i = 0; i < 2000; ++i) {
    std::string bytes;
    const int n = static_cast<int>(x % 64);
    for (int j = 0; j < n; ++j) {
      x = x * 1664525u + 1013904223u;
      bytes.push_back(static_cast<char>(x >> 24));
    }
    etcdserverpb::TxnResponse t;
    if (t.ParseFromString(bytes)) (void)decode_commit_round(t, ops);
    etcdserverpb::RangeResponse r;
    if (r.ParseFromString(bytes)) (void)decode_range(r, "/a", prefix_end("/a"));
    etcdserverpb::WatchResponse w;
    if (w.ParseFromString(bytes)) (void)decode_watch_events(w, "/a", prefix_end("/a"), 1);
    etcdserverpb::LeaseGrantResponse g;
    if (g.ParseFromString(bytes)) (void)decode_grant(g);
  }
}

}  // namespace
}  // namespace akt::etcd::detail
