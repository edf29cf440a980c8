#include "akt/mailbox/priority_mailbox.hpp"

#include <algorithm>

namespace akt {

priority_mailbox::priority_mailbox(priority_fn before, std::size_t capacity, bool stable)
    : before_(std::move(before)), capacity_(capacity), stable_(stable) {
  if (capacity_ > 0) heap_.reserve(capacity_);
}

priority_mailbox::~priority_mailbox() {
  while (dequeue() != nullptr) {
  }
  recycler_.flush();
}

error priority_mailbox::enqueue(envelope* e) {
  if (disposed_.load(std::memory_order_acquire)) return errc::mailbox_disposed;
  if (capacity_ > 0) {
    std::int64_t n = count_.load(std::memory_order_relaxed);
    do {
      if (n >= static_cast<std::int64_t>(capacity_)) return errc::mailbox_full;
    } while (!count_.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst,
                                           std::memory_order_relaxed));
  } else {
    count_.fetch_add(1, std::memory_order_seq_cst);
  }
  intake_.push(e);
  return {};
}

// Heap order: the top is the entry served first; a is "less" than b when b is served first.
bool priority_mailbox::served_after(const entry& a, const entry& b) const {
  if (before_(b.e->payload(), a.e->payload())) return true;
  if (before_(a.e->payload(), b.e->payload())) return false;
  return stable_ && a.seq > b.seq;
}

void priority_mailbox::drain_intake() {
  mpsc_node* n = intake_.take_all();
  const auto cmp = [this](const entry& a, const entry& b) { return served_after(a, b); };
  while (n != nullptr) {
    mpsc_node* next = n->next.load(std::memory_order_relaxed);
    n->next.store(nullptr, std::memory_order_relaxed);
    heap_.push_back(entry{static_cast<envelope*>(n), next_seq_++});
    std::push_heap(heap_.begin(), heap_.end(), cmp);
    n = next;
  }
}

envelope* priority_mailbox::dequeue() {
  recycler_.flush();
  drain_intake();
  if (heap_.empty()) return nullptr;
  const auto cmp = [this](const entry& a, const entry& b) { return served_after(a, b); };
  std::pop_heap(heap_.begin(), heap_.end(), cmp);
  envelope* e = heap_.back().e;
  heap_.pop_back();
  count_.fetch_sub(1, std::memory_order_seq_cst);
  return recycler_.hand_out(e);
}

std::size_t priority_mailbox::size() const {
  const std::int64_t n = count_.load(std::memory_order_relaxed);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

void priority_mailbox::dispose() { disposed_.store(true, std::memory_order_release); }

}  // namespace akt
