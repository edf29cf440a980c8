#pragma once
// The grain API of an actor system: kinds, identities, sending, inspection.
//
// Thread safety: every function may be called from any thread. ask_grain and acknowledged
// tell_grain block their caller; on a dispatcher worker (inside an actor or a grain) they
// return errc::blocking_on_worker without sending (inside a grain, use the grain context's
// one-way tell, its bounded ask_grain, or a request). Activating a grain runs its on_activate
// on the thread that sent the activating message.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "akt/actor/actor.hpp"
#include "akt/actor/actor_system.hpp"
#include "akt/actor/detail/actor_cell.hpp"
#include "akt/actor/schedule.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"
#include "akt/grain/detail/grain_host.hpp"
#include "akt/grain/grain.hpp"
#include "akt/grain/grain_context.hpp"

namespace akt {

// Registers kind T on sys, so that a bare send can activate it; with options, declares them as
// the kind's defaults (replacing earlier ones). The kind is named akt::type_name<T>(): give the
// type a stable name (type_name.hpp) for anything that outlives one process. Another type that
// already registered that name: errc::duplicate_type_name.
template <class T>
error register_grain_kind(actor_system& sys) {
  auto k = detail::register_kind(sys, detail::grain_kind_name<T>(), &detail::make_grain_cell<T>,
                                 nullptr);
  return k ? error() : k.error();
}
template <class T>
error with_grain_default_options(actor_system& sys, grain_options defaults) {
  auto k = detail::register_kind(sys, detail::grain_kind_name<T>(), &detail::make_grain_cell<T>,
                                 &defaults);
  return k ? error() : k.error();
}

// The identity of grain `name` of kind T, activating it if it is not active (with `options`
// over the kind's defaults, for this activation only). Errors: invalid_actor_name, the
// activation's error, system_shutting_down, system_not_started.
template <class T>
result<grain_identity> activate_grain(actor_system& sys, std::string_view name,
                                      grain_options options = {}) {
  auto k = detail::register_kind(sys, detail::grain_kind_name<T>(), &detail::make_grain_cell<T>,
                                 nullptr);
  if (!k) return k.error();
  return detail::resolve_grain(sys, *k, name, options);
}

// Sends msg to the grain (activating it if needed) and waits for its response, at most
// `timeout`. The deadline travels with the message: an ask that expired in the mailbox is not
// handed to on_receive. R = message returns the reply untyped.
template <class R = message, class M>
result<R> ask_grain(actor_system& sys, const grain_identity& id, M&& msg,
                    std::chrono::nanoseconds timeout) {
  return detail::reply_as<R>(
      detail::ask_grain_message(sys, id, message(std::forward<M>(msg)), timeout));
}

// Sends msg to the grain. By default waits until on_receive answered (no_err: ok; err or
// unhandled: that error), at most opts.timeout; with opts.one_way returns once the message is
// in the mailbox. Errors before the enqueue (invalid identity, unknown kind, a stopped system,
// a failed activation, a full mailbox) reach one-way callers too.
template <class M>
error tell_grain(actor_system& sys, const grain_identity& id, M&& msg,
                 grain_tell_options opts = {}) {
  return detail::tell_grain_message(sys, id, message(std::forward<M>(msg)), opts, nullptr);
}

// ---- scheduled delivery ----
// Delivers msg to the grain later (once after `delay`, every `interval`, or on a cron expression
// in `zone`) by a one-way tell, activating the grain again if it was deactivated. Unlike the
// grain's own timers, these outlive activations; cancel, pause and resume them through the ref
// (actor_system::schedules lists them, naming the grain). A delivery that fails (the activation
// fails, a full mailbox) is published as a dead letter. Errors: invalid_actor_name,
// grain_kind_unknown (register the kind first), and the scheduler's (invalid_cron, ...).
template <class M>
result<schedule_ref> schedule_grain_once(actor_system& sys, const grain_identity& id, M&& msg,
                                         std::chrono::nanoseconds delay) {
  return detail::schedule_grain(sys, id, message(std::forward<M>(msg)),
                                detail::timer_spec::once(delay));
}
template <class M>
result<schedule_ref> schedule_grain(actor_system& sys, const grain_identity& id, M&& msg,
                                    std::chrono::nanoseconds interval) {
  return detail::schedule_grain(sys, id, message(std::forward<M>(msg)),
                                detail::timer_spec::every(interval));
}
template <class M>
result<schedule_ref> schedule_grain_with_cron(actor_system& sys, const grain_identity& id, M&& msg,
                                              std::string_view expression,
                                              std::string_view zone = "UTC") {
  return detail::schedule_grain(sys, id, message(std::forward<M>(msg)),
                                detail::timer_spec::cron(expression, zone));
}

// ---- inspection ----
std::vector<grain_identity> active_grains(actor_system& sys);
// Activations started on this system since it was created (reactivations count again).
std::uint64_t grain_activation_count(actor_system& sys);
grain_stats stats_of(actor_system& sys, const grain_identity& id);

}  // namespace akt
