#pragma once
// The coordination store: the few key-value operations the cluster needs (leases, put-if-absent
// on a lease, reads by key and prefix, compare-and-delete on a key's create revision, batched
// conditional writes, watches from a revision), with one meaning for every implementation. Two
// implement it: the in-process store (akt/cluster/inproc_store.hpp, the embedded default and the
// tests' fault injector) and etcd (akt/etcd/etcd_store.hpp, library akt::etcd). One conformance
// suite (tests/cluster/store_conformance.hpp) runs against both.
//
// Contract
// - Callers: any thread, including from inside a completion. No call blocks: each returns at
//   once and its completion runs later on the store's own completion thread, never inside the
//   call (so a caller may hold a lock its completion also takes, and a dispatcher worker may
//   call). Completions of one store run one at a time, in no promised order across calls.
// - Every call completes exactly once: with its outcome, with errc::cluster_registry_timeout
//   when the store did not answer within call_timeout (the operation may still have been
//   applied: a timed-out write is "possibly written", read again to know), or with
//   errc::system_shutting_down when the store is destroyed first. The destructor completes
//   everything still pending, ends every watch (on_end with system_shutting_down) and returns
//   after the last completion has run; never destroy a store from its own completion.
// - Revisions are the store's global, strictly increasing write counter (etcd's): every
//   committed write (one batch counts once) gets the next revision; a key's create_revision is
//   the revision of the write that created it and stays until the key is deleted. A key that is
//   deleted and created again gets a new, higher create_revision: the fencing token of a grain
//   claim.
// - Leases: grant asks for a TTL; the store may grant a longer one (etcd and the in-process store
//   raise anything below 2 s to 2 s): read lease_grant::ttl. A lease lives until ttl passes
//   without a keep-alive, or until revoked; its keys are deleted with it, in one revision, and
//   watchers see those deletes. keep_alive renews it to the full TTL.
// - Memory: bounded by what is pending; a watch buffers nothing beyond the batch it delivers.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "akt/core/error.hpp"
#include "akt/core/result.hpp"

namespace akt::cluster {

using revision = std::int64_t;
using lease_id = std::int64_t;  // 0: no lease

struct store_limits {
  // etcd refuses a lease below this TTL by raising it; the in-process store does the same.
  static constexpr std::chrono::seconds min_lease_ttl{2};
  // etcd 3.4's default --max-txn-ops is 128: one outer txn of up to 127 nested ones. A batch
  // longer than this is split into several rounds by the store (each its own revision).
  static constexpr std::size_t max_ops_per_round = 127;
};

// One key as stored.
struct key_value {
  std::string key;
  std::string value;
  revision create_revision = 0;  // revision of the write that created the key
  revision mod_revision = 0;     // revision of the last write to it
  std::int64_t version = 0;      // writes since creation (1 after the create)
  lease_id lease = 0;            // the lease the key is attached to; 0: none
};

struct lease_grant {
  lease_id id = 0;
  std::chrono::seconds ttl{0};  // as granted, which may be longer than asked
};

struct keep_alive_ack {
  std::chrono::seconds ttl{0};  // the TTL the lease was renewed to
};

// A read: the keys (sorted by key) and the store's revision at the moment of the read, from
// which a watch continues (watch from header_revision + 1 misses nothing).
struct range_result {
  revision header_revision = 0;
  std::vector<key_value> kvs;
};

// One conditional write of a batch. Each is independent: one failing its condition does not
// stop the others (it reports what it found instead).
struct store_op {
  enum class kind : std::uint8_t {
    put_if_absent,         // create key with value on lease, only if the key does not exist
    update_if_created_at,  // overwrite value (keeping the lease given), only if the key exists
                           // with create_revision == expected_create_revision
    delete_if_created_at,  // delete key, only if it exists with that create_revision
  };
  kind what = kind::put_if_absent;
  std::string key;
  std::string value;                      // put_if_absent, update_if_created_at
  lease_id lease = 0;                     // put_if_absent, update_if_created_at
  revision expected_create_revision = 0;  // update_if_created_at, delete_if_created_at

  static store_op put_if_absent(std::string k, std::string v, lease_id l) {
    return {kind::put_if_absent, std::move(k), std::move(v), l, 0};
  }
  static store_op update_if_created_at(std::string k, std::string v, lease_id l, revision cr) {
    return {kind::update_if_created_at, std::move(k), std::move(v), l, cr};
  }
  static store_op delete_if_created_at(std::string k, revision cr) {
    return {kind::delete_if_created_at, std::move(k), {}, 0, cr};
  }
};

// What one op of a batch did.
struct op_outcome {
  bool succeeded = false;  // the condition held and the write was applied
  // On success: the revision of the round that applied it (for put_if_absent, the new key's
  // create_revision: ops batched into one round share it). On failure: 0.
  revision applied_revision = 0;
  // On failure: the key as found (absent: key_value with create_revision 0). On success: empty.
  key_value current;
};

// A watched change. A delete carries the key and mod_revision (the delete's revision) only.
struct watch_event {
  enum class kind : std::uint8_t { put, del };
  kind what = kind::put;
  key_value kv;
};

// Receives one watch's events on the store's completion thread, batch by batch in revision
// order, every change to a watched key exactly once, from the start revision on.
class watch_handler {
 public:
  virtual ~watch_handler() = default;
  // Changes committed at revisions <= header_revision (at least the last event's), in order.
  virtual void on_events(const std::vector<watch_event>& events, revision header_revision) = 0;
  // The watch ended and delivers nothing more: errc::cluster_compacted when the start revision
  // (or a revision the watch still had to deliver) was compacted away: read in full and watch
  // again from the read's revision + 1; compact_revision says the oldest revision still kept.
  // Any other error (cluster_registry_timeout: the stream to the store was lost, or
  // system_shutting_down) means: watch again from the last revision seen + 1, which loses
  // nothing unless that has been compacted meanwhile.
  virtual void on_end(error why, revision compact_revision) = 0;
};

// A running watch: cancel() stops it (on_end is not called after cancel returns; a batch being
// delivered on another thread finishes first). Destroying the handle cancels.
class watch_handle {
 public:
  virtual ~watch_handle() = default;
  virtual void cancel() = 0;
};

template <class T>
using store_callback = std::function<void(result<T>)>;

class store {
 public:
  virtual ~store() = default;

  // Leases.
  virtual void grant_lease(std::chrono::seconds ttl, store_callback<lease_grant> done) = 0;
  // One renewal round trip: errc::lease_not_found when the lease has expired or was revoked.
  virtual void keep_alive(lease_id id, store_callback<keep_alive_ack> done) = 0;
  // Ends the lease and deletes its keys at once (not found: lease_not_found).
  virtual void revoke_lease(lease_id id, store_callback<void> done) = 0;

  // Reads, at the store's latest revision.
  virtual void get(std::string key, store_callback<range_result> done) = 0;
  virtual void get_prefix(std::string prefix, store_callback<range_result> done) = 0;

  // The ops in order, as few rounds as the limit allows (store_limits::max_ops_per_round): each
  // round is atomic and has one revision; the outcomes are in the ops' order. An op whose
  // condition holds but whose lease no longer exists fails the whole round with
  // errc::lease_not_found (etcd checks the leases of the writes it will do); the commit then
  // completes with that error: earlier rounds stay applied, later ones are not tried. A round
  // may not put a key that an earlier op of the round puts or deletes: errc::invalid_argument
  // (etcd's "duplicate key given in txn request"; deleting one key twice is allowed).
  virtual void commit(std::vector<store_op> ops, store_callback<std::vector<op_outcome>> done) = 0;

  // Watches every key under prefix from revision `from` (> 0) on; h must outlive the handle.
  virtual std::unique_ptr<watch_handle> watch(std::string prefix, revision from,
                                              watch_handler& h) = 0;

  // One-op conveniences over commit.
  void put_if_absent(std::string key, std::string value, lease_id lease,
                     store_callback<op_outcome> done);
  void delete_if_created_at(std::string key, revision create_revision,
                            store_callback<op_outcome> done);
};

// How long each store call may take before it completes with cluster_registry_timeout.
struct store_defaults {
  static constexpr std::chrono::milliseconds call_timeout{2000};
};

}  // namespace akt::cluster
