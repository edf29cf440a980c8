#include "actor/reply_slot.hpp"

#include <memory>
#include <thread>

#include "core/futex.hpp"

namespace akt::detail {

namespace {
// Polls of the state before the asker sleeps: a reply that comes back within a few
// microseconds (the common local round trip) costs no system call on either side.
constexpr int k_await_spins = 256;

thread_local std::unique_ptr<reply_slot> t_slot;
}  // namespace

bool reply_slot::complete(result<message>& value) noexcept {
  value_.emplace(std::move(value));
  const std::uint32_t prev = state_.exchange(done, std::memory_order_acq_rel);
  if (prev == sleeping) {
    // The asker may already be gone from this slot (spurious wake-up): a wake on its address is
    // harmless, the asker re-checks the state.
    futex_wake_all(&state_);
  } else if (prev == gave_up) {
    value = std::move(*value_);
    delete this;
    return false;
  }
  return true;
}

result<message> reply_slot::await(std::int64_t deadline_ns, bool& abandoned, bool spin) noexcept {
  abandoned = false;
  for (int i = 0; spin && i < k_await_spins; ++i) {
    if (state_.load(std::memory_order_acquire) == done) return std::move(*value_);
    if ((i & 15) == 15) std::this_thread::yield();
  }
  for (;;) {
    std::uint32_t s = state_.load(std::memory_order_acquire);
    if (s == done) return std::move(*value_);
    if (s == pending) {
      if (!state_.compare_exchange_strong(s, sleeping, std::memory_order_acq_rel)) continue;
    }
    const bool woken = futex_wait_until(&state_, sleeping, deadline_ns);
    if (!woken) {
      std::uint32_t expected = sleeping;
      if (state_.compare_exchange_strong(expected, gave_up, std::memory_order_acq_rel)) {
        abandoned = true;
        return errc::request_timeout;
      }
      // completed just now: fall through to take it
    }
  }
}

void reply_slot::rearm() noexcept {
  value_.reset();
  state_.store(pending, std::memory_order_relaxed);
}

reply_slot* thread_reply_slot() {
  if (t_slot) return t_slot.release();
  return new reply_slot();
}

sharded_pool<reply_slot>& ack_slot_pool() noexcept {
  static auto* pool =
      new sharded_pool<reply_slot>(pool_shard_count_for(std::thread::hardware_concurrency()));
  return *pool;
}

void return_thread_reply_slot(reply_slot* s) noexcept {
  s->rearm();
  if (!t_slot)
    t_slot.reset(s);
  else
    delete s;
}

}  // namespace akt::detail
