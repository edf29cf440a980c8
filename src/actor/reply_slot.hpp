#pragma once
// reply_slot: where the reply to a blocking ask lands.
//
// Contract
// - Exactly one complete() per ask, from whichever thread resolves it (the handler's respond, the
//   runtime's no_reply/unhandled/handler_failed, a dead letter, an expired-ask skip).
// - await() only by the asking thread.
// - Ownership moves with the state word: while pending the asker owns the slot and the envelope
//   holds a borrowed pointer; complete() hands it back to the asker (done); an await that times
//   out hands it to the completer (abandoned), who deletes it. So a slot is never reused while a
//   late reply could still land in it, and it never needs a reference count.
// - The asker spins briefly, then sleeps on a futex; complete() makes a wake system call only
//   when the asker is asleep. An ask to another node sleeps at once: its reply takes tens of
//   microseconds, and the spin's yields were sixteen system calls per ask that bought nothing.
// - Where slots come from: a blocking ask uses its thread's cached slot; a grain's acknowledged
//   tell takes one from the ack-slot pool (ack_slot_pool), on the shard of its envelope's home
//   shard, and puts it back (rearmed) after a completed await. A slot abandoned on timeout goes
//   to its completer, who deletes it: it never returns to the pool or to a thread cache.

#include <atomic>
#include <cstdint>
#include <optional>

#include "akt/core/message.hpp"
#include "akt/core/result.hpp"
#include "akt/pool/sharded_pool.hpp"

namespace akt::detail {

// Where a reply goes: a blocking asker's slot, or an actor's pending request. complete() is
// called exactly once per ask or request; it returns false when nobody wants the reply any more
// (`value` is then left with the caller, to publish as a dead letter).
class reply_route {
 public:
  virtual bool complete(result<message>& value) noexcept = 0;
  // True when a thread sleeps until this route completes (a blocking ask, an acknowledged grain
  // tell). Another node's path writes such an ask, and its answer, on the calling thread at once
  // rather than batching them: each costs at most one system call per blocked thread per round
  // trip, and batching would only add a hand-off to the I/O thread to a waiting thread's time.
  virtual bool caller_blocked() const noexcept { return false; }

 protected:
  ~reply_route() = default;
};

class reply_slot final : public reply_route {
 public:
  reply_slot() noexcept = default;
  // A slot of the ack-slot pool, stamped with its home shard there.
  explicit reply_slot(std::uint32_t home_shard) noexcept : home_shard_(home_shard) {}
  reply_slot(const reply_slot&) = delete;
  reply_slot& operator=(const reply_slot&) = delete;
  ~reply_slot() = default;

  // Completes the ask. Returns false when the asker had already given up: the slot is deleted
  // and `value` is left with the caller (a late reply, to publish as a dead letter).
  bool complete(result<message>& value) noexcept override;
  bool caller_blocked() const noexcept override { return true; }

  // Waits for the reply until deadline_ns (steady clock). On timeout returns request_timeout and
  // sets `abandoned`: the slot then belongs to the completer and must not be touched again.
  // Without `spin` the asker sleeps at once: for a reply that cannot come back within the spin
  // (an ask to another node), whose yields would only be system calls.
  result<message> await(std::int64_t deadline_ns, bool& abandoned, bool spin = true) noexcept;

  // True once complete() ran (asker side, a poll: the value is then ready for await).
  bool ready() const noexcept { return state_.load(std::memory_order_acquire) == done; }

  // Asker-side reset before reuse; the slot must be done.
  void rearm() noexcept;

  // Home shard in the ack-slot pool (0 for a slot that is not pooled); never changes.
  std::uint32_t home_shard() const noexcept { return home_shard_; }

 private:
  enum : std::uint32_t { pending = 0, sleeping = 1, done = 2, gave_up = 3 };
  // Writers: the asker (pending -> sleeping / gave_up CAS, rearm), the completer (exchange to
  // done, acq_rel: publishes value_). Readers: both.
  std::atomic<std::uint32_t> state_{pending};
  const std::uint32_t home_shard_ = 0;    // fills the padding after state_
  std::optional<result<message>> value_;  // written by the completer before done
};

// A slot for this thread's next ask (reused across asks while it is not abandoned).
reply_slot* thread_reply_slot();
// Gives the slot back to the thread cache after a completed await.
void return_thread_reply_slot(reply_slot* s) noexcept;

// The process-wide pool of acknowledgement slots for grains' acknowledged tells (the third
// sibling of the envelope pools, reference: goakt-context-pools.md section 11): same geometry
// and shard count as the envelope pools, indexed with the envelope's home shard (its tag bits
// are ignored), so a tell's get and put stay on its envelope's shard. Slots rest rearmed
// (pending, no value). Created on first use, never destroyed.
sharded_pool<reply_slot>& ack_slot_pool() noexcept;
// A pooled slot for an acknowledged tell whose envelope has home shard `envelope_home`.
inline reply_slot* acquire_ack_slot(std::uint32_t envelope_home) {
  return ack_slot_pool().get(envelope_home);
}
// Back to its home shard after a completed await (never after an abandoned one).
inline void return_ack_slot(reply_slot* s) noexcept {
  s->rearm();
  ack_slot_pool().put(s);
}

}  // namespace akt::detail
