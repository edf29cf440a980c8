#pragma once
// The grain API of an actor system: kinds, identities, sending, inspection.
//
// Thread safety: every function may be called from any thread. ask_grain and acknowledged
// tell_grain block their caller; on a dispatcher worker (inside an actor or a grain) they
// return errc::blocking_on_worker without sending (use a one-way tell there). Activating a
// grain runs its on_activate on the thread that sent the activating message.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "akt/actor/actor.hpp"
#include "akt/actor/actor_system.hpp"
#include "akt/actor/detail/actor_cell.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"
#include "akt/grain/grain.hpp"
#include "akt/grain/grain_context.hpp"

namespace akt {

namespace detail {

struct grain_kind;

// The actor that hosts one activation of a grain (inside the activation's cell). The grain
// object lives in the derived grain_host<T>, so a fresh instance can be built in place when
// the identity is activated again.
class grain_host_base : public actor {
 public:
  explicit grain_host_base(const grain_kind* kind) noexcept : kind_(kind) {}
  error pre_start(actor_context& ctx) final;
  void receive(receive_context& ctx) final;
  void post_stop(actor_context& ctx) final;

  // For the grain layer (turn owner only, or before start).
  const grain_kind* kind() const noexcept { return kind_; }

 protected:
  virtual grain* build_instance() = 0;
  virtual void drop_instance() noexcept = 0;
  virtual grain* instance() noexcept = 0;

 private:
  friend struct grain_host_access;
  // Builds the instance and runs on_activate (its attempts, within the activation timeout);
  // on success arms the idle timer. Publishes grain_activated or grain_activation_failed.
  error activate(actor_system& sys, actor_cell* cell);
  // Runs on_deactivate for the current instance (once) and drops it; publishes
  // grain_deactivated. for_stop: a failure is also named in actor_system::stop's error.
  error deactivate(actor_system& sys, actor_cell* cell, bool for_stop);

  const grain_kind* kind_;
  // The activation's settled options. Written by the layer before start, then read-only.
  std::shared_ptr<const grain_settings> settings_;
  // During start only: where pre_start leaves on_activate's own error for the activating caller.
  error* activation_error_ = nullptr;
  // Turn owner: set when a reactivation failed; every waiting message gets this error.
  error failing_;
  // Messages sent through the grain API and not yet received, for the mailbox capacity.
  // Writers: senders (+1, acq_rel, undone when over capacity) and the turn (-1 per user
  // message; a message sent to the cell's pid directly was never counted, so the value can dip
  // below zero and then allows that many extra). A send is refused when its +1 finds the
  // capacity taken.
  std::atomic<std::int64_t> queued_{0};
  // Turn owner: user messages handled, and the count when the idle timer was armed.
  std::uint32_t handled_ = 0;
  std::uint32_t handled_at_arm_ = 0;
  bool deactivated_ = false;  // turn owner: on_deactivate ran for the current instance
};

template <class T>
class grain_host final : public grain_host_base {
 public:
  using grain_host_base::grain_host_base;

 protected:
  grain* build_instance() override {
    g_.emplace();
    return &*g_;
  }
  void drop_instance() noexcept override { g_.reset(); }
  grain* instance() noexcept override { return g_ ? &*g_ : nullptr; }

 private:
  std::optional<T> g_;
};

using grain_cell_factory = actor_cell* (*)(system_core* core, std::string_view identity,
                                           const grain_kind* kind);

template <class T>
actor_cell* make_grain_cell(system_core* core, std::string_view identity, const grain_kind* kind) {
  return new actor_cell_for<grain_host<T>, const grain_kind*>(core, nullptr, identity,
                                                              spawn_options{}, kind);
}

// Registers (or finds) kind `name`; with defaults, they become the kind's declared options.
result<const grain_kind*> register_kind(actor_system& sys, std::string_view name,
                                        grain_cell_factory factory, const grain_options* defaults);
result<grain_identity> resolve_grain(actor_system& sys, const grain_kind* kind,
                                     std::string_view name, const grain_options& per_call);
result<message> ask_grain_message(actor_system& sys, const grain_identity& id, message msg,
                                  std::chrono::nanoseconds timeout);
error tell_grain_message(actor_system& sys, const grain_identity& id, message msg,
                         const grain_tell_options& opts, actor_cell* sender);

template <class T>
constexpr std::string_view grain_kind_name() noexcept {
  static_assert(std::is_base_of_v<grain, T>, "a grain kind must derive from akt::grain");
  static_assert(std::is_default_constructible_v<T>,
                "grains are default-constructed by the framework; initialise in on_activate");
  return type_name<T>();
}

}  // namespace detail

// Registers kind T (named after its type) on sys, so that a bare send can activate it; with
// options, declares them as the kind's defaults (replacing earlier ones).
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
result<grain_identity> grain_of(actor_system& sys, std::string_view name,
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

// ---- inspection ----
std::vector<grain_identity> active_grains(actor_system& sys);
// Activations started on this system since it was created (reactivations count again).
std::uint64_t grain_activation_count(actor_system& sys);
grain_stats stats_of(actor_system& sys, const grain_identity& id);

}  // namespace akt
