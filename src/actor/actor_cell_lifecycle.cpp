// actor_cell: failures and supervision, the hierarchy and stopping (the cell's other half is
// actor_cell.cpp).

#include <exception>
#include <string>

#include "actor/cell_extras.hpp"
#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "akt/actor/detail/actor_cell.hpp"
#include "akt/core/thread.hpp"

namespace akt::detail {

// ---------------------------------------------------------------------------------------------
// failures and supervision

const supervisor& actor_cell::effective_supervisor() const noexcept {
  const cell_extras* x = extras_if_any();
  if (x != nullptr && x->sup) return *x->sup;
  return system_->default_supervisor_;
}

void actor_cell::report_failure(error err) noexcept { extras().reported_failure = std::move(err); }

void actor_cell::on_failure(receive_context* env, const std::exception_ptr& exception,
                            error err) noexcept {
  handler_failed_here() = true;  // for the handler's span, when it is traced (tracer.hpp)
  const std::string what = exception ? what_of(exception) : err.message();
  if (system_->runtime_metrics_.enabled()) system_->runtime_metrics_.on_failure(kind_id());
  if (exception) err = error(errc::handler_failed, what);
  const supervisor& sup = effective_supervisor();
  directive d = sup.decide(exception, err);
  if (env != nullptr) system_->complete_reply(*env, err);
  if (system_->events_->has_subscribers<actor_failed>()) {
    system_->events_->publish(
        actor_failed{detail::share_pid(this), what,
                     env != nullptr ? std::string(env->message().type_name()) : std::string(), d});
  }
  system_->log_actor(log_level::warning, path_,
                     "handler failed (" + what + "): " + std::string(to_string(d)));
  if (sup.strategy() == supervision_strategy::one_for_all && parent_ != nullptr &&
      d != directive::escalate) {
    parent_->post_system(supervise_siblings{d, err, detail::share_pid(this)});
  }
  apply_directive(d, err);
}

void actor_cell::apply_directive(directive d, const error& reason) noexcept {
  if (life() >= life_state::stopping) return;
  switch (d) {
    case directive::resume:
      if (mode() == turn_mode::suspended) set_mode(turn_mode::normal);
      break;
    case directive::stop:
      stop_now(reason);
      break;
    case directive::restart:
      restart(reason);
      break;
    case directive::escalate:
      if (parent_ == nullptr) {
        stop_now(reason);
      } else {
        suspend("escalated: " + reason.message());
        parent_->post_system(escalation{detail::share_pid(this), reason});
      }
      break;
  }
}

void actor_cell::suspend(std::string why) noexcept {
  set_mode(turn_mode::suspended);
  if (system_->events_->has_subscribers<actor_suspended>()) {
    system_->events_->publish(actor_suspended{detail::share_pid(this), std::move(why)});
  }
}

void actor_cell::on_escalation(const pid& child, const error& reason) noexcept {
  // The child's failure is this actor's now: its own supervisor decides for it.
  const directive d = effective_supervisor().decide(nullptr, reason);
  if (d == directive::resume) {
    detail::cell_of(child)->post_system(supervise_order{directive::resume, reason});
    return;
  }
  // restart and stop take the children (the escalating one too) down first.
  apply_directive(d, reason);
}

void actor_cell::restart(const error& reason) noexcept {
  const supervisor& sup = effective_supervisor();
  cell_extras& x = extras();
  const std::int64_t now = system_->timers_.now_ns();
  if (sup.max_retries() > 0) {
    const std::int64_t window = sup.retry_window().count();
    while (!x.restart_times.empty() && window > 0 && now - x.restart_times.front() > window) {
      x.restart_times.pop_front();
    }
    if (x.restart_times.size() >= sup.max_retries()) {
      system_->log_actor(log_level::error, path_, "restart limit reached: stopping");
      stop_now(error(
          errc::retry_limit_exceeded,
          std::to_string(sup.max_retries()) + " restarts, last failure: " + reason.message()));
      return;
    }
  }
  std::int64_t delay = 0;
  if (sup.backoff_initial().count() > 0) {
    const std::int64_t max = std::max(sup.backoff_max().count(), sup.backoff_initial().count());
    if (x.last_failure_ns != 0 && now - x.last_failure_ns > max) x.backoff_attempt = 0;
    const unsigned shift = std::min(x.backoff_attempt, 30u);
    delay = std::min(sup.backoff_initial().count() << shift, max);
    ++x.backoff_attempt;
    x.last_failure_ns = now;
  }
  if (delay > 0) {
    suspend("restart back-off");
    pid self = detail::share_pid(this);
    system_->timers_.schedule_after(std::chrono::nanoseconds(delay),
                                    [self] { detail::cell_of(self)->post_system(restart_now{}); });
    return;
  }
  begin_restart();
}

void actor_cell::begin_restart() noexcept {
  cell_extras* x = extras_if_any();
  if (x != nullptr && !x->children.empty()) {
    set_mode(turn_mode::restarting);
    for (actor_cell* c : x->children) c->post_system(poison_pill{});
    return;  // on_child_stopped completes the restart once the last child has stopped
  }
  complete_restart();
}

void actor_cell::drop_requests() noexcept {
  cell_extras* x = extras_if_any();
  if (x == nullptr) return;
  for (auto& [id, req] : x->requests) {
    if (req.timer) system_->timers_.cancel(req.timer);
  }
  // Out of the map before they are destroyed: a continuation may own a waiting coroutine's frame
  // (coroutine.hpp), and the destructors of its locals run now.
  auto dropped = std::move(x->requests);
  x->requests.clear();
  x->awaiting = 0;
  dropped.clear();
}

void actor_cell::complete_restart() noexcept {
  cell_extras& x = extras();
  x.restart_times.push_back(system_->timers_.now_ns());
  if (actor_system* owner = system_->owner(); instance() != nullptr && owner != nullptr) {
    actor_context ctx(*owner, detail::share_pid(this));
    try {
      instance()->post_stop(ctx);
    } catch (...) {
      system_->log_actor(log_level::warning, path_, "post_stop threw during a restart");
    }
  }
  // The old instance's closures (behaviours, continuations) must not outlive it.
  x.behaviors.clear();
  x.retired.clear();
  drop_requests();
  while (!x.stash.empty()) {  // keep stashed messages: they come first after the restart
    x.unstashed.push_back(x.stash.front());
    x.stash.pop_front();
  }
  error failure;
  try {
    rebuild_instance();
  } catch (const std::exception& e) {
    failure = error(errc::init_failure, std::string("constructor threw: ") + e.what());
  } catch (...) {
    failure = error(errc::init_failure, "constructor threw");
  }
  if (actor_system* owner = system_->owner(); !failure && owner != nullptr) {
    actor_context ctx(*owner, detail::share_pid(this));
    try {
      failure = instance()->pre_start(ctx);
    } catch (const std::exception& e) {
      failure = error(errc::init_failure, std::string("pre_start threw: ") + e.what());
    } catch (...) {
      failure = error(errc::init_failure, "pre_start threw");
    }
  }
  set_mode(turn_mode::normal);
  if (failure) {
    stop_now(failure);
    return;
  }
  const std::uint32_t n = x.restarts.load(std::memory_order_relaxed) + 1;
  x.restarts.store(n, std::memory_order_relaxed);
  if (system_->runtime_metrics_.enabled()) system_->runtime_metrics_.on_restart(kind_id());
  if (system_->events_->has_subscribers<actor_restarted>()) {
    system_->events_->publish(actor_restarted{detail::share_pid(this), n});
  }
}

// ---------------------------------------------------------------------------------------------
// the hierarchy and stopping

void actor_cell::adopt_child(actor_cell* child) {
  child->add_ref();
  extras().children.push_back(child);
}

void actor_cell::on_child_stopped(actor_cell* child) noexcept {
  cell_extras* x = extras_if_any();
  if (x == nullptr || !remove_one(x->children, child)) return;
  if (!x->children.empty()) return;
  if (life() == life_state::stopping) {
    finish_stop();
  } else if (mode() == turn_mode::restarting) {
    complete_restart();
  }
}

void actor_cell::on_supervise_siblings(const supervise_siblings& s) noexcept {
  cell_extras* x = extras_if_any();
  if (x == nullptr) return;
  for (actor_cell* c : x->children) {
    if (c != detail::cell_of(s.failed)) c->post_system(supervise_order{s.order, s.reason});
  }
}

void actor_cell::passivate() noexcept {
  cell_extras& x = extras();
  x.passivated = true;
  stop_now(error());
}

void actor_cell::arm_passivation(std::int64_t due_ns) noexcept {
  cell_extras& x = extras();
  pid self = detail::share_pid(this);
  x.passivation_timer = system_->timers_.schedule_after(
      std::chrono::nanoseconds(std::max<std::int64_t>(due_ns - system_->timers_.now_ns(), 0)),
      [self] { detail::cell_of(self)->post_system(passivation_check{}); });
}

void actor_cell::on_passivation_check() noexcept {
  cell_extras* x = extras_if_any();
  if (x == nullptr || x->passivate.mode != passivation::kind::idle ||
      life() >= life_state::stopping) {
    return;
  }
  x->passivation_timer = {};
  const std::int64_t idle_for = x->passivate.idle_for.count();
  const std::int64_t due = last_active_ns_.load(std::memory_order_relaxed) + idle_for;
  // Busy (queued work, a pending request or decision): look again a full period later.
  const bool busy = mode() != turn_mode::normal || !x->requests.empty() || x->has_owned_queues() ||
                    !user_empty(custom_.get());
  if (!busy && system_->timers_.now_ns() >= due) {
    passivate();
  } else {
    arm_passivation(busy ? system_->timers_.now_ns() + idle_for : due);
  }
}

void actor_cell::stop_now(const error& reason) noexcept {
  if (life() >= life_state::stopping) return;
  life_.store(life_state::stopping, std::memory_order_release);
  cell_extras* x = reason ? &extras() : extras_if_any();  // a failure reason is kept to report
  if (x != nullptr) {
    x->stop_reason = reason;
    if (x->passivation_timer) system_->timers_.cancel(x->passivation_timer);
    drop_requests();
    if (!x->children.empty()) {
      set_mode(turn_mode::restarting);  // hold user messages until the children are gone
      for (actor_cell* c : x->children) c->post_system(poison_pill{});
      return;  // on_child_stopped finishes once the last child has stopped
    }
  }
  finish_stop();
}

void actor_cell::drain_to_dead_letters() noexcept {
  if (cell_extras* x = extras_if_any()) {
    x->handed_out.flush();
    for (auto* q : {&x->replies, &x->unstashed, &x->stash}) {
      for (receive_context* e : *q) {
        if (!e->message().is<request_reply>() && !e->message().is<terminated>()) {
          system_->dead_letter(*e, errc::dead);
        }
        recycle(e);
      }
      q->clear();
    }
  }
  while (receive_context* env = dequeue_user(custom_.get())) {
    system_->dead_letter(*env, errc::dead);
    context_access::release_contents(*env);
  }
}

void actor_cell::finish_stop() noexcept {
  if (actor_system* owner = system_->owner(); instance() != nullptr && owner != nullptr) {
    actor_context ctx(*owner, detail::share_pid(this));
    try {
      instance()->post_stop(ctx);
    } catch (const std::exception& e) {
      if (system_->events_->has_subscribers<actor_failed>()) {
        system_->events_->publish(actor_failed{detail::share_pid(this),
                                               std::string("post_stop threw: ") + e.what(), "",
                                               directive::stop});
      }
    } catch (...) {
      if (system_->events_->has_subscribers<actor_failed>()) {
        system_->events_->publish(
            actor_failed{detail::share_pid(this), "post_stop threw", "", directive::stop});
      }
    }
  }
  destroy_instance();
  set_mode(turn_mode::normal);  // a dead actor's turns dead-letter whatever still arrives
  drain_to_dead_letters();
  if (custom_) custom_->dispose();
  system_->registry_.erase(this);
  // Its cluster-wide name (if it claimed one: the extension knows) is free once the local one is.
  if (cluster_extension* c = system_->cluster();
      c != nullptr && parent_ == nullptr && !grain_ && claims_cluster_name(path())) {
    c->release_name(path(), this);
  }
  bool passivated = false;
  error reason;
  system_->scheduler_.cancel_owned_by(this);
  if (cell_extras* x = extras_if_any()) {
    passivated = x->passivated;
    reason = x->stop_reason;
    pid self = detail::share_pid(this);
    for (actor_cell* w : x->watching) w->post_system(unwatch_request{self});
    release_all(x->watching);
    for (actor_cell* w : x->watchers) w->post_system(terminated_notice{self, error()});
    release_all(x->watchers);
    x->behaviors.clear();
    x->retired.clear();
  }
  // After the watchers were told (a remote watcher's notice names this actor by its uid).
  if (remote_extension* r = system_->remote()) r->on_actor_stopped(this);
  system_->processed_by_dead_.fetch_add(processed_.load(std::memory_order_relaxed),
                                        std::memory_order_relaxed);
  // After registry_.erase: see runtime_metrics' contract on why this order keeps the count from
  // going down.
  if (system_->runtime_metrics_.enabled())
    system_->runtime_metrics_.on_actor_stopped(kind_id(),
                                               processed_.load(std::memory_order_relaxed));
  if (parent_ != nullptr) {
    // A reference across the post: once child_stopped is in, the parent's turn may handle it,
    // finish its own stop and free the parent while post_system still reads its dispatch state
    // (stress.sh caught it under TSan). Its other posts come while this child is alive, which
    // its stop waits for.
    parent_->add_ref();
    parent_->post_system(child_stopped{this});
    parent_->release();
  }
  if (passivated && system_->events_->has_subscribers<actor_passivated>()) {
    system_->events_->publish(actor_passivated{detail::share_pid(this)});
  }
  if (system_->events_->has_subscribers<actor_stopped>()) {
    system_->events_->publish(actor_stopped{detail::share_pid(this), reason});
  }
  // Dead last: whoever waits for the stop sees the name released and post_stop done.
  system_->on_actor_dead([this] { life_.store(life_state::dead, std::memory_order_release); });
}

error actor_cell::start(bool register_name) {
  // On a cluster node a top-level actor's name is claimed cluster-wide first, so that nothing
  // finds it by that name (here or elsewhere) before the claim committed. The claim waits for
  // the store: a dispatcher worker may not spawn such an actor (cluster_hooks.hpp).
  cluster_extension* cluster =
      register_name && parent_ == nullptr && !grain_ && claims_cluster_name(path())
          ? system_->cluster()
          : nullptr;
  if (cluster != nullptr) {
    error claim = on_worker_thread()
                      ? error(errc::blocking_on_worker,
                              "spawning '" + std::string(path()) +
                                  "' claims its name in the cluster: not from a dispatcher "
                                  "worker (spawn it as a child, or from outside the system)")
                      : cluster->claim_name(path(), this);
    if (claim) {
      life_.store(life_state::dead, std::memory_order_release);
      return claim;
    }
  }
  if (register_name && !system_->registry_.insert(this)) {
    if (cluster != nullptr) cluster->release_name(path(), this);
    life_.store(life_state::dead, std::memory_order_release);
    return error(errc::actor_already_exists, std::string(path()));
  }
  error failure;
  if (actor_system* owner = system_->owner(); owner != nullptr) {
    actor_context ctx(*owner, detail::share_pid(this));
    try {
      failure = instance()->pre_start(ctx);
      if (failure && failure.code() != errc::init_failure) {
        failure = error(errc::init_failure, failure.message());
      }
    } catch (const std::exception& e) {
      failure = error(errc::init_failure, std::string("pre_start threw: ") + e.what());
    } catch (...) {
      failure = error(errc::init_failure, "pre_start threw");
    }
  }
  if (failure) {
    destroy_instance();
    life_.store(life_state::dead, std::memory_order_seq_cst);
    system_->registry_.erase(this);
    if (cluster != nullptr) cluster->release_name(path(), this);
    // Children spawned by a failing pre_start are stopped.
    if (cell_extras* x = extras_if_any()) {
      for (actor_cell* c : x->children) c->post_system(poison_pill{});
    }
  } else {
    life_.store(life_state::alive, std::memory_order_release);
    system_->on_actor_started();
    if (parent_ != nullptr) parent_->adopt_child(this);
    if (cell_extras* x = extras_if_any();
        x != nullptr && x->passivate.mode == passivation::kind::idle) {
      last_active_ns_.store(system_->timers_.now_ns(),
                            std::memory_order_relaxed);  // idle counts from the start
      arm_passivation(system_->timers_.now_ns() + x->passivate.idle_for.count());
    }
    if (system_->events_->has_subscribers<actor_started>()) {
      system_->events_->publish(actor_started{detail::share_pid(this)});
    }
  }
  // Messages that arrived while pre_start ran wait in the mailbox: open the dispatch state the
  // same way a turn ends, and schedule them (for a failed start they become dead letters).
  add_ref();  // the spawner's "turn" reference, released by finish_turn
  if (finish_or_reclaim(true)) {
    yield_turn();
    system_->dispatcher_.schedule(this);
  }
  return failure;
}

}  // namespace akt::detail
