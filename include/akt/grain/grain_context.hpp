#pragma once
// grain_context: what on_receive gets. Valid only during that call, on the grain's turn.
//
// Answering: an ask expects response(value), err(error) or unhandled(); an acknowledged tell
// expects no_err(), err(error) or unhandled() (a response counts as no_err). The first answer
// wins; later ones are ignored. A handler that returns without answering an ask or an
// acknowledged tell completes it with errc::no_reply at once (rather than leaving the caller
// to time out). For a one-way tell there is nobody to answer: err, unhandled and exceptions
// are published as dead letters naming the grain.

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "akt/actor/pid.hpp"
#include "akt/actor/receive_context.hpp"
#include "akt/core/error.hpp"
#include "akt/core/message.hpp"
#include "akt/grain/grain.hpp"

namespace akt {

namespace detail {
class grain_host_base;
}

class grain_context {
 public:
  grain_context(receive_context& env, detail::grain_host_base& host, bool acknowledged) noexcept
      : env_(env), host_(host), acknowledged_(acknowledged) {}
  grain_context(const grain_context&) = delete;
  grain_context& operator=(const grain_context&) = delete;

  akt::message& message() noexcept { return env_.message(); }
  template <class T>
  T* get_if() noexcept {
    return env_.get_if<T>();
  }
  template <class T>
  bool is() const noexcept {
    return env_.is<T>();
  }

  // This grain's identity (built on each call: keep it if you need it often).
  grain_identity self() const;
  actor_system& system() const noexcept { return env_.system(); }
  // The actor that sent the message, if it came from one.
  pid sender() const noexcept { return env_.sender(); }

  // When the caller stops waiting: the ask's deadline (the ask timeout, or the caller's own
  // deadline when that came first). None for tells: a tell is handled even when its sender no
  // longer waits for the acknowledgement.
  std::optional<std::chrono::steady_clock::time_point> deadline() const noexcept {
    if (acknowledged_) return std::nullopt;
    return env_.deadline();
  }
  // True once the caller of an ask gave up, or on_receive returned (work for this message is
  // then pointless). Handlers that call slow services pass deadline() on and check this.
  bool cancelled() const noexcept {
    if (done_) return true;
    const auto d = deadline();
    return d && std::chrono::steady_clock::now() >= *d;
  }
  // True when a caller waits for an answer (an ask, or an acknowledged tell).
  bool expects_answer() const noexcept { return env_.expects_reply(); }
  bool is_ask() const noexcept { return env_.expects_reply() && !acknowledged_; }

  // ---- answering ----
  template <class T>
  void response(T&& value) {
    if (acknowledged_) return no_err();
    if (answered_) return;
    answered_ = true;
    if (env_.expects_reply()) env_.respond(std::forward<T>(value));
  }
  void no_err();
  void err(error e);
  void unhandled();

  // ---- sending from inside (none of these blocks the worker) ----
  // Tells an actor, with this grain's activation as the sender.
  template <class T>
  error tell_actor(const pid& to, T&& msg) {
    return env_.tell(to, std::forward<T>(msg));
  }
  // Tells an actor found by name (actor_system::find).
  template <class T>
  error tell_actor(std::string_view name, T&& msg) {
    auto to = lookup_actor(name);
    if (!to) return to.error();
    return env_.tell(*to, std::forward<T>(msg));
  }
  // One-way tell to another grain (activating it if needed).
  template <class T>
  error tell_grain(const grain_identity& to, T&& msg) {
    return tell_grain_message(to, akt::message(std::forward<T>(msg)));
  }

  // Internal (the host): whether an answer was given; marks the call over.
  bool answered() const noexcept { return answered_; }
  void finish() noexcept { done_ = true; }
  receive_context& envelope_context() noexcept { return env_; }

 private:
  result<pid> lookup_actor(std::string_view name) const;
  error tell_grain_message(const grain_identity& to, akt::message msg);

  receive_context& env_;
  detail::grain_host_base& host_;
  const bool acknowledged_;
  bool answered_ = false;
  bool done_ = false;
};

}  // namespace akt
