#pragma once
// grain_registry: a cluster node's part of the grain registry (goakt-grains.md "Activation
// guarantee"; docs/design.md "Grains in a cluster"). It is the grain layer's placement and
// activation gate on a cluster node (grain/grain_seams.hpp):
//
// - Claims. Before a grain activates here, admit() claims its identity with a put-if-absent of
//   /akt/<cluster>/v1/grains/<kind>/<name> on this node's lease, carrying the owner, its epoch
//   and the kind's settings (grain_claim_record). The claim's create revision is the
//   activation's fencing token. A claim found already written for this node under its current
//   lease (a timed-out write that did commit, or a claim made for it) is adopted. Claims and
//   releases of all threads are coalesced into batched commits (claim_batcher).
// - Placement. place() answers from memory, never from the store: local for an identity this
//   node holds a claim for, remote (to the owner's proxy, routed by its claim's token) for one
//   the owner cache names another node for, claim otherwise. The cache is filled by lost claims
//   and reads, and kept by a watch of the grains prefix: a put updates an entry it holds, a
//   delete removes it; a node that left takes its entries with it.
// - Releases are compare-and-deletes on the claim's create revision, so a stale release never
//   removes a newer claim: at the end of an activation (released()), and in resend_place in
//   the two cases of the rule (a marked refusal by the owner; unreachable with the owner gone
//   from membership). Every other failure keeps the entry.
//
// Contract
// - Callers: the grain layer, from any thread. place() and released() never block; admit()
//   and resend_place() wait for the store (bounded by k_wait per round, a few rounds) and are
//   never called on a dispatcher worker, except admit() for an activation made in place, which
//   the layer does not ask (the admission is kept) — should one come anyway, it is refused
//   marked (the sender may send once more).
// - Threads: the store's completion thread runs the batcher's and the watch's callbacks; they
//   take mutex_ and the shards' locks briefly and never call the grain layer.
// - Lifetime: owned (shared) by the two seam adapters the grain layer owns and by the cluster
//   node; close() (before membership stops the store) ends every use of the store: afterwards
//   admit refuses with system_shutting_down and nothing is released or read.
// - Memory: the claims held (one entry per activation of this node) and the owner cache,
//   bounded by k_cache_max entries (each of the k_shards shards cleared past its share: entries
//   are hints, a miss costs one claim round).

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "akt/actor/actor_system.hpp"
#include "akt/cluster/member.hpp"
#include "akt/cluster/store.hpp"
#include "akt/metrics/registry.hpp"
#include "cluster/claim_batcher.hpp"
#include "cluster/grain_claim_record.hpp"
#include "grain/grain_seams.hpp"

namespace akt::cluster::detail {

class membership;

struct grain_registry_settings {
  std::string cluster;
  std::string node;
  std::string address;  // akt://system@host:port
  std::vector<std::string> roles;
  std::size_t min_peers = 0;  // the activation barrier (cluster_config)
  std::chrono::milliseconds barrier_timeout{30000};
};

class grain_registry : public std::enable_shared_from_this<grain_registry> {
 public:
  grain_registry(actor_system& sys, membership& m, grain_registry_settings s);
  ~grain_registry();

  // Starts the watch of the grains prefix and installs the placement and the gate. Blocks
  // (bounded) for the first read; the thread that starts the system.
  result<void> start();
  // Refuses new activations from now on (the node is shutting down): admit answers
  // system_shutting_down; releases still go out.
  void begin_shutdown() noexcept { shutting_down_.store(true, std::memory_order_release); }
  // Waits (until deadline) for the releases in flight, then ends the watch and the batcher:
  // nothing touches the store afterwards. Idempotent.
  void close(std::chrono::steady_clock::time_point deadline) noexcept;

  // A node left the cluster: its claims went with its lease; forget them now.
  void node_left(const std::string& name);

  // The seams (through the adapters in grain_registry.cpp).
  akt::detail::grain_place place(const grain_identity& id);
  result<std::int64_t> admit(const grain_identity& id);
  void released(const grain_identity& id) noexcept;
  std::optional<akt::detail::grain_place> resend_place(const grain_identity& id,
                                                       const akt::detail::grain_place& at,
                                                       const error& failure);

  // For tests and benchmarks.
  std::uint64_t claim_commits() const noexcept { return batcher_ ? batcher_->commits() : 0; }
  std::size_t held() const;

  // How long one store round may take here before it counts as failed, and how many rounds a
  // claim or a release tries (goakt-grains.md: "tried again a few times before the call fails").
  static constexpr std::chrono::milliseconds k_wait{2500};
  static constexpr int k_rounds = 3;
  static constexpr std::size_t k_cache_max = std::size_t{1} << 20;

 private:
  struct owner_entry {
    std::string node;     // member name
    std::string address;  // akt:// remoting address
    std::int64_t token = 0;
    lease_id lease = 0;  // the lease the claim is on
    pid proxy;           // the owner's grain proxy for this claim, made on first use
  };
  // The maps are keyed by "kind/name" and looked up by the identity's two parts, so that a send
  // builds no string (id_view): hashing and comparing treat the parts as joined by '/'. A view
  // carries its hash, computed once (view()): it picks the shard and the bucket both.
  struct id_view {
    std::string_view kind, name;
    std::size_t hash = 0;
  };
  struct id_hash {
    using is_transparent = void;
    static std::size_t mix(std::size_t h, std::string_view s) noexcept {
      for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
      return h;
    }
    std::size_t operator()(std::string_view s) const noexcept {
      return mix(14695981039346656037ull, s);
    }
    std::size_t operator()(const std::string& s) const noexcept {
      return (*this)(std::string_view(s));
    }
    std::size_t operator()(const id_view& v) const noexcept { return v.hash; }
    static std::size_t of(std::string_view kind, std::string_view name) noexcept {
      return mix(mix(mix(14695981039346656037ull, kind), "/"), name);
    }
  };
  struct id_eq {
    using is_transparent = void;
    bool operator()(const std::string& a, const std::string& b) const noexcept { return a == b; }
    bool operator()(const id_view& v, const std::string& s) const noexcept {
      const std::size_t k = v.kind.size();
      return s.size() == k + 1 + v.name.size() && s.compare(0, k, v.kind) == 0 && s[k] == '/' &&
             s.compare(k + 1, std::string::npos, v.name) == 0;
    }
    bool operator()(const std::string& s, const id_view& v) const noexcept { return (*this)(v, s); }
  };
  template <class T>
  using id_map = std::unordered_map<std::string, T, id_hash, id_eq>;
  static id_view view(const grain_identity& id) noexcept {
    return {id.kind, id.name, id_hash::of(id.kind, id.name)};
  }
  class watcher;

  // One conditional write through the batcher, waited for (at most k_wait).
  result<op_outcome> write(store_op op);
  // Reads the identity's claim now (at most k_wait): the owner (cached) or nothing.
  result<std::optional<owner_entry>> read_owner(const grain_identity& id);
  // Where a message for id goes once the owner is known (or not): from the cache only.
  // Under sh.m (sh: id's shard); a remote answer without its proxy yet leaves `make` set (made
  // outside the lock by place()).
  struct shard;
  akt::detail::grain_place place_locked(shard& sh, const grain_identity& id, const id_view& v,
                                        owner_entry* make = nullptr);
  akt::detail::grain_place remote_place(const grain_identity& id, const owner_entry& e);
  // Compare-and-delete of id's claim at token, with its rounds; true when it is gone.
  bool release_claim(const grain_identity& id, std::int64_t token);
  void release_async(const grain_identity& id, std::int64_t token, int round);
  // The record of a claim for owner, with the kind's settings (null: a kind this node does not
  // host: none recorded).
  static grain_claim_record record_for(const member& owner, const grain_settings* settings);
  // The activation barrier: ok once min_peers members were known; waits off the workers.
  error pass_barrier();
  // The node a grain of id's kind without an owner goes to, by the kind's placement strategy
  // and role (settings null: a kind this node does not host: any member listing it, in turn);
  // nothing when no member can host it.
  std::optional<member> choose_node(const grain_identity& id, const grain_settings* settings);
  // Claims id for `owner` (this node, or another member: on its lease), with its rounds.
  result<op_outcome> claim_for(const grain_identity& id, const member& owner,
                               const grain_settings* settings);
  // Adopts the claim another node made for this one at token (a message routed by it).
  result<std::int64_t> adopt(const grain_identity& id, std::int64_t token);
  bool decode_owner(const key_value& kv, owner_entry& out) const;
  // Under sh.m: caches an owner of another node (the shard cleared past its share of
  // k_cache_max: entries are hints, a miss costs a claim round).
  void cache_locked(shard& sh, const std::string& key, owner_entry e);
  void on_events(const std::vector<watch_event>& events, revision header);
  void on_watch_end(error why);
  void restart_watch();

  actor_system& sys_;
  membership& membership_;
  const grain_registry_settings settings_;
  const std::string& cluster_ = settings_.cluster;
  const std::string& node_ = settings_.node;
  const std::string& address_ = settings_.address;
  std::unique_ptr<claim_batcher> batcher_;  // null after close()

  // The claims held and the owner cache, split by the identity's hash, so that sends to
  // different grains from different threads take different locks: a send by identity locks
  // one shard and nothing else (place). Lock order: mutex_ before a shard's, never the reverse;
  // no shard lock is held while another shard's is taken.
  struct alignas(64) shard {
    mutable std::mutex m;
    id_map<std::int64_t> held;  // guarded by m: kind/name -> token
    id_map<owner_entry> cache;  // guarded by m: kind/name -> owner
  };
  static constexpr std::size_t k_shards = 16;  // bounds lock contention between sending threads
  shard& shard_of(const id_view& v) noexcept { return shards_[v.hash % k_shards]; }
  shard& shard_of(const grain_identity& id) noexcept { return shard_of(view(id)); }
  std::array<shard, k_shards> shards_;

  mutable std::mutex mutex_;  // guards what follows (and is taken before a shard's)
  std::condition_variable drained_;
  int releases_in_flight_ = 0;  // guarded
  bool closed_ = false;         // guarded
  revision last_revision_ = 0;  // guarded: the watch's last
  std::unique_ptr<watcher> watcher_;
  std::unique_ptr<watch_handle> watch_;  // guarded when replaced
  // guarded: the ended watch whose on_end is running or ran last (freed at the next end or close)
  std::vector<std::unique_ptr<watch_handle>> retired_;
  // Writer: begin_shutdown (release); readers: admit (acquire).
  std::atomic<bool> shutting_down_{false};
  // Writer: the first admit that saw min_peers members (release); readers: admit (acquire).
  std::atomic<bool> barrier_open_{false};
  std::atomic<std::uint64_t> next_node_{0};  // round-robin placement's counter

  // The metrics (system_config::metrics; empty handles while off, and nothing is timed):
  // akt_cluster_claims_made_total (a put-if-absent that wrote the claim, for this node or
  // another), akt_cluster_claims_released_total (a compare-and-delete that deleted one), and
  // akt_cluster_registry_seconds{op} per store round trip (op: claim, release, read). Set by
  // the constructor; updated from any thread (lock-free).
  struct metric_handles {
    akt::metrics::counter claims_made, claims_released;
    akt::metrics::histogram claim_seconds, release_seconds, read_seconds;
  };
  static metric_handles make_metrics(actor_system& sys);
  const metric_handles metrics_;
};

}  // namespace akt::cluster::detail
