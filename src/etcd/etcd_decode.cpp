// Requests to etcd and the checking decoders of its answers (etcd_decode.hpp).

#include "etcd/etcd_decode.hpp"

#include <utility>

namespace akt::etcd::detail {

namespace {

using cluster::key_value;
using cluster::op_outcome;
using cluster::revision;
using cluster::store_op;

error bad(std::string what) { return error(errc::protocol_error, "etcd answered " + what); }

// key in [key, range_end) as etcd reads a range: range_end "\0" means every key >= key.
bool in_range(const std::string& k, const std::string& key, const std::string& range_end) {
  if (range_end.empty()) return k == key;
  if (k < key) return false;
  if (range_end == std::string(1, '\0')) return true;
  return k < range_end;
}

etcdserverpb::Compare compare_create(const std::string& key, revision create_revision) {
  etcdserverpb::Compare c;
  c.set_result(etcdserverpb::Compare::EQUAL);
  c.set_target(etcdserverpb::Compare::CREATE);
  c.set_key(key);
  c.set_create_revision(create_revision);
  return c;
}

}  // namespace

std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

etcdserverpb::RangeRequest range_request(const std::string& key, const std::string& range_end) {
  etcdserverpb::RangeRequest r;
  r.set_key(key);
  if (!range_end.empty()) r.set_range_end(range_end);
  r.set_sort_order(etcdserverpb::RangeRequest::ASCEND);
  r.set_sort_target(etcdserverpb::RangeRequest::KEY);
  return r;
}

etcdserverpb::TxnRequest commit_round_request(std::span<const store_op> ops) {
  etcdserverpb::TxnRequest outer;
  for (const auto& op : ops) {
    auto* nested = outer.add_success()->mutable_request_txn();
    switch (op.what) {
      case store_op::kind::put_if_absent:
        *nested->add_compare() = compare_create(op.key, 0);
        break;
      case store_op::kind::update_if_created_at:
      case store_op::kind::delete_if_created_at: {
        // The key must exist (version > 0) as well: with an expected create revision of 0 the
        // create compare alone would hold for an absent key.
        *nested->add_compare() = compare_create(op.key, op.expected_create_revision);
        auto* exists = nested->add_compare();
        exists->set_result(etcdserverpb::Compare::GREATER);
        exists->set_target(etcdserverpb::Compare::VERSION);
        exists->set_key(op.key);
        exists->set_version(0);
        break;
      }
    }
    if (op.what == store_op::kind::delete_if_created_at) {
      nested->add_success()->mutable_request_delete_range()->set_key(op.key);
    } else {
      auto* put = nested->add_success()->mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
    }
    *nested->add_failure()->mutable_request_range() = range_request(op.key, {});
  }
  return outer;
}

result<key_value> decode_key_value(const mvccpb::KeyValue& kv) {
  if (kv.create_revision() <= 0 || kv.mod_revision() < kv.create_revision() || kv.version() < 1 ||
      kv.lease() < 0) {
    return bad("a key with inconsistent revisions (create " + std::to_string(kv.create_revision()) +
               ", mod " + std::to_string(kv.mod_revision()) + ", version " +
               std::to_string(kv.version()) + ")");
  }
  return key_value{kv.key(),          kv.value(),   kv.create_revision(),
                   kv.mod_revision(), kv.version(), kv.lease()};
}

result<cluster::range_result> decode_range(const etcdserverpb::RangeResponse& r,
                                           const std::string& key, const std::string& range_end) {
  if (!r.has_header() || r.header().revision() <= 0) return bad("a range without a revision");
  if (r.more()) return bad("a range with more keys than it returned");
  if (range_end.empty() && r.kvs_size() > 1) return bad("several keys for a one-key read");
  cluster::range_result out;
  out.header_revision = r.header().revision();
  out.kvs.reserve(static_cast<std::size_t>(r.kvs_size()));
  for (const auto& kv : r.kvs()) {
    auto decoded = decode_key_value(kv);
    if (!decoded) return decoded.error();
    if (!in_range(decoded->key, key, range_end)) return bad("a key outside the range asked");
    if (!out.kvs.empty() && !(out.kvs.back().key < decoded->key)) {
      return bad("keys out of order");
    }
    if (decoded->mod_revision > out.header_revision) {
      return bad("a key written after the read's revision");
    }
    out.kvs.push_back(std::move(*decoded));
  }
  return out;
}

result<cluster::lease_grant> decode_grant(const etcdserverpb::LeaseGrantResponse& r) {
  if (!r.error().empty()) return error(errc::protocol_error, "etcd refused a lease: " + r.error());
  if (r.id() == 0 || r.ttl() <= 0) return bad("a lease grant without an id or a TTL");
  return cluster::lease_grant{r.id(), std::chrono::seconds(r.ttl())};
}

result<cluster::keep_alive_ack> decode_keep_alive(const etcdserverpb::LeaseKeepAliveResponse& r,
                                                  cluster::lease_id asked) {
  if (r.id() != asked) return bad("a keep-alive for another lease");
  if (r.ttl() <= 0) {
    return error(errc::lease_not_found, "lease " + std::to_string(asked) + " not found");
  }
  return cluster::keep_alive_ack{std::chrono::seconds(r.ttl())};
}

result<std::vector<op_outcome>> decode_commit_round(const etcdserverpb::TxnResponse& r,
                                                    std::span<const store_op> ops) {
  if (!r.has_header() || r.header().revision() <= 0) return bad("a txn without a revision");
  if (!r.succeeded()) return bad("a txn without compares as failed");
  if (static_cast<std::size_t>(r.responses_size()) != ops.size()) {
    return bad(std::to_string(r.responses_size()) + " responses to a txn of " +
               std::to_string(ops.size()) + " ops");
  }
  std::vector<op_outcome> out;
  out.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& resp = r.responses(static_cast<int>(i));
    if (!resp.has_response_txn()) return bad("a txn op's response that is not a txn");
    const auto& nested = resp.response_txn();
    if (nested.responses_size() != 1) return bad("a nested txn without its one response");
    const auto& only = nested.responses(0);
    op_outcome o;
    if (nested.succeeded()) {
      const bool is_delete = ops[i].what == store_op::kind::delete_if_created_at;
      if (is_delete ? !only.has_response_delete_range() : !only.has_response_put()) {
        return bad("a nested txn's write response of the wrong kind");
      }
      if (is_delete && only.response_delete_range().deleted() != 1) {
        return bad("a compare-and-delete that deleted " +
                   std::to_string(only.response_delete_range().deleted()) + " keys");
      }
      o.succeeded = true;
      o.applied_revision = r.header().revision();
    } else {
      if (!only.has_response_range()) return bad("a nested txn's failure that is not a range");
      const auto& range = only.response_range();
      if (range.kvs_size() > 1) return bad("several keys for a one-key read");
      if (range.kvs_size() == 1) {
        auto kv = decode_key_value(range.kvs(0));
        if (!kv) return kv.error();
        if (kv->key != ops[i].key) return bad("another key than the op's");
        o.current = std::move(*kv);
      } else {
        o.current.key = ops[i].key;
      }
    }
    out.push_back(std::move(o));
  }
  return out;
}

result<std::vector<cluster::watch_event>> decode_watch_events(const etcdserverpb::WatchResponse& r,
                                                              const std::string& key,
                                                              const std::string& range_end,
                                                              revision last) {
  if (!r.has_header() || r.header().revision() <= 0) return bad("a watch batch without a revision");
  std::vector<cluster::watch_event> out;
  out.reserve(static_cast<std::size_t>(r.events_size()));
  for (const auto& e : r.events()) {
    if (!e.has_kv()) return bad("a watch event without its key");
    const auto& kv = e.kv();
    if (!in_range(kv.key(), key, range_end)) return bad("a watch event outside the prefix");
    if (kv.mod_revision() < last || kv.mod_revision() > r.header().revision()) {
      return bad("a watch event out of revision order");
    }
    last = kv.mod_revision();
    cluster::watch_event w;
    if (e.type() == mvccpb::Event::PUT) {
      auto decoded = decode_key_value(kv);
      if (!decoded) return decoded.error();
      w.what = cluster::watch_event::kind::put;
      w.kv = std::move(*decoded);
    } else if (e.type() == mvccpb::Event::DELETE) {
      w.what = cluster::watch_event::kind::del;
      w.kv.key = kv.key();
      w.kv.mod_revision = kv.mod_revision();
    } else {
      return bad("a watch event of unknown type " + std::to_string(e.type()));
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace akt::etcd::detail
