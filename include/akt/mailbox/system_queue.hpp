#pragma once
// system_queue: an actor's control messages (poison pill and, later, watch and supervision
// signals). The dispatcher serves it before every user message.
//
// Contract: push from any thread (lock-free CAS onto an intake stack); pop and empty by the
// consumer only. Send order is kept: the consumer takes the whole intake in one exchange and
// reverses it into a private batch. The idle check is two loads and no writes. A popped envelope
// stays valid until the next pop, which recycles it.

#include <cstdint>

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
    flush();
  }

  void push(envelope* e) noexcept { intake_.push(e); }

  envelope* pop() noexcept {
    // The common case, the idle check: reads, writes nothing (the last handed-out envelope is
    // recycled by the next pop that finds work, or by flush).
    if (batch_done() && intake_.empty_relaxed()) return nullptr;
    flush();
    if (batch_ == 0) batch_ = reinterpret_cast<std::uintptr_t>(intake_.take_all());
    if (batch_ == 0) return nullptr;
    // The envelope stays at the head of the batch, tagged as handed out, until the next pop
    // or flush recycles it (one field instead of a batch pointer and a recycler).
    batch_ |= k_handed_out;
    return head();
  }

  // Consumer only.
  bool empty() const noexcept { return batch_done() && intake_.empty(); }
  // Any thread: true when nothing was pushed since the consumer last took the intake. Used by a
  // turn that has stopped owning the actor (its batch is empty at that point).
  bool intake_empty() const noexcept { return intake_.empty(); }

  // Recycles the last popped envelope now (the turn that handled it is over).
  void flush() noexcept {
    if ((batch_ & k_handed_out) == 0) return;
    envelope* e = head();
    batch_ = reinterpret_cast<std::uintptr_t>(e->next.load(std::memory_order_relaxed));
    e->next.store(nullptr, std::memory_order_relaxed);
    recycle(e);
  }

 private:
  // Nothing left in the batch but, possibly, the handed-out head.
  bool batch_done() const noexcept {
    return batch_ == 0 || ((batch_ & k_handed_out) != 0 &&
                           head()->next.load(std::memory_order_relaxed) == nullptr);
  }
  // Envelopes are 64-byte aligned: the low bit of batch_ is free for the tag.
  static constexpr std::uintptr_t k_handed_out = 1;
  envelope* head() const noexcept {
    return static_cast<envelope*>(reinterpret_cast<mpsc_node*>(batch_ & ~k_handed_out));
  }

  intake_stack intake_;
  // Consumer only: the batch taken from the intake, oldest first; its head possibly handed out.
  std::uintptr_t batch_ = 0;
};

}  // namespace akt
