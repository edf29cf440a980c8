#pragma once
// receive_context: the envelope a message travels in, and what a handler sees of it.
//
// The runtime takes one from the envelope pool for every local tell and ask (from the
// receiver's home shard), fills it, and enqueues it; the receiver's mailbox recycles it one
// dequeue after handing it out. A handler must not keep a pointer or reference to its context
// after it returns: the envelope is rebuilt for an unrelated message soon after.
//
// Field triple (build / reset / clone): every field below is set when the envelope is built,
// cleared by reset() except home_shard (stamped at allocation, never changed), and copied by
// clone_for_stash() except the reply guard, which a clone starts cleared.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "akt/actor/pid.hpp"
#include "akt/actor/schedule.hpp"
#include "akt/actor/spawn_options.hpp"

namespace akt {

class receive_context;

namespace detail {
class reply_route;
class system_core;
struct trace_state;
struct context_access;
using continuation = std::function<void(receive_context&, result<message>)>;
using piped_task = std::function<result<message>()>;
error pipe(system_core* core, actor_cell* from, const pid& to, piped_task task,
           std::chrono::nanoseconds timeout);
system_core* cell_system(const actor_cell* c) noexcept;

template <class>
inline constexpr bool is_result_v = false;
template <class T>
inline constexpr bool is_result_v<result<T>> = true;

// Wraps a pipe_to task so that it returns result<message>.
template <class F>
piped_task wrap_task(F&& f) {
  return [f = std::forward<F>(f)]() mutable -> result<message> {
    using R = std::invoke_result_t<F&>;
    static_assert(!std::is_void_v<R>, "a pipe_to task returns the value to deliver");
    if constexpr (is_result_v<R>) {
      R r = f();
      if (!r) return r.error();
      return message(std::move(*r));
    } else {
      return message(f());
    }
  };
}
}  // namespace detail

namespace detail {
// Where a built envelope goes instead of its target's mailbox: deliver(ctx, env) takes env
// (and with it the duty to complete its reply route on a refusal). Internal.
struct envelope_sink {
  void (*deliver)(void* ctx, receive_context* env) noexcept = nullptr;
  void* ctx = nullptr;
};
}  // namespace detail

// Options of receive_context::request.
struct request_options {
  // Hold this actor's other messages (they stay queued) until the reply or the timeout; the
  // continuation then runs before any of them.
  bool stash_others = false;
};

// A pending request, as receive_context::request and grain_context::request_grain /
// request_actor return it. Every outcome of a request reaches its continuation, on the
// requester's turn: the reply, or the error (request_timeout, dead, unhandled, no_reply, and a
// refusal made before anything was sent). error() also reports such a refusal at once
// (empty_pid, reentrancy_disabled, ...), for a caller that wants to react on the spot; it is ok
// for a request that went out. cancel() drops the continuation (it will not run) and returns
// whether the request was still pending. Only the requester may cancel, from its own turns.
class request_handle {
 public:
  request_handle() = default;
  request_handle(detail::actor_cell* owner, std::uint64_t id, akt::error refused = {})
      : owner_(owner), id_(id), refused_(std::move(refused)) {}
  bool cancel();
  std::uint64_t id() const noexcept { return id_; }
  // True when the request went out (it was not refused at once).
  explicit operator bool() const noexcept { return id_ != 0 && !refused_; }
  // Why the request was refused before anything was sent; ok when it went out.
  const akt::error& error() const noexcept { return refused_; }

 private:
  detail::actor_cell* owner_ = nullptr;
  std::uint64_t id_ = 0;
  akt::error refused_;
};

// The answer owed for one message, taken out of its envelope by defer_reply (on an actor's
// receive_context or a grain's grain_context) so that a later turn gives it: a request's
// continuation, a timer, another message. reply, reply_error and ack then do what the context's
// own reply, reply_error and ack would have done while handling the message. A caller gets at
// most one answer: for an actor's ask a second one, or one after the asker gave up, is published
// as a dead letter (request_timeout); for a grain later answers are ignored. A handle dropped
// while a caller still waits completes it with errc::no_reply.
//
// Move-only; one owner at a time, not for concurrent use. Meant for the deferring actor's or
// grain's own turns, though completing it from another thread is safe too (the reply routes
// are). It holds a reference on the deferring actor (the sender of a reply by tell). Deferring
// an actor's reply allocates nothing.
class reply_handle {
 public:
  reply_handle() = default;
  reply_handle(reply_handle&& o) noexcept;
  reply_handle& operator=(reply_handle&& o) noexcept;
  reply_handle(const reply_handle&) = delete;
  reply_handle& operator=(const reply_handle&) = delete;
  ~reply_handle();

  template <class T>
  void reply(T&& value) {
    reply_message(akt::message(std::forward<T>(value)));
  }
  void reply_message(akt::message value);
  // Completes a waiting caller with `err`. For a grain's one-way tell (nobody waits) the error
  // is published as a dead letter naming the grain; for an actor's tell it is dropped.
  void reply_error(akt::error err);
  // Completes a waiting caller without a value (an acknowledged grain tell: no error; an ask:
  // an empty message). Nothing is sent when nobody waits.
  void ack();
  // True while a caller waits for this answer.
  bool expects_reply() const noexcept { return route_ != nullptr; }
  // The caller's deadline (asks with a timeout only).
  std::optional<std::chrono::steady_clock::time_point> deadline() const noexcept;
  // True once the caller gave up (its deadline passed) or the answer was given.
  bool cancelled() const noexcept;

 private:
  friend class receive_context;
  friend class grain_context;

  detail::reply_route* route_ = nullptr;  // the caller's route while an answer is owed
  pid self_;                              // the deferring actor; empty for a default handle
  pid sender_;                            // who gets a reply by tell (an actor's tell only)
  // A grain's answer: its kind/name, for dead letters of a one-way tell's errors. Empty for an
  // actor's.
  std::string grain_;
  std::int64_t deadline_ns_ = 0;  // steady-clock ns; 0 = no deadline
  bool ask_ = false;              // the message was an ask (replies never go by tell)
  bool ack_only_ = false;         // a grain's acknowledged tell: a value counts as ack
};

// 64-byte aligned and 128 bytes long: two cache lines, of which a tell of a small payload
// touches only the first (see envelope's layout).
class alignas(64) receive_context final : public envelope {
 public:
  explicit receive_context(std::uint32_t home_shard) noexcept : envelope(home_shard) {}
  ~receive_context();
  receive_context(const receive_context&) = delete;

  // Envelopes are 64-byte aligned. The global aligned operator new goes through glibc's
  // memalign path, which bypasses the per-thread cache, splits and frees chunk slack, and was
  // the dominant cost whenever the pool ran dry (a backlog larger than its spares). These
  // align an ordinary block by hand instead (64 bytes of slack, the original pointer kept
  // just below the object). The block comes from the global operator new (a replacement that
  // counts allocations sees it).
  static void* operator new(std::size_t size);
  static void* operator new(std::size_t size, std::align_val_t);
  static void operator delete(void* p) noexcept;
  static void operator delete(void* p, std::align_val_t) noexcept;
  receive_context& operator=(const receive_context&) = delete;

  // ---- for handlers ----
  akt::message& message() noexcept { return msg_; }
  const akt::message& message() const noexcept { return msg_; }
  template <class T>
  T* get_if() noexcept {
    return msg_.get_if<T>();
  }
  template <class T>
  bool is() const noexcept {
    return msg_.is<T>();
  }

  pid self() const noexcept { return detail::share_pid(receiver_); }
  // The sending actor; empty when the message came from outside any actor.
  pid sender() const noexcept { return detail::share_pid(sender_); }
  // True when the sender waits for a reply (an ask).
  bool expects_reply() const noexcept { return reply_ != nullptr; }
  // The ask's deadline, if the message is an ask with a timeout.
  std::optional<std::chrono::steady_clock::time_point> deadline() const noexcept;
  bool has_deadline() const noexcept { return (flags_ & flag_has_deadline) != 0; }
  actor_system& system() const noexcept;

  // ---- answering (the same words as grain_context's) ----
  // Replies: to the asker when this is an ask, else to the sending actor (with self as sender);
  // with neither, the reply is published as a dead letter. At most one reply reaches an asker.
  template <class T>
  void reply(T&& value) {
    reply_message(akt::message(std::forward<T>(value)));
  }
  void reply_message(akt::message value);
  // Completes an ask with an error instead of a value (the asker's result carries it); nothing
  // for a tell.
  void reply_error(akt::error err);
  // Completes an ask with an empty message (an acknowledgement without a value); nothing for a
  // tell.
  void ack();
  // Takes the reply route out of this message (the asker's, or the sender to reply to by tell)
  // into a handle, to reply after the handler returns; the handler then no longer owes a reply
  // (and ctx.reply to an ask is a dead letter).
  reply_handle defer_reply();

  // Sends with this actor as the sender.
  template <class T>
  error tell(const pid& to, T&& msg) {
    if (!to) return errc::empty_pid;
    return detail::deliver(receiver_, detail::cell_of(to),
                           detail::make_envelope(detail::cell_of(to), std::forward<T>(msg)));
  }

  // Declares the message unhandled: it is published as an unhandled_message event and a dead
  // letter (reason unhandled), and an asker gets errc::unhandled.
  void unhandled();
  // Stops this actor after the current message (its queued messages become dead letters).
  void stop_self();
  // Reports that handling this message failed: after the handler returns, the actor's
  // supervisor decides (as for an exception). An asker gets the error.
  void fail(akt::error err);

  // ---- the hierarchy ----
  // Spawns a child of this actor (path "<this path>/<name>"). Children stop before their
  // parent (post_stop runs bottom-up); a restart of the parent stops them too.
  template <class T, class... Args>
  result<pid> spawn(std::string_view name, spawn_options options, Args&&... args);
  template <class T, class... Args>
  result<pid> spawn(std::string_view name, Args&&... args) {
    return spawn<T>(name, spawn_options{}, std::forward<Args>(args)...);
  }
  std::vector<pid> children() const;
  // The live child with that name, or errc::actor_not_found.
  result<pid> child(std::string_view name) const;
  // This actor's parent; empty for a top-level actor.
  pid parent() const noexcept;

  // ---- watching ----
  // After watch(target), this actor receives akt::terminated{target} once target has stopped
  // (at once if it already has). Watching oneself or an empty pid does nothing.
  void watch(const pid& target);
  void unwatch(const pid& target);

  // ---- stash ----
  // Keeps the current message (its payload, sender and reply route) for later.
  void stash();
  // The oldest stashed message is processed before anything else in the mailbox; false when
  // the stash is empty.
  bool unstash();
  // All stashed messages, in the order they were stashed, before anything else in the mailbox.
  std::size_t unstash_all();
  std::size_t stash_size() const noexcept;

  // ---- behaviours ----
  using behavior = std::function<void(receive_context&)>;
  // From the next message on, `b` handles messages instead of receive (replacing the current
  // behaviour); become_stacked pushes on top of it; unbecome pops (back to receive at the
  // bottom). A restart returns to receive.
  void become(behavior b);
  void become_stacked(behavior b);
  void unbecome();

  // ---- sending on ----
  // Sends this message on to `to` as if it had come there directly: the original sender and
  // reply route go with it (an asker gets the reply from `to`).
  error forward(const pid& to);

  // Runs task() on the system's blocking pool (never on a dispatcher thread) and delivers its
  // result to `to` as a message, with this actor as the sender: a T for a task returning T or
  // a result<T> holding a value; akt::status_failure{error} when it returns an error, throws,
  // or (timeout > 0) has not finished in time (a late result is then a dead letter).
  template <class F>
  error pipe_to(const pid& to, F&& task,
                std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero());

  // Schedules a message to this actor (see schedule.hpp); the schedule ends when the actor
  // stops. The sender of each delivery is this actor.
  result<schedule_ref> schedule_once(akt::message msg, std::chrono::nanoseconds delay);
  result<schedule_ref> schedule(akt::message msg, std::chrono::nanoseconds interval);
  result<schedule_ref> schedule_with_cron(akt::message msg, std::string_view expression,
                                          std::string_view zone = "UTC");

  // Asks `to` without blocking: returns at once; `then(ctx, reply)` runs later on this actor,
  // serialised with its other messages, with the reply or the error (request_timeout, dead,
  // unhandled, no_reply, empty_pid, ...). timeout 0 = no timeout. See request_handle.
  template <class R = akt::message, class T, class F>
  request_handle request(const pid& to, T&& msg, std::chrono::nanoseconds timeout, F&& then,
                         request_options options = {});

  // The envelope pools' contract (sharded_pool): the shard the envelope was allocated for.
  std::uint32_t home_shard() const noexcept { return home_shard_; }

 private:
  // ---- runtime (through detail::context_access) ----
  // Clears everything but the home shard; releases the sender reference; the reply route must
  // have been completed or moved away.
  void reset() noexcept;
  // Drops what the handler no longer needs once the message was handled: the payload and the
  // sender reference. The turn calls it after every message, because the envelope then stays in
  // the mailbox (as its sentinel) until the next dequeue: without this, an idle actor would keep
  // its last sender (and anything its last payload owns) alive, and two idle actors that last
  // wrote to each other would keep each other alive for ever.
  void release_contents() noexcept {
    if (sender_ != nullptr) release_sender();
    msg_.reset();
  }
  void release_sender() noexcept;
  // env null: the request is refused at once with `refused` (empty_pid when ok); the
  // continuation still gets the error, on a later turn.
  // sink (optional): takes the built envelope instead of `to` (the grain layer hands a request
  // to a grain that must be activated off this worker to its runtime threads).
  request_handle request_erased(const pid& to, envelope_ptr env, std::chrono::nanoseconds timeout,
                                detail::continuation then, request_options options,
                                akt::error refused = {}, detail::envelope_sink sink = {});

  friend class detail::system_core;
  friend struct detail::context_access;

  std::int64_t deadline_ns_ = 0;  // steady-clock ns; meaningful when flag_has_deadline is set
  // Late-reply guard: set once a reply has been delivered or the ask completed, so a second
  // reply is dropped. reset() leaves it set on purpose (build clears it); a clone clears it.
  bool reply_closed_ = false;
  // The message's trace (owned), meaningful only under flag_traced: reset() tests the flag, not
  // this field, so an untraced message never touches it. It sits in what was the padding at the
  // end of the second line: sizeof(receive_context) stays 128.
  detail::trace_state* trace_ = nullptr;
  void drop_trace() noexcept;
};
static_assert(sizeof(void*) != 8 || sizeof(receive_context) == 128,
              "the envelope is two cache lines (see envelope's layout)");

template <class F>
error receive_context::pipe_to(const pid& to, F&& task, std::chrono::nanoseconds timeout) {
  return detail::pipe(detail::cell_system(receiver_), receiver_, to,
                      detail::wrap_task(std::forward<F>(task)), timeout);
}

template <class R, class T, class F>
request_handle receive_context::request(const pid& to, T&& msg, std::chrono::nanoseconds timeout,
                                        F&& then, request_options options) {
  envelope_ptr env =
      to ? detail::make_envelope(detail::cell_of(to), std::forward<T>(msg)) : nullptr;
  return request_erased(
      to, std::move(env), timeout,
      [f = std::forward<F>(then)](receive_context& ctx, result<akt::message> reply) mutable {
        f(ctx, detail::reply_as<R>(std::move(reply)));
      },
      options);
}

}  // namespace akt
