// pipe_to: a task on the blocking pool whose result is delivered to an actor (or through a
// sink: grains) as a message.

#include <atomic>
#include <memory>

#include "actor/system_core.hpp"
#include "akt/actor/detail/actor_cell.hpp"
#include "akt/actor/detail/pipe.hpp"
#include "akt/actor/events.hpp"
#include "akt/core/thread.hpp"

namespace akt::detail {

namespace {

// Shared by the task and its timeout: whichever finishes first delivers; the other yields.
struct piped {
  piped(system_core* c, actor_cell* f, pid t, pipe_sink s)
      : core(c), from(detail::share_pid(f)), to(std::move(t)), sink(std::move(s)) {
    core->add_ref();
  }
  ~piped() { core->release(); }
  system_core* core;
  pid from;
  pid to;                         // the target actor (empty with a sink)
  pipe_sink sink;                 // delivers instead of `to` when set
  std::atomic<bool> done{false};  // writers: the task, the timeout (exchange, acq_rel)
  // The trace of the handler that piped (capture_trace; invalid when untraced): the task and
  // the delivery of its result run inside it. Written before the task is submitted.
  span_context trace;
  timer_service::handle timer;  // written before the task is submitted
};

void deliver(const piped& p, message msg) {
  if (p.sink) {
    p.sink(std::move(msg));
    return;
  }
  (void)detail::deliver(detail::cell_of(p.from), detail::cell_of(p.to),
                        make_envelope(detail::cell_of(p.to), std::move(msg)));
}

}  // namespace

error pipe(system_core* core, actor_cell* from, const pid& to, piped_task task,
           std::chrono::nanoseconds timeout) {
  if (!to) return errc::empty_pid;
  return pipe_through(core, from, to, nullptr, std::move(task), timeout);
}

error pipe_through(system_core* core, actor_cell* from, const pid& to, pipe_sink sink,
                   piped_task task, std::chrono::nanoseconds timeout) {
  if (!task) return error(errc::invalid_argument, "pipe_to without a task");
  auto state = std::make_shared<piped>(core, from, to, std::move(sink));
  state->trace = capture_trace();
  if (timeout > std::chrono::nanoseconds::zero()) {
    state->timer = core->timers_.schedule_after(timeout, [state] {
      never_block = true;  // the timer thread: never blocks on a full bounded mailbox
      const resumed_trace in_trace(state->core->tracer(), state->trace);
      if (!state->done.exchange(true, std::memory_order_acq_rel)) {
        deliver(*state, status_failure{error(errc::request_timeout, "pipe_to task")});
      }
    });
  }
  const bool queued = core->blocking_.submit([state, task = std::move(task)]() mutable {
    const resumed_trace in_trace(state->core->tracer(), state->trace);
    result<message> r = error(errc::handler_failed);
    try {
      r = task();
    } catch (const std::exception& e) {
      r = error(errc::handler_failed, e.what());
    } catch (...) {
      r = error(errc::handler_failed, "unknown exception");
    }
    if (state->done.exchange(true, std::memory_order_acq_rel)) {
      // The timeout won: nobody waits for this result any more.
      if (r) state->core->dead_letter(std::move(*r), state->from, state->to, errc::request_timeout);
      return;
    }
    if (state->timer) state->core->timers_.cancel(state->timer);
    if (r)
      deliver(*state, std::move(*r));
    else
      deliver(*state, status_failure{r.error()});
  });
  if (!queued) {
    if (state->timer) core->timers_.cancel(state->timer);
    return errc::system_shutting_down;
  }
  return {};
}

}  // namespace akt::detail
