#pragma once
// bounded_mailbox: FIFO with an exact capacity and blocking back-pressure.
//
// When the mailbox is full:
// - a local producer outside the dispatcher (an application thread) blocks until space frees, the
//   mailbox is disposed (mailbox_disposed) or max_block passes (mailbox_full);
// - a producer on a dispatcher worker thread is refused at once with mailbox_full: a worker never
//   blocks, since the actor it would wait for may need that very worker;
// - a message of remote origin is refused at once with mailbox_full: blocking it would stall
//   every receiver behind the same connection.
// Refused messages are published as dead letters by the runtime.
//
// Contract: see mailbox.hpp. Enqueue is lock-free while there is space (an admission fetch_add
// and a ring CAS); waiting producers sleep on a condition variable, woken by the consumer only
// when someone waits. Memory: a ring of next_power_of_two(capacity) cells, allocated once.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "akt/mailbox/mailbox.hpp"
#include "akt/mailbox/mpsc_ring.hpp"

namespace akt {

class bounded_mailbox final : public mailbox {
 public:
  static constexpr std::chrono::nanoseconds forever = std::chrono::nanoseconds::max();

  explicit bounded_mailbox(std::size_t capacity, std::chrono::nanoseconds max_block = forever);
  ~bounded_mailbox() override;

  std::size_t capacity() const noexcept { return capacity_; }

  error enqueue(envelope* e) override;
  envelope* dequeue() override;
  bool empty() const override { return size_.load(std::memory_order_seq_cst) == 0; }
  std::size_t size() const override;
  void dispose() override;

 private:
  bool try_admit() noexcept;
  error wait_for_space(envelope* e);

  const std::size_t capacity_;
  const std::chrono::nanoseconds max_block_;
  mpsc_ring<envelope*> ring_;
  // Admitted messages not yet dequeued. Writers: producers (CAS up), consumer (fetch_sub).
  // seq_cst so a producer's waiters_ increment and the consumer's decrement order (no lost wake).
  alignas(cache_line) std::atomic<std::int64_t> size_{0};
  // Producers sleeping for space. Writers: producers under mutex_. Reader: consumer after its
  // decrement (seq_cst), then it takes mutex_ to notify.
  std::atomic<int> waiters_{0};
  std::atomic<bool> disposed_{false};  // writer: dispose; readers: producers
  std::mutex mutex_;
  std::condition_variable space_;
  deferred_recycler recycler_;
};

}  // namespace akt
