#pragma once
// Scheduled messages: once after a delay, at a fixed interval, or on a cron expression.
//
//   auto r = sys.schedule_with_cron(reporter, make_report{}, "0 9 * * MON-FRI", "Europe/Paris");
//   if (r) r->pause();  ...  r->resume();  ...  r->cancel();
//
// Timers live on the system's timer thread, which only enqueues the messages (a copy per fire
// for repeating schedules, so their message must be copyable). A fire that finds the schedule
// paused is skipped (a paused one-shot fires when resumed). Schedules made from inside an actor
// (receive_context::schedule_*) target that actor and end when it stops; schedules made on the
// system last until cancelled or until the system stops. Nothing is persisted.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "akt/actor/pid.hpp"

namespace akt {

namespace detail {
struct schedule_state;
class scheduler;
}  // namespace detail

enum class schedule_kind : std::uint8_t { once, interval, cron };

struct schedule_info {
  std::uint64_t id = 0;
  schedule_kind kind = schedule_kind::once;
  pid target;         // the actor it delivers to (empty for a grain)
  std::string grain;  // the grain it delivers to, as kind/name (empty for an actor)
  std::string message_type;
  std::string spec;  // "250ms", "every 1s", or the cron expression and zone
  bool paused = false;
  std::uint64_t fired = 0;
};

// A handle to one schedule; copies refer to the same schedule. Any thread.
class schedule_ref {
 public:
  schedule_ref() = default;
  explicit schedule_ref(std::shared_ptr<detail::schedule_state> s) : state_(std::move(s)) {}

  std::uint64_t id() const noexcept;
  // False when the schedule had already ended (fired its last time, or was cancelled).
  bool cancel();
  bool pause();
  bool resume();
  bool active() const noexcept;
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::schedule_state> state_;
};

}  // namespace akt
