#pragma once
// The data of an in-process store (akt/cluster/inproc_store.hpp): keys, revisions, leases, the
// history since the compaction point and the live watches, behind one mutex, plus the thread
// that expires leases. Private to the cluster module.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "akt/cluster/inproc_store.hpp"
#include "akt/cluster/store.hpp"
#include "akt/cluster/store_clock.hpp"
#include "cluster/client_core.hpp"

namespace akt::cluster::detail {

// Contract
// - Callers: every method from any thread, concurrently (the clients' calls, watch handles,
//   the clock's advance, the owner's compact). Each takes mutex_ for its own work and queues
//   what it tells clients on their client_core (lock order: mutex_, then a client's); it never
//   runs a completion and never waits on a client under mutex_.
// - Ordering: one total order of writes (the revision); each watch fetches its batches from the
//   history in revision order, one pump at a time (watcher's comment).
// - Leases expire on clock_: every operation first expires the leases due by the clock's
//   now(), the expiry thread does so when the next one is due (steady clock) or every
//   clock_poll (function clock), and a manual clock's advance() does so on its thread (the
//   expiry thread then only waits for the end).
// - Memory: keys, leases, the history since the compaction point (bounded by
//   history_revisions when set), one watcher entry per live watch; a watch's events are copied
//   out of the history only for the batch it delivers (at most max_watch_batch events, more
//   only when one revision has more).
class inproc_state final : public store_clock_listener {
 public:
  explicit inproc_state(inproc_store_options options);
  ~inproc_state() override;
  inproc_state(const inproc_state&) = delete;
  inproc_state& operator=(const inproc_state&) = delete;

  result<lease_grant> grant(std::chrono::seconds ttl);
  result<keep_alive_ack> keep_alive(lease_id id);
  result<void> revoke(lease_id id);
  range_result read(const std::string& key, bool prefix);
  result<std::vector<op_outcome>> commit(std::span<const store_op> ops);

  // Starts w: replays its history and registers it, or queues its end (compacted, or the
  // client is cut off).
  void add_watcher(const std::shared_ptr<watcher>& w);
  void remove_watcher(const watcher& w);
  // Unregisters and returns every live watch of that client.
  std::vector<std::shared_ptr<watcher>> remove_watchers_of(const client_core& core);

  result<void> compact(revision r);
  revision current_revision() const;
  revision compact_revision() const;
  std::size_t lease_count() const;
  const std::shared_ptr<store_clock>& clock() const noexcept { return clock_; }

  void time_moved() override;

 private:
  struct lease_entry {
    std::chrono::seconds ttl{0};
    store_clock::time_point expires{};
    std::set<std::string> keys;
  };
  struct change {
    revision rev = 0;
    watch_event event;
  };

  void expire_due_locked(store_clock::time_point now);
  // Deletes the lease and its keys (one revision when it has keys).
  void end_lease_locked(std::map<lease_id, lease_entry>::iterator it);
  void commit_round_locked(std::span<const store_op> ops, std::vector<op_outcome>& out,
                           error& failed);
  void attach_locked(const std::string& key, lease_id lease);
  void detach_locked(const std::string& key, lease_id lease);
  // Records the changes of revision rev and queues them for the watches that want them.
  void publish_locked(revision rev, std::vector<watch_event> events);
  // Queues w's pump (pump_queued set).
  void pump_locked(const std::shared_ptr<watcher>& w);
  // Run by a pump on the watch's client thread: w's next batch from the history.
  watch_batch fetch(watcher& w);
  void compact_locked(revision r);
  void expiry_loop();

  const std::shared_ptr<store_clock> clock_;
  const revision history_revisions_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;  // wakes the expiry thread: a new lease, or stop
  // All guarded by mutex_:
  revision current_ = 1;  // etcd's revision of an empty store
  revision compacted_ = 0;
  lease_id next_lease_ = 1;
  std::map<std::string, key_value> keys_;
  std::map<lease_id, lease_entry> leases_;
  std::set<std::pair<store_clock::time_point, lease_id>> expiries_;  // (expires, lease)
  std::deque<change> history_;  // changes at revisions >= compacted_, in order
  std::vector<std::shared_ptr<watcher>> watchers_;
  bool stop_ = false;

  std::thread expiry_;
};

}  // namespace akt::cluster::detail
