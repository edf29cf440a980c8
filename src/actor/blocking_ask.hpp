#pragma once
// A blocking ask in two steps, for senders that must deliver the envelope themselves: the grain
// layer delivers while its directory holds the activation (under the shard lock), so that an
// idle deactivation cannot end the activation between the lookup and the enqueue. ask() in
// receive_context.cpp is begin_ask, a delivery, and finish_ask.
//
// Contract: both steps on the asking thread; between them the envelope is delivered exactly
// once (a refused delivery completes the slot with its reason). begin_ask neither blocks nor
// publishes anything (it takes a reply slot from a pool or the thread's cache), so it may run
// under a caller's lock.

#include <chrono>
#include <cstdint>

#include "akt/core/message.hpp"
#include "akt/core/result.hpp"

namespace akt {
class receive_context;
namespace detail {
class actor_cell;
class dispatcher;
class reply_slot;

struct pending_ask {
  // The system's dispatcher, not the receiver's cell: once delivered, the ask holds no reference
  // on its receiver, which may be destroyed (a grain deactivated) before finish_ask runs.
  dispatcher* turns = nullptr;
  reply_slot* slot = nullptr;
  bool pooled_slot = false;
  bool remote = false;        // to another node: the reply takes a network round trip
  std::int64_t deadline = 0;  // the asker's wait, real time (now_ns)
};

// Whether the calling thread may start a blocking ask of `timeout`: the refusal begin_ask would
// otherwise meet. Check it before begin_ask when begin_ask runs under a lock.
error ask_refusal(std::chrono::nanoseconds timeout) noexcept;

// Makes env an ask to `to` (see detail::ask for extra_flags and deadline_travels) and fills p.
// Precondition: ask_refusal(timeout) gave no error.
void begin_ask(actor_cell* to, receive_context& env, std::chrono::nanoseconds timeout,
               std::uint32_t extra_flags, bool deadline_travels, pending_ask& p);

// Waits for the reply of a delivered ask (in the deterministic mode it runs turns meanwhile).
result<message> finish_ask(pending_ask& p);

}  // namespace detail
}  // namespace akt
