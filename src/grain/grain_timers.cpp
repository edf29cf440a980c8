// Activation timers of grains and system schedules to grains (see grain_layer.hpp).

#include <string>
#include <utility>

#include "actor/name_registry.hpp"
#include "grain/grain_layer.hpp"

namespace akt {
namespace detail {

namespace {

// Schedules msg to target as spec says.
result<schedule_ref> schedule(scheduler& sched, schedule_target target, message msg,
                              const timer_spec& spec) {
  switch (spec.kind) {
    case schedule_kind::once:
      return sched.schedule_once(std::move(target), std::move(msg), spec.period);
    case schedule_kind::interval:
      return sched.schedule_every(std::move(target), std::move(msg), spec.period);
    case schedule_kind::cron:
      break;
  }
  return sched.schedule_cron(std::move(target), std::move(msg), spec.expression, spec.zone);
}

}  // namespace

result<std::string> grain_timer(grain_host_base* host, message msg, const timer_spec& spec,
                                grain_timer_options options) {
  if (host == nullptr) return error(errc::invalid_argument, "grain timers need an activation");
  if (grain_host_access::timers_stopped(*host)) {
    return error(errc::grain_timers_stopped, "the activation is ending: no new timers");
  }
  actor_cell* cell = host->cell();
  system_core* core = cell->system();
  auto& table = grain_host_access::timers(*host);
  if (table == nullptr) table = new grain_timer_table();
  std::string ref = options.reference.empty() ? "timer-" + std::to_string(table->next_reference++)
                                              : std::move(options.reference);
  (void)cancel_grain_timer(host, ref);  // the same reference replaces the earlier timer
  schedule_target target;
  target.label = std::string(cell->path()) + " (timer " + ref + ")";  // path: kind/name
  // The tick goes to this cell only (never activates the grain again); a strong reference
  // keeps the cell while the timer lives, and stop_timers cancels it on deactivation.
  target.sink = [to = detail::share_pid(cell), generation = grain_host_access::generation(*host),
                 keep = options.keep_alive](message m) {
    return deliver(nullptr, detail::cell_of(to),
                   make_envelope(detail::cell_of(to), grain_tick{generation, keep, std::move(m)}));
  };
  result<schedule_ref> r = schedule(core->scheduler_, std::move(target), std::move(msg), spec);
  if (!r) return r.error();
  table->entries.emplace_back(ref, std::move(*r));
  return ref;
}

error cancel_grain_timer(grain_host_base* host, std::string_view reference) {
  if (host == nullptr) return errc::schedule_not_found;
  grain_timer_table* table = grain_host_access::timers(*host);
  if (table == nullptr) return errc::schedule_not_found;
  auto& v = table->entries;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->first != reference) continue;
    const bool live = it->second.cancel();
    v.erase(it);
    return live ? error() : error(errc::schedule_not_found);
  }
  return errc::schedule_not_found;
}

result<schedule_ref> schedule_grain(actor_system& sys, const grain_identity& id, message msg,
                                    const timer_spec& spec) {
  system_core* core = detail::core_of(sys);
  if (error e = validate_actor_name(id.name)) return e;
  if (auto k = layer_of(core).find_kind(id.kind); !k) return k.error();
  schedule_target target;
  target.label = id.str();
  target.sink = [core, id](message m) { return deliver_from_runtime(core, id, std::move(m)); };
  return schedule(core->scheduler_, std::move(target), std::move(msg), spec);
}

}  // namespace detail

}  // namespace akt
