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
#include <new>
#include <optional>

#include "akt/actor/pid.hpp"

namespace akt {

namespace detail {
class reply_slot;
class system_core;
struct context_access;
}  // namespace detail

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

  pid self() const noexcept { return pid::share(receiver_); }
  // The sending actor; empty when the message came from outside any actor.
  pid sender() const noexcept { return pid::share(sender_); }
  // True when the sender waits for a reply (an ask).
  bool expects_reply() const noexcept { return reply_ != nullptr; }
  // The ask's deadline, if the message is an ask with a timeout.
  std::optional<std::chrono::steady_clock::time_point> deadline() const noexcept;
  bool has_deadline() const noexcept { return (flags_ & flag_has_deadline) != 0; }
  actor_system& system() const noexcept;

  // Replies: to the asker when this is an ask, else to the sending actor (with self as sender);
  // with neither, the reply is published as a dead letter. At most one reply reaches an asker.
  template <class T>
  void respond(T&& value) {
    respond_message(akt::message(std::forward<T>(value)));
  }
  void respond_message(akt::message value);
  // Completes an ask with an error instead of a value (the asker's result carries it).
  void respond_error(error err);

  // Sends with this actor as the sender.
  template <class T>
  error tell(const pid& to, T&& msg) {
    if (!to) return errc::empty_pid;
    envelope* env = detail::acquire_envelope(to.cell());
    detail::fill(env, std::forward<T>(msg));
    return detail::deliver(receiver_, to.cell(), env);
  }

  // Declares the message unhandled: it is published as a dead letter (reason unhandled) and an
  // asker gets errc::unhandled.
  void unhandled();
  // Stops this actor after the current message (its queued messages become dead letters).
  void stop_self();

  // ---- runtime ----
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
  std::uint32_t home_shard() const noexcept { return home_shard_; }
  bool reply_closed() const noexcept { return reply_closed_; }

 private:
  void release_sender() noexcept;

  friend class detail::system_core;
  friend struct detail::context_access;

  std::int64_t deadline_ns_ = 0;  // steady-clock ns; meaningful when flag_has_deadline is set
  // Late-reply guard: set once a reply has been delivered or the ask completed, so a second
  // respond is dropped. reset() leaves it set on purpose (build clears it); a clone clears it.
  bool reply_closed_ = false;
};

}  // namespace akt
