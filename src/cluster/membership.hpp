#pragma once
// membership: one node's part in the cluster's member list, over a coordination store. It holds
// the node's lease and member record, keeps the list of members from a full read and a watch,
// and decides whether the node is fenced (include/akt/cluster/cluster.hpp says what that means).
//
// Contract
// - Callers: join() once, from the thread that starts the system (it blocks, bounded by
//   start_wait; never a dispatcher worker); then members(), self(), wait_ready() and
//   valid_epoch() from any thread; leave() once, then stop() once, from the stopping thread.
// - Threads: the store's completion thread delivers keep-alive answers and watch batches; the
//   membership's own thread (the ticker) sends keep-alives, pings the dispatcher probe, notices
//   the fence, restarts a lost watch and rejoins (keep-alives and rejoins only while the probe
//   is handled). Neither runs user code; the listener's calls (events, remoting) are made
//   outside the lock, from either thread.
// - Fencing: valid_until_ns_ = send time of the last acknowledged keep-alive (or of the lease's
//   grant) + TTL - margin, on the steady clock. valid_epoch() compares it with the clock on every
//   call; nothing waits for a timer to notice, so after a SIGSTOP/SIGCONT the first grain handler
//   already sees the node fenced.
// - Ordering: a rejoin stores epoch_ then valid_until_ns_ (release); valid_epoch() loads
//   valid_until_ns_ then epoch_ (acquire): a reader that sees the new validity sees the new
//   epoch, so an activation of the old epoch never passes as current.
// - Memory: the member list (one record per member) and one pending keep-alive.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "akt/cluster/cluster.hpp"
#include "akt/cluster/store.hpp"
#include "grain/grain_seams.hpp"

namespace akt::cluster::detail {

// What membership tells its node.
class membership_listener {
 public:
  virtual ~membership_listener() = default;
  virtual void joined(const member& m) = 0;
  virtual void left(const member& m) = 0;
  virtual void fenced(lease_id epoch) = 0;
  virtual void rejoined(lease_id epoch) = 0;
  // The dispatcher probe: ping sends it a message; healthy says whether one was handled within
  // `within` before now (steady ns).
  virtual void ping_dispatcher() = 0;
  virtual bool dispatcher_healthy(std::int64_t now_ns, std::int64_t within_ns) = 0;
  // The node's load for its record (its active grains); read every keep-alive period.
  virtual std::uint64_t load() = 0;
};

struct membership_settings {
  std::string cluster;
  std::string node;
  std::string address;  // akt://system@host:port
  std::uint64_t incarnation = 0;
  std::chrono::seconds ttl{5};
  std::chrono::milliseconds margin{500};
  std::chrono::milliseconds start_wait{10000};
  bool old_process_gone = false;
  std::vector<std::string> roles;
  std::vector<std::string> kinds;
  std::string http;  // host:port of the node's HTTP endpoint, or empty (member::http)
};

class membership final : public akt::detail::grain_fence {
 public:
  membership(membership_settings s, std::unique_ptr<store> st, membership_listener& l);
  ~membership() override;
  membership(const membership&) = delete;
  membership& operator=(const membership&) = delete;

  // Grants the lease, writes the record (waiting, at most start_wait, for an earlier process of
  // the same name to let go, or revoking its lease with old_process_gone), reads the members
  // and starts the watch and the ticker. Errors: cluster_unavailable, invalid_cluster_config
  // (the name is held by a live member).
  result<void> join();
  // The node began to stop: its record says leaving=1 from now on (written without waiting, best
  // effort: the others' placements skip a leaving member; leave() writes it again before the
  // revoke). Once, from the stopping thread.
  void announce_leaving();
  // Revokes the lease (the record vanishes at once), waiting for the store until deadline.
  void leave(std::chrono::steady_clock::time_point deadline, std::vector<std::string>& problems);
  // Ends the ticker, the watch and the store connection. Idempotent.
  void stop() noexcept;

  std::vector<member> members() const;
  member self() const;
  // The lease this node's claims go on now (0 between a fence and the rejoin), and whether the
  // node `name` is a member under lease `epoch` (0: under any lease). Any thread.
  lease_id lease() const;
  // Waits (at most timeout) until at least n members are known, this node included; false on
  // the timeout or when membership stops.
  bool wait_members(std::size_t n, std::chrono::nanoseconds timeout) const;
  bool is_member(const std::string& name, lease_id epoch = 0) const;
  // The store connection, shared with the grain registry; valid until stop().
  store& coordination_store() noexcept { return *store_; }
  bool wait_ready(std::chrono::nanoseconds timeout) const;
  bool fenced() const noexcept { return valid_epoch() == 0; }
  // Until when (akt::detail::now_ns()'s steady clock) the lease is provably alive, as the fence
  // reads it; 0 while fenced. Any thread (the metrics' akt_cluster_lease_seconds_left).
  std::int64_t valid_until_ns() const noexcept {
    return valid_until_ns_.load(std::memory_order_acquire);
  }

 private:
  class member_watch;
  struct pending_events {
    std::vector<member> joined, left;
  };

  // Grants a lease and writes the record on it: the steps of join and of a rejoin.
  result<void> enter(std::int64_t give_up_ns);
  // Reads the member prefix and (re)starts the watch from the read's revision + 1; the
  // differences with the list held so far become events.
  result<void> read_and_watch();
  void run_ticker();
  void send_keep_alive(std::int64_t now);
  // Writes the record again when the load changed (compare-and-put on its create revision).
  void update_load();
  void on_watch_events(const std::vector<watch_event>& events, revision header);
  void on_watch_end(error why);
  // Marks the node fenced now (its lease is gone): called under mutex_.
  void fence_now_locked();
  void deliver(pending_events& ev);
  void apply_member_locked(const member& m, pending_events& ev);
  void remove_member_locked(const std::string& name, pending_events& ev);

  const membership_settings settings_;
  std::unique_ptr<store> store_;
  membership_listener& listener_;

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::map<std::string, member> members_;  // guarded; by node name
  member self_;                            // guarded: the record as written
  lease_id lease_ = 0;                     // guarded: the current lease; 0 between leases
  lease_id retired_lease_ = 0;             // guarded: the lease given up at the last fence
  revision record_revision_ = 0;           // guarded: our record's create revision
  bool record_update_pending_ = false;     // guarded
  revision last_revision_ = 0;             // guarded: the last revision the watch delivered
  bool ready_ = false;                     // guarded: the first full read is done
  bool watch_lost_ = false;                // guarded: restart the watch from last_revision_ + 1
  bool read_again_ = false;                // guarded: compacted: read in full, then watch
  bool leaving_ = false;                   // guarded: leave() began; no keep-alive, no rejoin
  bool stopping_ = false;                  // guarded: the ticker ends
  bool fence_reported_ = false;            // guarded: fenced() was told for the current lease
  bool keep_alive_pending_ = false;        // guarded
  std::unique_ptr<member_watch> watch_handler_;
  std::unique_ptr<watch_handle> watch_;  // guarded by mutex_ when replaced

  // The fence's valid_until_ns_ and epoch_ (grain_fence, grain_seams.hpp) are this class's:
  // valid_until_ns_ is written by keep-alive completions (store thread) and the ticker, under
  // mutex_ (release), in steady-clock ns, 0: fenced; epoch_ (a counter of this process's joins,
  // from 1) by the ticker under mutex_, before valid_until_ns_ of the same join (release).
  std::thread ticker_;
};

}  // namespace akt::cluster::detail
