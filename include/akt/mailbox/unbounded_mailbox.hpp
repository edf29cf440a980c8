#pragma once
// unbounded_mailbox: the default FIFO, as a standalone mailbox (the actor cell embeds the same
// queue without padding so that a default actor allocates no mailbox).
//
// Contract: see mailbox.hpp. Unbounded, never blocks, never refuses (until disposed: after
// dispose it refuses with mailbox_disposed). Lock-free MPSC: one exchange per enqueue. The
// dequeued envelope is the queue's sentinel until the next dequeue, which recycles it.

#include <atomic>
#include <cstdint>

#include "akt/mailbox/mailbox.hpp"
#include "akt/mailbox/mpsc_queue.hpp"
#include "akt/pool/mpmc_ring.hpp"

namespace akt {

class unbounded_mailbox final : public mailbox {
 public:
  unbounded_mailbox() = default;
  ~unbounded_mailbox() override;

  error enqueue(envelope* e) override;
  envelope* dequeue() override;
  bool empty() const override;
  std::size_t size() const override;
  void dispose() override;

 private:
  alignas(cache_line) mpsc_queue queue_;
  // Writers: producers (release fetch_add after the push). Readers: size(), empty() (acquire).
  alignas(cache_line) std::atomic<std::uint64_t> enqueued_{0};
  // Writer: the consumer (release). Readers: size(), empty().
  alignas(cache_line) std::atomic<std::uint64_t> dequeued_{0};
  std::atomic<bool> disposed_{false};  // writer: dispose (release); readers: enqueue (acquire)
};

}  // namespace akt
