#pragma once
// Requests to etcd and checking decoders of its answers (private to akt::etcd). A decoder reads
// only what the message holds and turns every shape the store contract does not expect (a
// missing header, keys out of the asked range or out of order, revisions that contradict each
// other, a count of responses that does not match the request) into errc::protocol_error with
// the reason, never a crash or an assertion: etcd is a peer, its answers are input.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "akt/cluster/store.hpp"
#include "akt/core/result.hpp"
#include "etcdserverpb/rpc.pb.h"

namespace akt::etcd::detail {

// The range_end that selects every key starting with prefix (etcd's "prefix + 1"): the prefix
// with its last byte below 0xff incremented and the bytes after it dropped; "\0" (every key)
// for an empty prefix or one of 0xff bytes only.
std::string prefix_end(const std::string& prefix);

// A Range of one key (range_end empty) or of a prefix.
etcdserverpb::RangeRequest range_request(const std::string& key, const std::string& range_end);

// The outer txn of one commit round: no compares; per op a nested txn (compare on the key's
// create revision, success: the write, failure: a range of the key).
etcdserverpb::TxnRequest commit_round_request(std::span<const cluster::store_op> ops);

result<cluster::key_value> decode_key_value(const mvccpb::KeyValue& kv);
// range_end empty: a read of exactly `key`.
result<cluster::range_result> decode_range(const etcdserverpb::RangeResponse& r,
                                           const std::string& key, const std::string& range_end);
result<cluster::lease_grant> decode_grant(const etcdserverpb::LeaseGrantResponse& r);
// errc::lease_not_found when etcd answered TTL <= 0 (it does so for an unknown lease).
result<cluster::keep_alive_ack> decode_keep_alive(const etcdserverpb::LeaseKeepAliveResponse& r,
                                                  cluster::lease_id asked);
result<std::vector<cluster::op_outcome>> decode_commit_round(
    const etcdserverpb::TxnResponse& r, std::span<const cluster::store_op> ops);
// The events of one watch response, checked: known types, keys under the prefix, revisions in
// order, after `last` (the revision of the last event delivered, or from - 1), at most the
// header's.
result<std::vector<cluster::watch_event>> decode_watch_events(const etcdserverpb::WatchResponse& r,
                                                              const std::string& key,
                                                              const std::string& range_end,
                                                              cluster::revision last);

}  // namespace akt::etcd::detail
