#pragma once
// actor_names: a cluster node's part of the cluster-wide actor names (cluster.hpp, "Actor names
// in a cluster"). The spawn of a top-level actor on a cluster node claims its name here
// (actor/cluster_hooks.hpp: claim_name, release_name) before the actor is registered locally:
//
// - Claims. A put-if-absent of /akt/<cluster>/v1/actors/<name> on this node's lease
//   (membership::lease()), carrying the owner, its address, its epoch and a claim number
//   (actor_name_record), through a claim_batcher like the grain registry's claims. A key found
//   already written by this node under its current lease with this claim's number (a timed-out
//   write that did commit) is adopted; any other record, readable or not, means the name is held:
//   actor_already_exists. A name this node holds or is claiming is refused without a round trip.
// - Releases. When the actor stops (or its start fails after the claim), a compare-and-delete on
//   the claim's create revision, sent without waiting. A claim of the same name on this node
//   meanwhile waits for it (bounded), so a stop followed by a spawn of that name here succeeds. A
//   crashed node's names vanish with its lease; a clean stop revokes the lease first.
// - Rejoin. A node that was fenced and rejoined under a new lease puts its names again on that
//   lease (their keys went with the old one); a name another node claimed meanwhile stays that
//   node's, and the local actor keeps running but is no longer found by name elsewhere (logged).
//
// Contract
// - Callers: claim() from any thread that may block (the spawn path refuses on a dispatcher
//   worker before calling it): it waits for the store, at most k_wait per round, k_rounds
//   rounds. release() from any thread, a worker included: it never blocks beyond the mutex.
//   read() from any thread that may block (find_actor). reclaim() from membership's threads.
//   close() once the node leaves, from the stopping thread; idempotent.
// - Threads: the store's completion thread runs the batcher's callbacks; they take mutex_ briefly
//   and call nothing outside this class (a log line at most).
// - Lifetime: shared by the cluster node and by the callbacks in flight; close() ends every use
//   of the store (before membership stops it): afterwards claim() refuses with
//   system_shutting_down and release() forgets the name (the lease's revoke deletes its key).
// - Memory: one entry per name this node holds or is claiming.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "akt/actor/actor_system.hpp"
#include "akt/cluster/store.hpp"
#include "cluster/actor_name_record.hpp"
#include "cluster/claim_batcher.hpp"

namespace akt::cluster::detail {

class membership;

class actor_names : public std::enable_shared_from_this<actor_names> {
 public:
  actor_names(actor_system& sys, membership& m, std::string cluster, std::string node,
              std::string address);
  ~actor_names();
  actor_names(const actor_names&) = delete;
  actor_names& operator=(const actor_names&) = delete;

  // Claims `name` for `owner` (cluster_extension::claim_name).
  error claim(std::string_view name, const void* owner);
  // Releases `name` if `owner` holds it (cluster_extension::release_name).
  void release(std::string_view name, const void* owner) noexcept;
  // The record of `name` as the store holds it now (nullopt: nobody holds it), waiting at most
  // `timeout`. Errors: decode_failed (a record this node cannot read), cluster_registry_timeout,
  // system_shutting_down.
  result<std::optional<actor_name_record>> read(std::string_view name,
                                                std::chrono::nanoseconds timeout);
  // After a rejoin: puts every name held here again, on the new lease (without waiting).
  void reclaim() noexcept;
  // Waits (until deadline) for the releases in flight, then ends the batcher. Idempotent.
  void close(std::chrono::steady_clock::time_point deadline) noexcept;

  // For tests: the names held or being claimed here.
  std::size_t held() const;

  // How long one store round may take here before it counts as failed, and how many rounds a
  // claim or a release tries (the grain registry's figures).
  static constexpr std::chrono::milliseconds k_wait{2500};
  static constexpr int k_rounds = 3;

 private:
  struct entry {
    const void* owner = nullptr;  // the claiming cell
    std::uint64_t claim = 0;      // this claim's number (the record's claim field)
    revision token = 0;           // the key's create revision; 0 while the claim is in flight
    bool releasing = false;       // a release is in flight: a new claim waits for it
  };

  result<op_outcome> write(store_op op);
  void release_async(std::string name, revision token, int round);
  // The end of a release: forgets the name, counts the release done. Under mutex_.
  void finish_release_locked(const std::string& name);
  void log_warning(const std::string& text) const;

  actor_system& sys_;
  membership& membership_;
  const std::string cluster_;
  const std::string node_;
  const std::string address_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;         // an entry went away, or the releases in flight drained
  std::unique_ptr<claim_batcher> batcher_;  // guarded when reset; null after close()
  std::unordered_map<std::string, entry> held_;  // guarded: name -> this node's claim
  std::uint64_t next_claim_ = 0;                 // guarded
  int releases_in_flight_ = 0;                   // guarded
  bool closed_ = false;                          // guarded
};

}  // namespace akt::cluster::detail
