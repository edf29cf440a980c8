#pragma once
// system_core: the shared state of one actor system: dispatcher, registry, event stream,
// counters. actor_system owns one reference, every live cell another, so a pid that outlives
// its system still finds the core (and gets errc::dead / system_shutting_down, not a crash).
//
// Thread safety: all members may be used from any thread unless noted.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actor/cluster_hooks.hpp"
#include "actor/http_hooks.hpp"
#include "actor/name_registry.hpp"
#include "actor/remote_hooks.hpp"
#include "actor/runtime_metrics.hpp"
#include "actor/scheduler.hpp"
#include "actor/tracer.hpp"
#include "akt/actor/actor_system.hpp"
#include "akt/actor/event_stream.hpp"
#include "akt/actor/receive_context.hpp"
#include "akt/actor/supervisor.hpp"
#include "akt/actor/topics.hpp"
#include "akt/core/logger.hpp"
#include "akt/metrics/registry.hpp"
#include "akt/pool/sharded_pool.hpp"
#include "dispatch/blocking_pool.hpp"
#include "dispatch/dispatcher.hpp"
#include "dispatch/timer_service.hpp"

namespace akt::detail {

enum class run_state : std::uint8_t { created, running, stopping, stopped };

error validate_actor_name(std::string_view name);

// A layer built on the actor runtime (grains) that takes part in the system's stop: it runs
// after the shutdown hooks and before actors get their poison pills, while the system still
// accepts messages. It reports what did not finish in `problems` and sets timed_out when the
// deadline cut it short.
class system_extension {
 public:
  virtual ~system_extension() = default;
  virtual void before_actors_stop(std::chrono::steady_clock::time_point deadline,
                                  std::vector<std::string>& problems, bool& timed_out) = 0;
};

// The process-wide envelope pools (reference: goakt-context-pools.md): the actor pool and its
// grain sibling (section 11). Same geometry and limits; separate rings, objects and round-robin
// counters, so an actor on shard 3 and a grain on shard 3 use different rings. The grain pool
// stamps its tag (pool_limits::tag_bit) into every home shard it hands out: a grain cell's home
// shard (actor_cell::mark_grain) and its envelopes' carry it, so acquire, recycle and clone find
// the pool by indexing with the tag bit, without a branch, and an envelope never lands in the
// other pool's rings. Each pool is created on first use and never destroyed, so a late recycle
// during static destruction is still safe. The hot path reads one pointer (acquire, a plain load
// on x86) instead of a function-local-static guard.
inline constexpr std::uint32_t k_grain_pool_tag = pool_limits::tag_bit;
// [0]: actors, [1]: grains. Writer: make_envelope_pool, once per pool (release, pairs with the
// acquire in envelope_pool_of). Readers: every acquire, recycle and clone.
extern std::atomic<sharded_pool<receive_context>*> g_envelope_pools[2];
sharded_pool<receive_context>& make_envelope_pool(std::uint32_t which) noexcept;
// The pool an envelope (or a cell's messages) with this home shard belongs to.
inline sharded_pool<receive_context>& envelope_pool_of(std::uint32_t home_shard) noexcept {
  const std::uint32_t which = home_shard / k_grain_pool_tag;
  AKT_ASSERT(which < 2);
  if (auto* p = g_envelope_pools[which].load(std::memory_order_acquire)) return *p;
  return make_envelope_pool(which);
}
inline sharded_pool<receive_context>& envelope_pool() noexcept { return envelope_pool_of(0); }
inline sharded_pool<receive_context>& grain_envelope_pool() noexcept {
  return envelope_pool_of(k_grain_pool_tag);
}

// A copy of src for a second queue (stash): the payload moves, sender, receiver, reply route and
// deadline are copied, from src's home shard in src's pool; the clone's late-reply guard starts
// cleared.
receive_context* clone_for_stash(receive_context& src);

// The what() of a caught exception, for error details (actor_cell.cpp).
std::string what_of(const std::exception_ptr& e);

struct context_access {
  static actor_cell*& receiver(receive_context& c) noexcept { return c.receiver_; }
  static actor_cell*& sender(receive_context& c) noexcept { return c.sender_; }
  static reply_route*& reply(receive_context& c) noexcept { return c.reply_; }
  static std::int64_t& deadline(receive_context& c) noexcept { return c.deadline_ns_; }
  static bool& reply_closed(receive_context& c) noexcept { return c.reply_closed_; }
  static std::uint32_t& flags(receive_context& c) noexcept { return c.flags_; }
  // Valid under envelope::flag_traced only.
  static trace_state*& trace(receive_context& c) noexcept { return c.trace_; }
  static void reset(receive_context& c) noexcept { c.reset(); }
  static void release_contents(receive_context& c) noexcept { c.release_contents(); }
  // A request refused before anything was sent: the continuation gets `why` on a later turn.
  static request_handle refuse_request(receive_context& c, continuation then, error why) {
    return c.request_erased(pid(), nullptr, std::chrono::nanoseconds::zero(), std::move(then),
                            request_options{}, std::move(why));
  }
  static request_handle request(receive_context& c, const pid& to, envelope_ptr e,
                                std::chrono::nanoseconds timeout, continuation then,
                                request_options options) {
    return c.request_erased(to, std::move(e), timeout, std::move(then), options);
  }
  static request_handle request_into(receive_context& c, envelope_ptr e,
                                     std::chrono::nanoseconds timeout, continuation then,
                                     request_options options, envelope_sink sink) {
    return c.request_erased(pid(), std::move(e), timeout, std::move(then), options, {}, sink);
  }
};

// The system cores not yet deleted in this process: a core lives while its actor_system or any
// cell, pid or thread holds it, so a count that stays up after the system is destroyed names a
// reference cycle through a cell (what LeakSanitizer reports only at exit). Writers: the core's
// constructor (relaxed) and destructor (release); reader: tests (acquire).
extern std::atomic<int> g_system_cores_alive;

class system_core {
 public:
  system_core(actor_system* owner, std::string name, const system_config& cfg);

  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  run_state state() const noexcept { return state_.load(std::memory_order_acquire); }
  bool accepting() const noexcept { return state() == run_state::running; }
  // Why new work (a spawn, an activation) is refused now: system_not_started or
  // system_shutting_down; ok while running.
  error refusal() const noexcept {
    switch (state()) {
      case run_state::created:
        return errc::system_not_started;
      case run_state::stopping:
      case run_state::stopped:
        return errc::system_shutting_down;
      case run_state::running:
        break;
    }
    return {};
  }

  // Publishes env's payload as a dead letter and completes an ask it carries with `reason`.
  // The envelope stays the caller's (its mailbox, or the caller recycles it).
  void dead_letter(receive_context& env, const error& reason) noexcept;
  // A dead letter without an envelope (late replies, replies with no recipient).
  void dead_letter(message msg, pid sender, pid receiver, const error& reason) noexcept;
  // Completes the ask env carries (if a reply is still owed) with r; a late reply is published
  // as a dead letter.
  void complete_reply(receive_context& env, result<message> r) noexcept;

  void on_actor_started() noexcept;
  // Runs mark (which flips the actor's state to dead) under the lock that waiters re-check,
  // counts the death and wakes them.
  template <class Mark>
  void on_actor_dead(Mark&& mark) noexcept {
    {
      std::lock_guard<std::mutex> lock(death_mutex_);
      mark();
      live_.fetch_sub(1, std::memory_order_relaxed);
    }
    death_cv_.notify_all();
  }
  // Wakes wait_for_deaths to re-check its predicate after a change that is not a death (a
  // grain activation that failed while a shutdown waits for it). Takes the waiters' lock, so a
  // change made before the call is seen by every waiter.
  void wake_death_waiters() noexcept {
    { std::lock_guard<std::mutex> lock(death_mutex_); }
    death_cv_.notify_all();
  }
  // Waits until pred() or the deadline; woken whenever an actor dies.
  template <class Pred>
  bool wait_for_deaths(std::chrono::steady_clock::time_point deadline, Pred pred) {
    std::unique_lock<std::mutex> lock(death_mutex_);
    return death_cv_.wait_until(lock, deadline, pred);
  }

  // A reference on this core held by a thread object (workers, blocking threads) until it ends.
  std::shared_ptr<void> keep_alive() {
    add_ref();
    return std::shared_ptr<void>(nullptr, [this](void*) { release(); });
  }

  struct shutdown_hook {
    std::string name;
    std::function<result<void>()> run;
    int order;
  };
  std::mutex hooks_mutex_;
  std::vector<shutdown_hook> hooks_;  // guarded by hooks_mutex_

  // The grain layer, created on first use (see grain_layer.cpp). Writer: the first grain call,
  // under extension_mutex_ (release); readers: grain calls and stop (acquire). Destroyed with
  // the core.
  std::mutex extension_mutex_;
  std::atomic<system_extension*> grains_{nullptr};
  // The remote module's extension: written by start() before it returns (release), when the
  // config has remote settings; null otherwise. Owned; deleted with the core (proxies that
  // outlive stop() still reach it).
  std::atomic<remote_extension*> remote_{nullptr};
  remote_extension* remote() const noexcept { return remote_.load(std::memory_order_acquire); }
  // The cluster module's extension: written by start() after remote_ (release), when the config
  // has a cluster section; null otherwise. Owned; deleted with the core, before remote_.
  std::atomic<cluster_extension*> cluster_{nullptr};
  // Set by akt::testkit::crash before it calls stop(): the stop then looks to the other nodes
  // like a killed process's (no shutdown hooks, no on_deactivate, no claim release, no lease
  // revoke, nothing flushed to peers). Writer: the crashing thread (release), before stop();
  // readers: the layers' stop steps on that same thread.
  std::atomic<bool> crash_requested_{false};
  bool crashing() const noexcept { return crash_requested_.load(std::memory_order_acquire); }
  cluster_extension* cluster() const noexcept { return cluster_.load(std::memory_order_acquire); }
  // The http module's extension: written by start() first of all (release), when the config has
  // an http section; null otherwise. Owned; closed by stop(), deleted with the core.
  std::atomic<http_extension*> http_{nullptr};
  http_extension* http() const noexcept { return http_.load(std::memory_order_acquire); }

  // Actor kinds registered by name, for spawn_on from other nodes. Any thread; each call takes
  // kinds_mutex_ once and runs no factory under it.
  using actor_factory = std::function<result<pid>(actor_system&, std::string_view name)>;
  // Registers make under kind; false (make dropped) when kind has a factory already.
  bool add_actor_kind(std::string_view kind, actor_factory make) {
    std::lock_guard<std::mutex> lock(kinds_mutex_);
    return actor_kinds_.try_emplace(std::string(kind), std::move(make)).second;
  }
  // A copy of kind's factory; empty when none is registered.
  actor_factory find_actor_kind(const std::string& kind) const {
    std::lock_guard<std::mutex> lock(kinds_mutex_);
    if (auto it = actor_kinds_.find(kind); it != actor_kinds_.end()) return it->second;
    return {};
  }

  // The runtime's "now" (the timer service's clock: virtual under manual time), for deadlines
  // carried as time left. Any thread, lock-free.
  std::int64_t now_ns() const noexcept { return timers_.now_ns(); }
  // Runs task on the blocking pool (user code that must run neither on a dispatcher worker nor
  // on an I/O thread); false when the pool is stopping (task dropped).
  bool run_blocking(std::function<void()> task) { return blocking_.submit(std::move(task)); }
  // The system's event stream (peer events and the like are published here).
  event_stream& events() const noexcept { return *events_; }

  // Logs an event of a part of the runtime (component: "remote", "shutdown", ...), or of an
  // actor or grain (log_actor: its path or identity is both the component and the actor
  // field). The record carries the node and, inside a traced handler, its trace id. Any thread.
  void log(log_level level, std::string_view component, std::string_view text) const {
    if (logger_ && level >= logger_->threshold()) log_record_of(level, component, {}, text);
  }
  void log_actor(log_level level, std::string_view actor, std::string_view text) const {
    if (logger_ && level >= logger_->threshold()) log_record_of(level, actor, actor, text);
  }

  // Null once the actor_system object is gone. Writer: ~actor_system (release); readers: turns
  // (acquire), among them a handler abandoned by a shutdown that finishes afterwards.
  std::atomic<actor_system*> owner_;
  actor_system* owner() const noexcept { return owner_.load(std::memory_order_acquire); }
  const std::string name_;
  const system_config config_;
  const std::shared_ptr<logger> logger_;
  void log_record_of(log_level level, std::string_view component, std::string_view actor,
                     std::string_view text) const;
  const supervisor default_supervisor_;
  // The system's metrics registry (actor_system::metrics()); before everything that may
  // register a collector in it, so that it outlives their handles.
  metrics::registry metrics_;
  // Manual time only: actors ready or in a turn plus blocking-pool tasks queued or running (the
  // dispatcher and the pool count here; see their contracts); zero when the system is
  // quiescent. Reader: the testkit (seq_cst).
  std::atomic<std::int64_t> work_{0};
  timer_service timers_;
  scheduler scheduler_{this, &timers_};
  blocking_pool blocking_;
  dispatcher dispatcher_;
  name_registry registry_;
  std::shared_ptr<event_stream> events_;
  akt::topics topics_{*this};  // after events_, which it follows
  std::atomic<run_state> state_{run_state::created};
  std::atomic<std::uint64_t> live_{0};
  std::atomic<std::uint64_t> spawned_{0};
  std::atomic<std::uint64_t> dead_letters_{0};
  std::atomic<std::uint64_t> processed_by_dead_{0};  // messages processed by stopped actors
  // The system's tracer: made by the constructor when the config traces, stopped (flushed) by
  // stop(), destroyed with the core. Null: tracing is off. Never changes after construction.
  const std::unique_ptr<detail::tracer> tracer_;
  detail::tracer* tracer() const noexcept { return tracer_.get(); }
  // The runtime's own metrics (system_config::metrics); after everything its collector reads,
  // so that it goes first.
  runtime_metrics runtime_metrics_{*this};

 private:
  ~system_core() {
    delete http_.load(std::memory_order_acquire);
    delete grains_.load(std::memory_order_acquire);
    delete cluster_.load(std::memory_order_acquire);
    delete remote_.load(std::memory_order_acquire);
    g_system_cores_alive.fetch_sub(1, std::memory_order_release);
  }
  std::atomic<std::uint32_t> refs_{1};
  mutable std::mutex kinds_mutex_;
  std::unordered_map<std::string, actor_factory> actor_kinds_;  // guarded by kinds_mutex_
  std::mutex death_mutex_;
  std::condition_variable death_cv_;
};

}  // namespace akt::detail
