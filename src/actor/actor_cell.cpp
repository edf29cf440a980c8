#include "akt/actor/detail/actor_cell.hpp"

#include <exception>
#include <string>

#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "akt/core/clock.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace akt::detail {

namespace {
// Times a turn re-polls a mailbox whose next push is still linking (the producer is between
// its exchange and its link store, usually a few instructions) before it yields the worker.
constexpr int k_pending_link_polls = 64;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}
}  // namespace

actor_cell::actor_cell(system_core* core, std::string_view name, spawn_options&& options)
    : schedulable(dispatch_state::processing),  // the spawner owns the first "turn"
      inbox_head_(&inbox_stub_),
      system_(core),
      custom_(std::move(options.mailbox)),
      home_shard_(envelope_pool().next_home_shard()),
      name_hash_(name_registry::hash(name)),
      name_(name),
      inbox_tail_(&inbox_stub_) {
  system_->add_ref();
}

actor_cell::~actor_cell() {
  // No producer and no turn can reach the cell any more (both hold references), so the default
  // mailbox is empty; recycle its sentinel.
  while (dequeue_user(nullptr) != nullptr) {
  }
  if (inbox_tail_ != &inbox_stub_) recycle(static_cast<envelope*>(inbox_tail_));
  system_->release();
}

void actor_cell::destroy() noexcept { delete this; }

std::size_t actor_cell::mailbox_size() const noexcept {
  if (custom_) return custom_->size();
  // The embedded queue keeps no count (that would be a second atomic per message).
  return inbox_head_.load(std::memory_order_acquire) == &inbox_stub_ ? 0 : 1;
}

bool actor_cell::user_empty(mailbox* custom) const noexcept {
  return custom != nullptr ? custom->empty()
                           : inbox_head_.load(std::memory_order_seq_cst) == inbox_tail_;
}

bool actor_cell::finish_or_reclaim() noexcept {
  // Once Idle is stored another worker may own the actor: the re-check reads only state that
  // producers publish atomically, compared with what this turn last saw.
  const mpsc_node* sentinel = inbox_tail_;
  mailbox* custom = custom_.get();
  return finish_turn([this, sentinel, custom] {
    if (!sysq_.intake_empty()) return true;
    return custom != nullptr ? !custom->empty()
                             : inbox_head_.load(std::memory_order_seq_cst) != sentinel;
  });
}

receive_context* actor_cell::dequeue_user(mailbox* custom) noexcept {
  if (custom != nullptr) return static_cast<receive_context*>(custom->dequeue());
  mpsc_node* retired = nullptr;
  mpsc_node* n = mpsc::pop(inbox_tail_, &inbox_stub_, retired);
  if (n != nullptr) {
    // In a backlog the next envelope is a cache miss (written long ago on the sender's core,
    // or evicted): start loading it while this one is processed.
    if (mpsc_node* after = n->next.load(std::memory_order_relaxed)) __builtin_prefetch(after);
  }
  if (retired != nullptr) recycle(static_cast<envelope*>(retired));
  return static_cast<receive_context*>(static_cast<envelope*>(n));
}

error actor_cell::deliver(receive_context* env) noexcept {
  context_access::receiver(*env) = this;
  // Fast path: a user message to a live actor with the default mailbox.
  if (AKT_LIKELY(custom_ == nullptr && !env->message().is<poison_pill>() && system_->accepting() &&
                 life() < life_state::stopping)) {
    mpsc::push(inbox_head_, env);
    if (try_schedule(observe())) system_->dispatcher_.schedule(this);
    return {};
  }
  return deliver_slow(env);
}

error actor_cell::deliver_slow(receive_context* env) noexcept {
  dispatch_state observed;
  if (env->message().is<poison_pill>()) {
    // Control messages pass a stopping system: they are how it stops.
    sysq_.push(env);
    observed = observe();
  } else {
    error refusal;
    if (!system_->accepting()) {
      refusal = system_->state() == run_state::created ? errc::system_not_started
                                                       : errc::system_shutting_down;
    } else if (life() >= life_state::stopping) {
      refusal = errc::dead;
    } else if (custom_) {
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

bool actor_cell::run_turn(unsigned budget) {
  begin_turn();
  mailbox* const custom = custom_.get();  // read once per turn: it shares the producers' line
  unsigned done = 0;
  int pending_polls = 0;
  while (done < budget) {
    if (envelope* s = sysq_.pop()) {
      auto& ctl = static_cast<receive_context&>(*s);
      handle_system(ctl);
      ctl.release_contents();
      ++done;
      continue;
    }
    receive_context* env = dequeue_user(custom);
    if (env == nullptr) {
      if (!user_empty(custom)) {
        // A push is mid-link: poll briefly, then let other actors run and come back.
        if (++pending_polls > k_pending_link_polls) break;
        cpu_relax();
        continue;
      }
      sysq_.flush();
      if (finish_or_reclaim()) continue;
      return false;  // idle; our reference is gone, do not touch *this
    }
    ++done;
    // instance_ (turn owner's line) rather than life_ (on the line producers write): the turn
    // owner is the only one that destroys the instance, when the actor stops.
    if (instance_ == nullptr)
      system_->dead_letter(*env, errc::dead);
    else
      invoke(*env);
    env->release_contents();
  }
  yield_turn();
  return true;
}

void actor_cell::invoke(receive_context& env) noexcept {
  if (env.has_deadline() && now_ns() >= context_access::deadline(env)) {
    // The asker has given up: skip the handler (goakt: an expired ask is never handled).
    system_->dead_letter(env, errc::request_timeout);
    return;
  }
  try {
    instance_->receive(env);
  } catch (const std::exception& e) {
    std::string what = e.what();
    system_->complete_reply(env, error(errc::handler_failed, what));
    if (system_->events_->has_subscribers<actor_failed>()) {
      system_->events_->publish(
          actor_failed{pid::share(this), what, std::string(env.message().type_name())});
    }
    stop_now();
    return;
  } catch (...) {
    system_->complete_reply(env, error(errc::handler_failed, "unknown exception"));
    if (system_->events_->has_subscribers<actor_failed>()) {
      system_->events_->publish(actor_failed{pid::share(this), "unknown exception",
                                             std::string(env.message().type_name())});
    }
    stop_now();
    return;
  }
  if (context_access::reply(env) != nullptr) {
    system_->complete_reply(env, errc::no_reply);
  }
}

void actor_cell::handle_system(receive_context& env) noexcept {
  if (env.message().is<poison_pill>()) stop_now();
}

void actor_cell::drain_to_dead_letters() noexcept {
  while (receive_context* env = dequeue_user(custom_.get())) {
    system_->dead_letter(*env, errc::dead);
    env->release_contents();
  }
}

void actor_cell::stop_now() noexcept {
  if (life() >= life_state::stopping) return;
  life_.store(life_state::stopping, std::memory_order_release);
  if (instance_ != nullptr && system_->owner_ != nullptr) {
    actor_context ctx(*system_->owner_, pid::share(this));
    try {
      instance_->post_stop(ctx);
    } catch (const std::exception& e) {
      if (system_->events_->has_subscribers<actor_failed>()) {
        system_->events_->publish(
            actor_failed{pid::share(this), std::string("post_stop threw: ") + e.what(), ""});
      }
    } catch (...) {
      if (system_->events_->has_subscribers<actor_failed>()) {
        system_->events_->publish(actor_failed{pid::share(this), "post_stop threw", ""});
      }
    }
  }
  destroy_instance();
  drain_to_dead_letters();
  if (custom_) custom_->dispose();
  system_->registry_.erase(this);
  if (system_->events_->has_subscribers<actor_stopped>()) {
    system_->events_->publish(actor_stopped{pid::share(this)});
  }
  // Dead last: whoever waits for the stop sees the name released and post_stop done.
  system_->on_actor_dead([this] { life_.store(life_state::dead, std::memory_order_release); });
}

error actor_cell::start() {
  if (!system_->registry_.insert(this)) {
    life_.store(life_state::dead, std::memory_order_release);
    return error(errc::actor_already_exists, std::string(name_));
  }
  error failure;
  if (system_->owner_ != nullptr) {
    actor_context ctx(*system_->owner_, pid::share(this));
    try {
      failure = instance_->pre_start(ctx);
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
  } else {
    life_.store(life_state::alive, std::memory_order_release);
    system_->on_actor_started();
    if (system_->events_->has_subscribers<actor_started>()) {
      system_->events_->publish(actor_started{pid::share(this)});
    }
  }
  // Messages that arrived while pre_start ran wait in the mailbox: open the dispatch state the
  // same way a turn ends, and schedule them (for a failed start they become dead letters).
  add_ref();  // the spawner's "turn" reference, released by finish_turn
  if (finish_or_reclaim()) {
    yield_turn();
    system_->dispatcher_.schedule(this);
  }
  return failure;
}

}  // namespace akt::detail
