#pragma once
// Options for spawn. Aggregate, so designated initialisers work:
//   sys.spawn<worker>("w", {.mailbox = std::make_unique<akt::bounded_mailbox>(1024)});

#include <memory>

#include "akt/mailbox/mailbox.hpp"

namespace akt {

struct spawn_options {
  // The actor's mailbox; null = the default unbounded lock-free FIFO, embedded in the actor.
  std::unique_ptr<akt::mailbox> mailbox;
};

inline spawn_options with_mailbox(std::unique_ptr<mailbox> m) {
  spawn_options o;
  o.mailbox = std::move(m);
  return o;
}

}  // namespace akt
