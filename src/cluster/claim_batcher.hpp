#pragma once
// claim_batcher: coalesces single conditional writes (claims: put_if_absent; releases:
// delete_if_created_at; updates: update_if_created_at) submitted from any thread into batched
// store commits, without a timer. When no commit is in flight, a submitted op goes out at once as
// a commit of one (no added latency at low load). While one is in flight, submissions queue;
// when it completes, the queue's head goes out as the next commit. The batch size thus follows
// the load and the store's latency: what arrives during one round trip leaves in the next.
//
// Contract
// - Callers: submit() from any thread, including from inside a completion (a `done` may submit
//   again: it queues behind the next commit if one is in flight, or goes out at once).
//   commits() and ops() from any thread. The destructor from the owner's thread, never from the
//   store's completion thread (so never from a `done` either; asserted for this batcher's own
//   completions): the destructor waits for the in-flight commit's completion, which runs there.
//   Nobody may call submit() once the destructor has begun, except a `done` it is itself
//   waiting for (that op is completed with system_shutting_down like the other queued ones).
// - In flight: ONE commit at a time. Commit n+1 is sent after commit n was answered, so two ops
//   on one key in successive commits apply in submission order without any tracking across
//   commits, and a queue that grows during a round trip leaves as one commit. A second commit in
//   flight would halve the batches' size for at most one more round trip of overlap; not worth
//   per-key tracking across commits at a claim rate of 127 ops per store round trip.
// - Batches: at most max_batch ops (1..store_limits::max_ops_per_round, so a commit is one
//   atomic round of the store: never several rounds of which some applied), in submission order,
//   and never two ops on one key: an op whose key is already in the batch being formed stays
//   queued (and so do the later ops on that key) for a later commit; ops on other keys behind it
//   still go. So the store's invalid_argument (a round putting a key it also writes) cannot
//   happen, and per-key submission order is kept: in the store, and in the callbacks too, since
//   a store runs its completions one at a time (store.hpp) and commit n+1's cannot start before
//   commit n's has called its callbacks.
// - Outcomes: each `done` is called exactly once. With the op's op_outcome when the commit was
//   answered; with the commit's error otherwise, for every op of that commit: lease_not_found
//   (an op's lease was gone: etcd fails the whole round, so ops of that commit on a live lease
//   fail with it; the caller retries those, and a claim on a gone lease needs a new epoch
//   anyway), cluster_registry_timeout (possibly written: read again to know), protocol_error (an
//   answer with the wrong number of outcomes), system_shutting_down (the store went first). A
//   failed commit fails only its own ops: the next commit goes out as usual.
// - Threads: `done` runs on the store's completion thread, never inside submit(); except for ops
//   still queued at destruction, which complete with system_shutting_down on the destructor's
//   thread. Callbacks are called without the batcher's lock held.
// - Progress: submit() takes a mutex briefly (forming a batch looks at most k_scan_factor *
//   max_batch queued ops) and never waits for the store; the destructor blocks until the
//   in-flight commit's completion has run.
// - Memory: the queued ops (unbounded: the caller bounds what it submits) and one batch in
//   flight; nothing else.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "akt/cluster/store.hpp"

namespace akt::cluster::detail {

class claim_batcher {
 public:
  // How many queued ops one batch formation looks at, as a multiple of max_batch: bounds the
  // time submit() and a completion hold the lock when many ops wait on a few keys; ops beyond
  // wait for a later commit in any case.
  static constexpr std::size_t k_scan_factor = 4;

  // st must outlive the batcher. max_batch in 1..store_limits::max_ops_per_round (asserted).
  explicit claim_batcher(store& st, std::size_t max_batch = store_limits::max_ops_per_round);
  // Completes every op still queued with system_shutting_down (on this thread), then waits until
  // the in-flight commit's completion has run; see the contract for who may call it.
  ~claim_batcher();
  claim_batcher(const claim_batcher&) = delete;
  claim_batcher& operator=(const claim_batcher&) = delete;

  void submit(store_op op, store_callback<op_outcome> done);

  // Counters for tests and benchmarks: commits sent, ops sent (in them).
  std::uint64_t commits() const noexcept;
  std::uint64_t ops() const noexcept;

 private:
  struct pending {
    store_op op;
    store_callback<op_outcome> done;
  };

  // Takes the next batch from queue_ (non-empty when queue_ is), counts it in flight.
  std::vector<pending> take_batch_locked();
  // Sends a batch taken by take_batch_locked; without the lock.
  void send(std::vector<pending> batch);
  // The commit's completion, on the store's completion thread.
  void finished(std::vector<store_callback<op_outcome>>& dones, result<std::vector<op_outcome>> r);

  store& store_;
  const std::size_t max_batch_;

  std::mutex mutex_;
  std::condition_variable idle_;  // notified when handlers_ drops to 0
  // All guarded by mutex_:
  std::deque<pending> queue_;  // submitted, not yet sent, in submission order
  // A commit is out whose completion has not yet taken the next batch: submit() only queues.
  bool in_flight_ = false;
  // Commits sent whose completion has not finished touching this batcher (at most 2 for an
  // instant: the next commit is sent before the current one's callbacks run); the destructor
  // waits for 0.
  int handlers_ = 0;
  bool closing_ = false;  // the destructor has begun: nothing more is sent

  // Written (relaxed) under mutex_ by the thread that sends a batch, read by any thread
  // (relaxed): counts only; a test that waited for a commit's completions sees at least its
  // counts, since the increment happens before the commit is handed to the store.
  std::atomic<std::uint64_t> commits_{0};
  std::atomic<std::uint64_t> ops_{0};
};

}  // namespace akt::cluster::detail
