#pragma once
// scheduler: the system's table of scheduled messages, armed on the timer service.
//
// Contract: every member may be called from any thread. The table is guarded by a mutex (taken
// to add, remove and list; a fire only touches its own schedule's atomics and the timer
// service). A schedule's state is shared by its refs, the table and its pending timer callback;
// `ended` (exchange, acq_rel) decides once whether a cancel or the last fire ends it.

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "akt/actor/schedule.hpp"
#include "akt/actor/tracing.hpp"
#include "akt/core/cron.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"
#include "akt/core/time_zone.hpp"
#include "dispatch/timer_service.hpp"

namespace akt::detail {

class actor_cell;
class system_core;

// Where a schedule delivers: an actor (to, with from as the sender), or a custom sink (grains:
// the grain layer decides how a fire reaches the identity). `label` names a sink target in
// listings.
struct schedule_target {
  pid to;
  actor_cell* from = nullptr;
  std::function<error(message)> sink;
  std::string label;
};

struct schedule_state {
  std::uint64_t id = 0;
  schedule_kind kind = schedule_kind::once;
  pid target;
  pid sender;                          // the scheduling actor, when scheduled from inside one
  std::function<error(message)> sink;  // set instead of target for custom targets
  std::string label;                   // the custom target's name
  message msg;                         // the template: copied for each fire of a repeating schedule
  std::string message_type;
  std::string spec;
  std::chrono::nanoseconds interval{0};
  std::optional<cron_schedule> cron;
  std::optional<time_zone> zone;
  scheduler* owner = nullptr;
  std::mutex mutex;                 // guards msg (once) and timer between fire and cancel
  timer_service::handle timer;      // guarded by mutex
  std::atomic<bool> paused{false};  // writers: pause/resume; reader: fire
  std::atomic<bool> due{false};     // a paused one-shot whose time came (fires on resume)
  std::atomic<bool> ended{false};   // writers: cancel, the last fire (exchange)
  std::atomic<std::uint64_t> fired{0};
  // A one-shot scheduled inside a trace (capture_trace): its message continues that trace when
  // it fires. Repeating schedules start none: each fire would join the trace of whoever made the
  // schedule, for as long as it runs. Written before the schedule is armed.
  span_context trace;
};

class scheduler {
 public:
  scheduler(system_core* core, timer_service* timers) : core_(core), timers_(timers) {}

  // To an actor, from `from` (null: no sender).
  result<schedule_ref> schedule_once(const pid& to, message msg, std::chrono::nanoseconds delay,
                                     actor_cell* from) {
    return schedule_once(schedule_target{to, from, nullptr, {}}, std::move(msg), delay);
  }
  result<schedule_ref> schedule_every(const pid& to, message msg, std::chrono::nanoseconds interval,
                                      actor_cell* from) {
    return schedule_every(schedule_target{to, from, nullptr, {}}, std::move(msg), interval);
  }
  result<schedule_ref> schedule_cron(const pid& to, message msg, std::string_view expression,
                                     std::string_view zone, actor_cell* from) {
    return schedule_cron(schedule_target{to, from, nullptr, {}}, std::move(msg), expression, zone);
  }
  // To any target.
  result<schedule_ref> schedule_once(schedule_target to, message msg,
                                     std::chrono::nanoseconds delay);
  result<schedule_ref> schedule_every(schedule_target to, message msg,
                                      std::chrono::nanoseconds interval);
  result<schedule_ref> schedule_cron(schedule_target to, message msg, std::string_view expression,
                                     std::string_view zone);
  std::vector<schedule_info> list() const;
  // Cancels every schedule an actor made for itself (it stopped).
  void cancel_owned_by(actor_cell* owner);
  // Ends every schedule and refuses new ones (system_shutting_down). The system's stop calls it
  // once its timers have stopped: no fire runs any more, and a repeating schedule would otherwise
  // stay in the table for ever, its state holding its target's pid, whose cell holds the core
  // that holds the table, so the whole system leaked.
  void stop();

  bool cancel(schedule_state& s);
  bool pause(schedule_state& s);
  bool resume(schedule_state& s);

 private:
  result<schedule_ref> add(std::shared_ptr<schedule_state> s, schedule_target to);
  void arm(const std::shared_ptr<schedule_state>& s);
  void fire(const std::shared_ptr<schedule_state>& s);
  void deliver(schedule_state& s, message msg);
  void forget(std::uint64_t id);

  system_core* const core_;
  timer_service* const timers_;
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<schedule_state>> table_;  // guarded
  std::uint64_t next_id_ = 1;                                                 // guarded
  bool stopped_ = false;                                                      // guarded
};

}  // namespace akt::detail
