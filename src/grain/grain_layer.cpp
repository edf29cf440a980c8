// The grain layer: kinds, the directory, activation and shutdown (see grain_layer.hpp).

#include "grain/grain_layer.hpp"

#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>

#include "actor/name_registry.hpp"

namespace akt {
namespace detail {

error caught(std::string_view where) {
  try {
    throw;
  } catch (const std::exception& e) {
    return error(errc::handler_failed, std::string(where) + " threw: " + e.what());
  } catch (...) {
    return error(errc::handler_failed, std::string(where) + " threw");
  }
}

grain_layer& layer_of(system_core* core) {
  if (auto* g = core->grains_.load(std::memory_order_acquire)) return *static_cast<grain_layer*>(g);
  std::lock_guard<std::mutex> lock(core->extension_mutex_);
  auto* g = core->grains_.load(std::memory_order_relaxed);
  if (g == nullptr) {
    g = new grain_layer(core);
    core->grains_.store(g, std::memory_order_release);
  }
  return *static_cast<grain_layer*>(g);
}

grain_layer& layer_of(actor_system& sys) { return layer_of(detail::core_of(sys)); }

grain_identity identity_of(const grain_kind* kind, const actor_cell* cell) {
  const std::string_view path = cell->path();
  return {kind->name, std::string(path.substr(kind->name.size() + 1))};
}

result<directory_link*> grain_layer::activation::create() {
  if (!may_activate) return k_not_active;
  if (layer.closing_.load(std::memory_order_acquire)) return errc::system_shutting_down;
  // Names are checked here, once per activation: an active grain's name was checked already.
  if (error e = validate_actor_name(name)) return e;
  actor_cell* cell = nullptr;
  try {
    cell = kind->factory(layer.core_, key, kind);
  } catch (...) {
    return caught("the grain's constructor");
  }
  cell->mark_grain();
  grain_host_base& host = grain_host_access::of(cell);
  auto settings = layer.settings_for(kind, per_call);
  grain_host_access::mailbox_capacity(host) = static_cast<std::uint32_t>(
      std::min<std::size_t>(settings->mailbox_capacity, std::numeric_limits<std::uint32_t>::max()));
  grain_host_access::settings(host) = std::move(settings);
  cell->add_ref();  // the directory's
  directory_link& link = grain_host_access::link(host);
  link.cell = cell;
  return &link;
}

error grain_layer::activation::start(actor_cell* cell) {
  grain_host_base& host = grain_host_access::of(cell);
  attempted = true;
  error own;  // on_activate's own error, reported by pre_start
  grain_host_access::activation_error(host) = &own;
  error started = cell->start(false);
  if (started) {
    if (!own) own = started;  // pre_start published grain_activation_failed
    return own;
  }
  grain_host_access::activation_error(host) = nullptr;
  layer.count_activation();
  activated = true;
  return {};
}

result<const grain_kind*> register_kind(actor_system& sys, std::string_view name,
                                        grain_cell_factory factory, const grain_options* defaults) {
  return layer_of(sys).register_kind(name, factory, defaults);
}

result<grain_identity> resolve_grain(actor_system& sys, const grain_kind* kind,
                                     std::string_view name, const grain_options& per_call) {
  grain_identity id{kind->name, std::string(name)};
  grain_layer& layer = layer_of(sys);
  grain_place at = route_grain(core_of(sys), id);
  if (at.at == grain_place::where::claim && on_worker_thread()) {
    return error(errc::blocking_on_worker,
                 "activate_grain of " + id.str() +
                     ", whose activation waits on the cluster, from a dispatcher worker (send it "
                     "a message instead: it is activated off the worker)");
  }
  if (at.at == grain_place::where::remote) {
    // Activated where it lives: the owner activates it for the probe (with the kind's options
    // there: per_call does not travel). Bounded by the activation's own limit, and a margin for
    // the round trip.
    if (error e = validate_actor_name(name)) return e;
    const auto settings = layer.settings_for(kind, &per_call);
    const auto limit =
        settings->activation_timeout * settings->activation_attempts + std::chrono::seconds(5);
    result<message> r = ask_owner(at.target, message(grain_activate_probe{}), limit);
    if (!r) return r.error();
    return id;
  }
  auto p = layer.acquire(kind, name, &per_call);
  if (!p) return p.error();
  return id;
}

}  // namespace detail

std::vector<grain_identity> active_grains(actor_system& sys) {
  return detail::layer_of(sys).active();
}

std::uint64_t grain_activation_count(actor_system& sys) {
  return detail::layer_of(sys).activations();
}

grain_stats stats_of(actor_system& sys, const grain_identity& id) {
  grain_stats s;
  pid p = detail::layer_of(sys).find_active(id.str());
  if (!p) return s;
  s.active = true;
  s.processed = detail::cell_of(p)->processed();
  return s;
}

}  // namespace akt
