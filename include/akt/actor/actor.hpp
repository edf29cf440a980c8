#pragma once
// actor: the base class of user actors. The runtime calls one method at a time on an actor,
// never concurrently, on a dispatcher worker thread:
//   pre_start  once, before the first message (on the thread that spawned the actor);
//              returning an error (or throwing) fails the spawn with errc::init_failure
//   receive    once per message, in mailbox order
//   post_stop  once, after the last message, when the actor stops for any reason
// An exception thrown by receive never reaches the worker: the actor is stopped, an asker gets
// errc::handler_failed naming the exception, and an actor_failed event is published.

#include <string_view>

#include "akt/actor/pid.hpp"
#include "akt/actor/receive_context.hpp"
#include "akt/core/error.hpp"

namespace akt {

class actor_system;

// What pre_start and post_stop see: the actor's identity and its system.
class actor_context {
 public:
  actor_context(actor_system& sys, pid self) noexcept : system_(sys), self_(std::move(self)) {}
  const pid& self() const noexcept { return self_; }
  std::string_view name() const noexcept { return self_.name(); }
  actor_system& system() const noexcept { return system_; }

 private:
  actor_system& system_;
  pid self_;
};

class actor {
 public:
  virtual ~actor() = default;
  virtual error pre_start(actor_context&) { return {}; }
  virtual void receive(receive_context& ctx) = 0;
  virtual void post_stop(actor_context&) {}
};

}  // namespace akt
