#include "akt/mailbox/bounded_mailbox.hpp"

#include <algorithm>

#include "akt/core/thread.hpp"

namespace akt {

bounded_mailbox::bounded_mailbox(std::size_t capacity, std::chrono::nanoseconds max_block)
    : capacity_(std::max<std::size_t>(capacity, 1)),
      max_block_(max_block),
      ring_(next_power_of_two(std::max<std::size_t>(capacity_, 2))) {}

bounded_mailbox::~bounded_mailbox() {
  while (dequeue() != nullptr) {
  }
  recycler_.flush();
}

bool bounded_mailbox::try_admit() noexcept {
  // seq_cst: a waiter's admission retry must be ordered after its waiters_ increment (no lost
  // wake-up against the consumer's decrement-then-read).
  std::int64_t n = size_.load(std::memory_order_seq_cst);
  while (n < static_cast<std::int64_t>(capacity_)) {
    if (size_.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst, std::memory_order_relaxed))
      return true;
  }
  return false;
}

error bounded_mailbox::enqueue(envelope* e) {
  if (disposed_.load(std::memory_order_acquire)) return errc::mailbox_disposed;
  if (!try_admit()) {
    if (e->remote_origin() || detail::on_worker_thread()) return errc::mailbox_full;
    if (error err = wait_for_space(e)) return err;
  }
  // Admission guarantees a free cell: the ring holds at most size_ <= capacity_ values.
  const bool pushed = ring_.try_push(e);
  AKT_ASSERT(pushed);
  (void)pushed;
  return {};
}

error bounded_mailbox::wait_for_space(envelope*) {
  const bool bounded_wait = max_block_ != forever;
  const auto deadline = bounded_wait ? std::chrono::steady_clock::now() + max_block_
                                     : std::chrono::steady_clock::time_point::max();
  std::unique_lock<std::mutex> lock(mutex_);
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  error result;
  for (;;) {
    if (disposed_.load(std::memory_order_acquire)) {
      result = errc::mailbox_disposed;
      break;
    }
    if (try_admit()) break;
    if (!bounded_wait) {
      space_.wait(lock);
    } else if (space_.wait_until(lock, deadline) == std::cv_status::timeout) {
      if (!try_admit()) result = errc::mailbox_full;
      break;
    }
  }
  waiters_.fetch_sub(1, std::memory_order_relaxed);
  return result;
}

envelope* bounded_mailbox::dequeue() {
  recycler_.flush();
  envelope* e = nullptr;
  if (!ring_.try_pop(e)) return nullptr;
  size_.fetch_sub(1, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    space_.notify_one();
  }
  return recycler_.hand_out(e);
}

std::size_t bounded_mailbox::size() const {
  const std::int64_t n = size_.load(std::memory_order_relaxed);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

void bounded_mailbox::dispose() {
  disposed_.store(true, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mutex_);
  space_.notify_all();
}

}  // namespace akt
