// The host actor that runs a grain inside an actor cell, and grain_context's answers (see
// grain_layer.hpp).

#include <chrono>
#include <string>
#include <utility>

#include "grain/grain_layer.hpp"

namespace akt {
namespace detail {

namespace {

void arm_idle_timer(actor_cell* cell, std::chrono::nanoseconds after) {
  if (after <= std::chrono::nanoseconds::zero()) return;
  pid self = detail::share_pid(cell);
  (void)cell->system()->timers_.schedule_after(after,
                                               [self] { (void)self.tell(grain_idle_check{}); });
}

// Ends an activation that has no instance (deactivated by the shutdown marker, dormant after an
// idle deactivation that a send raced, or a failed reactivation) once nothing is left in its
// mailbox. Every branch of receive that finds no instance must end here, whatever kind of
// message it handled: no later message comes to do it. The marker's activation has already
// left the directory, so nothing new reaches it, and a dormant one is only reached again while
// listed, which leave (under the directory's shard lock, like every send) rules out. A branch
// that returned early instead left the cell alive and unlisted for ever: an idle check that the
// timer thread queued just behind the shutdown marker did that, and stop() then waited for the
// cell until its timeout.
// What a message queued behind the shutdown gets: refused before any handler ran, so marked
// (a caller on another node may send it once more, to the grain's next owner).
error shutting_down_refusal() {
  return error_access::mark_refused(
      error(errc::system_shutting_down, "the grain's node is shutting down"));
}

void end_if_drained(receive_context& ctx, actor_cell* cell, grain_layer& layer) {
  if (cell->user_backlog_empty() && layer.leave(cell, true)) ctx.stop_self();
}

// An activation of `kind` ended (the metrics' deactivations; nothing while they are off).
void count_deactivation(const grain_kind* kind) noexcept {
  if (grain_kind_figures* f = kind->figures.get())
    f->deactivations.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

error grain_host_base::activate(actor_system& sys, actor_cell* cell) {
  const grain_identity id = identity_of(kind_, cell);
  const grain_settings& settings = *settings_;
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + settings.activation_timeout;
  ++generation_;          // ticks of an earlier activation's timers are stale from here on
  reentrancy_mode_ = -1;  // a new activation starts from its options
  timers_stopped_ = false;
  auto& events = sys.events();
  // A fenced node starts no activation (its lease may be gone, its claims another's).
  fence_epoch_ = 0;
  grain_layer& layer = layer_of(sys);
  const grain_fence* fence = layer.fence();
  if (fence != nullptr) {
    fence_epoch_ = fence->valid_epoch();
    if (fence_epoch_ == 0) {
      timers_stopped_ = true;
      error fenced(errc::not_owner, "this node is fenced: its cluster lease cannot be proven");
      if (events.has_subscribers<grain_activation_failed>())
        events.publish(grain_activation_failed{id, fenced});
      return error_access::mark_refused(std::move(fenced));
    }
  }
  // Both activation paths come here (a new cell's pre_start, the fresh instance in place): the
  // gate sees every activation of this node before any of its handlers runs.
  grain_activation_gate* gate = layer.gate();
  if (layer.fence_expected() && (fence == nullptr || gate == nullptr)) {
    // A cluster node that has not joined yet (its remoting listens already, and a node started
    // again under its name and address is reached by peers that still route there), or that
    // joined but whose grain registry has not started: the cluster installs the fence after
    // the join and the gate after a read of the registry, so for that read's round trip a
    // joined node had a fence and no gate, and an activation there took no claim (the fault
    // harness saw six, token 0, on a node restarted under its name). Without both, no claim can
    // be made or proven: refuse, marked, so the caller may send again.
    timers_stopped_ = true;
    error early(errc::not_owner, fence == nullptr
                                     ? "this node has not joined its cluster yet"
                                     : "this node's grain registry has not started yet");
    if (events.has_subscribers<grain_activation_failed>())
      events.publish(grain_activation_failed{id, early});
    return error_access::mark_refused(std::move(early));
  }
  // An activation made again in place after an idle deactivation keeps the admission (and the
  // claim) of the one before it: the cell never left the directory, so the identity was never
  // free (see the idle check in receive). A fence drop released it: that one asks again.
  if (gate != nullptr && !admitted_) {
    result<std::int64_t> token = gate->admit(id);
    if (!token) {
      timers_stopped_ = true;
      if (events.has_subscribers<grain_activation_failed>())
        events.publish(grain_activation_failed{id, token.error()});
      return error_access::mark_refused(token.error());
    }
    admitted_ = true;
    claim_token_.store(*token, std::memory_order_relaxed);
  }
  error last;
  for (unsigned attempt = 0; attempt < settings.activation_attempts; ++attempt) {
    if (attempt > 0 && std::chrono::steady_clock::now() >= deadline) break;
    grain* g = nullptr;
    try {
      g = build_instance();
    } catch (...) {
      last = caught("the grain's constructor");
      continue;
    }
    grain_props props(id, sys, settings, deadline, this);
    try {
      last = g->on_activate(props);
    } catch (...) {
      last = caught("on_activate");
    }
    if (!last && std::chrono::steady_clock::now() > deadline) {
      // Too late: the caller has given up. Undo it, so nothing half-activated stays.
      try {
        (void)g->on_deactivate(props);
      } catch (...) {
      }
      last = error(errc::request_timeout,
                   "activation of " + id.str() + " took longer than " +
                       std::to_string(settings.activation_timeout.count() / 1'000'000) + " ms");
    }
    if (!last) break;
    end_activation();  // what the failed attempt scheduled goes with it
    timers_stopped_ = false;
  }
  if (last) {
    timers_stopped_ = true;
    release_admission(id);
    if (events.has_subscribers<grain_activation_failed>())
      events.publish(grain_activation_failed{id, last});
    return last;
  }
  handled_at_arm_ = handled_low();
  arm_idle_timer(cell, settings.deactivate_after);
  open_direct();
  if (grain_kind_figures* f = kind_->figures.get()) {  // metrics on
    f->activations.fetch_add(1, std::memory_order_relaxed);
    if (f->activation_seconds) {
      f->activation_seconds.observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
  }
  if (events.has_subscribers<grain_activated>()) events.publish(grain_activated{id});
  return {};
}

void grain_host_base::open_direct() noexcept {
  std::atomic<std::uint32_t>& direct = cell()->grain_direct();
  const std::uint32_t open = direct_open(generation_);
  std::uint32_t v = direct.load(std::memory_order_relaxed);
  // Senders that found it closed may still be on their way out: keep their count.
  while (!direct.compare_exchange_weak(v, open | (v & k_direct_senders), std::memory_order_release,
                                       std::memory_order_relaxed)) {
  }
}

void grain_host_base::close_direct() noexcept {
  std::atomic<std::uint32_t>& direct = cell()->grain_direct();
  std::uint32_t v = direct.fetch_or(k_direct_closed, std::memory_order_acq_rel);
  // A sender inside is between its check and its enqueue (a few instructions): wait it out, so
  // that what it sends is in the mailbox before anyone checks the mailbox is empty.
  for (unsigned spins = 0; (v & k_direct_senders) != 0; ++spins) {
    if (spins > 64) std::this_thread::yield();
    v = direct.load(std::memory_order_acquire);
  }
}

error grain_host_base::pre_start(actor_context& ctx) {
  error e = activate(ctx.system(), detail::cell_of(ctx.self()));
  if (e) {
    // The cell destroys this host (and the directory link in it) when pre_start fails: leave
    // the directory first (grain_directory::activator::start).
    layer_of(ctx.system()).withdraw(detail::cell_of(ctx.self()));
    if (activation_error_ != nullptr) *activation_error_ = e;
  }
  return e;
}

error grain_host_base::deactivate(actor_system& sys, actor_cell* cell, bool for_stop,
                                  bool keep_admission) {
  error e;
  if (instance() != nullptr) {
    const grain_identity id = identity_of(kind_, cell);
    grain_props props(id, sys, *settings_, std::chrono::steady_clock::time_point::max(), this);
    timers_stopped_ = true;  // on_deactivate may not start timers
    stop_timers();
    try {
      e = instance()->on_deactivate(props);
    } catch (...) {
      e = caught("on_deactivate");
    }
    if (e) {
      if (for_stop) layer_of(sys).report_deactivation_failure(id.str() + ": " + e.message());
      cell->system()->log_actor(log_level::warning, id.str(), "on_deactivate: " + e.message());
    }
    auto& events = sys.events();
    if (events.has_subscribers<grain_deactivated>()) events.publish(grain_deactivated{id, e});
    count_deactivation(kind_);
  }
  end_activation();
  if (!keep_admission) release_admission(identity_of(kind_, cell));
  return e;
}

bool grain_host_base::fence_holds() const noexcept {
  if (fence_epoch_ == 0) return true;  // not made under a fence
  // Through the kind, not link_.cell->system(): that pointer shares the line senders write on
  // every message, and reading it before every handler cost a grain_ref's one-way tell in a
  // cluster a fifth of its rate (docs/benchmarks.md, "Grains in a cluster").
  const grain_fence* fence = kind_->layer->fence();
  return fence == nullptr || fence->valid_epoch() == fence_epoch_;
}

void grain_host_base::drop_for_fence(actor_system& sys, actor_cell* cell) {
  const grain_identity id = identity_of(kind_, cell);
  if (instance() != nullptr) count_deactivation(kind_);
  end_activation();
  fence_epoch_ = 0;
  release_admission(id);
  auto& events = sys.events();
  if (events.has_subscribers<grain_deactivated>()) {
    events.publish(grain_deactivated{
        id, error(errc::not_owner, "dropped without on_deactivate: the node is fenced")});
  }
}

void grain_host_base::release_admission(const grain_identity& id) noexcept {
  claim_token_.store(0, std::memory_order_relaxed);
  if (!std::exchange(admitted_, false)) return;
  if (grain_activation_gate* gate = layer_of(cell()->system()).gate()) gate->released(id);
}

void grain_host_base::deactivate_for_stop(actor_system& sys, actor_cell* cell) {
  grain_layer& layer = layer_of(sys);
  if (layer.abandoned()) {
    if (instance() != nullptr) count_deactivation(kind_);
    end_activation();
  } else {
    (void)deactivate(sys, cell, true);
  }
  (void)layer.leave(cell, false);
}

void grain_host_base::end_activation() noexcept {
  close_direct();
  timers_stopped_ = true;
  stop_timers();
  drop_instance();
}

grain_host_base::~grain_host_base() { delete timers_; }

void grain_host_base::stop_timers() noexcept {
  if (!timers_) return;
  for (auto& [ref, sched] : timers_->entries) (void)sched.cancel();
  delete std::exchange(timers_, nullptr);
}

void grain_host_base::post_stop(actor_context& ctx) {
  // Normally the instance is gone by now (deactivated). It is still here when the cell was
  // stopped some other way.
  deactivate_for_stop(ctx.system(), detail::cell_of(ctx.self()));
  // The cell has left the directory (a scrape no longer reads its count there): its messages
  // join the kind's count of stopped cells. Its last turn: nothing is handled after this.
  if (grain_kind_figures* f = kind_->figures.get())
    f->messages_of_stopped.fetch_add(handled_.load(std::memory_order_relaxed),
                                     std::memory_order_relaxed);
}

void grain_host_base::receive(receive_context& ctx) {
  actor_cell* const cell = context_access::receiver(ctx);
  // The layer is found through the cell's system pointer, on the line senders write on every
  // message: looked up only on the rare branches that need it, never for a plain user message.
  auto layer_here = [cell]() -> grain_layer& { return layer_of(cell->system()); };

  // Made under a fence (a cluster node): no handler of it starts once the node is fenced or
  // rejoined under another epoch. Dropped here, the activation is dormant for what follows: a
  // marker or an idle check ends it, a user message tries a fresh activation (refused while
  // fenced), a tick is dropped.
  if (AKT_UNLIKELY(fence_epoch_ != 0) && !fence_holds()) drop_for_fence(ctx.system(), cell);

  if (ctx.is<grain_shutdown_marker>()) {
    grain_layer& layer = layer_here();
    deactivate_for_stop(ctx.system(), cell);
    // Whatever is queued behind the marker was sent after the shutdown began: it is refused
    // like a send that would activate (below, as it is reached), not handed to a new instance.
    failing_ = shutting_down_refusal();
    end_if_drained(ctx, cell, layer);  // left the directory already: stops when drained
    return;
  }
  if (ctx.is<grain_nudge>()) {  // the fence check above did the work; an ended one may go
    if (instance() == nullptr) end_if_drained(ctx, cell, layer_here());
    return;
  }
  if (ctx.is<grain_idle_check>()) {
    grain_layer& layer = layer_here();
    if (instance() == nullptr) {
      // A check of an ended activation (it can sit behind the shutdown marker): never a reason
      // to activate, but it may be the last message, so it ends the activation like any other.
      end_if_drained(ctx, cell, layer);
      return;
    }
    const cell_extras* x = cell->extras_if_any();
    const bool requests_in_flight = x != nullptr && !x->requests.empty();
    // Not yet opened: the sender whose message activated this grain has not put it in yet (it
    // does so right after the activation, and a short idle period under load can end first);
    // deactivating now would only cost that message a second activation. Asked first: once
    // opened, that message is in the mailbox (the same hold of the directory's lock).
    if (!layer.opened(cell) || handled_low() != handled_at_arm_ || !cell->user_backlog_empty() ||
        requests_in_flight) {
      // Busy since the timer was armed, or waiting for a reply: wait a full period again.
      handled_at_arm_ = handled_low();
      arm_idle_timer(cell, settings_->deactivate_after);
      return;
    }
    // The admission (a cluster's claim) is kept until the cell has left the directory: should
    // a send have raced the deactivation, the fresh instance in place runs under the same
    // claim, never asking the gate on this worker (it could not wait for the store here).
    (void)deactivate(ctx.system(), cell, false, true);
    if (layer.leave(cell, true)) {
      release_admission(identity_of(kind_, cell));
      ctx.stop_self();
      return;
    }
    // Something arrived during on_deactivate. The activation stays in the directory without
    // an instance: the first user message it reaches activates a fresh one in place (below),
    // so those messages reach a fresh activation in arrival order, while timer ticks of the
    // ended activation are dropped and never activate it. Once the shutdown began nothing is
    // activated: they are refused.
    if (layer.closing()) failing_ = shutting_down_refusal();
    return;
  }

  if (auto* tick = ctx.get_if<grain_tick>()) {
    // A timer tick: not counted against the mailbox capacity; activity only with keep_alive; a
    // tick of an earlier activation (or one after deactivation) is dropped.
    if (tick->generation != generation_ || instance() == nullptr || failing_) {
      // A dormant activation (see the idle check) that had only ticks waiting goes now.
      if (instance() == nullptr) end_if_drained(ctx, cell, layer_here());
      return;
    }
    if (tick->keep_alive) note_handled();
    message inner = std::move(tick->inner);
    ctx.message() = std::move(inner);
    (void)run_on_receive(ctx, cell, false);
    return;
  }

  // A user message.
  if (mailbox_capacity_ != 0) queued_.fetch_sub(1, std::memory_order_acq_rel);
  note_handled();
  if (!failing_ && instance() == nullptr) {
    // Dormant since an idle deactivation: this message activates a fresh instance in place.
    // A fresh activation starts from the kind's options, like one made by a new cell: the
    // options of the call that created this cell belonged to the activation that just ended.
    // Only the mailbox (and so its capacity) carries over.
    grain_layer& layer = layer_here();
    if (layer.closing()) {
      failing_ = shutting_down_refusal();
    } else {
      settings_ = layer.settings_for_fresh(kind_, mailbox_capacity_);
      if (error e = activate(ctx.system(), cell))
        failing_ = e;
      else
        layer.count_activation();
    }
  }
  if (failing_) {
    // A failed reactivation, or the shutdown: every waiting message gets the error; then the
    // activation goes.
    const error why = failing_;
    if (grain_kind_figures* f = kind_->figures.get()) f->refused(why.code());
    if (ctx.expects_reply())
      ctx.reply_error(why);
    else
      cell->system()->dead_letter(ctx, why);
    end_if_drained(ctx, cell, layer_here());
    return;
  }
  if (ctx.is<grain_activate_probe>()) {  // activate_grain from another node: activated now
    if (ctx.expects_reply()) ctx.reply(true);
    return;
  }
  const bool acknowledged = (context_access::flags(ctx) & envelope::flag_grain_ack) != 0;
  const bool answered = run_on_receive(ctx, cell, acknowledged);
  if (ctx.expects_reply() && !answered) ctx.reply_error(errc::no_reply);
}

bool grain_host_base::run_on_receive(receive_context& ctx, actor_cell* cell, bool acknowledged) {
  grain_context g(ctx, *this, acknowledged);
  try {
    instance()->on_receive(g);
  } catch (...) {
    // No supervisor for grains: the caller gets the error and the grain keeps serving.
    error e = caught("on_receive");
    cell->system()->log_actor(log_level::warning, cell->path(), e.message());  // path: kind/name
    g.reply_error(std::move(e));
  }
  g.finish();
  return g.answered();
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// grain_context

grain_identity grain_context::self() const {
  return detail::identity_of(host_.kind(), detail::context_access::receiver(env_));
}

void grain_context::ack() {
  if (answered_) return;
  answered_ = true;
  env_.ack();
}

void grain_context::reply_error(error e) {
  if (answered_) return;
  answered_ = true;
  if (!e) e = error(errc::handler_failed, "reply_error() without an error");
  if (env_.expects_reply())
    env_.reply_error(std::move(e));
  else
    detail::cell_system(detail::context_access::receiver(env_))->dead_letter(env_, e);
}

void grain_context::unhandled() {
  if (answered_) return;
  answered_ = true;
  env_.unhandled();
}

result<pid> grain_context::lookup_actor(std::string_view name) const {
  return env_.system().find(name);
}

error grain_context::tell_grain_message(const grain_identity& to, akt::message msg) {
  grain_tell_options o;
  o.one_way = true;
  return detail::tell_grain_message(env_.system(), to, std::move(msg), o,
                                    detail::context_access::receiver(env_));
}

std::int64_t grain_context::fencing_token() const noexcept { return host_.fencing_token(); }

std::int64_t grain_props::fencing_token() const noexcept {
  return host_ != nullptr ? host_->fencing_token() : 0;
}

}  // namespace akt
