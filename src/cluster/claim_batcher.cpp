// claim_batcher (claim_batcher.hpp): one commit in flight, the queue's head as the next.

#include "cluster/claim_batcher.hpp"

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "akt/core/assert.hpp"

namespace akt::cluster::detail {

namespace {
// The batcher whose completion this thread is running (the destructor asserts it is not its
// own: it would wait for itself).
thread_local const claim_batcher* t_completing = nullptr;
}  // namespace

claim_batcher::claim_batcher(store& st, std::size_t max_batch) : store_(st), max_batch_(max_batch) {
  AKT_ASSERT(max_batch >= 1 && max_batch <= store_limits::max_ops_per_round);
}

claim_batcher::~claim_batcher() {
  AKT_ASSERT(t_completing != this);
  std::unique_lock lk(mutex_);
  closing_ = true;
  for (;;) {
    if (!queue_.empty()) {
      // Never sent: refused here, outside the lock (a `done` may submit again, which queues and
      // is refused by the next turn of this loop).
      std::deque<pending> refused = std::move(queue_);
      queue_.clear();
      lk.unlock();
      for (pending& p : refused) p.done(error(errc::system_shutting_down, "claim batcher stopped"));
      refused.clear();  // the callers' captures go outside the lock too
      lk.lock();
      continue;
    }
    if (handlers_ == 0) break;
    idle_.wait(lk);
  }
}

std::uint64_t claim_batcher::commits() const noexcept {
  return commits_.load(std::memory_order_relaxed);
}

std::uint64_t claim_batcher::ops() const noexcept { return ops_.load(std::memory_order_relaxed); }

void claim_batcher::submit(store_op op, store_callback<op_outcome> done) {
  std::vector<pending> batch;
  {
    std::lock_guard lk(mutex_);
    queue_.push_back(pending{std::move(op), std::move(done)});
    // Closing: the destructor refuses it (wake it, should it be waiting already).
    if (closing_) {
      idle_.notify_all();
      return;
    }
    if (in_flight_) return;       // the in-flight commit's completion sends it
    batch = take_batch_locked();  // just this op: the queue is empty while nothing is in flight
  }
  send(std::move(batch));
}

std::vector<claim_batcher::pending> claim_batcher::take_batch_locked() {
  std::vector<pending> batch;
  if (queue_.empty()) return batch;
  // Reserved so that the key views below stay valid: no reallocation moves a key.
  batch.reserve(std::min(max_batch_, queue_.size()));
  std::unordered_set<std::string_view> keys;
  std::vector<pending> kept;  // same key as an op of the batch: for a later commit, in order
  const std::size_t scan = k_scan_factor * max_batch_;
  for (std::size_t looked = 0; !queue_.empty() && batch.size() < max_batch_ && looked < scan;
       ++looked) {
    pending p = std::move(queue_.front());
    queue_.pop_front();
    if (keys.count(p.op.key) != 0) {
      kept.push_back(std::move(p));
    } else {
      batch.push_back(std::move(p));
      keys.insert(batch.back().op.key);
    }
  }
  queue_.insert(queue_.begin(), std::make_move_iterator(kept.begin()),
                std::make_move_iterator(kept.end()));
  in_flight_ = true;
  ++handlers_;
  commits_.fetch_add(1, std::memory_order_relaxed);
  ops_.fetch_add(batch.size(), std::memory_order_relaxed);
  return batch;
}

void claim_batcher::send(std::vector<pending> batch) {
  std::vector<store_op> ops;
  std::vector<store_callback<op_outcome>> dones;
  ops.reserve(batch.size());
  dones.reserve(batch.size());
  for (pending& p : batch) {
    ops.push_back(std::move(p.op));
    dones.push_back(std::move(p.done));
  }
  // The store never completes inside commit(), so no completion runs before this returns.
  store_.commit(std::move(ops),
                [this, dones = std::move(dones)](result<std::vector<op_outcome>> r) mutable {
                  finished(dones, std::move(r));
                });
}

void claim_batcher::finished(std::vector<store_callback<op_outcome>>& dones,
                             result<std::vector<op_outcome>> r) {
  const claim_batcher* const outer = t_completing;
  t_completing = this;
  // First the next commit, so the store works on it while this one's callbacks run.
  std::vector<pending> next;
  {
    std::lock_guard lk(mutex_);
    if (!closing_ && !queue_.empty()) {
      next = take_batch_locked();
    } else {
      in_flight_ = false;
    }
  }
  if (!next.empty()) send(std::move(next));

  if (!r) {
    for (auto& done : dones) done(r.error());
  } else if (r->size() != dones.size()) {
    const error wrong(errc::protocol_error, "the store answered a commit of " +
                                                std::to_string(dones.size()) + " ops with " +
                                                std::to_string(r->size()) + " outcomes");
    for (auto& done : dones) done(wrong);
  } else {
    for (std::size_t i = 0; i < dones.size(); ++i) dones[i](std::move((*r)[i]));
  }

  dones.clear();  // the callers' captures go before the destructor may return
  t_completing = outer;
  // The last touch of this batcher: once handlers_ is 0 the destructor may return, so nothing
  // after the unlock may use a member.
  std::lock_guard lk(mutex_);
  if (--handlers_ == 0) idle_.notify_all();
}

}  // namespace akt::cluster::detail
