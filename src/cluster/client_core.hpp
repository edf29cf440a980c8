#pragma once
// One in-process store client's completion side: its completion thread, the timed queue that
// thread runs, its watches' delivery state and its fault switches. Private to the cluster
// module (inproc_store.cpp, inproc_state.cpp).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "akt/cluster/store.hpp"
#include "akt/core/error.hpp"

namespace akt::cluster::detail {

class client_core;

// One watch. The store's watcher list holds it while the watch is live (it is removed there
// when it ends or is cancelled); the handle and a queued delivery hold it too.
//
// Deliveries are pulled, as etcd's unsynced watchers catch up: the store queues at most one
// pump per watch on its client; the pump, on the client's thread, copies the next batch out of
// the store's history and delivers it. So a watch holds no events of its own beyond the batch
// it delivers, and one that falls behind a compaction ends with cluster_compacted.
struct watcher {
  std::string prefix;
  revision from = 0;
  watch_handler* handler = nullptr;
  std::shared_ptr<client_core> core;  // where its deliveries run
  // Guarded by the store's mutex:
  revision next = 0;         // the first revision not yet fetched for delivery
  bool pump_queued = false;  // a pump is queued: the store queues no second one
  // Guarded by core->mutex_:
  bool cancelled = false;   // cancel() was called: nothing more is delivered
  bool end_queued = false;  // an on_end is queued: no pump runs after it
  bool end_ran = false;     // on_end ran: nothing more runs
};

// What a pump fetched for one delivery: events (none: nothing to deliver), or the watch's end.
struct watch_batch {
  std::vector<watch_event> events;
  revision header = 0;
  error end;  // set: the watch ends with this instead
  revision compact_revision = 0;
};

// The completion thread of one client and what it runs.
//
// Contract
// - Callers: post_*() from any thread (the caller's, the store's expiry thread, a clock's
//   advance); under the store's mutex or not (the lock order is store mutex, then this one:
//   the thread takes the store's mutex only in a pump's fetch, with mutex_ released). cancel()
//   from any thread, a completion included.
//   shutdown() once, from the owner (the client's destructor), never from the thread itself.
// - Progress: post and cancel take mutex_ for a queue insert; cancel waits only while that
//   watch's batch is being delivered on the thread, unless it is that thread.
// - Ordering: items run by due time, ties in post order. Replies and watch items are due at
//   max(now + delay, the previous reply's due), so a watch's batches and end keep their order
//   even when the delay changes; timeouts (cut off, dropped) are due at now + call_timeout.
// - Memory: one map node per queued item (a call's outcome, or a watch's single pump or end);
//   the thread holds one item, and a pump's batch, while it runs.
class client_core {
 public:
  using clock = std::chrono::steady_clock;
  using task = std::function<void(bool shutting_down)>;

  client_core(std::string name, std::chrono::milliseconds call_timeout);
  ~client_core();  // after shutdown()
  client_core(const client_core&) = delete;
  client_core& operator=(const client_core&) = delete;

  const std::string& name() const noexcept { return name_; }
  std::chrono::milliseconds call_timeout() const noexcept { return call_timeout_; }

  // A call's outcome: run(false) after the reply delay (or run's timeout variant if the delay
  // reaches call_timeout), run(true) if the client shuts down first.
  template <class T>
  void post_result(result<T> r, store_callback<T> done) {
    task timed_out = [done](bool shutting_down) {
      done(shutting_down ? errc::system_shutting_down : errc::cluster_registry_timeout);
    };
    task on_time = [r = std::move(r), done = std::move(done)](bool shutting_down) mutable {
      if (shutting_down) {
        done(errc::system_shutting_down);
      } else {
        done(std::move(r));
      }
    };
    post_reply(std::move(on_time), std::move(timed_out));
  }
  // A call that gets no answer: cluster_registry_timeout after call_timeout.
  template <class T>
  void post_timeout(store_callback<T> done) {
    post_at(clock::now() + call_timeout_, [done = std::move(done)](bool shutting_down) {
      done(shutting_down ? errc::system_shutting_down : errc::cluster_registry_timeout);
    });
  }

  // Queues w's pump: fetch() runs on the thread (without mutex_; it takes the store's) and its
  // batch is delivered, unless w was cancelled or its end queued first.
  void post_pump(const std::shared_ptr<watcher>& w, std::function<watch_batch()> fetch);
  // Queues w's on_end unless one is queued or w was cancelled; `after` > 0 makes it due then
  // (a watch made while cut off) instead of in reply order.
  void post_end(const std::shared_ptr<watcher>& w, error why, revision compact_revision,
                std::chrono::milliseconds after = {});
  // No delivery to w starts after this returns; waits for one in progress (on another thread).
  void cancel(watcher& w);

  // Stops: queues on_end(system_shutting_down) for `live` (the watches the store dropped), runs
  // every queued item at once in shutdown mode, joins the thread.
  void shutdown(const std::vector<std::shared_ptr<watcher>>& live);
  bool on_thread() const noexcept;

  // Fault switches. Writer: the client's switch calls (any thread); readers: the client's calls
  // and the store (under its mutex). Relaxed: each is a standalone flag; a call racing with a
  // switch may see either value, as a packet in flight during a partition may or may not pass.
  std::atomic<bool> cut_off{false};
  std::atomic<bool> drop_keep_alives{false};
  std::atomic<std::int64_t> delay_ms{0};

 private:
  struct item {
    task run;                            // a call's completion; empty for a watch item
    std::shared_ptr<watcher> w;          // a watch item's watch
    std::function<watch_batch()> fetch;  // set: a pump
    revision rev = 0;                    // an end item's compact revision
    error why;                           // set: an end item
  };
  using key = std::pair<clock::time_point, std::uint64_t>;

  void post_reply(task on_time, task timed_out);
  void post_at(clock::time_point due, task run);
  // Due time of the next reply or watch item (mutex_ held).
  clock::time_point next_reply_due_locked();
  void insert_locked(clock::time_point due, item it);
  void loop();
  void run_locked(std::unique_lock<std::mutex>& lk, item& it, bool shutting_down);
  void deliver_locked(std::unique_lock<std::mutex>& lk, item& it);

  const std::string name_;
  const std::chrono::milliseconds call_timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;          // the thread waits for items; cancel() for a delivery's end
  std::map<key, item> items_;           // guarded by mutex_
  std::uint64_t seq_ = 0;               // guarded by mutex_
  clock::time_point last_reply_due_{};  // guarded by mutex_
  bool stopping_ = false;               // guarded by mutex_
  const watcher* delivering_ = nullptr;  // guarded by mutex_: the watch being delivered
  std::thread thread_;
};

}  // namespace akt::cluster::detail
