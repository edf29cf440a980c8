#include "akt/actor/detail/actor_cell.hpp"

#include <algorithm>
#include <exception>
#include <string>

#include "actor/cell_extras.hpp"
#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "akt/core/clock.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace akt::detail {

// The what() of an exception (or "unknown exception"), for error details.
std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}

namespace {
// Times a turn re-polls a mailbox whose next push is still linking (the producer is between
// its exchange and its link store, usually a few instructions) before it yields the worker.
constexpr int k_pending_link_polls = 64;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

std::string child_path(actor_cell* parent, std::string_view name) {
  if (parent == nullptr) return std::string(name);
  std::string p(parent->path());
  p += '/';
  p += name;
  return p;
}

void release_all(std::vector<actor_cell*>& cells) noexcept {
  for (actor_cell* c : cells) c->release();
  cells.clear();
}

bool remove_one(std::vector<actor_cell*>& cells, actor_cell* c) noexcept {
  auto it = std::find(cells.begin(), cells.end(), c);
  if (it == cells.end()) return false;
  cells.erase(it);
  c->release();
  return true;
}
}  // namespace

cell_extras::~cell_extras() {
  // The owner drained the queues when the actor stopped; what is left (a cell destroyed before
  // it started) is recycled here.
  for (auto* q : {&stash, &unstashed, &replies}) {
    for (receive_context* e : *q) recycle(e);
    q->clear();
  }
  release_all(children);
  release_all(watchers);
  release_all(watching);
}

// ---------------------------------------------------------------------------------------------
// construction, figures

// The layout comment in actor_cell.hpp counts on these sizes: a change moves the turn owner's
// fields onto the producers' cache line, or grows every actor.
static_assert(sizeof(void*) != 8 || sizeof(schedulable) == 16);
static_assert(sizeof(void*) != 8 || sizeof(system_queue) == 16);
static_assert(sizeof(void*) != 8 || sizeof(actor_cell) == actor_cell::instance_offset);
static_assert(((pool_limits::max_shards - 1) | k_grain_pool_tag) <= 0xffff,
              "home_shard_ is 16 bits and carries the grain pool's tag");
static_assert(alignof(cell_extras) >= 16, "turn_word_ keeps four flags in the extras pointer");

actor_cell::actor_cell(system_core* core, actor_cell* parent, std::string_view name,
                       spawn_options&& options)
    : schedulable(dispatch_state::processing),  // the spawner owns the first "turn"
      inbox_head_(&inbox_stub_),
      system_(core),
      custom_(std::move(options.mailbox)),
      home_shard_(static_cast<std::uint16_t>(envelope_pool().next_home_shard())),
      name_hash_(0),
      path_(child_path(parent, name)),
      parent_(parent),
      inbox_tail_(&inbox_stub_) {
  name_hash_ = name_registry::hash(path_);
  system_->add_ref();
  if (options.supervisor || options.passivation.mode != passivation::kind::never) {
    cell_extras& x = extras();
    x.sup = std::move(options.supervisor);
    x.passivate = options.passivation;
  }
}

actor_cell::~actor_cell() {
  // No producer and no turn can reach the cell any more (both hold references), so the default
  // mailbox is empty; recycle its sentinel.
  while (dequeue_user(nullptr) != nullptr) {
  }
  if (inbox_tail_ != &inbox_stub_) recycle(static_cast<envelope*>(inbox_tail_));
  delete extras_if_any();
  system_->release();
}

void actor_cell::destroy() noexcept { delete this; }

void actor_cell::mark_grain() noexcept {
  // Before start no producer can reach the cell, and nothing was taken from the actor pool for
  // it yet (its first sentinel is inbox_stub_): re-stamping moves all its traffic to the grain
  // pool. The shard the constructor drew from the actor pool's round robin is left unused.
  AKT_ASSERT(!grain_ && life() == life_state::starting && inbox_tail_ == &inbox_stub_);
  grain_ = true;
  home_shard_ = static_cast<std::uint16_t>(grain_envelope_pool().next_home_shard());
}

std::string_view actor_cell::name() const noexcept {
  const std::string_view p = path_;
  if (grain_) return p;  // kind/name
  const auto slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

std::size_t actor_cell::mailbox_size() const noexcept {
  if (custom_) return custom_->size();
  // The embedded queue keeps no count (that would be a second atomic per message).
  return inbox_head_.load(std::memory_order_acquire) == &inbox_stub_ ? 0 : 1;
}

std::uint32_t actor_cell::restarts() const noexcept {
  const cell_extras* x = extras_if_any();
  return x != nullptr ? x->restarts.load(std::memory_order_relaxed) : 0;
}

cell_extras& actor_cell::extras() {
  const std::uintptr_t w = turn_word_.load(std::memory_order_relaxed);
  auto* x = reinterpret_cast<cell_extras*>(w & ~k_tag_mask);
  if (x == nullptr) {
    x = new cell_extras();
    turn_word_.store(w | reinterpret_cast<std::uintptr_t>(x), std::memory_order_release);
  }
  return *x;
}

// ---------------------------------------------------------------------------------------------
// producers

error actor_cell::deliver(receive_context* env) noexcept {
  if (AKT_LIKELY(deliver_if_open(env))) return {};
  return deliver_slow(env);
}

// The fast path: a user message to a live actor with the default mailbox.
bool actor_cell::deliver_if_open(receive_context* env) noexcept {
  context_access::receiver(*env) = this;  // deliver_slow needs it too
  if (custom_ != nullptr || env->message().is<poison_pill>() || !system_->accepting() ||
      life() >= life_state::stopping)
    return false;
  mpsc::push(inbox_head_, env);
  if (try_schedule(observe())) system_->dispatcher_.schedule(this);
  return true;
}

error actor_cell::deliver_slow(receive_context* env) noexcept {
  dispatch_state observed;
  if (env->message().is<poison_pill>()) {
    // Control messages pass a stopping system: they are how it stops.
    sysq_.push(env);
    observed = observe();
  } else {
    error refusal = system_->refusal();
    if (!refusal && life() >= life_state::stopping) {
      refusal = errc::dead;
    } else if (!refusal && custom_) {
      refusal = custom_->enqueue(env);
      if (refusal == errc::mailbox_disposed) refusal = errc::dead;
    }
    if (refusal) {
      system_->dead_letter(*env, refusal);
      recycle(env);
      return refusal;
    }
    if (custom_) {
      observed = observe_rmw();
    } else {
      mpsc::push(inbox_head_, env);
      observed = observe();
    }
  }
  if (try_schedule(observed)) system_->dispatcher_.schedule(this);
  return {};
}

void actor_cell::post_system(message msg, actor_cell* from) noexcept {
  auto* env = static_cast<receive_context*>(acquire_envelope(this));
  env->message() = std::move(msg);
  if (from != nullptr) {
    from->add_ref();
    context_access::sender(*env) = from;
  }
  context_access::receiver(*env) = this;
  sysq_.push(env);
  if (try_schedule(observe())) system_->dispatcher_.schedule(this);
}

// ---------------------------------------------------------------------------------------------
// the turn

bool actor_cell::user_empty(mailbox* custom) const noexcept {
  return custom != nullptr ? custom->empty()
                           : inbox_head_.load(std::memory_order_seq_cst) == inbox_tail_;
}

bool actor_cell::finish_or_reclaim(bool count_user) noexcept {
  // Once Idle is stored another worker may own the actor: the re-check reads only state that
  // producers publish atomically, compared with what this turn last saw.
  const mpsc_node* sentinel = inbox_tail_;
  mailbox* custom = custom_.get();
  return finish_turn([this, sentinel, custom, count_user] {
    if (!sysq_.intake_empty()) return true;
    if (!count_user) return false;
    return custom != nullptr ? !custom->empty()
                             : inbox_head_.load(std::memory_order_seq_cst) != sentinel;
  });
}

receive_context* actor_cell::dequeue_user(mailbox* custom) noexcept {
  if (custom != nullptr) return static_cast<receive_context*>(custom->dequeue());
  mpsc_node* retired = nullptr;
  mpsc_node* n = mpsc::pop(inbox_tail_, &inbox_stub_, retired);
  if (n == &inbox_stub_) {
    // A grain's sentinel given back at the end of a turn (see run_turn): the stub is the
    // sentinel again; skip it.
    if (retired != nullptr) recycle(static_cast<envelope*>(retired));
    retired = nullptr;
    n = mpsc::pop(inbox_tail_, &inbox_stub_, retired);  // retired stays null: tail is the stub
  }
  if (n != nullptr) {
    // In a backlog the next envelope is a cache miss (written long ago on the sender's core,
    // or evicted): start loading it while this one is processed.
    if (mpsc_node* after = n->next.load(std::memory_order_relaxed)) __builtin_prefetch(after);
  }
  if (retired != nullptr) recycle(static_cast<envelope*>(retired));
  return static_cast<receive_context*>(static_cast<envelope*>(n));
}

// The next user message: replies to requests and terminated notices first (even while awaiting
// a reply), then unstashed messages, then the mailbox. Null when nothing may be processed now.
receive_context* actor_cell::next_user(mailbox* custom, bool& from_mailbox) noexcept {
  from_mailbox = false;
  if (cell_extras* x = extras_if_any()) {
    x->handed_out.flush();
    if (!x->replies.empty()) {
      receive_context* e = x->replies.front();
      x->replies.pop_front();
      x->handed_out.hand_out(e);
      return e;
    }
    if (x->awaiting > 0) return nullptr;
    if (!x->unstashed.empty()) {
      receive_context* e = x->unstashed.front();
      x->unstashed.pop_front();
      x->handed_out.hand_out(e);
      return e;
    }
  }
  from_mailbox = true;
  return dequeue_user(custom);
}

bool actor_cell::run_turn(unsigned budget) {
  begin_turn();
  mailbox* const custom = custom_.get();  // read once per turn: it shares the producers' line
  bool touched = false;  // last_active_ns_ set in this turn (only user messages count)
  unsigned done = 0;
  int pending_polls = 0;
  std::uint64_t processed = processed_.load(std::memory_order_relaxed);
  while (done < budget) {
    if (envelope* s = sysq_.pop()) {
      auto& ctl = static_cast<receive_context&>(*s);
      handle_system(ctl);
      ctl.release_contents();
      ++done;
      continue;
    }
    if (mode() != turn_mode::normal) {
      // Holding user messages (a pending supervision decision, a restart or a stop waiting for
      // children): only system messages count as work.
      sysq_.flush();
      processed_.store(processed, std::memory_order_relaxed);
      if (finish_or_reclaim(false)) continue;
      return false;
    }
    bool from_mailbox = false;
    receive_context* env = next_user(custom, from_mailbox);
    if (env == nullptr) {
      if (from_mailbox && !user_empty(custom)) {
        // A push is mid-link: poll briefly, then let other actors run and come back.
        if (++pending_polls > k_pending_link_polls) break;
        cpu_relax();
        continue;
      }
      if (from_mailbox && grain_ && custom == nullptr && inbox_tail_ != &inbox_stub_) {
        // A drained grain gives its last envelope back to the pool instead of keeping it as the
        // sentinel until its next message, so an idle grain holds no envelope: the stub goes
        // through the queue like a message (only into an empty queue, so never twice) and
        // dequeue_user recycles the envelope when it reaches it.
        mpsc::push(inbox_head_, &inbox_stub_);
        continue;
      }
      sysq_.flush();
      processed_.store(processed, std::memory_order_relaxed);
      const cell_extras* x = extras_if_any();
      const bool held = x != nullptr && x->awaiting > 0;
      if (finish_or_reclaim(!held)) continue;
      return false;  // idle; our reference is gone, do not touch *this
    }
    ++done;
    ++processed;
    if (!touched) {
      last_active_ns_.store(system_->timers_.now_ns(), std::memory_order_relaxed);
      touched = true;
    }
    // instance() (turn owner's line) rather than life_ (on the line producers write): the turn
    // owner is the only one that destroys the instance, when the actor stops.
    if (instance() == nullptr)
      system_->dead_letter(*env, errc::dead);
    else
      invoke(*env);
    env->release_contents();
  }
  processed_.store(processed, std::memory_order_relaxed);
  yield_turn();
  return true;
}

void actor_cell::invoke(receive_context& env) noexcept {
  if (env.has_deadline() && system_->timers_.now_ns() >= context_access::deadline(env)) {
    // The asker has given up: skip the handler (goakt: an expired ask is never handled).
    system_->dead_letter(env, errc::request_timeout);
    return;
  }
  cell_extras* x = extras_if_any();
  try {
    if (x != nullptr) {
      if (auto* r = env.message().get_if<request_reply>()) {
        run_continuation(env, *r);
      } else if (!x->behaviors.empty()) {
        // Called in place; what it replaces meanwhile is retired, not destroyed (cell_extras).
        (*x->behaviors.back())(env);
        x->retired.clear();
      } else {
        instance()->receive(env);
      }
    } else {
      instance()->receive(env);
    }
  } catch (...) {
    on_failure(&env, std::current_exception(), error());
    return;
  }
  x = extras_if_any();
  if (x != nullptr) {
    if (x->reported_failure) {
      error err = std::move(*x->reported_failure);
      x->reported_failure.reset();
      on_failure(&env, nullptr, std::move(err));
      return;
    }
    if (x->passivate.mode == passivation::kind::messages && mode() == turn_mode::normal &&
        ++x->passivation_count >= x->passivate.message_limit) {
      passivate();
    }
  }
  if (context_access::reply(env) != nullptr) {
    system_->complete_reply(env, errc::no_reply);
  }
}

// ---------------------------------------------------------------------------------------------
// system messages

void actor_cell::handle_system(receive_context& env) noexcept {
  message& m = env.message();
  if (m.is<poison_pill>()) {
    stop_now(error());
  } else if (auto* w = m.get_if<watch_request>()) {
    actor_cell* watcher = w->watcher.cell();
    if (life() >= life_state::stopping) {
      watcher->post_system(terminated_notice{pid::share(this)});
    } else {
      auto& watchers = extras().watchers;
      if (std::find(watchers.begin(), watchers.end(), watcher) == watchers.end()) {
        watcher->add_ref();
        watchers.push_back(watcher);
      }
    }
  } else if (auto* u = m.get_if<unwatch_request>()) {
    if (cell_extras* x = extras_if_any()) remove_one(x->watchers, u->watcher.cell());
  } else if (auto* t = m.get_if<terminated_notice>()) {
    cell_extras* x = extras_if_any();
    // Delivered only while still watched (an unwatch cancels a notice in flight).
    if (x != nullptr && life() < life_state::stopping && remove_one(x->watching, t->actor.cell())) {
      auto* note = static_cast<receive_context*>(acquire_envelope(this));
      note->message().emplace<terminated>(terminated{t->actor});
      t->actor.cell()->add_ref();
      context_access::sender(*note) = t->actor.cell();
      context_access::receiver(*note) = this;
      x->replies.push_back(note);
    }
  } else if (auto* c = m.get_if<child_stopped>()) {
    on_child_stopped(c->child);
  } else if (auto* e = m.get_if<escalation>()) {
    on_escalation(e->child, e->reason);
  } else if (auto* o = m.get_if<supervise_order>()) {
    apply_directive(o->order, o->reason);
  } else if (auto* sib = m.get_if<supervise_siblings>()) {
    on_supervise_siblings(*sib);
  } else if (m.is<restart_now>()) {
    if (mode() == turn_mode::suspended && life() < life_state::stopping) begin_restart();
  } else if (auto* r = m.get_if<request_reply>()) {
    queue_reply(r->id, std::move(r->reply), context_access::sender(env));
  } else if (auto* ex = m.get_if<request_expired>()) {
    cell_extras* x = extras_if_any();
    if (x != nullptr && x->requests.count(ex->id) != 0) {
      x->requests[ex->id].timer = {};  // fired: nothing to cancel
      queue_reply(ex->id, errc::request_timeout, nullptr);
    }
  } else if (m.is<passivation_check>()) {
    on_passivation_check();
  }
}

void actor_cell::queue_reply(std::uint64_t id, result<message> reply, actor_cell* from) noexcept {
  cell_extras* x = extras_if_any();
  if (x == nullptr || x->requests.count(id) == 0 || life() >= life_state::stopping) {
    // Cancelled, timed out or superseded: a late reply nobody waits for.
    if (reply.has_value()) {
      system_->dead_letter(std::move(*reply), pid::share(from), pid::share(this),
                           errc::request_timeout);
    }
    return;
  }
  auto* note = static_cast<receive_context*>(acquire_envelope(this));
  note->message().emplace<request_reply>(request_reply{id, std::move(reply)});
  if (from != nullptr) {
    from->add_ref();
    context_access::sender(*note) = from;
  }
  context_access::receiver(*note) = this;
  x->replies.push_back(note);
}

void actor_cell::run_continuation(receive_context& env, request_reply& r) {
  cell_extras& x = extras();
  auto it = x.requests.find(r.id);
  if (it == x.requests.end()) return;  // cancelled after the reply was queued
  pending_request req = std::move(it->second);
  x.requests.erase(it);
  if (req.stash_others && x.awaiting > 0) --x.awaiting;
  if (req.timer) system_->timers_.cancel(req.timer);
  req.then(env, std::move(r.reply));
}

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
  const std::string what = exception ? what_of(exception) : err.message();
  if (exception) err = error(errc::handler_failed, what);
  const supervisor& sup = effective_supervisor();
  directive d = sup.decide(exception, err);
  if (env != nullptr) system_->complete_reply(*env, err);
  if (system_->events_->has_subscribers<actor_failed>()) {
    system_->events_->publish(
        actor_failed{pid::share(this), what,
                     env != nullptr ? std::string(env->message().type_name()) : std::string(), d});
  }
  system_->log(log_level::warning, path_,
               "handler failed (" + what + "): " + std::string(to_string(d)));
  if (sup.strategy() == supervision_strategy::one_for_all && parent_ != nullptr &&
      d != directive::escalate) {
    parent_->post_system(supervise_siblings{d, err, pid::share(this)});
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
        parent_->post_system(escalation{pid::share(this), reason});
      }
      break;
  }
}

void actor_cell::suspend(std::string why) noexcept {
  set_mode(turn_mode::suspended);
  if (system_->events_->has_subscribers<actor_suspended>()) {
    system_->events_->publish(actor_suspended{pid::share(this), std::move(why)});
  }
}

void actor_cell::on_escalation(const pid& child, const error& reason) noexcept {
  // The child's failure is this actor's now: its own supervisor decides for it.
  const directive d = effective_supervisor().decide(nullptr, reason);
  if (d == directive::resume) {
    child.cell()->post_system(supervise_order{directive::resume, reason});
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
      system_->log(log_level::error, path_, "restart limit reached: stopping");
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
    pid self = pid::share(this);
    system_->timers_.schedule_after(std::chrono::nanoseconds(delay),
                                    [self] { self.cell()->post_system(restart_now{}); });
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
    actor_context ctx(*owner, pid::share(this));
    try {
      instance()->post_stop(ctx);
    } catch (...) {
      system_->log(log_level::warning, path_, "post_stop threw during a restart");
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
    actor_context ctx(*owner, pid::share(this));
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
  if (system_->events_->has_subscribers<actor_restarted>()) {
    system_->events_->publish(actor_restarted{pid::share(this), n});
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
    if (c != s.failed.cell()) c->post_system(supervise_order{s.order, s.reason});
  }
}

void actor_cell::passivate() noexcept {
  cell_extras& x = extras();
  x.passivated = true;
  stop_now(error());
}

void actor_cell::arm_passivation(std::int64_t due_ns) noexcept {
  cell_extras& x = extras();
  pid self = pid::share(this);
  x.passivation_timer = system_->timers_.schedule_after(
      std::chrono::nanoseconds(std::max<std::int64_t>(due_ns - system_->timers_.now_ns(), 0)),
      [self] { self.cell()->post_system(passivation_check{}); });
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
    env->release_contents();
  }
}

void actor_cell::finish_stop() noexcept {
  if (actor_system* owner = system_->owner(); instance() != nullptr && owner != nullptr) {
    actor_context ctx(*owner, pid::share(this));
    try {
      instance()->post_stop(ctx);
    } catch (const std::exception& e) {
      if (system_->events_->has_subscribers<actor_failed>()) {
        system_->events_->publish(actor_failed{
            pid::share(this), std::string("post_stop threw: ") + e.what(), "", directive::stop});
      }
    } catch (...) {
      if (system_->events_->has_subscribers<actor_failed>()) {
        system_->events_->publish(
            actor_failed{pid::share(this), "post_stop threw", "", directive::stop});
      }
    }
  }
  destroy_instance();
  set_mode(turn_mode::normal);  // a dead actor's turns dead-letter whatever still arrives
  drain_to_dead_letters();
  if (custom_) custom_->dispose();
  system_->registry_.erase(this);
  bool passivated = false;
  error reason;
  system_->scheduler_.cancel_owned_by(this);
  if (cell_extras* x = extras_if_any()) {
    passivated = x->passivated;
    reason = x->stop_reason;
    pid self = pid::share(this);
    for (actor_cell* w : x->watching) w->post_system(unwatch_request{self});
    release_all(x->watching);
    for (actor_cell* w : x->watchers) w->post_system(terminated_notice{self});
    release_all(x->watchers);
    x->behaviors.clear();
    x->retired.clear();
  }
  system_->processed_by_dead_.fetch_add(processed_.load(std::memory_order_relaxed),
                                        std::memory_order_relaxed);
  if (parent_ != nullptr) parent_->post_system(child_stopped{this});
  if (passivated && system_->events_->has_subscribers<actor_passivated>()) {
    system_->events_->publish(actor_passivated{pid::share(this)});
  }
  if (system_->events_->has_subscribers<actor_stopped>()) {
    system_->events_->publish(actor_stopped{pid::share(this), reason});
  }
  // Dead last: whoever waits for the stop sees the name released and post_stop done.
  system_->on_actor_dead([this] { life_.store(life_state::dead, std::memory_order_release); });
}

error actor_cell::start(bool register_name) {
  if (register_name && !system_->registry_.insert(this)) {
    life_.store(life_state::dead, std::memory_order_release);
    return error(errc::actor_already_exists, std::string(path()));
  }
  error failure;
  if (actor_system* owner = system_->owner(); owner != nullptr) {
    actor_context ctx(*owner, pid::share(this));
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
      system_->events_->publish(actor_started{pid::share(this)});
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
