#pragma once
// non_blocking_bounded_mailbox: FIFO with a fixed capacity that never blocks. The capacity is
// rounded up to a power of two (at least 2); when full, enqueue refuses with mailbox_full and the
// runtime publishes the message as a dead letter.
//
// Contract: see mailbox.hpp. Lock-free MPSC ring (mpsc_ring): one CAS per enqueue. Memory: the
// ring, allocated once. Dequeued envelopes are recycled one dequeue later.

#include "akt/mailbox/mailbox.hpp"
#include "akt/mailbox/mpsc_ring.hpp"

namespace akt {

class non_blocking_bounded_mailbox final : public mailbox {
 public:
  explicit non_blocking_bounded_mailbox(std::size_t capacity);
  ~non_blocking_bounded_mailbox() override;

  std::size_t capacity() const noexcept { return ring_.capacity(); }

  error enqueue(envelope* e) override;
  envelope* dequeue() override;
  bool empty() const override { return ring_.claimed() == 0; }
  std::size_t size() const override { return ring_.claimed(); }
  void dispose() override;

 private:
  mpsc_ring<envelope*> ring_;
  deferred_recycler recycler_;
  std::atomic<bool> disposed_{false};  // writer: dispose (release); readers: enqueue (acquire)
};

}  // namespace akt
