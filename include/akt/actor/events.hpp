#pragma once
// Events the runtime publishes on the system's event stream.

#include <string>

#include "akt/actor/pid.hpp"
#include "akt/core/error.hpp"
#include "akt/core/message.hpp"

namespace akt {

// A message that could not be delivered or was not processed. Nothing the runtime refuses
// vanishes silently: it is published as one of these.
struct dead_letter {
  message msg;   // the undelivered payload
  pid sender;    // empty when sent from outside any actor
  pid receiver;  // the intended receiver (may be stopped)
  error reason;  // dead, mailbox_full, system_shutting_down, request_timeout, unhandled, ...
};

struct actor_started {
  pid actor;
};

struct actor_stopped {
  pid actor;
};

// A handler threw. The actor has been stopped.
struct actor_failed {
  pid actor;
  std::string what;          // the exception's what(), or a description
  std::string message_type;  // the type of the message being processed
};

}  // namespace akt
