#pragma once
// pid: a handle to an actor. Copying a pid takes a reference on the actor's cell, so a pid stays
// valid (and safe to tell) after the actor stopped: a tell then returns errc::dead and the
// message is published as a dead letter. An empty pid refers to no actor.
//
// Thread safety: a pid may be copied, compared and used to send from any thread.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "akt/core/error.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"
#include "akt/mailbox/envelope.hpp"

namespace akt {

class actor_system;

// Stops the receiving actor when told; travels on the system queue, ahead of queued user
// messages, which are then published as dead letters.
struct poison_pill {
  static constexpr std::string_view akt_type_name = "akt.poison_pill";
};

class pid;
namespace detail {
actor_cell* cell_of(const pid& p) noexcept;
pid adopt_pid(actor_cell* c) noexcept;
void add_ref(actor_cell* c) noexcept;
void release(actor_cell* c) noexcept;
// An envelope from the receiver's home shard, ready to be filled; never null. Prefer
// make_envelope, which owns it until delivery.
envelope* acquire_envelope(actor_cell* to);
// Enqueues and schedules; on refusal publishes a dead letter. `from` may be null (no sender).
error deliver(actor_cell* from, actor_cell* to, envelope_ptr env) noexcept;
// Blocking ask. With deadline_travels false the caller still waits at most `timeout`, but the
// message carries no deadline (a grain's acknowledged tell: handled even after its caller gave
// up). extra_flags are or-ed into the envelope's flags.
result<message> ask(actor_cell* to, envelope_ptr env, std::chrono::nanoseconds timeout,
                    std::uint32_t extra_flags = 0, bool deadline_travels = true);
std::vector<result<message>> ask_batch(actor_cell* to, std::vector<message>&& msgs,
                                       std::chrono::nanoseconds timeout);
std::string_view cell_name(const actor_cell* c) noexcept;
std::string cell_path(const actor_cell* c);
bool cell_alive(const actor_cell* c) noexcept;

template <class T>
void fill(envelope* env, T&& msg) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, message>)
    env->payload() = std::forward<T>(msg);
  else
    env->payload().template emplace<D>(std::forward<T>(msg));
}

// An envelope to `to` holding msg. If copying or moving msg in throws, the envelope goes back
// to its pool (the exception propagates): a send that throws loses no envelope.
template <class T>
envelope_ptr make_envelope(actor_cell* to, T&& msg) {
  envelope_ptr env(acquire_envelope(to));
  fill(env.get(), std::forward<T>(msg));
  return env;
}

template <class R>
result<R> reply_as(result<message>&& r) {
  if constexpr (std::is_same_v<R, message>) {
    return std::move(r);
  } else {
    if (!r) return r.error();
    if (R* v = r->template get_if<R>()) return std::move(*v);
    return error(errc::unexpected_reply, std::string("expected ") +
                                             std::string(akt::type_name<R>()) + ", got " +
                                             std::string(r->type_name()));
  }
}
}  // namespace detail

class pid {
 public:
  // Its stable name: a pid can travel to another node (akt/remote/remote.hpp).
  static constexpr std::string_view akt_type_name = "akt.pid";

  pid() noexcept = default;
  pid(const pid& o) noexcept : cell_(o.cell_) {
    if (cell_) detail::add_ref(cell_);
  }
  pid(pid&& o) noexcept : cell_(std::exchange(o.cell_, nullptr)) {}
  pid& operator=(pid o) noexcept {
    std::swap(cell_, o.cell_);
    return *this;
  }
  ~pid() {
    if (cell_) detail::release(cell_);
  }

  bool empty() const noexcept { return cell_ == nullptr; }
  explicit operator bool() const noexcept { return cell_ != nullptr; }

  // The actor's name ("" for an empty pid) and its path, akt://<system>/user/<name>.
  std::string_view name() const noexcept { return cell_ ? detail::cell_name(cell_) : ""; }
  std::string path() const { return cell_ ? detail::cell_path(cell_) : std::string(); }
  // False once the actor is stopping or stopped.
  bool alive() const noexcept { return cell_ && detail::cell_alive(cell_); }

  // Sends msg with no sender. Returns ok, or why it was refused (dead, mailbox_full,
  // system_shutting_down, empty_pid); a refused message is published as a dead letter.
  template <class T>
  error tell(T&& msg) const {
    if (!cell_) return errc::empty_pid;
    return detail::deliver(nullptr, cell_, detail::make_envelope(cell_, std::forward<T>(msg)));
  }

  // Sends msg and waits for the reply, at most `timeout`. For code outside the actor system: on
  // a dispatcher worker it returns errc::blocking_on_worker without sending. The deadline
  // travels with the message: if it expires while the message waits in the mailbox, the
  // handler never sees it. R = message returns the reply untyped; any other R checks its type
  // (errc::unexpected_reply).
  template <class R = message, class T>
  result<R> ask(T&& msg, std::chrono::nanoseconds timeout) const {
    if (!cell_) return errc::empty_pid;
    return detail::reply_as<R>(
        detail::ask(cell_, detail::make_envelope(cell_, std::forward<T>(msg)), timeout));
  }

  // Sends each message in order. Returns ok, or the first refusal (every refused message is
  // published as a dead letter).
  error tell_batch(std::vector<message> msgs) const {
    error first;
    for (auto& m : msgs) {
      error e = tell(std::move(m));
      if (e && !first) first = e;
    }
    return first;
  }
  // Sends every message as an ask at once, then waits for all the replies, at most `timeout`
  // in all: replies[i] answers msgs[i]. The actor processes them in order.
  std::vector<result<message>> ask_batch(std::vector<message> msgs,
                                         std::chrono::nanoseconds timeout) const {
    if (!cell_) return std::vector<result<message>>(msgs.size(), errc::empty_pid);
    return detail::ask_batch(cell_, std::move(msgs), timeout);
  }

  // Asks the actor to stop (a poison pill on its system queue). Returns at once.
  error stop() const { return tell(poison_pill{}); }

  friend bool operator==(const pid& a, const pid& b) noexcept { return a.cell_ == b.cell_; }
  friend bool operator!=(const pid& a, const pid& b) noexcept { return a.cell_ != b.cell_; }
  std::size_t hash() const noexcept { return std::hash<const void*>{}(cell_); }

 private:
  friend detail::actor_cell* detail::cell_of(const pid& p) noexcept;
  friend pid detail::adopt_pid(detail::actor_cell* c) noexcept;
  detail::actor_cell* cell_ = nullptr;
};

namespace detail {
// akt's own access to the cell behind a pid (the runtime's handle); not for users.
inline actor_cell* cell_of(const pid& p) noexcept { return p.cell_; }
// A pid that adopts a reference the caller already holds.
inline pid adopt_pid(actor_cell* c) noexcept {
  pid p;
  p.cell_ = c;
  return p;
}
// A pid that takes a new reference.
inline pid share_pid(actor_cell* c) noexcept {
  if (c) add_ref(c);
  return adopt_pid(c);
}
}  // namespace detail

}  // namespace akt

template <>
struct std::hash<akt::pid> {
  std::size_t operator()(const akt::pid& p) const noexcept { return p.hash(); }
};
