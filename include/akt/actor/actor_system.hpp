#pragma once
// actor_system: creates, runs and stops actors on a pool of dispatcher threads.
//
//   akt::actor_system sys("demo");
//   sys.start();
//   auto counter = sys.spawn<counter_actor>("counter");   // result<pid>
//   counter->tell(increment{1});
//   auto n = counter->ask<int>(get_count{}, std::chrono::seconds(1));
//   sys.stop();
//
// Thread safety: every member may be called from any thread, except that start and stop must
// not race with each other, and stop must not be called from one of the system's own workers
// (it returns errc::blocking_on_worker there).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "akt/actor/actor.hpp"
#include "akt/actor/cluster_config.hpp"
#include "akt/actor/event_stream.hpp"
#include "akt/actor/events.hpp"
#include "akt/actor/http_config.hpp"
#include "akt/actor/pid.hpp"
#include "akt/actor/remote_config.hpp"
#include "akt/actor/schedule.hpp"
#include "akt/actor/spawn_options.hpp"
#include "akt/actor/supervisor.hpp"
#include "akt/actor/topics.hpp"
#include "akt/actor/tracing.hpp"
#include "akt/core/logger.hpp"
#include "akt/core/result.hpp"
#include "akt/metrics/metrics_config.hpp"
#include "akt/metrics/registry.hpp"

namespace akt {

struct system_config {
  unsigned workers = 0;      // dispatcher threads; 0 = std::thread::hardware_concurrency()
  unsigned throughput = 32;  // messages an actor processes per turn before yielding its worker
  unsigned spin_rounds = 0;  // idle polls before a worker parks; 0 = the default
  // How long stop() waits for the shutdown hooks and for actors to process their poison pills.
  std::chrono::milliseconds shutdown_timeout = std::chrono::seconds(30);
  // Supervises actors spawned without a supervisor of their own. The default stops a failing
  // actor.
  akt::supervisor default_supervisor = akt::supervisor().otherwise(directive::stop);
  // Where the runtime logs; null = warnings and errors to stderr.
  std::shared_ptr<akt::logger> logger = nullptr;
  // Threads that run pipe_to tasks (blocking work, off the dispatcher).
  unsigned blocking_threads = 4;
  // Deterministic mode for tests: no dispatcher threads; turns run only inside
  // run_until_idle() / step() (and while a blocking ask waits), on the calling thread, in the
  // order actors became ready. pipe_to still runs on its own threads; timers run in real time
  // on their own thread unless manual_time is set too.
  bool deterministic = false;
  // Manual time for tests (with or without deterministic): the timer service runs on a virtual
  // clock that only akt::testkit::advance moves (<akt/testkit/manual_time.hpp>), firing what is
  // due on the advancing thread. Schedules and cron, idle passivation, supervisor back-off,
  // request and pipe timeouts, grain idle deactivation and grain timers all follow it; blocking
  // waits of outside callers (ask, acknowledged tell_grain, stop, probe expectations) stay in
  // real time. The dispatcher then also counts ready actors so the testkit can wait until
  // everything an advance triggered has been handled.
  bool manual_time = false;
  // Remoting (include/akt/remote/remote.hpp): set, the system is a node of a cluster of
  // systems, reachable at akt://<name>@<host>:<port>; unset, it opens no socket.
  std::optional<remote_config> remote = std::nullopt;
  // Cluster membership (include/akt/cluster/cluster.hpp): set (with remote), the node joins
  // the cluster at start and leaves it at stop; unset, nothing of the cluster runs.
  std::optional<cluster_config> cluster = std::nullopt;
  // The HTTP endpoint (include/akt/http/http.hpp): set, the system serves /metrics, /health,
  // /ready, /api/... and a dashboard at / on its own threads from start() to stop(); unset (the
  // default), it opens no socket.
  std::optional<http_config> http = std::nullopt;
  // The runtime's own metrics (include/akt/metrics/metrics_config.hpp); off by default. The
  // registry (actor_system::metrics()) takes the user's metrics either way.
  metrics_config metrics = {};
  // Tracing (include/akt/actor/tracing.hpp): set, messages carry W3C trace context and the
  // runtime records spans; unset (the default), nothing is traced and nothing travels.
  std::optional<tracing_config> tracing = std::nullopt;
};

// Figures of one actor (actor_system::stats(pid)).
struct actor_stats {
  std::uint64_t processed = 0;     // messages handed to its handlers
  std::size_t mailbox_length = 0;  // approximate (0 or 1 for the default mailbox: not counted)
  std::uint32_t restarts = 0;
  std::chrono::steady_clock::time_point last_active;  // start of its last turn; epoch before any
  bool alive = false;
};

struct system_stats {
  std::uint64_t actors = 0;        // live actors
  std::uint64_t processed = 0;     // messages handed to handlers, all actors
  std::uint64_t spawned = 0;       // actors ever started
  std::uint64_t dead_letters = 0;  // dead letters published
  // Dispatcher figures: actor turns run, times a worker parked, run-queue steals, hand-offs of
  // a ready actor straight to a parked worker.
  std::uint64_t turns = 0;
  std::uint64_t parks = 0;
  std::uint64_t steals = 0;
  std::uint64_t handoffs = 0;
};

class actor_system;
namespace detail {
class system_core;
class actor_cell;
system_core* core_of(const actor_system& sys) noexcept;
result<pid> start_actor(system_core* core, actor_cell* cell);
error check_spawn(system_core* core, actor_cell* parent, std::string_view name);
template <class T, class... Args>
result<pid> spawn_actor(system_core* core, actor_cell* parent, std::string_view name,
                        spawn_options&& options, Args&&... args);
}  // namespace detail

class actor_system {
 public:
  explicit actor_system(std::string name, system_config config = {});
  ~actor_system();  // stops the system if it is running
  actor_system(const actor_system&) = delete;
  actor_system& operator=(const actor_system&) = delete;

  const std::string& name() const noexcept;
  unsigned worker_count() const noexcept;

  // Starts the dispatcher. Returns errc::system_shutting_down after stop.
  result<void> start();
  // Coordinated shutdown, all within config.shutdown_timeout:
  //  1. the shutdown hooks, in ascending order (actors still running);
  //  2. every actor stops (children before their parents; each runs post_stop and publishes
  //     what it still had queued as dead letters);
  //  3. timers, the blocking pool and the dispatcher threads stop.
  // Whatever did not finish in time (a hook, an actor, a handler that never returns) is
  // reported in the returned error (request_timeout), not waited for. Messages sent afterwards
  // are refused with system_shutting_down and published as dead letters. Idempotent.
  result<void> stop();
  // Adds a hook for step 1 of stop(). A hook returning an error (or throwing) is reported and
  // the shutdown goes on.
  void add_shutdown_hook(std::string name, std::function<result<void>()> hook, int order = 0);
  bool running() const noexcept;

  // Deterministic mode: runs actor turns on this thread until none is ready (or max_turns);
  // returns how many ran. step() runs one. Both return 0 in the normal mode.
  std::size_t run_until_idle(std::size_t max_turns = static_cast<std::size_t>(-1));
  bool step();

  // Creates an actor of type T from args, runs its pre_start, and registers it under `name`
  // (unique per system; 1-255 characters, a letter or digit first, then letters, digits, '-',
  // '_' or '.'). Errors: invalid_actor_name, actor_already_exists, init_failure,
  // system_not_started, system_shutting_down.
  template <class T, class... Args>
  result<pid> spawn(std::string_view name, spawn_options options, Args&&... args);
  template <class T, class... Args>
  result<pid> spawn(std::string_view name, Args&&... args) {
    return spawn<T>(name, spawn_options{}, std::forward<Args>(args)...);
  }

  // The live actor with that path ("name" for a top-level actor, "parent/child" below it; the
  // full form akt://<system>/user/parent/child is accepted too), or errc::actor_not_found.
  result<pid> find(std::string_view path) const;

  // Stops the actor and waits until it has stopped (post_stop ran, name released), at most
  // `timeout`. From a worker thread it only sends the poison pill and returns
  // errc::blocking_on_worker.
  result<void> stop_actor(const pid& actor,
                          std::chrono::nanoseconds timeout = std::chrono::seconds(5));

  // Runs task() on the blocking pool and delivers its result to `to` (no sender); see
  // receive_context::pipe_to.
  template <class F>
  error pipe_to(const pid& to, F&& task,
                std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero()) {
    return detail::pipe(core_, nullptr, to, detail::wrap_task(std::forward<F>(task)), timeout);
  }

  // Scheduled messages (see schedule.hpp). delay <= 0 fires at once; interval must be > 0;
  // repeating schedules need a copyable message. Cron: 5 fields (min hour dom month dow) or 6
  // (seconds first), in a named IANA zone ("UTC" by default); errors name the position.
  result<schedule_ref> schedule_once(const pid& to, message msg, std::chrono::nanoseconds delay);
  result<schedule_ref> schedule(const pid& to, message msg, std::chrono::nanoseconds interval);
  result<schedule_ref> schedule_with_cron(const pid& to, message msg, std::string_view expression,
                                          std::string_view zone = "UTC");
  // The active schedules, oldest first.
  std::vector<schedule_info> schedules() const;

  // ---- Remoting (system_config::remote; without it these return errc::remoting_disabled) ----

  // This node's address, akt://<name>@<host>:<port> (the bound port when the config said 0);
  // empty without remoting.
  std::string address() const;
  // An actor's address: akt://<system>@<host>:<port>/<path> (a local actor's, with this node's
  // address; empty without remoting), for a lookup on another node.
  std::string address_of(const pid& actor) const;
  // The actor at `address` (akt://system@host:port/path, or a local one), checked by a round
  // trip to its node: actor_not_found when nothing lives there, invalid_address when the text
  // does not parse, unreachable when the node cannot be reached within the timeout. The pid is
  // told, asked, watched and stopped like a local one. Blocking: not from a dispatcher worker
  // (blocking_on_worker).
  result<pid> lookup(std::string_view address,
                     std::chrono::nanoseconds timeout = std::chrono::seconds(5));
  // The actor named `name` on node "host:port".
  result<pid> lookup(std::string_view node, std::string_view name,
                     std::chrono::nanoseconds timeout = std::chrono::seconds(5));
  // Makes T spawnable by name from other nodes (spawn_on): T is default-constructed.
  // duplicate_type_name when another factory has that name.
  template <class T>
  error register_actor_kind(std::string_view kind) {
    static_assert(std::is_base_of_v<actor, T> && std::is_default_constructible_v<T>,
                  "register_actor_kind<T>: T must derive from akt::actor and be default-"
                  "constructible");
    return register_actor_factory(
        kind, [](actor_system& sys, std::string_view name) { return sys.spawn<T>(name); });
  }
  error register_actor_factory(std::string_view kind,
                               std::function<result<pid>(actor_system&, std::string_view)> make);
  // Spawns an actor of a registered kind on node "host:port" and returns its pid.
  result<pid> spawn_on(std::string_view node, std::string_view kind, std::string_view name,
                       std::chrono::nanoseconds timeout = std::chrono::seconds(5));
  // Figures per peer node (messages, bytes, frames, writes, reconnects, refusals).
  std::vector<peer_stats> peers() const;

  // The port the HTTP endpoint (system_config::http) listens on, the bound one when the config
  // said 0; 0 without an http section, before start() and after stop().
  std::uint16_t http_port() const noexcept;

  event_stream& events() noexcept;
  // Publish/subscribe between this system's actors, by topic name (see topics.hpp).
  akt::topics& topics() noexcept;
  system_stats stats() const noexcept;
  // The tracer's counters (all zero when tracing is off).
  akt::tracing_stats trace_stats() const noexcept;
  actor_stats stats(const pid& actor) const noexcept;
  akt::logger& logger() const noexcept;
  // The system's metrics registry (include/akt/metrics/registry.hpp): the user's metrics, and
  // the runtime's when config.metrics.enabled. Render a scrape with
  // akt::metrics::to_prometheus_text(sys.metrics().collect()).
  metrics::registry& metrics() noexcept;

 private:
  friend detail::system_core* detail::core_of(const actor_system& sys) noexcept;
  detail::system_core* core_;
};

// The runtime behind a system, for akt's own layers (grains, testkit); not for users.
inline detail::system_core* detail::core_of(const actor_system& sys) noexcept { return sys.core_; }

}  // namespace akt

#include "akt/actor/detail/actor_cell.hpp"

namespace akt {

template <class T, class... Args>
result<pid> detail::spawn_actor(system_core* core, actor_cell* parent, std::string_view name,
                                spawn_options&& options, Args&&... args) {
  static_assert(std::is_base_of_v<actor, T>, "spawn<T>: T must derive from akt::actor");
  if (error err = check_spawn(core, parent, name)) return err;
  actor_cell* cell = nullptr;
  try {
    cell = new actor_cell_for<T, std::decay_t<Args>...>(core, parent, name, std::move(options),
                                                        std::forward<Args>(args)...);
  } catch (const std::exception& e) {
    return error(errc::init_failure, std::string("constructor threw: ") + e.what());
  } catch (...) {
    return error(errc::init_failure, "constructor threw");
  }
  return start_actor(core, cell);
}

template <class T, class... Args>
result<pid> actor_system::spawn(std::string_view name, spawn_options options, Args&&... args) {
  return detail::spawn_actor<T>(core_, nullptr, name, std::move(options),
                                std::forward<Args>(args)...);
}

template <class T, class... Args>
result<pid> receive_context::spawn(std::string_view name, spawn_options options, Args&&... args) {
  return detail::spawn_actor<T>(detail::cell_system(receiver_), receiver_, name, std::move(options),
                                std::forward<Args>(args)...);
}

}  // namespace akt
