#pragma once
// Events the runtime publishes on the system's event stream, and the messages it delivers to
// actors (terminated, status_failure).

#include <string>

#include "akt/actor/pid.hpp"
#include "akt/actor/supervisor.hpp"
#include "akt/core/error.hpp"
#include "akt/core/message.hpp"

namespace akt {

// ---- delivered to actors ----

// Sent to every watcher (ctx.watch) of an actor when it has stopped, for whatever reason.
struct terminated {
  pid actor;
  // ok when the actor stopped. For an actor on another node: errc::node_lost when its node was
  // lost (heartbeats missed, or unreachable past remote_config::node_lost_after), so a watcher
  // can tell "it stopped" from "we lost sight of it".
  error reason = {};
};

// Delivered by pipe_to when the piped task failed, threw or timed out.
struct status_failure {
  error reason;
};

// ---- published on the event stream ----

// A message that could not be delivered or was not processed. Nothing the runtime refuses
// vanishes silently: it is published as one of these.
struct dead_letter {
  message msg;   // the undelivered payload
  pid sender;    // empty when sent from outside any actor
  pid receiver;  // the intended receiver (may be stopped)
  error reason;  // dead, mailbox_full, system_shutting_down, request_timeout, unhandled, ...
};

// A handler declared a message unhandled (also published as a dead letter).
struct unhandled_message {
  pid actor;
  std::string message_type;
};

struct actor_started {
  pid actor;
};

struct actor_stopped {
  pid actor;
  // Why: ok for a requested stop or a passivation; the failure for a supervisor's stop, the
  // retry limit (retry_limit_exceeded) or a failed restart (init_failure).
  error reason;
};

// A handler failed (threw, or reported an error). The supervisor's directive follows.
struct actor_failed {
  pid actor;
  std::string what;          // the exception's what(), or the reported error
  std::string message_type;  // the type of the message being processed
  directive decision = directive::stop;
};

struct actor_restarted {
  pid actor;
  unsigned restarts = 0;  // restarts so far, this one included
};

// A failed actor waits for a decision (back-off delay or escalation); it holds its messages.
struct actor_suspended {
  pid actor;
  std::string reason;
};

struct actor_passivated {
  pid actor;
};

}  // namespace akt
