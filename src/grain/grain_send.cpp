// The send paths of the grain layer: one-way and acknowledged tells, asks, requests from grains
// and actors, pipes to grains, and a grain_ref's direct path (see grain_layer.hpp).

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "actor/blocking_ask.hpp"
#include "actor/cell_extras.hpp"
#include "actor/delivery_fields.hpp"
#include "actor/name_registry.hpp"
#include "actor/reply_slot.hpp"
#include "akt/actor/detail/pipe.hpp"
#include "akt/core/thread.hpp"
#include "grain/grain_layer.hpp"

namespace akt {
namespace detail {

namespace {

// Takes a place in a bounded mailbox of capacity cap whose counter is q (no-op when unbounded).
error reserve(std::atomic<std::int64_t>& q, std::uint32_t cap, const grain_identity& id) {
  if (cap == 0) return {};
  if (q.fetch_add(1, std::memory_order_acq_rel) >= static_cast<std::int64_t>(cap)) {
    q.fetch_sub(1, std::memory_order_acq_rel);
    return error(errc::mailbox_full,
                 id.str() + " has " + std::to_string(cap) + " messages waiting");
  }
  return {};
}

// Takes a place in the activation's bounded mailbox (no-op when unbounded).
error reserve(actor_cell* cell, const grain_identity& id) {
  grain_host_base& host = grain_host_access::of(cell);
  return reserve(grain_host_access::queued(host), grain_host_access::mailbox_capacity(host), id);
}

// The activation for id (activating it if needed), with room reserved in a bounded mailbox.
// The reservation is taken inside the visit, under the directory's shard lock: only there is
// the host known to be alive. A pid alone keeps the cell, not the host, which an idle
// deactivation may destroy as soon as the lock is released. For requests (non-blocking), whose
// delivery comes later: if an idle deactivation ends the activation before that delivery, the
// request is refused (the continuation gets the error, the message is a dead letter). One-way
// tells and blocking asks deliver under the lock instead and never meet that refusal.
result<pid> reach(grain_layer& layer, const grain_identity& id) {
  auto kind = layer.find_kind(id.kind);
  if (!kind) return kind.error();
  struct take_reserved final : grain_directory::visitor {
    const grain_identity& id;
    pid p;
    explicit take_reserved(const grain_identity& i) : id(i) {}
    error visit(actor_cell* cell) override {
      if (error e = reserve(cell, id)) return e;
      p = detail::share_pid(cell);
      return {};
    }
  } v(id);
  if (error e = layer.visit(*kind, id.name, nullptr, v)) return e;
  return std::move(v.p);
}

// Where a request to id goes: the owner's target when another node owns it (nothing reserved
// or activated here), else reach's local activation.
result<pid> reach_routed(system_core* core, const grain_identity& id) {
  grain_place at = route_grain(core, id);
  if (at.at == grain_place::where::remote) return std::move(at.target);
  return reach(layer_of(core), id);
}

// An envelope to `to` holding msg (owned until it is delivered).
envelope_ptr envelope_for(actor_cell* to, message msg) { return make_envelope(to, std::move(msg)); }
envelope_ptr envelope_for(const pid& to, message msg) {
  return make_envelope(detail::cell_of(to), std::move(msg));
}

// Publishes a message refused before its enqueue as a dead letter naming the grain: always for
// a full mailbox, and for every refusal with publish_all (senders that cannot report an error,
// like timers).
void publish_refused(system_core* core, message& msg, actor_cell* sender, const grain_identity& id,
                     const error& e, bool publish_all = false) {
  if (!publish_all && e.code() != errc::mailbox_full) return;
  core->dead_letter(std::move(msg), detail::share_pid(sender), pid(),
                    error(e.code(), id.str() + ": " + e.message()));
}

// The sends to a grain that another node owns (route_grain answered remote): through the
// placement's target pid, with the actor layer's machinery, so the remote module carries them
// as it carries a remote actor's. Nothing is activated here.
bool owned_elsewhere(const grain_place& at) noexcept { return at.at == grain_place::where::remote; }

// A one-way tell through `to`; a refusal is dead-lettered by the delivery.
error tell_through(const pid& to, message msg, actor_cell* sender) {
  actor_cell* cell = detail::cell_of(to);
  auto* env = static_cast<receive_context*>(envelope_for(cell, std::move(msg)).release());
  if (sender != nullptr) {
    sender->add_ref();
    context_access::sender(*env) = sender;
  }
  return cell->deliver(env);
}

// A blocking ask (or, with flag_grain_ack and no travelling deadline, an acknowledged tell)
// through `to`; a refusal completes it with its reason, dead-lettered by the delivery.
result<message> ask_through(const pid& to, message msg, actor_cell* sender,
                            std::chrono::nanoseconds timeout, std::uint32_t extra_flags,
                            bool deadline_travels) {
  actor_cell* cell = detail::cell_of(to);
  envelope_ptr env = envelope_for(cell, std::move(msg));
  if (sender != nullptr) {
    sender->add_ref();
    context_access::sender(*static_cast<receive_context*>(env.get())) = sender;
  }
  return ask(cell, std::move(env), timeout, extra_flags, deadline_travels);
}

// Whether a send that may activate id must leave this thread first: the placement has no owner
// for it (its activation waits behind the gate, on the store), and this is a dispatcher worker,
// which never waits on anything remote. Such sends go to deliver_to_grain, whose pending queue
// activates on the runtime's blocking pool and delivers in arrival order.
bool activates_elsewhere(const grain_place& at) noexcept {
  return at.at == grain_place::where::claim && on_worker_thread();
}

// An envelope's message, sender, answer route and deadline as a delivery (envelope_sink): the
// one place an envelope built by the actor machinery becomes a grain_delivery.
grain_delivery delivery_of(receive_context* env) {
  grain_delivery d;
  d.msg = std::move(env->message());
  d.sender = std::exchange(context_access::sender(*env), nullptr);
  if (!context_access::reply_closed(*env)) {
    d.route = std::exchange(context_access::reply(*env), nullptr);
    context_access::reply_closed(*env) = true;
  }
  const std::uint32_t flags = context_access::flags(*env);
  if ((flags & envelope::flag_has_deadline) != 0) d.deadline_ns = context_access::deadline(*env);
  d.flags = flags & envelope::flag_grain_ack;
  if ((flags & envelope::flag_traced) != 0) {
    d.trace.reset(std::exchange(context_access::trace(*env), nullptr));
    context_access::flags(*env) &= ~envelope::flag_traced;
  }
  return d;
}

// A deferred send reaches its cell later, from the delivery queue's thread, which is in no
// trace: it takes the sending handler's trace along from here (null when untraced).
trace_state_ptr deferred_trace(system_core* core) noexcept {
  const span_context c = capture_trace();
  if (!c.valid() || core->tracer() == nullptr) return nullptr;
  return trace_state_ptr(new (std::nothrow) trace_state{c, 0, 0});
}

// The sink of a send deferred to the runtime's threads: id's delivery queue.
struct deferred_target {
  system_core* core;
  const grain_identity* id;
};
void deliver_deferred(void* ctx, receive_context* env) noexcept {
  auto* t = static_cast<deferred_target*>(ctx);
  try {
    grain_delivery d = delivery_of(env);
    // On the sending thread (a blocking ask's, or a request's sink): its trace goes along.
    if (!d.trace) d.trace = deferred_trace(t->core);
    recycle(env);
    deliver_to_grain(t->core, *t->id, std::move(d));
  } catch (...) {  // an allocation: refused like a closed mailbox, with its dead letter
    t->core->dead_letter(*env, error(errc::system_shutting_down, "the delivery could not queue"));
    recycle(env);
  }
}

// A blocking ask from a grain's turn (a bounded wait on this worker) whose activation must
// happen elsewhere: the envelope goes to the delivery queue, and this thread only waits.
result<message> ask_deferred(system_core* core, const grain_identity& id, message msg,
                             actor_cell* self, std::chrono::nanoseconds timeout) {
  if (error e = ask_refusal(timeout)) return e;
  envelope_ptr owned = envelope_for(self, std::move(msg));  // self: only for the pool's shard
  auto* env = static_cast<receive_context*>(owned.get());
  self->add_ref();
  context_access::sender(*env) = self;
  pending_ask p;
  // begin_ask reads from `to` only the system and whether it is remote; the envelope goes to
  // the delivery queue, not to that cell.
  begin_ask(self, *env, timeout, 0, true, p);
  deferred_target t{core, &id};
  deliver_deferred(&t, static_cast<receive_context*>(owned.release()));
  return finish_ask(p);
}

// A one-way tell deferred to the runtime's threads (activates_elsewhere).
error tell_deferred(system_core* core, const grain_identity& id, message msg, actor_cell* sender) {
  grain_delivery d;
  d.msg = std::move(msg);
  if (sender != nullptr) {
    sender->add_ref();
    d.sender = sender;
  }
  d.trace = deferred_trace(core);
  deliver_to_grain(core, id, std::move(d));
  return {};
}

// A blocking ask (or acknowledged tell, with flag_grain_ack and no travelling deadline) to the
// identity's activation. Delivered while the directory holds the activation, like a one-way
// tell: delivered after the lookup instead, an idle deactivation could end the activation in
// between (its mailbox still empty) and the ask would be refused by a closed cell although
// the grain, being virtual, is always reachable. Only the wait is outside the lock. sender
// (may be null) is named in the dead letter of a refusal.
// msg is taken when it reached an activation (or its dead letter); a refusal before that (the
// activation was refused, say) leaves it with the caller, who may route it once more.
result<message> ask_activation(system_core* core, const grain_identity& id, message& msg,
                               actor_cell* sender, std::chrono::nanoseconds timeout,
                               std::uint32_t extra_flags, bool deadline_travels) {
  if (error e = ask_refusal(timeout)) return e;
  grain_layer& layer = layer_of(core);
  auto kind = layer.find_kind(id.kind);
  struct enqueue_ask final : grain_directory::visitor {
    const grain_identity& id;
    message& msg;
    std::chrono::nanoseconds timeout;
    std::uint32_t flags;
    bool deadline_travels;
    pending_ask ask;
    receive_context* refused = nullptr;  // to deliver (and be refused) outside the lock
    pid refused_by;
    enqueue_ask(const grain_identity& i, message& m, std::chrono::nanoseconds t, std::uint32_t f,
                bool d)
        : id(i), msg(m), timeout(t), flags(f), deadline_travels(d) {}
    error visit(actor_cell* cell) override {
      if (error e = reserve(cell, id)) return e;
      envelope_ptr owned = envelope_for(cell, std::move(msg));
      auto* env = static_cast<receive_context*>(owned.get());
      begin_ask(cell, *env, timeout, flags, deadline_travels, ask);
      owned.release();
      if (cell->deliver_if_open(env)) return {};
      refused = env;
      refused_by = detail::share_pid(cell);
      return {};
    }
  } v(id, msg, timeout, extra_flags, deadline_travels);
  error e = kind ? layer.visit(*kind, id.name, nullptr, v) : kind.error();
  if (e) {
    publish_refused(core, msg, sender, id, e);
    return e;
  }
  // A closed cell refuses it with its dead letter and completes the slot with the reason.
  if (v.refused != nullptr) (void)detail::cell_of(v.refused_by)->deliver(v.refused);
  return finish_ask(v.ask);
}

// A one-way tell: the message goes into the mailbox while the directory holds the activation
// (under its shard lock), so a send costs no reference count traffic on the grain's cell; only
// a refusal (a closing cell) is delivered outside the lock, where its dead letter is published.
// publish_all: see publish_refused. Without may_activate (a runtime thread that must not run
// on_activate: the timer thread) a delivery that needs an activation moves to the blocking pool.
// With a route (a grain_ref's), the activation it reached is remembered when it is open for
// direct sends.
// msg is taken when it reached an activation or a dead letter; a refusal before that leaves it
// with the caller (see ask_activation).
error tell_one_way(system_core* core, const grain_identity& id, message& msg, actor_cell* sender,
                   bool publish_all = false, bool may_activate = true,
                   grain_route* route = nullptr) {
  grain_layer& layer = layer_of(core);
  auto kind = layer.find_kind(id.kind);
  struct enqueue final : grain_directory::visitor {
    const grain_identity& id;
    message& msg;
    actor_cell* sender;
    grain_route* route;
    receive_context* refused = nullptr;  // to deliver (and be refused) outside the lock
    pid refused_by;
    enqueue(const grain_identity& i, message& m, actor_cell* s, grain_route* r)
        : id(i), msg(m), sender(s), route(r) {}
    error visit(actor_cell* cell) override {
      if (error e = reserve(cell, id)) return e;
      auto* env = static_cast<receive_context*>(envelope_for(cell, std::move(msg)).release());
      if (sender != nullptr) {
        sender->add_ref();
        context_access::sender(*env) = sender;
      }
      if (route != nullptr) remember(cell);
      if (cell->deliver_if_open(env)) return {};
      refused = env;
      refused_by = detail::share_pid(cell);
      return {};
    }
    // Under the directory's lock: the host is alive.
    void remember(actor_cell* cell) {
      std::atomic<std::uint32_t>& direct = cell->grain_direct();
      const std::uint32_t d = direct.load(std::memory_order_acquire);
      if ((d & k_direct_closed) != 0) {
        route->cell = pid();  // dormant or ending: ask the directory next time too
        return;
      }
      if (detail::cell_of(route->cell) != cell) route->cell = detail::share_pid(cell);
      route->direct = &direct;
      grain_host_base& host = grain_host_access::of(cell);
      route->queued = &grain_host_access::queued(host);
      route->capacity = grain_host_access::mailbox_capacity(host);
      route->generation = direct_generation(d);
    }
  } v(id, msg, sender, route);
  error e = kind ? layer.visit(*kind, id.name, nullptr, v, may_activate) : kind.error();
  if (e == k_not_active) {  // without may_activate only; msg is untouched
    auto task = [core, id, publish_all, m = std::make_shared<message>(std::move(msg))] {
      (void)tell_one_way(core, id, *m, nullptr, publish_all);
    };
    if (core->blocking_.submit(std::move(task))) return {};
    e = errc::system_shutting_down;
  }
  if (e) {
    publish_refused(core, msg, sender, id, e, publish_all);
    return e;
  }
  if (v.refused != nullptr) return detail::cell_of(v.refused_by)->deliver(v.refused);
  return {};
}

// The fast path of a grain_ref's one-way tell: straight into route's activation while it is open
// for direct sends under route's generation (no directory lookup, no lock). False when the route
// is empty or stale (nothing was sent; msg is untouched); true when sent or refused (`out`).
bool direct_send(const grain_identity& id, message& msg, grain_route& route, actor_cell* sender,
                 error& out) {
  actor_cell* const cell = detail::cell_of(route.cell);
  if (cell == nullptr) return false;
  // Not through the host: it may be gone (the cell stopped); the word is the cell's.
  if (!enter_direct(route)) {
    route.cell = pid();
    return false;
  }
  receive_context* refused = nullptr;
  out = reserve(*route.queued, route.capacity, id);
  if (!out) {
    auto* env = static_cast<receive_context*>(envelope_for(cell, std::move(msg)).release());
    if (sender != nullptr) {
      sender->add_ref();
      context_access::sender(*env) = sender;
    }
    if (!cell->deliver_if_open(env)) refused = env;
  }
  leave_direct(route);
  if (out) {
    layer_of(cell->system()).note_refusal(id.kind, out.code());
    publish_refused(cell->system(), msg, sender, id, out);
  } else if (refused != nullptr) {
    out = cell->deliver(refused);  // a closed cell: refused, with its dead letter
  }
  return true;
}
}  // namespace

// Delivers a timer's or a pipe's message to a grain: every refusal is published, and
// on_activate never runs on the timer thread.
error deliver_from_runtime(system_core* core, const grain_identity& id, message msg) {
  grain_place at = route_grain(core, id);
  if (owned_elsewhere(at)) return tell_through(at.target, std::move(msg), nullptr);
  return tell_one_way(core, id, msg, nullptr, true, false);
}

result<message> ask_owner(const pid& to, message msg, std::chrono::nanoseconds timeout) {
  return ask_through(to, std::move(msg), nullptr, timeout, 0, true);
}

grain_place route_grain(system_core* core, const grain_identity& id) {
  grain_placement* p = layer_of(core).placement();
  if (p == nullptr) return {};
  grain_place at = p->place(id);
  // A placement must name a target for remote (asserted). Should one not, the identity is
  // treated as unowned rather than local: it then passes the gate, never activating here
  // unchecked.
  AKT_ASSERT(!owned_elsewhere(at) || at.target);
  if (owned_elsewhere(at) && !at.target) at.at = grain_place::where::claim;
  return at;
}

bool install_grain_placement(system_core* core, std::unique_ptr<grain_placement> p) {
  return layer_of(core).set_placement(std::move(p));
}

bool install_grain_gate(system_core* core, std::unique_ptr<grain_activation_gate> g) {
  return layer_of(core).set_gate(std::move(g));
}

std::shared_ptr<const grain_settings> grain_kind_settings(system_core* core,
                                                          std::string_view kind) {
  if (core->grains_.load(std::memory_order_acquire) == nullptr) return nullptr;
  grain_layer& layer = layer_of(core);
  auto k = layer.find_kind(kind);
  if (!k) return nullptr;
  return layer.settings_for(*k, nullptr);
}

std::size_t active_grain_count(system_core* core) {
  // Only a system that has grains has a layer: do not make one to count none.
  if (core->grains_.load(std::memory_order_acquire) == nullptr) return 0;
  return layer_of(core).active_count();
}

void nudge_grains(system_core* core) { layer_of(core).nudge_all(); }

bool install_grain_fence(system_core* core, const grain_fence* f) {
  return layer_of(core).set_fence(f);
}

namespace {
// Set by drain_pending around the delivery of a claim-routed message (routed_claim_token).
thread_local std::int64_t t_routed_token = 0;
}  // namespace

std::int64_t routed_claim_token() noexcept { return t_routed_token; }

namespace {
// Answers and dead-letters a delivery that did not reach an activation.
void refuse_delivery(system_core* core, const grain_identity& id, grain_delivery& d, error e) {
  e = error_access::mark_refused(error(e.code(), id.str() + ": " + e.message()));
  if (reply_route* r = std::exchange(d.route, nullptr)) {
    result<message> v(e);
    (void)r->complete(v);
  }
  core->dead_letter(std::move(d.msg), detail::adopt_pid(std::exchange(d.sender, nullptr)), pid(),
                    e);
}

error not_this_claim(std::int64_t token) {
  return error(errc::not_owner,
               "this node does not hold the claim " + std::to_string(token) + " any more");
}

struct enqueue_delivery final : grain_directory::visitor {
  const grain_identity& id;
  grain_delivery& d;
  receive_context* refused = nullptr;  // to deliver (and be refused) outside the lock
  pid refused_by;
  enqueue_delivery(const grain_identity& i, grain_delivery& del) : id(i), d(del) {}
  error visit(actor_cell* cell) override {
    // Routed by a claim this activation does not hold (released, claimed again, another
    // node's): not this activation's message. The sender reads the owner again.
    if (d.claim_token != 0 && grain_host_access::of(cell).fencing_token() != d.claim_token)
      return not_this_claim(d.claim_token);
    if (error e = reserve(cell, id)) return e;
    auto* env = static_cast<receive_context*>(envelope_for(cell, std::move(d.msg)).release());
    fill_envelope(*env, d);
    if (cell->deliver_if_open(env)) return {};
    refused = env;
    refused_by = detail::share_pid(cell);
    return {};
  }
};

// One attempt; k_not_active (d untouched) when the identity needs an activation and
// may_activate is false.
error try_deliver(system_core* core, const grain_identity& id, grain_delivery& d,
                  bool may_activate) {
  grain_layer& layer = layer_of(core);
  auto kind = layer.find_kind(id.kind);
  if (!kind) return kind.error();
  enqueue_delivery v(id, d);
  // A message routed by a claim goes only to the activation holding it. One is activated for
  // it only to adopt a claim another node made for this one (the gate checks the token it
  // finds in routed_claim_token); any other token is refused (not_this_claim, above).
  const std::int64_t before = std::exchange(t_routed_token, d.claim_token);
  error e = layer.visit(*kind, id.name, nullptr, v, may_activate, true);
  t_routed_token = before;
  // A closed cell refuses it with its own dead letter, answering the route.
  if (v.refused != nullptr) (void)detail::cell_of(v.refused_by)->deliver(v.refused);
  return e;
}
}  // namespace

namespace {
// A deferred delivery whose activation the gate refused because another node won the claim
// (marked not_owner, the message untouched): it goes to that owner, as if it had been routed
// there at first. False when it stays refused: routed by a claim already (its sender re-reads),
// encoded (it came from another node), or the owner is not another node.
bool forward_after_lost_claim(system_core* core, const grain_identity& id, grain_delivery& d,
                              const error& err) {
  if (err.code() != errc::not_owner || !error_access::refused(err) || d.claim_token != 0 ||
      d.msg.empty() || (d.flags & envelope::flag_encoded) != 0) {
    return false;
  }
  grain_place at = route_grain(core, id);
  if (!owned_elsewhere(at)) return false;
  actor_cell* cell = detail::cell_of(at.target);
  auto* env = static_cast<receive_context*>(envelope_for(cell, std::move(d.msg)).release());
  fill_envelope(*env, d);
  (void)cell->deliver(env);  // a refusal answers the route and dead-letters it there
  return true;
}

// Delivers what waits for id's activation, in order, activating it on the first (this thread
// is a blocking-pool thread): the entry stays until its queue is empty, so a delivery that
// arrives meanwhile joins the queue instead of overtaking it.
void drain_pending(system_core* core, const grain_identity& id) {
  grain_layer& layer = layer_of(core);
  const std::string key = id.str();
  for (;;) {
    // Stays in the queue (and owned there) while it is sent.
    grain_delivery* d = layer.front_pending(key);
    if (d == nullptr) return;
    if (error err = try_deliver(core, id, *d, true)) {
      if (!forward_after_lost_claim(core, id, *d, err)) refuse_delivery(core, id, *d, err);
    }
    layer.pop_pending(key);
  }
}
}  // namespace

void deliver_to_grain(system_core* core, const grain_identity& id, grain_delivery d) {
  grain_layer& layer = layer_of(core);
  // Deliveries already wait for this identity's activation: this one goes behind them.
  if (layer.any_pending() && layer.join_pending(id.str(), d)) return;
  error e = try_deliver(core, id, d, false);
  if (e == k_not_active) {
    // Activate on the blocking pool (on_activate is user code, this is an I/O thread), and
    // deliver this one and those that follow it there, in order.
    if (!layer.open_pending(id.str(), d)) return;  // joined a queue that is being drained
    if (core->blocking_.submit([core, id] { drain_pending(core, id); })) return;
    // The pool is stopping: refuse what waits.
    std::deque<std::unique_ptr<grain_delivery>> refused = layer.take_pending(id.str());
    for (auto& r : refused) refuse_delivery(core, id, *r, errc::system_shutting_down);
    return;
  }
  if (e) refuse_delivery(core, id, d, e);
}

namespace {
// Sending once more (goakt-grains.md "Activation guarantee", grain_seams.hpp: resend_place).
// A call reaches a grain with at most two sends: a message that was refused before any handler
// ran (or never left this node) may go once more, to where the placement says after it
// released the claim the first send was routed by. A call also re-routes, without counting it
// as a send, when this node's claim lost to another node's (the gate refused the activation
// marked not_owner: the message never left). Only off the dispatcher workers: the placement
// may wait on the store.
constexpr int k_max_sends = 2;
constexpr int k_max_routes = 3;  // two sends and one lost claim

struct resend_state {
  system_core* core;
  const grain_identity& id;
  grain_placement* placement;  // null: no resend (no placement, or a worker)
  std::chrono::steady_clock::time_point deadline;
  int sends = 0;
  int routes = 0;

  // timeout: the call's (an ask's); zero: none (a one-way tell), which reads no clock.
  resend_state(system_core* c, const grain_identity& i, std::chrono::nanoseconds timeout)
      : core(c),
        id(i),
        placement(on_worker_thread() ? nullptr : layer_of(c).placement()),
        deadline(placement == nullptr || timeout == std::chrono::nanoseconds::zero()
                     ? std::chrono::steady_clock::time_point::max()
                     : std::chrono::steady_clock::now() + timeout) {}

  std::chrono::nanoseconds left() const {
    if (deadline == std::chrono::steady_clock::time_point::max()) return std::chrono::hours(1);
    return std::max(std::chrono::nanoseconds(1), deadline - std::chrono::steady_clock::now());
  }
  // Keeps msg before a send to another node, when a second send may follow.
  kept_message keep(const message& msg) const {
    if (placement == nullptr || sends + 1 >= k_max_sends) return {};
    return placement->keep(msg);
  }
  // After a failed attempt to `at` (sent: the message left this node or reached an
  // activation): where the message goes next, or nothing (the failure is the call's answer).
  std::optional<grain_place> next(const grain_place& at, const error& failure, bool sent) {
    if (placement == nullptr) return std::nullopt;
    if (sent) ++sends;
    if (++routes >= k_max_routes || sends >= k_max_sends) return std::nullopt;
    if (deadline != std::chrono::steady_clock::time_point::max() &&
        std::chrono::steady_clock::now() >= deadline)
      return std::nullopt;
    return placement->resend_place(id, at, failure);
  }
};

// Whether a local attempt's failure left the message here without it reaching a handler or a
// mailbox: only then may it be routed once more.
bool untouched(const message& msg) noexcept { return !msg.empty(); }

// An ask (or, with flag_grain_ack and no travelling deadline, an acknowledged tell) with its
// resend.
result<message> ask_routed(system_core* core, const grain_identity& id, message msg,
                           actor_cell* sender, std::chrono::nanoseconds timeout,
                           std::uint32_t extra_flags, bool deadline_travels) {
  resend_state rs(core, id, timeout);
  grain_place at = route_grain(core, id);
  std::chrono::nanoseconds wait = timeout;
  for (;;) {
    const bool remote = owned_elsewhere(at);
    kept_message kept = remote ? rs.keep(msg) : kept_message();
    result<message> r =
        remote ? ask_through(at.target, std::move(msg), sender, wait, extra_flags, deadline_travels)
               : ask_activation(core, id, msg, sender, wait, extra_flags, deadline_travels);
    if (r) return r;
    if (remote ? !kept : !untouched(msg)) return r;
    const bool sent = remote;
    std::optional<grain_place> next = rs.next(at, r.error(), sent);
    if (!next) return r;
    if (kept) {
      result<message> again = kept.take();
      if (!again) return r;
      msg = std::move(*again);
    }
    at = std::move(*next);
    wait = rs.left();
  }
}

// A one-way tell with its resend: the failures a one-way call sees are those before the
// enqueue (a refused activation, a lost claim, a peer that could not be reached).
error tell_routed(system_core* core, const grain_identity& id, message msg, actor_cell* sender,
                  grain_place at, grain_route* route) {
  resend_state rs(core, id, std::chrono::nanoseconds::zero());
  for (;;) {
    kept_message kept;
    error e;
    bool sent = true;
    if (owned_elsewhere(at)) {
      kept = rs.keep(msg);
      e = tell_through(at.target, std::move(msg), sender);
      if (!e || !kept) return e;
    } else if (activates_elsewhere(at)) {
      return tell_deferred(core, id, std::move(msg), sender);
    } else {
      e = tell_one_way(core, id, msg, sender, false, true, route);
      if (!e || !untouched(msg)) return e;
      sent = false;
    }
    std::optional<grain_place> next = rs.next(at, e, sent);
    if (!next) return e;
    if (kept) {
      result<message> again = kept.take();
      if (!again) return e;
      msg = std::move(*again);
    }
    at = std::move(*next);
  }
}
}  // namespace

result<message> ask_grain_message(actor_system& sys, const grain_identity& id, message msg,
                                  std::chrono::nanoseconds timeout) {
  return ask_routed(detail::core_of(sys), id, std::move(msg), nullptr, timeout, 0, true);
}

error tell_grain_message(actor_system& sys, const grain_identity& id, message msg,
                         const grain_tell_options& opts, actor_cell* sender) {
  system_core* core = detail::core_of(sys);
  if (opts.one_way)
    return tell_routed(core, id, std::move(msg), sender, route_grain(core, id), nullptr);
  if (opts.timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  if (on_worker_thread()) return errc::blocking_on_worker;
  result<message> r =
      ask_routed(core, id, std::move(msg), sender, opts.timeout, envelope::flag_grain_ack, false);
  return r ? error() : r.error();
}

result<message> ask_from_grain(receive_context& env, const grain_identity* grain, const pid* actor,
                               message msg, std::chrono::nanoseconds timeout) {
  actor_cell* self = context_access::receiver(env);
  system_core* core = self->system();
  if (timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  if (core->dispatcher_.manual()) {
    return error(errc::blocking_on_worker,
                 "a blocking ask from a grain in the deterministic mode (use request_grain)");
  }
  if (grain != nullptr && grain->str() == self->path())
    return error(errc::invalid_argument, "a grain cannot ask itself (use a method call)");
  if (grain == nullptr) {
    if (actor == nullptr || !*actor) return errc::empty_pid;
    if (detail::cell_of(*actor) == self)
      return error(errc::invalid_argument, "a grain cannot ask itself (use a method call)");
  }
  // The wait is bounded by timeout: allowed on this worker for this one call.
  const grain_place at = grain != nullptr ? route_grain(core, *grain) : grain_place{};
  const bool before = std::exchange(bounded_wait_allowed, true);
  result<message> r =
      grain == nullptr ? ask(detail::cell_of(*actor), envelope_for(*actor, std::move(msg)), timeout)
      : owned_elsewhere(at)     ? ask_through(at.target, std::move(msg), self, timeout, 0, true)
      : activates_elsewhere(at) ? ask_deferred(core, *grain, std::move(msg), self, timeout)
                                : ask_activation(core, *grain, msg, self, timeout, 0, true);
  bounded_wait_allowed = before;
  return r;
}

error pipe_from_grain(receive_context& env, const grain_identity* grain, const pid* actor,
                      piped_task task, std::chrono::nanoseconds timeout) {
  actor_cell* self = context_access::receiver(env);
  system_core* core = self->system();
  if (grain == nullptr) {
    if (actor == nullptr || !*actor) return errc::empty_pid;
    return pipe_through(core, self, *actor, nullptr, std::move(task), timeout);
  }
  if (error e = validate_actor_name(grain->name)) return e;
  pipe_sink sink = [core, id = *grain](message m) {
    (void)deliver_from_runtime(core, id, std::move(m));
  };
  return pipe_through(core, self, pid(), std::move(sink), std::move(task), timeout);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// grain_context: requests and deferred answers

request_handle grain_context::request_message(const grain_identity* grain, const pid* actor,
                                              akt::message msg, detail::grain_continuation then,
                                              const grain_request_options& options, error refused) {
  using namespace detail;
  grain_host_base* host = &host_;
  auto continuation = [host, then = std::move(then)](receive_context& rc,
                                                     result<akt::message> reply) mutable {
    // The activation that made the request is gone (a shutdown deactivated it): nobody to
    // continue; the reply is dropped with it.
    if (!grain_host_access::serving(*host)) return;
    grain_context g(rc, *host, false);
    try {
      then(g, std::move(reply));
    } catch (...) {
      actor_cell* c = context_access::receiver(rc);
      c->system()->log_actor(log_level::warning, c->path(),
                             caught("a request's continuation").message());
    }
    g.finish();
  };
  // A refusal made here reaches the continuation too (on a later turn), like every outcome.
  auto refuse = [&](error why) {
    return context_access::refuse_request(env_, std::move(continuation), std::move(why));
  };
  if (refused) return refuse(std::move(refused));
  const grain_reentrancy policy = host_.reentrancy();
  if (policy.mode == reentrancy_mode::off) {
    return refuse(error(errc::reentrancy_disabled,
                        "enable reentrancy on the grain kind, or with ctx.enable_reentrancy"));
  }
  const reentrancy_mode mode = options.mode.value_or(policy.mode);
  if (mode == reentrancy_mode::off) {
    return refuse(error(errc::reentrancy_disabled, "a request with its mode set to off"));
  }
  actor_cell* self = context_access::receiver(env_);
  if (policy.max_in_flight != 0) {
    const cell_extras* x = self->extras_if_any();
    if (x != nullptr && x->requests.size() >= policy.max_in_flight) {
      return refuse(error(errc::reentrancy_in_flight_limit,
                          std::to_string(policy.max_in_flight) + " requests already in flight"));
    }
  }
  request_options ro;
  ro.stash_others = mode == reentrancy_mode::stash_non_reentrant;
  if (grain != nullptr && activates_elsewhere(route_grain(self->system(), *grain))) {
    deferred_target t{self->system(), grain};
    return context_access::request_into(env_, envelope_for(self, std::move(msg)), options.timeout,
                                        detail::continuation(std::move(continuation)), ro,
                                        envelope_sink{&deliver_deferred, &t});
  }
  pid to;
  if (grain != nullptr) {
    auto p = reach_routed(self->system(), *grain);
    if (!p) {
      publish_refused(self->system(), msg, self, *grain, p.error());
      return refuse(p.error());
    }
    to = std::move(*p);
  } else {
    if (actor == nullptr || !*actor) return refuse(errc::empty_pid);
    to = *actor;
  }
  return env_.request<akt::message>(to, std::move(msg), options.timeout, std::move(continuation),
                                    ro);
}

void grain_context::enable_reentrancy(grain_reentrancy r) {
  if (r.mode == reentrancy_mode::off) r.mode = reentrancy_mode::allow_all;
  host_.set_reentrancy(r);
}

void grain_context::disable_reentrancy() { host_.set_reentrancy({reentrancy_mode::off, 0}); }

reply_handle grain_context::defer_reply() {
  reply_handle r = env_.defer_reply();
  r.ack_only_ = acknowledged_;
  if (acknowledged_) r.deadline_ns_ = 0;  // a tell has no deadline (see deadline())
  r.grain_ = std::string(detail::context_access::receiver(env_)->path());  // kind/name
  answered_ = true;  // the answer now belongs to the handle
  return r;
}

namespace detail {

error check_grain_name(std::string_view name) { return validate_actor_name(name); }

error tell_grain_via(actor_system& sys, const grain_identity& id, message msg, grain_route& route,
                     actor_cell* sender) {
  error out;
  if (direct_send(id, msg, route, sender, out)) return out;
  // No direct route (only a local activation makes one): maybe not this node's.
  system_core* core = detail::core_of(sys);
  return tell_routed(core, id, std::move(msg), sender, route_grain(core, id), &route);
}

request_handle request_grain_from_actor(receive_context& ctx, const grain_identity& id, message msg,
                                        std::chrono::nanoseconds timeout, continuation then,
                                        request_options options) {
  actor_cell* self = context_access::receiver(ctx);
  if (activates_elsewhere(route_grain(self->system(), id))) {
    deferred_target t{self->system(), &id};
    return context_access::request_into(ctx, envelope_for(self, std::move(msg)), timeout,
                                        std::move(then), options,
                                        envelope_sink{&deliver_deferred, &t});
  }
  auto p = reach_routed(self->system(), id);
  if (!p) {
    publish_refused(self->system(), msg, self, id, p.error());
    return context_access::refuse_request(ctx, std::move(then), p.error());
  }
  return ctx.request<message>(*p, std::move(msg), timeout, std::move(then), options);
}

}  // namespace detail

}  // namespace akt
