#include "akt/mailbox/non_blocking_bounded_mailbox.hpp"

#include <algorithm>

namespace akt {

non_blocking_bounded_mailbox::non_blocking_bounded_mailbox(std::size_t capacity)
    : ring_(next_power_of_two(std::max<std::size_t>(capacity, 2))) {}

non_blocking_bounded_mailbox::~non_blocking_bounded_mailbox() {
  while (dequeue() != nullptr) {
  }
  recycler_.flush();
}

error non_blocking_bounded_mailbox::enqueue(envelope* e) {
  if (disposed_.load(std::memory_order_acquire)) return errc::mailbox_disposed;
  return ring_.try_push(e) ? error() : error(errc::mailbox_full);
}

envelope* non_blocking_bounded_mailbox::dequeue() {
  recycler_.flush();
  envelope* e = nullptr;
  return ring_.try_pop(e) ? recycler_.hand_out(e) : nullptr;
}

void non_blocking_bounded_mailbox::dispose() { disposed_.store(true, std::memory_order_release); }

}  // namespace akt
