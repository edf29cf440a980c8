#pragma once
// unbounded_fair_mailbox: one FIFO sub-queue per sender, served round-robin, one message per
// sender per round, so a chatty sender cannot starve quiet ones. Messages from one sender keep
// their order; messages sent from outside any actor share one sub-queue.
//
// Contract: see mailbox.hpp. A producer finds its sender's sub-queue in an insert-only hash table
// (lock-free reads), pushes onto it (exchange), and, when it moves the sub-queue's pending count
// from 0 to 1, pushes the sub-queue onto the active ring. Lock-free for senders already seen; a
// sender's first message takes a mutex to insert its sub-queue (so one sender never gets two).
// The consumer pops a sub-queue from the active ring, takes one message (detached from the
// sub-queue), and puts the sub-queue back at the tail while it still has pending messages.
// Dequeued envelopes are recycled one dequeue later, whichever sender the next one came from.
//
// Memory: one sub-queue (two cache lines) per distinct sender for the mailbox's lifetime, plus
// the table (grows by doubling into a chained table).

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "akt/mailbox/mailbox.hpp"
#include "akt/mailbox/mpsc_queue.hpp"
#include "akt/pool/mpmc_ring.hpp"

namespace akt {

class unbounded_fair_mailbox final : public mailbox {
 public:
  unbounded_fair_mailbox();
  ~unbounded_fair_mailbox() override;

  error enqueue(envelope* e) override;
  envelope* dequeue() override;
  bool empty() const override { return size_.load(std::memory_order_seq_cst) == 0; }
  std::size_t size() const override;
  void dispose() override;

  // Distinct senders seen so far (tests).
  std::size_t senders() const noexcept { return senders_.load(std::memory_order_relaxed); }

 private:
  struct sub_queue : mpsc_node {  // mpsc_node links it into active_
    mpsc_node_queue queue;
    // Messages pushed and not yet taken. Writers: producers (+1 after the push), consumer (-1).
    // The 0 -> 1 transition's winner puts the sub-queue on active_.
    std::atomic<std::int64_t> pending{0};
  };
  struct table {
    explicit table(std::size_t cap);
    const std::size_t capacity;  // power of two
    // Written under insert_mutex_ (value first, then key with release); read lock-free.
    std::unique_ptr<std::atomic<const void*>[]> keys;  // null = free
    std::unique_ptr<std::atomic<sub_queue*>[]> values;
    std::size_t used = 0;               // guarded by insert_mutex_
    std::atomic<table*> next{nullptr};  // a larger table, linked under insert_mutex_
  };

  sub_queue* find(const void* key, std::size_t h) const noexcept;
  sub_queue* find_or_insert(const void* key);
  static std::size_t hash(const void* key) noexcept;

  table* first_;
  std::mutex insert_mutex_;
  sub_queue outside_;  // messages with no sending actor
  mpsc_node_queue active_;
  alignas(cache_line) std::atomic<std::int64_t> size_{0};  // producers +1, consumer -1
  std::atomic<std::size_t> senders_{0};
  std::atomic<bool> disposed_{false};
  deferred_recycler recycler_;  // consumer only
};

}  // namespace akt
