#pragma once
// Priority mailboxes: the consumer serves the message that the user's priority function ranks
// first. `before(a, b)` returns true when a must be processed before b.
//
//   unbounded_priority_mailbox          unbounded, ties in unspecified order
//   unbounded_stable_priority_mailbox   unbounded, ties in arrival order
//   bounded_priority_mailbox            exact capacity, full -> mailbox_full (dead letter)
//   bounded_stable_priority_mailbox     the same, ties in arrival order
//
// Contract: see mailbox.hpp. Producers push onto a lock-free intake stack (a CAS) and never
// contend with the consumer; bounded variants first take a place with an admission CAS. The
// consumer moves the intake into a binary heap before each dequeue, numbering messages in
// arrival order for the stable tie-break. Memory: the heap's vector (reserved to the capacity for
// bounded variants; grows and keeps its size for unbounded ones). The priority function runs on
// the consumer only, never concurrently with itself.

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "akt/mailbox/mailbox.hpp"
#include "akt/mailbox/mpsc_queue.hpp"

namespace akt {

using priority_fn = std::function<bool(const message& a, const message& b)>;

class priority_mailbox : public mailbox {
 public:
  ~priority_mailbox() override;

  error enqueue(envelope* e) override;
  envelope* dequeue() override;
  bool empty() const override { return count_.load(std::memory_order_seq_cst) == 0; }
  std::size_t size() const override;
  void dispose() override;

  // 0 for the unbounded variants.
  std::size_t capacity() const noexcept { return capacity_; }

 protected:
  priority_mailbox(priority_fn before, std::size_t capacity, bool stable);

 private:
  struct entry {
    envelope* e;
    std::uint64_t seq;  // arrival number, the stable tie-break
  };
  bool served_after(const entry& a, const entry& b) const;
  void drain_intake();

  const priority_fn before_;
  const std::size_t capacity_;
  const bool stable_;
  intake_stack intake_;
  // Admitted, not yet dequeued. Writers: producers (fetch_add / admission CAS), consumer
  // (fetch_sub). seq_cst: empty() must see an enqueue as soon as it returned.
  alignas(64) std::atomic<std::int64_t> count_{0};
  std::atomic<bool> disposed_{false};
  std::vector<entry> heap_;     // consumer only
  std::uint64_t next_seq_ = 0;  // consumer only
  deferred_recycler recycler_;
};

class unbounded_priority_mailbox final : public priority_mailbox {
 public:
  explicit unbounded_priority_mailbox(priority_fn before)
      : priority_mailbox(std::move(before), 0, false) {}
};

class unbounded_stable_priority_mailbox final : public priority_mailbox {
 public:
  explicit unbounded_stable_priority_mailbox(priority_fn before)
      : priority_mailbox(std::move(before), 0, true) {}
};

class bounded_priority_mailbox final : public priority_mailbox {
 public:
  bounded_priority_mailbox(std::size_t capacity, priority_fn before)
      : priority_mailbox(std::move(before), capacity == 0 ? 1 : capacity, false) {}
};

class bounded_stable_priority_mailbox final : public priority_mailbox {
 public:
  bounded_stable_priority_mailbox(std::size_t capacity, priority_fn before)
      : priority_mailbox(std::move(before), capacity == 0 ? 1 : capacity, true) {}
};

}  // namespace akt
