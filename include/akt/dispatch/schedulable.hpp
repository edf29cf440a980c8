#pragma once
// schedulable: anything the dispatcher runs in turns (actors now, grain activations later).
//
// Dispatch state (one atomic word) and the no-lost-wake-up order:
//   Idle -> Scheduled     by the producer that wins the CAS after enqueueing (try_schedule); the
//                         winner takes a reference for the ready queue and pushes it there
//   Scheduled -> Processing   by the worker that popped it (begin_turn): the single owner
//   Processing -> Scheduled   budget spent (yield_turn); the worker re-queues it, ref kept
//   Processing -> Idle        nothing left (finish_turn): store Idle FIRST, then re-check the
//                         queues; if work slipped in, CAS Idle -> Processing and keep going,
//                         else drop the turn's reference
// Why it works: the producer's publication and its state read, and the consumer's Idle write and
// its queue re-check, are each ordered (seq_cst on the default mailbox; acq_rel read-modify-writes
// on the state word for custom mailboxes), so either the producer sees Idle and schedules, or the
// consumer sees the message and reclaims. Both may happen; the CAS lets only one of them win.
//
// References: refs_ counts pids, the registry, envelopes naming the actor as sender, and the one
// reference a Scheduled/Processing actor holds for its ready-queue episode. The last release
// destroys the object (destroy()).

#include <atomic>
#include <cstdint>

#include "akt/core/assert.hpp"

namespace akt::detail {

enum class dispatch_state : std::uint32_t { idle = 0, scheduled = 1, processing = 2 };

class schedulable {
 public:
  schedulable(const schedulable&) = delete;
  schedulable& operator=(const schedulable&) = delete;

  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy();
  }
  std::uint32_t ref_count() const noexcept { return refs_.load(std::memory_order_relaxed); }

  // Producer side, after a publication ordered as described above. True when this call moved
  // the state Idle -> Scheduled; the caller then owns the episode's reference (taken here) and
  // must hand the object to the dispatcher.
  bool try_schedule(dispatch_state observed) noexcept {
    if (observed != dispatch_state::idle) return false;
    auto expected = static_cast<std::uint32_t>(dispatch_state::idle);
    if (!dispatch_.compare_exchange_strong(expected,
                                           static_cast<std::uint32_t>(dispatch_state::scheduled),
                                           std::memory_order_seq_cst)) {
      return false;
    }
    add_ref();
    return true;
  }
  // The state as seen after a seq_cst publication (default mailbox).
  dispatch_state observe() const noexcept {
    return static_cast<dispatch_state>(dispatch_.load(std::memory_order_seq_cst));
  }
  // The state as seen by a read-modify-write (custom mailboxes, acq_rel argument).
  dispatch_state observe_rmw() noexcept {
    return static_cast<dispatch_state>(dispatch_.fetch_or(0, std::memory_order_acq_rel));
  }
  dispatch_state state() const noexcept {
    return static_cast<dispatch_state>(dispatch_.load(std::memory_order_acquire));
  }

  // Runs one turn of at most `budget` messages. Returns true when the budget ran out with work
  // left: the object is Scheduled again and the caller re-queues it (keeping the reference).
  // Returns false when it went Idle (the reference has been released; do not touch it again).
  virtual bool run_turn(unsigned budget) = 0;

 protected:
  explicit schedulable(dispatch_state initial) noexcept
      : dispatch_(static_cast<std::uint32_t>(initial)) {}
  virtual ~schedulable() = default;
  virtual void destroy() noexcept = 0;

  // Turn helpers (owner only).
  void begin_turn() noexcept {
    dispatch_.store(static_cast<std::uint32_t>(dispatch_state::processing),
                    std::memory_order_relaxed);
  }
  void yield_turn() noexcept {
    dispatch_.store(static_cast<std::uint32_t>(dispatch_state::scheduled),
                    std::memory_order_release);
  }
  // Stores Idle, then asks has_work(); reclaims (returns true, still Processing, reference kept)
  // when work slipped in and no producer took the turn. Otherwise releases the turn's reference.
  template <class HasWork>
  bool finish_turn(HasWork&& has_work) noexcept {
    dispatch_.exchange(static_cast<std::uint32_t>(dispatch_state::idle), std::memory_order_seq_cst);
    if (has_work()) {
      auto expected = static_cast<std::uint32_t>(dispatch_state::idle);
      if (dispatch_.compare_exchange_strong(expected,
                                            static_cast<std::uint32_t>(dispatch_state::processing),
                                            std::memory_order_seq_cst)) {
        return true;
      }
    }
    release();
    return false;
  }

  // Writers: every holder of a reference. The acq_rel decrement orders all uses before destroy.
  std::atomic<std::uint32_t> refs_{0};
  // Writers: producers (CAS Idle->Scheduled, observe_rmw), the turn's owner (stores, CAS).
  std::atomic<std::uint32_t> dispatch_;
};

}  // namespace akt::detail
