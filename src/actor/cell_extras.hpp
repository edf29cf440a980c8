#pragma once
// What only some actors need, allocated on first use: children, watchers, stash, behaviours,
// pending requests, supervision and passivation state. Touched by the turn owner only, except
// `restarts` (figures, read by anyone).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "akt/actor/detail/actor_cell.hpp"
#include "akt/actor/passivation.hpp"
#include "akt/actor/receive_context.hpp"
#include "akt/actor/supervisor.hpp"
#include "akt/actor/tracing.hpp"
#include "akt/mailbox/mailbox.hpp"
#include "dispatch/timer_service.hpp"

namespace akt::detail {

class actor_cell;

// Control messages the runtime sends through system queues. Never seen by user handlers.
struct watch_request {
  pid watcher;
};
struct unwatch_request {
  pid watcher;
};
struct terminated_notice {  // from a watched actor that stopped
  pid actor;
  error reason = {};  // ok for a stop; node_lost when the remote module lost the actor's node
};
struct child_stopped {  // from a child to its parent, as the child's last act
  actor_cell* child;
};
struct escalation {  // from a child whose supervisor escalated
  pid child;
  error reason;
};
struct supervise_order {  // from a parent: apply this directive (one_for_all, escalation result)
  directive order;
  error reason;
};
struct supervise_siblings {  // from a child under one_for_all: order its siblings
  directive order;
  error reason;
  pid failed;
};
struct restart_now {};  // the back-off delay is over
struct request_reply {  // the reply (or error) to receive_context::request
  std::uint64_t id;
  result<message> reply;
};
struct request_expired {  // the request's timeout passed
  std::uint64_t id;
};
struct passivation_check {};  // the idle timer fired

struct pending_request {
  continuation then;
  timer_service::handle timer;
  bool stash_others = false;
  // The trace of the handler that made the request (capture_trace; invalid when untraced): the
  // continuation runs inside it, so what it sends joins that trace.
  span_context trace;
};

// 16-byte aligned: actor_cell keeps four flags in the low bits of its pointer to this block.
struct alignas(16) cell_extras {
  ~cell_extras();

  std::vector<actor_cell*> children;       // strong references
  std::vector<actor_cell*> watchers;       // strong references: actors watching this one
  std::vector<actor_cell*> watching;       // strong references: actors this one watches
  std::deque<receive_context*> stash;      // clones, owned
  std::deque<receive_context*> unstashed;  // served before the mailbox, owned
  // Request replies and terminated notices, served first (also while awaiting a reply).
  std::deque<receive_context*> replies;
  deferred_recycler handed_out;  // the last envelope served from the three queues above
  // The behaviour stack (top = back). Each behaviour lives in its own block, so the turn calls
  // the top one in place (no copy of the std::function per message) while push_back may move
  // the vector. A behaviour replaced or popped while one runs (it may become() itself) waits in
  // retired until that call returns.
  std::vector<std::unique_ptr<receive_context::behavior>> behaviors;
  std::vector<std::unique_ptr<receive_context::behavior>> retired;
  std::unordered_map<std::uint64_t, pending_request> requests;
  std::uint64_t next_request_id = 1;
  unsigned awaiting = 0;                  // pending requests with stash_others
  std::optional<error> reported_failure;  // receive_context::fail during the current message
  std::optional<supervisor> sup;          // the spawn option, if any
  // Supervision state.
  std::deque<std::int64_t> restart_times;  // steady ns of recent restarts (retry window)
  unsigned backoff_attempt = 0;
  std::int64_t last_failure_ns = 0;
  error stop_reason;
  // Passivation.
  passivation passivate;
  timer_service::handle passivation_timer;
  std::uint64_t passivation_count = 0;
  bool passivated = false;
  // Figures: writer the turn owner (relaxed), readers anyone.
  std::atomic<std::uint32_t> restarts{0};

  bool has_owned_queues() const noexcept { return !replies.empty() || !unstashed.empty(); }
};

// Releases the references a cell list holds and empties it.
inline void release_all(std::vector<actor_cell*>& cells) noexcept {
  for (actor_cell* c : cells) c->release();
  cells.clear();
}

// Removes c from the list and releases the list's reference; false when it was not listed.
inline bool remove_one(std::vector<actor_cell*>& cells, actor_cell* c) noexcept {
  auto it = std::find(cells.begin(), cells.end(), c);
  if (it == cells.end()) return false;
  cells.erase(it);
  c->release();
  return true;
}

}  // namespace akt::detail
