// libFuzzer target for the etcd store's checking decoders (src/etcd/etcd_decode.cpp): every
// answer etcd sends is parsed as its protobuf message and decoded; whatever the bytes, a decoder
// returns a value or an error, never crashes or trips a sanitizer. Built from
// src/etcd/CMakeLists.txt with AKT_BUILD_FUZZERS (the `fuzz` preset):
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target akt_fuzz_etcd_decode
//   build/fuzz/src/etcd/akt_fuzz_etcd_decode -runs=200000
//
// Input: one byte that picks the message (and the op kinds of a commit round), then the message.
// Beyond "no crash", it checks what a decoder promises on success: a range's keys sorted and in
// range, a commit round's one outcome per op, watch events in revision order.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "etcd/etcd_decode.hpp"

namespace {

using namespace akt::etcd::detail;
using akt::cluster::store_op;

void check(bool ok) {
  if (!ok) std::abort();  // a decoder's promise broken: libFuzzer keeps the input
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t pick = data[0];
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string prefix = "/p/";
  const std::string end = prefix_end(prefix);
  switch (pick % 5) {
    case 0: {
      etcdserverpb::RangeResponse r;
      if (!r.ParseFromString(body)) return 0;
      auto out = decode_range(r, prefix, end);
      if (out) {
        for (std::size_t i = 0; i < out->kvs.size(); ++i) {
          check(out->kvs[i].key.compare(0, prefix.size(), prefix) == 0);
          check(i == 0 || out->kvs[i - 1].key < out->kvs[i].key);
          check(out->kvs[i].mod_revision <= out->header_revision);
        }
      }
      auto one = decode_range(r, "/p/a", "");
      if (one) check(one->kvs.size() <= 1);
      break;
    }
    case 1: {
      etcdserverpb::TxnResponse r;
      if (!r.ParseFromString(body)) return 0;
      std::vector<store_op> ops;
      for (int i = 0; i < 1 + (pick >> 5); ++i) {
        const std::string key = "/p/" + std::to_string(i);
        switch ((pick >> (i % 3)) % 3) {
          case 0:
            ops.push_back(store_op::put_if_absent(key, "v", 0));
            break;
          case 1:
            ops.push_back(store_op::update_if_created_at(key, "v", 0, 5));
            break;
          default:
            ops.push_back(store_op::delete_if_created_at(key, 5));
            break;
        }
      }
      auto out = decode_commit_round(r, ops);
      if (out) {
        check(out->size() == ops.size());
        for (std::size_t i = 0; i < out->size(); ++i) {
          const auto& o = (*out)[i];
          check(o.succeeded ? o.applied_revision > 0 : o.current.key == ops[i].key);
        }
      }
      break;
    }
    case 2: {
      etcdserverpb::WatchResponse r;
      if (!r.ParseFromString(body)) return 0;
      auto out = decode_watch_events(r, prefix, end, 3);
      if (out) {
        akt::cluster::revision last = 3;
        for (const auto& e : *out) {
          check(e.kv.mod_revision >= last && e.kv.mod_revision <= r.header().revision());
          last = e.kv.mod_revision;
        }
      }
      break;
    }
    case 3: {
      etcdserverpb::LeaseGrantResponse r;
      if (!r.ParseFromString(body)) return 0;
      auto out = decode_grant(r);
      if (out) check(out->id != 0 && out->ttl.count() > 0);
      break;
    }
    default: {
      etcdserverpb::LeaseKeepAliveResponse r;
      if (!r.ParseFromString(body)) return 0;
      auto out = decode_keep_alive(r, 7);
      if (out) check(out->ttl.count() > 0);
      break;
    }
  }
  return 0;
}
