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
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "akt/actor/actor.hpp"
#include "akt/actor/event_stream.hpp"
#include "akt/actor/events.hpp"
#include "akt/actor/pid.hpp"
#include "akt/actor/spawn_options.hpp"
#include "akt/core/result.hpp"

namespace akt {

struct system_config {
  unsigned workers = 0;      // dispatcher threads; 0 = std::thread::hardware_concurrency()
  unsigned throughput = 32;  // messages an actor processes per turn before yielding its worker
  unsigned spin_rounds = 0;  // idle polls before a worker parks; 0 = the default
  // How long stop() waits for actors to process their poison pills.
  std::chrono::milliseconds shutdown_timeout = std::chrono::seconds(30);
};

struct system_stats {
  std::uint64_t actors = 0;        // live actors
  std::uint64_t spawned = 0;       // actors ever started
  std::uint64_t dead_letters = 0;  // dead letters published
  // Dispatcher figures: actor turns run, times a worker parked, run-queue steals, hand-offs of
  // a ready actor straight to a parked worker.
  std::uint64_t turns = 0;
  std::uint64_t parks = 0;
  std::uint64_t steals = 0;
  std::uint64_t handoffs = 0;
};

namespace detail {
class system_core;
class actor_cell;
result<pid> start_actor(system_core* core, actor_cell* cell);
error check_spawn(system_core* core, std::string_view name);
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
  // Stops every actor (poison pills: each processes the pill, runs post_stop, and publishes
  // its queued messages as dead letters), then the dispatcher. Messages sent afterwards are
  // refused with system_shutting_down and published as dead letters. Idempotent.
  result<void> stop();
  bool running() const noexcept;

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

  // The live actor registered under name, or errc::actor_not_found.
  result<pid> find(std::string_view name) const;

  // Stops the actor and waits until it has stopped (post_stop ran, name released), at most
  // `timeout`. From a worker thread it only sends the poison pill and returns
  // errc::blocking_on_worker.
  result<void> stop_actor(const pid& actor,
                          std::chrono::nanoseconds timeout = std::chrono::seconds(5));

  event_stream& events() noexcept;
  system_stats stats() const noexcept;

  detail::system_core* core() const noexcept { return core_; }

 private:
  detail::system_core* core_;
};

}  // namespace akt

#include "akt/actor/detail/actor_cell.hpp"

namespace akt {

template <class T, class... Args>
result<pid> actor_system::spawn(std::string_view name, spawn_options options, Args&&... args) {
  static_assert(std::is_base_of_v<actor, T>, "spawn<T>: T must derive from akt::actor");
  if (error err = detail::check_spawn(core_, name)) return err;
  detail::actor_cell* cell = nullptr;
  try {
    cell =
        new detail::actor_cell_for<T>(core_, name, std::move(options), std::forward<Args>(args)...);
  } catch (const std::exception& e) {
    return error(errc::init_failure, std::string("constructor threw: ") + e.what());
  } catch (...) {
    return error(errc::init_failure, "constructor threw");
  }
  return detail::start_actor(core_, cell);
}

}  // namespace akt
