#pragma once
// The in-process coordination store: etcd 3.4's semantics for the operations of
// akt/cluster/store.hpp, held in memory and shared by every node of one process. The embedded
// default (a first cluster of several systems in one process needs no etcd) and the tests'
// fault injector.
//
//   akt::cluster::inproc_store data;              // the "etcd server"
//   auto a = data.connect("node-a");              // one client per node: an akt::cluster::store
//   auto b = data.connect("node-b");
//   a->grant_lease(std::chrono::seconds(5), [](akt::result<akt::cluster::lease_grant> g) {...});
//   b->cut_off(true);                             // node-b's calls now time out
//
// Semantics (as etcd 3.4; the conformance suite tests/cluster/store_conformance.hpp checks them)
// - One global revision, 1 when empty; every round that writes something takes the next one
//   (a round whose conditions all fail, a revoke or expiry of a lease without keys, writes
//   nothing and takes none). create_revision, mod_revision and version as etcd keeps them.
// - Leases: TTLs below store_limits::min_lease_ttl are raised to it (above etcd's maximum,
//   9e9 s: errc::invalid_argument); a lease expires on the store's clock (store_clock.hpp)
//   when its TTL passes without a keep-alive; its keys are deleted in one revision and
//   watchers get the deletes.
// - commit: rounds of at most store_limits::max_ops_per_round ops, each atomic with one
//   revision. As in an etcd txn, every condition of a round is read before its writes, then
//   the ops run in order (a failed op reports the key as found at its turn); a round may not
//   put a key that an earlier op of it puts or deletes (errc::invalid_argument). An op whose
//   condition holds but whose lease is gone fails its round with lease_not_found, which ends
//   the commit: earlier rounds stay applied, later ones are not tried.
// - History: every change since the compaction point is kept, so a watch from any later
//   revision replays; compact(r) drops the changes before r and a watch from before r ends
//   with errc::cluster_compacted, as does a watch whose handler fell so far behind that what it
//   still had to deliver was compacted. inproc_store_options::history_revisions compacts by
//   itself.
//
// Contract
// - inproc_store: any thread; compact(), current_revision() and connect() take the store's
//   mutex briefly. Its data lives as long as the last of the inproc_store and its clients (a
//   client may outlive it: leases then expire on its clock still).
// - inproc_client: the akt::cluster::store contract. Each client has its own completion thread:
//   the completions and watch deliveries of one client run there one at a time, never inside
//   the call; a slow completion delays only its own client. Fault switches: any thread, any
//   time; they act on the calls made (and watch batches queued) after they return.
// - Progress: every call takes the store's mutex for its own work only (a commit of n ops is
//   O(n log keys) plus the watchers to tell); nothing waits on a client under it.
// - Memory: the keys, live leases, the history since the compaction point, and per client its
//   queued completions: each call's outcome until it runs, at most one queued pump per watch
//   (a watch copies events out of the history only for the batch it delivers).

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "akt/cluster/store.hpp"
#include "akt/cluster/store_clock.hpp"
#include "akt/core/result.hpp"

namespace akt::cluster {

namespace detail {
class inproc_state;
class client_core;
}  // namespace detail

struct inproc_store_defaults {
  // How often, in real time, a store whose clock cannot tell it of a move (function_clock)
  // reads the clock to expire leases: bounds how late past its TTL such a lease is deleted.
  static constexpr std::chrono::milliseconds clock_poll{10};
  // Revisions of history kept before the store compacts by itself: bounds the history's
  // memory (every change of the last this many revisions) for a store that runs for days.
  static constexpr revision history_revisions = 100'000;
  // Events one on_events call carries at most (a revision is never split: one with more
  // events goes whole): bounds the copy a watch makes under the store's mutex and holds.
  static constexpr std::size_t max_watch_batch = 1000;
};

struct inproc_store_options {
  // The clock leases expire on; null: steady_store_clock.
  std::shared_ptr<store_clock> clock;
  // Once the history spans more revisions than this, the store compacts to keep that many
  // (as etcd's revision auto-compaction). 0: never by itself, only compact().
  revision history_revisions = inproc_store_defaults::history_revisions;
};

struct inproc_client_options {
  // How long an unanswered call (cut off, keep-alive dropped, reply delayed past it) waits, in
  // real time, before it completes with errc::cluster_registry_timeout. Above zero.
  std::chrono::milliseconds call_timeout = store_defaults::call_timeout;
};

class inproc_client;

class inproc_store {
 public:
  explicit inproc_store(inproc_store_options options = {});
  ~inproc_store();
  inproc_store(const inproc_store&) = delete;
  inproc_store& operator=(const inproc_store&) = delete;

  // A new client (a node's connection to the store). The name appears in error details only.
  std::unique_ptr<inproc_client> connect(std::string client_name,
                                         inproc_client_options options = {});

  // Drops the history before r: watches from a revision below r end with cluster_compacted.
  // errc::cluster_compacted when r <= the compaction point already; errc::invalid_argument
  // when r is above the current revision.
  result<void> compact(revision r);
  revision current_revision() const;
  revision compact_revision() const;
  // Leases alive now (expired ones count until the store noticed).
  std::size_t lease_count() const;
  const std::shared_ptr<store_clock>& clock() const noexcept;

 private:
  std::shared_ptr<detail::inproc_state> state_;
};

class inproc_client final : public store {
 public:
  // Completes every pending call with system_shutting_down, ends every watch (on_end with
  // system_shutting_down) and returns after the last completion ran. Never from one of this
  // client's own completions (asserted).
  ~inproc_client() override;
  inproc_client(const inproc_client&) = delete;
  inproc_client& operator=(const inproc_client&) = delete;

  void grant_lease(std::chrono::seconds ttl, store_callback<lease_grant> done) override;
  void keep_alive(lease_id id, store_callback<keep_alive_ack> done) override;
  void revoke_lease(lease_id id, store_callback<void> done) override;
  void get(std::string key, store_callback<range_result> done) override;
  void get_prefix(std::string prefix, store_callback<range_result> done) override;
  void commit(std::vector<store_op> ops, store_callback<std::vector<op_outcome>> done) override;
  std::unique_ptr<watch_handle> watch(std::string prefix, revision from, watch_handler& h) override;

  const std::string& name() const noexcept { return name_; }

  // Fault injection.
  // Cut this client off the store (a partition): while on, no call reaches the store, each
  // completes with cluster_registry_timeout after call_timeout (keep-alives too, so its leases
  // expire); turning it on ends every watch with cluster_registry_timeout at once, and a watch
  // made while cut off ends so after call_timeout.
  void cut_off(bool on);
  // Keep-alives are lost (the lease is not renewed) and complete with cluster_registry_timeout
  // after call_timeout; everything else works.
  void drop_keep_alives(bool on);
  // Ends every watch of this client now with cluster_registry_timeout (a lost stream).
  void sever_watches();
  // Every reply and watch batch arrives d later (the operation itself is applied at once); a
  // reply delayed to call_timeout or more completes with cluster_registry_timeout instead, the
  // write applied ("possibly written"). Zero: no delay.
  void delay_replies(std::chrono::milliseconds d);

 private:
  friend class inproc_store;
  inproc_client(std::shared_ptr<detail::inproc_state> state, std::string name,
                inproc_client_options options);
  bool unreachable() const noexcept;  // cut off
  void end_watches();                 // every watch ends with cluster_registry_timeout

  std::shared_ptr<detail::inproc_state> state_;
  std::shared_ptr<detail::client_core> core_;
  std::string name_;
};

}  // namespace akt::cluster
