#pragma once
// Options for spawn. Aggregate, so designated initialisers work:
//   sys.spawn<worker>("w", {.mailbox = std::make_unique<akt::bounded_mailbox>(1024),
//                           .supervisor = akt::supervisor().otherwise(akt::directive::restart)});

#include <memory>
#include <optional>

#include "akt/actor/passivation.hpp"
#include "akt/actor/supervisor.hpp"
#include "akt/mailbox/mailbox.hpp"

namespace akt {

struct spawn_options {
  // The actor's mailbox; null = the default unbounded lock-free FIFO, embedded in the actor.
  std::unique_ptr<akt::mailbox> mailbox = nullptr;
  // How failures of this actor are handled; unset = the system's default supervisor.
  std::optional<akt::supervisor> supervisor = std::nullopt;
  // When the actor stops itself for lack of use; default never.
  akt::passivation passivation = akt::passivation::never();
};

inline spawn_options with_mailbox(std::unique_ptr<mailbox> m) {
  spawn_options o;
  o.mailbox = std::move(m);
  return o;
}

}  // namespace akt
