#pragma once
// pipe_through: pipe_to with a custom delivery (the grain layer delivers to identities).

#include <chrono>
#include <functional>

#include "akt/actor/receive_context.hpp"

namespace akt::detail {

// Delivers a piped result (the value, or status_failure); publishes what it cannot deliver.
using pipe_sink = std::function<void(message)>;

// Runs task on the blocking pool and hands its result to sink (or, without a sink, delivers it
// to `to` with `from` as the sender). `to` also names the target of a late result's dead letter.
error pipe_through(system_core* core, actor_cell* from, const pid& to, pipe_sink sink,
                   piped_task task, std::chrono::nanoseconds timeout);

}  // namespace akt::detail
