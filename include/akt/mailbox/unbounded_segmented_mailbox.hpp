#pragma once
// unbounded_segmented_mailbox: unbounded FIFO stored in fixed-size array segments.
//
// Producers reserve a slot in the tail segment with one fetch_add and store the envelope pointer
// into it; a producer that finds the tail full links the next segment. The consumer reads slots
// in order, so a burst is read from contiguous memory instead of by chasing links.
//
// Contract: see mailbox.hpp. Lock-free. Unbounded, never refuses until disposed.
//
// Segment reclamation. A producer may hold a pointer to a segment it read from tail_ for a while
// (it is preempted between the load and its fetch_add), so a drained segment cannot be freed or
// reused at once. Producers bracket their use of tail_ with active_ (+1 before loading tail_, -1
// after the slot is written). The consumer retires a drained segment only after tail_ has moved
// past it, and recycles retired segments only once it has seen active_ == 0 afterwards: from then
// on no producer can reach them. Recycled segments go to a one-segment spare slot that producers
// take with an exchange, so a steady stream allocates nothing; a burst that outruns the spare
// allocates. A drained segment is never reused while a producer may still see it
// (UnboundedSegmentedMailbox_DrainedSegmentIsNotReusedWhileReachable).
//
// Memory: live segments of 256 slots (2 KiB + header), plus retired ones awaiting quiescence.

#include <atomic>
#include <cstdint>

#include "akt/mailbox/mailbox.hpp"
#include "akt/pool/mpmc_ring.hpp"

namespace akt {

class unbounded_segmented_mailbox final : public mailbox {
 public:
  static constexpr std::uint32_t segment_slots = 256;  // slots per segment: one fetch_add range

  unbounded_segmented_mailbox();
  ~unbounded_segmented_mailbox() override;

  error enqueue(envelope* e) override;
  envelope* dequeue() override;
  bool empty() const override;
  std::size_t size() const override;
  void dispose() override;

  // Segments allocated so far (tests and benchmarks).
  std::uint64_t segments_allocated() const noexcept {
    return allocated_.load(std::memory_order_relaxed);
  }

 private:
  struct segment {
    std::atomic<std::uint32_t> claimed{0};  // fetch_add by producers; >= segment_slots: full
    std::atomic<segment*> next{nullptr};    // written once (CAS) by the producer that links it
    std::uint64_t base = 0;                 // position of slot 0, set before publication
    segment* retired_next = nullptr;        // consumer-only list link
    std::atomic<envelope*> slots[segment_slots];  // null until published (release)
    segment() {
      for (auto& s : slots) s.store(nullptr, std::memory_order_relaxed);
    }
  };

  segment* new_segment(std::uint64_t base);
  void reclaim_retired();

  // Writers: producers (CAS forward) and the consumer (helps it past a drained segment).
  alignas(cache_line) std::atomic<segment*> tail_;
  // Producers inside the tail_-protected region. Writers: producers (seq_cst).
  alignas(cache_line) mutable std::atomic<std::int64_t> active_{0};
  // A recycled segment producers may take (exchange). Writers: consumer (store), producers.
  std::atomic<segment*> spare_{nullptr};
  std::atomic<std::uint64_t> allocated_{0};
  std::atomic<bool> disposed_{false};
  // Consumer side.
  alignas(cache_line) segment* head_;
  std::uint32_t read_ = 0;                  // next slot of head_ to read
  std::atomic<std::uint64_t> dequeued_{0};  // writer: consumer; reader: size()
  segment* retired_ = nullptr;              // drained, waiting for active_ == 0
  deferred_recycler recycler_;
};

}  // namespace akt
