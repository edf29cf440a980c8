#pragma once
// grain_context: what on_receive gets. Valid only during that call, on the grain's turn.
//
// Answering, in the same words as an actor's receive_context: an ask expects reply(value),
// reply_error(error) or unhandled(); an acknowledged tell expects ack(), reply_error(error) or
// unhandled() (a reply counts as ack). The first answer wins; later ones are ignored. A handler
// that returns without answering an ask or an acknowledged tell completes it with
// errc::no_reply at once (rather than leaving the caller to time out). For a one-way tell there
// is nobody to answer: reply_error, unhandled and exceptions are published as dead letters
// naming the grain. defer_reply hands the answer to a reply_handle for a later turn.

#include <chrono>
#include <functional>
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
using grain_continuation = std::function<void(grain_context&, result<akt::message>)>;
result<akt::message> ask_from_grain(receive_context& env, const grain_identity* grain,
                                    const pid* actor, akt::message msg,
                                    std::chrono::nanoseconds timeout);
error pipe_from_grain(receive_context& env, const grain_identity* grain, const pid* actor,
                      piped_task task, std::chrono::nanoseconds timeout);
}  // namespace detail

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

  // The activation's fencing token: in a cluster, the revision at which its node claimed the
  // identity (strictly greater for every later claim of it anywhere in the cluster; claims
  // committed in one batch share their revision, but name different identities). A resource
  // that must never see two writers of this grain (a database row, a file) stores it and
  // refuses writes with a smaller one: that stops a handler still running on a paused or
  // partitioned node that has since lost the grain. 0 outside a cluster.
  std::int64_t fencing_token() const noexcept;

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
  void reply(T&& value) {
    if (acknowledged_) return ack();
    if (answered_) return;
    answered_ = true;
    if (env_.expects_reply()) env_.reply(std::forward<T>(value));
  }
  void reply_message(akt::message value) {
    if (acknowledged_) return ack();
    if (answered_) return;
    answered_ = true;
    if (env_.expects_reply()) env_.reply_message(std::move(value));
  }
  void ack();
  void reply_error(error e);
  void unhandled();

  // ---- one-way sends from inside (they never wait for the target) ----
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

  // ---- blocking asks from inside ----
  // Ask another grain or an actor and wait for the answer, at most `timeout`: this grain's turn
  // (and the worker running it) waits, so every other message of this grain waits too. A cycle
  // (A asks B while B asks A) ends with request_timeout; use request_grain with reentrancy to
  // let it complete. Asking oneself is refused (it could only time out). Refused in the
  // deterministic (single-thread) mode, where nobody else could run the other side.
  template <class R = akt::message, class T>
  result<R> ask_grain(const grain_identity& to, T&& msg, std::chrono::nanoseconds timeout) {
    return detail::reply_as<R>(
        detail::ask_from_grain(env_, &to, nullptr, akt::message(std::forward<T>(msg)), timeout));
  }
  template <class R = akt::message, class T>
  result<R> ask_actor(const pid& to, T&& msg, std::chrono::nanoseconds timeout) {
    return detail::reply_as<R>(
        detail::ask_from_grain(env_, nullptr, &to, akt::message(std::forward<T>(msg)), timeout));
  }
  template <class R = akt::message, class T>
  result<R> ask_actor(std::string_view name, T&& msg, std::chrono::nanoseconds timeout) {
    auto to = lookup_actor(name);
    if (!to) return to.error();
    return ask_actor<R>(*to, std::forward<T>(msg), timeout);
  }

  // ---- non-blocking requests (need reentrancy) ----
  // Sends msg as an ask and returns at once; then(ctx, reply) runs later on this grain's turn
  // with the answer or the error (request_timeout after options.timeout, dead, unhandled,
  // no_reply, ...), as an actor's receive_context::request (the same request_handle). Refused
  // with reentrancy_disabled when the mode is off, and with reentrancy_in_flight_limit when
  // max_in_flight requests are already pending: the handle's error() says so at once, and the
  // continuation gets the same error on a later turn. While a request is in flight the grain is
  // not deactivated for idleness. Inside `then`, answer an earlier message through its
  // reply_handle (defer_reply); ctx's own answers go nowhere.
  template <class R = akt::message, class T, class F>
  request_handle request_grain(const grain_identity& to, T&& msg, F&& then,
                               grain_request_options options = {}) {
    return request_message(&to, nullptr, akt::message(std::forward<T>(msg)),
                           wrap<R>(std::forward<F>(then)), options);
  }
  template <class R = akt::message, class T, class F>
  request_handle request_actor(const pid& to, T&& msg, F&& then,
                               grain_request_options options = {}) {
    return request_message(nullptr, &to, akt::message(std::forward<T>(msg)),
                           wrap<R>(std::forward<F>(then)), options);
  }
  // An actor found by name (actor_system::find); not found: errc::actor_not_found, as above.
  template <class R = akt::message, class T, class F>
  request_handle request_actor(std::string_view name, T&& msg, F&& then,
                               grain_request_options options = {}) {
    auto to = lookup_actor(name);
    return request_message(nullptr, to ? &*to : nullptr, akt::message(std::forward<T>(msg)),
                           wrap<R>(std::forward<F>(then)), options, to ? error() : to.error());
  }

  // Changes this activation's reentrancy until it is deactivated (the next activation starts
  // from the kind's options again). Requests already in flight are not affected. A mode of off
  // given to enable_reentrancy means allow_all.
  void enable_reentrancy(grain_reentrancy r = {reentrancy_mode::allow_all, 0});
  void disable_reentrancy();

  // Takes the answer owed for this message out of the call, to be given later (see
  // reply_handle). on_receive's return then answers nothing. Deferring does not hold off
  // deactivation.
  reply_handle defer_reply();

  // ---- piping (work off the grain's turn) ----
  // Runs task() on the system's blocking pool and delivers its result as a message: a T for a
  // task returning T (or a result<T> holding one); akt::status_failure{error} when it returns an
  // error, throws, or has not finished within timeout (> 0). To this grain's identity (a
  // passivated grain is activated again), to another grain, or to an actor.
  template <class F>
  error pipe_to_self(F&& task,
                     std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero()) {
    const grain_identity me = self();
    return detail::pipe_from_grain(env_, &me, nullptr, detail::wrap_task(std::forward<F>(task)),
                                   timeout);
  }
  template <class F>
  error pipe_to_grain(const grain_identity& to, F&& task,
                      std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero()) {
    return detail::pipe_from_grain(env_, &to, nullptr, detail::wrap_task(std::forward<F>(task)),
                                   timeout);
  }
  template <class F>
  error pipe_to_actor(const pid& to, F&& task,
                      std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero()) {
    return detail::pipe_from_grain(env_, nullptr, &to, detail::wrap_task(std::forward<F>(task)),
                                   timeout);
  }
  template <class F>
  error pipe_to_actor(std::string_view name, F&& task,
                      std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero()) {
    auto to = lookup_actor(name);
    if (!to) return to.error();
    return pipe_to_actor(*to, std::forward<F>(task), timeout);
  }

  // ---- activation timers ----
  // Messages to this activation, once after `delay`, every `interval`, or on a cron expression
  // (5 or 6 fields, in `zone`). They live with the activation: deactivation cancels them and
  // they never activate the grain again. Ticks are ordinary messages in mailbox order; they do
  // not hold off idle deactivation unless options.keep_alive. Returns the timer's reference.
  template <class T>
  result<std::string> schedule_once(T&& msg, std::chrono::nanoseconds delay,
                                    grain_timer_options o = {}) {
    return detail::grain_timer(&host_, akt::message(std::forward<T>(msg)),
                               detail::timer_spec::once(delay), std::move(o));
  }
  template <class T>
  result<std::string> schedule(T&& msg, std::chrono::nanoseconds interval,
                               grain_timer_options o = {}) {
    return detail::grain_timer(&host_, akt::message(std::forward<T>(msg)),
                               detail::timer_spec::every(interval), std::move(o));
  }
  template <class T>
  result<std::string> schedule_with_cron(T&& msg, std::string_view expression,
                                         std::string_view zone = "UTC",
                                         grain_timer_options o = {}) {
    return detail::grain_timer(&host_, akt::message(std::forward<T>(msg)),
                               detail::timer_spec::cron(expression, zone), std::move(o));
  }
  // Cancels the timer; errc::schedule_not_found when no live timer has that reference.
  error cancel_schedule(std::string_view reference) {
    return detail::cancel_grain_timer(&host_, reference);
  }

  // Internal (the host): whether an answer was given; marks the call over.
  bool answered() const noexcept { return answered_; }
  void finish() noexcept { done_ = true; }
  receive_context& envelope_context() noexcept { return env_; }

 private:
  result<pid> lookup_actor(std::string_view name) const;
  error tell_grain_message(const grain_identity& to, akt::message msg);
  request_handle request_message(const grain_identity* grain, const pid* actor, akt::message msg,
                                 detail::grain_continuation then,
                                 const grain_request_options& options, error refused = {});
  template <class R, class F>
  static detail::grain_continuation wrap(F&& f) {
    return [f = std::forward<F>(f)](grain_context& ctx, result<akt::message> reply) mutable {
      f(ctx, detail::reply_as<R>(std::move(reply)));
    };
  }

  receive_context& env_;
  detail::grain_host_base& host_;
  const bool acknowledged_;
  bool answered_ = false;
  bool done_ = false;
};

}  // namespace akt
