#pragma once
// delivery_fields: what an envelope carries besides its message when the message arrives from
// elsewhere (another node, through the remote module; or a grain delivery, which the grain layer
// may hold before it reaches an activation): the sender, the answer's route, the deadline and
// envelope flags. fill_envelope is the one place that puts them into an envelope, for actors and
// grains alike.
//
// Contract: a plain value, used by one thread at a time. The sender's reference and the route
// belong to the fields until fill_envelope moves them into an envelope (it leaves them null
// here); whoever drops fields that still hold them answers the route and releases the sender.
// No lock, no allocation.

#include <cstdint>

#include "actor/tracer.hpp"

namespace akt {

class receive_context;

namespace detail {

class actor_cell;
class reply_route;

struct delivery_fields {
  actor_cell* sender = nullptr;  // a reference the fields own; null: no sender
  reply_route* route = nullptr;  // an ask or an acknowledged tell's answer; null: none
  std::int64_t deadline_ns = 0;  // timer service clock; 0: none
  std::uint32_t flags = 0;       // envelope flags to add (remote_origin, encoded, grain_ack)
  trace_state_ptr trace;         // the message's trace; null: untraced (the common case)
};

// Moves f's sender and route into env, an envelope fresh from its pool (no sender, no route):
// a route makes env an ask (flag_ask, its reply open), a deadline sets flag_has_deadline, and
// f.flags are added to env's flags.
void fill_envelope(receive_context& env, delivery_fields& f) noexcept;

}  // namespace detail
}  // namespace akt
