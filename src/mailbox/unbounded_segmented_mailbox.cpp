#include "akt/mailbox/unbounded_segmented_mailbox.hpp"

namespace akt {

unbounded_segmented_mailbox::unbounded_segmented_mailbox() {
  segment* s = new_segment(0);
  tail_.store(s, std::memory_order_relaxed);
  head_ = s;
}

unbounded_segmented_mailbox::~unbounded_segmented_mailbox() {
  while (dequeue() != nullptr) {
  }
  recycler_.flush();
  // No producer can reach the mailbox any more: free every segment.
  for (segment* s = head_; s != nullptr;) {
    segment* next = s->next.load(std::memory_order_relaxed);
    delete s;
    s = next;
  }
  while (retired_ != nullptr) {
    segment* next = retired_->retired_next;
    delete retired_;
    retired_ = next;
  }
  delete spare_.load(std::memory_order_relaxed);
}

unbounded_segmented_mailbox::segment* unbounded_segmented_mailbox::new_segment(std::uint64_t base) {
  segment* s = spare_.exchange(nullptr, std::memory_order_acquire);
  if (s == nullptr) {
    s = new segment();
    allocated_.fetch_add(1, std::memory_order_relaxed);
  }
  s->base = base;
  return s;
}

error unbounded_segmented_mailbox::enqueue(envelope* e) {
  if (disposed_.load(std::memory_order_acquire)) return errc::mailbox_disposed;
  active_.fetch_add(1, std::memory_order_seq_cst);
  segment* seg = tail_.load(std::memory_order_seq_cst);
  for (;;) {
    const std::uint32_t idx = seg->claimed.fetch_add(1, std::memory_order_seq_cst);
    if (idx < segment_slots) {
      seg->slots[idx].store(e, std::memory_order_release);
      break;
    }
    // Full: move to the next segment, linking one if nobody has yet.
    segment* next = seg->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      segment* fresh = new_segment(seg->base + segment_slots);
      if (seg->next.compare_exchange_strong(next, fresh, std::memory_order_acq_rel)) {
        next = fresh;
      } else {
        // Lost the race: keep ours for later, or free it if the spare slot is taken.
        segment* expected = nullptr;
        if (!spare_.compare_exchange_strong(expected, fresh, std::memory_order_release)) {
          delete fresh;
        }
      }
    }
    segment* expected = seg;
    tail_.compare_exchange_strong(expected, next, std::memory_order_seq_cst);
    seg = next;
  }
  active_.fetch_sub(1, std::memory_order_seq_cst);
  return {};
}

envelope* unbounded_segmented_mailbox::dequeue() {
  recycler_.flush();
  if (read_ == segment_slots) {
    segment* next = head_->next.load(std::memory_order_acquire);
    if (next == nullptr) return nullptr;
    // Help tail_ past the drained segment so no new producer can load it, then retire it.
    segment* expected = head_;
    tail_.compare_exchange_strong(expected, next, std::memory_order_seq_cst);
    head_->retired_next = retired_;
    retired_ = head_;
    head_ = next;
    read_ = 0;
  }
  envelope* e = head_->slots[read_].load(std::memory_order_acquire);
  if (e == nullptr) {
    reclaim_retired();
    return nullptr;  // empty, or the producer of this slot has not stored yet
  }
  head_->slots[read_].store(nullptr, std::memory_order_relaxed);
  ++read_;
  dequeued_.store(dequeued_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (read_ == segment_slots) reclaim_retired();
  return recycler_.hand_out(e);
}

void unbounded_segmented_mailbox::reclaim_retired() {
  if (retired_ == nullptr) return;
  if (active_.load(std::memory_order_seq_cst) != 0) return;
  // Quiescent: every producer that could have read a retired segment from tail_ has left.
  while (retired_ != nullptr) {
    segment* s = retired_;
    retired_ = s->retired_next;
    s->claimed.store(0, std::memory_order_relaxed);
    s->next.store(nullptr, std::memory_order_relaxed);
    s->retired_next = nullptr;
    segment* expected = nullptr;
    if (!spare_.compare_exchange_strong(expected, s, std::memory_order_release)) delete s;
  }
}

bool unbounded_segmented_mailbox::empty() const { return size() == 0; }

std::size_t unbounded_segmented_mailbox::size() const {
  // Claimed positions come from the tail segment, which size() may only read inside the same
  // active_ bracket as producers.
  active_.fetch_add(1, std::memory_order_seq_cst);
  const segment* t = tail_.load(std::memory_order_seq_cst);
  const std::uint32_t claimed = t->claimed.load(std::memory_order_seq_cst);
  const std::uint64_t produced = t->base + (claimed < segment_slots ? claimed : segment_slots);
  active_.fetch_sub(1, std::memory_order_seq_cst);
  const std::uint64_t consumed = dequeued_.load(std::memory_order_acquire);
  return produced > consumed ? static_cast<std::size_t>(produced - consumed) : 0;
}

void unbounded_segmented_mailbox::dispose() { disposed_.store(true, std::memory_order_release); }

}  // namespace akt
