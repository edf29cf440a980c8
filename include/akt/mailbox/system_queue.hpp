#pragma once
// system_queue: an actor's control messages (poison pill and, later, watch and supervision
// signals). The dispatcher serves it before every user message.
//
// Contract: push from any thread (lock-free CAS onto an intake stack); pop and empty by the
// consumer only. Send order is kept: the consumer takes the whole intake in one exchange and
// reverses it into a private batch. The idle check is two loads and no writes. A popped envelope
// stays valid until the next pop, which recycles it.

#include "akt/mailbox/mailbox.hpp"
#include "akt/mailbox/mpsc_queue.hpp"

namespace akt {

class system_queue {
 public:
  system_queue() = default;
  system_queue(const system_queue&) = delete;
  system_queue& operator=(const system_queue&) = delete;
  ~system_queue() {
    while (pop() != nullptr) {
    }
    recycler_.flush();
  }

  void push(envelope* e) noexcept { intake_.push(e); }

  envelope* pop() noexcept {
    if (batch_ == nullptr && intake_.empty_relaxed()) return nullptr;  // the common case
    recycler_.flush();
    if (batch_ == nullptr) batch_ = intake_.take_all();
    if (batch_ == nullptr) return nullptr;
    auto* e = static_cast<envelope*>(batch_);
    batch_ = batch_->next.load(std::memory_order_relaxed);
    e->next.store(nullptr, std::memory_order_relaxed);
    return recycler_.hand_out(e);
  }

  // Consumer only.
  bool empty() const noexcept { return batch_ == nullptr && intake_.empty(); }
  // Any thread: true when nothing was pushed since the consumer last took the intake. Used by a
  // turn that has stopped owning the actor (its batch is empty at that point).
  bool intake_empty() const noexcept { return intake_.empty(); }

  // Recycles the last popped envelope now (the turn that handled it is over).
  void flush() noexcept { recycler_.flush(); }

 private:
  intake_stack intake_;
  mpsc_node* batch_ = nullptr;  // consumer only, oldest first
  deferred_recycler recycler_;
};

}  // namespace akt
