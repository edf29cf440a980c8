#include "akt/mailbox/unbounded_mailbox.hpp"

namespace akt {

unbounded_mailbox::~unbounded_mailbox() {
  while (dequeue() != nullptr) {
  }
  if (mpsc_node* s = queue_.take_sentinel()) recycle(static_cast<envelope*>(s));
}

error unbounded_mailbox::enqueue(envelope* e) {
  if (disposed_.load(std::memory_order_acquire)) return errc::mailbox_disposed;
  // Count first: the count may run ahead of the queue (empty() says "not empty" a moment early),
  // never behind it (empty() would hide a message whose enqueue has returned).
  enqueued_.fetch_add(1, std::memory_order_release);
  queue_.push(e);
  return {};
}

envelope* unbounded_mailbox::dequeue() {
  mpsc_node* retired = nullptr;
  mpsc_node* n = queue_.pop(retired);
  if (n == nullptr) return nullptr;
  if (retired != nullptr) recycle(static_cast<envelope*>(retired));
  dequeued_.store(dequeued_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  return static_cast<envelope*>(n);
}

bool unbounded_mailbox::empty() const { return size() == 0; }

std::size_t unbounded_mailbox::size() const {
  const std::uint64_t d = dequeued_.load(std::memory_order_acquire);
  const std::uint64_t e = enqueued_.load(std::memory_order_acquire);
  return e > d ? static_cast<std::size_t>(e - d) : 0;
}

void unbounded_mailbox::dispose() { disposed_.store(true, std::memory_order_release); }

}  // namespace akt
