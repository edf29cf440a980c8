#pragma once
// The mailbox interface: where an actor's user messages wait until its turn processes them.
// Control messages never enter a mailbox: they travel on the actor's system queue, which the
// dispatcher always serves first.
//
// Contract for every implementation (built-in or user-written)
// - enqueue: any number of threads at once. Returns errc::ok, or the reason it refused
//   (mailbox_full, mailbox_disposed); on refusal the envelope stays the caller's, and the runtime
//   publishes it as a dead letter. It may block only a producer outside the dispatcher (see
//   bounded_mailbox).
// - dequeue, dispose: one consumer at a time (the actor's turn). dequeue never blocks and returns
//   null when nothing is ready.
// - empty, size: any thread, also while the consumer runs: they may read only state that
//   producers and the consumer publish atomically (a turn re-checks empty() after it released
//   the actor, when another worker may already be consuming).
// - Ownership: a dequeued envelope stays valid, and owned by the mailbox, until the next dequeue
//   or dispose; the mailbox then recycles it (akt::recycle). The dispatcher never recycles.
// - Visibility: once enqueue has returned ok, empty() is false until that envelope is dequeued.
//   enqueue must publish with a release (or stronger) operation and empty() must observe with
//   an acquire (or stronger) one; the runtime orders the rest (see dispatch_state.hpp).
// - dispose: called once, by the consumer, when the actor stops for good, after the runtime
//   drained the queue into dead letters. From then on enqueue refuses with mailbox_disposed and
//   blocked producers wake with that error. The mailbox stays usable for dequeue: an enqueue that
//   raced with dispose may still land, and the runtime drains it too. The destructor recycles
//   whatever is left.

#include <cstddef>
#include <memory>

#include "akt/core/error.hpp"
#include "akt/mailbox/envelope.hpp"

namespace akt {

class mailbox {
 public:
  virtual ~mailbox() = default;

  virtual error enqueue(envelope* e) = 0;
  virtual envelope* dequeue() = 0;
  virtual bool empty() const = 0;
  virtual std::size_t size() const = 0;
  virtual void dispose() = 0;
};

// Helper for mailboxes that hand out detached envelopes: keeps the last one handed out and
// recycles it on the next dequeue (or on dispose). Consumer-side only.
class deferred_recycler {
 public:
  deferred_recycler() = default;
  deferred_recycler(const deferred_recycler&) = delete;
  deferred_recycler& operator=(const deferred_recycler&) = delete;
  ~deferred_recycler() { flush(); }

  // Records `e` as handed out, recycling the previous one. Returns e.
  envelope* hand_out(envelope* e) noexcept {
    flush();
    prev_ = e;
    return e;
  }
  void flush() noexcept {
    if (prev_ != nullptr) {
      prev_->next.store(nullptr, std::memory_order_relaxed);
      recycle(prev_);
      prev_ = nullptr;
    }
  }

 private:
  envelope* prev_ = nullptr;
};

}  // namespace akt
