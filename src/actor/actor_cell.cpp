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

// Messages until this thread times a handler (invoke_sampled); starts at 1 so that a thread's
// first message reads the config. Writer and reader: this thread.
thread_local std::uint32_t t_handler_sample_countdown = 1;

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
      hash_or_direct_(0),
      path_(child_path(parent, name)),
      parent_(parent),
      inbox_tail_(&inbox_stub_) {
  hash_or_direct_.store(name_registry::hash(path_), std::memory_order_relaxed);
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
  // Tracing: the one test a send pays while no system traces (src/actor/tracer.hpp).
  if (AKT_UNLIKELY(tracing_active()) && send_may_be_traced()) trace_outgoing(*env, this);
  if (custom_ != nullptr || env->message().is<poison_pill>() || !system_->accepting() ||
      life() >= life_state::stopping)
    return false;
  mpsc::push(inbox_head_, env);
  if (try_schedule(observe())) system_->dispatcher_.schedule(this);
  return true;
}

error actor_cell::deliver_slow(receive_context* env) noexcept {
  // A proxy for an actor on another node fails the fast path (its life state is above dead).
  if (AKT_UNLIKELY(life() == life_state::remote)) return system_->remote()->deliver(this, env);
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
  if (AKT_UNLIKELY(life() == life_state::remote)) {
    system_->remote()->post_system(this, msg, from);
    return;
  }
  auto* env = static_cast<receive_context*>(acquire_envelope(this));
  env->message() = std::move(msg);
  if (from != nullptr) {
    from->add_ref();
    context_access::sender(*env) = from;
  }
  context_access::receiver(*env) = this;
  // The caller keeps this cell alive across the push and the scheduling below (a pid, a list
  // that holds a reference, or see finish_stop for the one raw pointer, parent_).
  sysq_.push(env);
  if (try_schedule(observe())) system_->dispatcher_.schedule(this);
}

// ---------------------------------------------------------------------------------------------
// the turn

bool actor_cell::user_empty(mailbox* custom) const noexcept {
  if (custom != nullptr) return custom->empty();
  const mpsc_node* head = inbox_head_.load(std::memory_order_seq_cst);
  if (head == inbox_tail_) return true;
  // A grain's stub alone behind the sentinel is no message: run_turn pushes it into a queue it
  // found empty, and a send can land just before it ([sentinel, message, stub]); once that
  // message is taken the queue is [sentinel, stub] until the next dequeue skips the stub.
  // Counting the stub as a backlog made an idle check there wait a whole period more (a grain
  // with a 5 ms timer missed its 80 ms deadline in CI). The stub is pushed only by the turn
  // owner, the one caller here, so it is fully linked whenever it is the head.
  return head == &inbox_stub_ && inbox_tail_->next.load(std::memory_order_acquire) == &inbox_stub_;
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
      // A system message may stop the actor (finish_stop reads processed_ for the figures of
      // stopped actors): publish this turn's count first. Rare next to user messages.
      processed_.store(processed, std::memory_order_relaxed);
      handle_system(ctl);
      context_access::release_contents(ctl);
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
    else if (AKT_UNLIKELY((context_access::flags(*env) & envelope::flag_traced) != 0))
      invoke_traced(*env);  // the handler inside its span
    else if (AKT_UNLIKELY(--t_handler_sample_countdown == 0))
      invoke_sampled(*env);
    else
      invoke(*env);
    context_access::release_contents(*env);
  }
  processed_.store(processed, std::memory_order_relaxed);
  yield_turn();
  return true;
}

void actor_cell::invoke_sampled(receive_context& env) noexcept {
  runtime_metrics& m = system_->runtime_metrics_;
  t_handler_sample_countdown = m.sample_every();  // "never" (UINT32_MAX) when metrics are off
  if (!m.enabled() || grain_) {  // grains' handler times are the grain layer's metrics
    invoke(env);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  invoke(env);
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  m.record_handler(kind_id(), static_cast<std::uint64_t>(ns));
}

void actor_cell::invoke(receive_context& env) noexcept {
  // One test for the two rare cases: an ask with a deadline, a payload still in wire form.
  if (AKT_UNLIKELY((context_access::flags(env) &
                    (envelope::flag_has_deadline | envelope::flag_encoded)) != 0)) {
    if (env.has_deadline() && system_->timers_.now_ns() >= context_access::deadline(env)) {
      // The asker has given up: skip the handler (goakt: an expired ask is never handled).
      system_->dead_letter(env, errc::request_timeout);
      return;
    }
    // Decoded here, on the receiver's turn, not on the I/O thread that framed it.
    if ((context_access::flags(env) & envelope::flag_encoded) != 0 &&
        !system_->remote()->decode(env))
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
    actor_cell* watcher = detail::cell_of(w->watcher);
    if (life() >= life_state::stopping) {
      watcher->post_system(terminated_notice{detail::share_pid(this), error()});
    } else {
      auto& watchers = extras().watchers;
      if (std::find(watchers.begin(), watchers.end(), watcher) == watchers.end()) {
        watcher->add_ref();
        watchers.push_back(watcher);
      }
    }
  } else if (auto* u = m.get_if<unwatch_request>()) {
    if (cell_extras* x = extras_if_any()) remove_one(x->watchers, detail::cell_of(u->watcher));
  } else if (auto* t = m.get_if<terminated_notice>()) {
    cell_extras* x = extras_if_any();
    // Delivered only while still watched (an unwatch cancels a notice in flight).
    if (x != nullptr && life() < life_state::stopping &&
        remove_one(x->watching, detail::cell_of(t->actor))) {
      auto* note = static_cast<receive_context*>(acquire_envelope(this));
      note->message().emplace<terminated>(terminated{t->actor, t->reason});
      detail::cell_of(t->actor)->add_ref();
      context_access::sender(*note) = detail::cell_of(t->actor);
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
      system_->dead_letter(std::move(*reply), detail::share_pid(from), detail::share_pid(this),
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
  const resumed_trace in_trace(system_->tracer(), req.trace);  // nothing when untraced
  req.then(env, std::move(r.reply));
}

}  // namespace akt::detail
