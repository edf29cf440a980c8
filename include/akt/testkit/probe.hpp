#pragma once
// testkit::probe: an actor whose received messages a test waits for.
//
//   akt::testkit::probe p(sys);
//   (void)worker.tell(job{1});                     // the worker answers ctx.sender()...
//   (void)p.send(worker, job{2});                  // ...and here the sender is the probe
//   akt::result<done> d = p.expect<done>();        // the next message must be a done
//   if (!d) std::puts(d.error().message().c_str());
//
// The probe does not depend on a test framework: every expectation returns a result, with
// errc::request_timeout when nothing came in time and errc::unexpected_reply (naming the type
// that came) when the wrong message came.
//
// Contract
// - The probe actor moves each message it receives, with its sender, to the end of a queue
//   (mutex + condition variable); the expect* calls take messages from the front, in arrival
//   order. Every member may be called from any thread, but the probe is meant for one test
//   thread: two threads expecting at once would each take some of the messages.
// - Each expect* consumes exactly one message when one arrives in time, also when it is the
//   wrong one (the error names it). expect_no_message consumes nothing.
// - Blocking: the expect* calls wait at most `within`. In deterministic mode
//   (system_config::deterministic) no dispatcher thread runs turns, so while waiting they run
//   them on the calling thread, one turn at a time (actor_system::step()), until the probe has
//   a message, sleeping briefly while none is ready (a timer may still send one).
// - The probe cannot answer asks: its actor returns at once, so an asker gets errc::no_reply.
//   reply() answers the last sender with a tell.
// - Memory: the queue holds every message received and not yet expected.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "akt/actor/actor_system.hpp"
#include "akt/actor/events.hpp"
#include "akt/actor/pid.hpp"
#include "akt/core/error.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"

namespace akt::testkit {

struct probe_defaults {
  // How long an expectation waits by default: long enough for a loaded CI machine running
  // sanitizers, short enough that a missing message fails the test quickly.
  static constexpr std::chrono::seconds within{3};
  // How long expect_no_message listens by default.
  static constexpr std::chrono::milliseconds quiet{100};
};

namespace detail {
// Shared by the probe object and its actor (which may outlive the object briefly, when the
// stop in ~probe times out).
struct probe_queue {
  struct item {
    message msg;
    pid sender;
  };
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<item> items;  // guarded by mutex
};
}  // namespace detail

class probe {
 public:
  // Spawns the probe actor under `name` (akt.probe-<n> when empty: the framework's own name, so
  // that on a cluster node an unnamed probe claims no cluster-wide name). If that fails (the
  // system is not running, the name is taken), ref() is empty and every call returns
  // start_error().
  explicit probe(actor_system& sys, std::string_view name = "");
  // Stops the probe actor and waits (briefly) for it to stop.
  ~probe();
  probe(const probe&) = delete;
  probe& operator=(const probe&) = delete;

  const pid& ref() const noexcept { return self_; }
  // Why the probe actor could not be spawned; ok when it runs.
  const akt::error& start_error() const noexcept { return start_error_; }

  // Waits for the next message, which must be a T (T = akt::message takes any): returns it
  // moved out. Errors: request_timeout (nothing came within `within`), unexpected_reply (a
  // message of another type came; it is consumed).
  template <class T>
  result<T> expect(std::chrono::nanoseconds within = probe_defaults::within) {
    return expect_where<T>([](const T&) { return true; }, within);
  }

  // Like expect, but the T must also satisfy pred(const T&) (unexpected_reply otherwise; the
  // message is consumed).
  template <class T, class P>
  result<T> expect_where(P pred, std::chrono::nanoseconds within = probe_defaults::within) {
    result<message> next = next_message(within, akt::type_name<T>());
    if (!next) return next.error();
    if constexpr (std::is_same_v<T, message>) {
      if (!pred(std::as_const(*next))) return mismatch(next->type_name());
      return std::move(*next);
    } else {
      T* v = next->template get_if<T>();
      if (v == nullptr) return wrong_type(akt::type_name<T>(), next->type_name());
      if (!pred(std::as_const(*v))) return mismatch(next->type_name());
      return std::move(*v);
    }
  }

  // True when no message arrives within d. A message that does arrive stays queued (so the
  // test can expect it and see what it was).
  bool expect_no_message(std::chrono::nanoseconds d = probe_defaults::quiet);

  // Watches target from the probe and waits for its terminated notice, which must be the next
  // message. Errors as for expect; empty_pid for an empty target.
  result<void> expect_terminated(const pid& target,
                                 std::chrono::nanoseconds within = probe_defaults::within);
  // Watches / stops watching target: the probe receives akt::terminated{target} once it stops.
  error watch(const pid& target);
  error unwatch(const pid& target);

  // Sends msg to `to` with the probe as the sender (the receiver's ctx.sender() is ref()).
  error send(const pid& to, message msg);
  // Sends msg to last_sender(), as the probe. errc::empty_pid when there is none.
  error reply(message msg);
  // The sender of the message the last expect* took (empty when it came from outside any
  // actor, or before any).
  pid last_sender() const;
  // Messages received and not yet taken. Does not run turns in deterministic mode.
  std::size_t pending() const;

 private:
  // The front message, waiting (and in deterministic mode running turns) until `within`.
  result<message> next_message(std::chrono::nanoseconds within, std::string_view expected);
  // Waits for the queue to be non-empty, at most until deadline; true when it is.
  bool wait_nonempty(std::chrono::steady_clock::time_point deadline);
  static akt::error wrong_type(std::string_view expected, std::string_view got);
  static akt::error mismatch(std::string_view got);

  actor_system& system_;
  std::shared_ptr<detail::probe_queue> queue_;
  pid self_;
  akt::error start_error_;
  bool manual_ = false;  // deterministic mode: this thread runs the turns
  pid last_sender_;      // guarded by queue_->mutex
};

}  // namespace akt::testkit
