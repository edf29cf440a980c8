#pragma once
// Routers (GoAkt's routers, Akka's pool routers): an actor that spawns a pool of routees (its
// children, all of one actor type), supervises them, and sends each message it receives on to
// routees by a strategy.
//
//   akt::router_options opts;
//   opts.strategy = akt::routing::round_robin;
//   opts.pool_size = 4;
//   auto workers = akt::spawn_router<worker>(sys, "workers", opts, /* worker's arguments */);
//   workers->tell(job{42});                         // to one worker
//   workers->tell(akt::broadcast{flush{}});         // to every worker
//   auto n = workers->ask<int>(count{}, 1s);        // answered by one worker
//
// Strategies:
//   round_robin           the routees in turn
//   random                a routee at random
//   consistent_hash       the routee that owns options.key(msg) on a hash ring (virtual nodes
//                         per routee): one key always goes to the same routee while the pool is
//                         unchanged, and when a routee leaves, only its keys move
//   broadcast             a copy to every routee
//   scatter_gather_first  a request to every routee; the first successful reply answers
//   tail_chopping         a request to one routee (in random order), then to another every
//                         `interval` while none has answered, until `within`; the first
//                         successful reply answers
// The first three forward the message: its sender and reply route go with it, so the routee
// answers an ask itself. Broadcast sends copies with the original sender; an ask's reply route
// goes with one of them (the asker gets one answer; the other routees' replies go to the
// sending actor, or are dead letters when it asked from outside). scatter_gather_first and
// tail_chopping ask on the sender's behalf (the routees see the router as sender) and answer
// it once: the first successful reply, else the last error (request_timeout when the routees
// did not answer in time); later replies are dropped. They wait at most `within`, or less when
// the original ask's deadline comes first.
//
// Refusals (published as dead letters; an asker gets the error): errc::dead when no routee is
// left; errc::invalid_argument for a message that must be copied (broadcast, scatter, tail) but
// is not copyable; errc::handler_failed when options.key throws.
//
// The pool: routees are named routee-0 .. routee-<N-1> below the router and supervised by
// options.routee_supervisor (a restarted routee stays in the pool); one that stops leaves the
// pool for good. Stopping the router stops its routees; a restarted router builds a new pool.
// The router itself handles get_routees, broadcast{...} and the terminated notices of its
// routees; everything else is routed.
//
// Cost: the router is an ordinary actor (one extra hop); its routing state (the round-robin
// counter, the random generator, the hash ring) is its own, touched by its turn only.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "akt/actor/actor.hpp"
#include "akt/actor/actor_system.hpp"
#include "akt/actor/pid.hpp"
#include "akt/actor/receive_context.hpp"
#include "akt/actor/supervisor.hpp"
#include "akt/core/error.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"

namespace akt {

enum class routing : std::uint8_t {
  round_robin,
  random,
  broadcast,
  consistent_hash,
  scatter_gather_first,
  tail_chopping,
};

std::string_view to_string(routing r) noexcept;

// A value: copied into the router (and reused when the router restarts).
struct router_options {
  routing strategy = routing::round_robin;
  std::size_t pool_size = 0;  // routees; 0 is refused (errc::invalid_argument)
  // consistent_hash: the key of a message (required for that strategy), hashed onto a ring of
  // `virtual_nodes` points per routee (more points spread keys more evenly; must be > 0).
  // Called on the router's turn; it must not keep the message.
  std::function<std::string(const message&)> key;
  unsigned virtual_nodes = 150;
  // scatter_gather_first: how long to wait for the first reply. tail_chopping: the same, and
  // how long to wait before asking the next routee. Both must be > 0 for those strategies.
  std::chrono::nanoseconds within{std::chrono::seconds(5)};
  std::chrono::nanoseconds interval{std::chrono::milliseconds(100)};
  akt::supervisor routee_supervisor = akt::supervisor().otherwise(directive::restart);
};

// Wraps a message that must go to every routee whatever the strategy (copies: it must be
// copyable).
struct broadcast {
  message msg;
};

// Asks a router for its live routees: the reply is a std::vector<pid>.
struct get_routees {};

namespace detail {

// Spawns one routee (type-erased over its type) as a child of `router`.
using routee_factory = std::function<result<pid>(actor_system& sys, actor_cell* router,
                                                 std::string_view name, const supervisor& sup)>;

// Why the options cannot make a router (errc::invalid_argument), or ok.
error validate(const router_options& options);

struct router_gather;  // a pending scatter_gather_first ask
struct router_chop;    // a pending tail_chopping ask

// The router actor (see the top of this file). An ordinary actor: every member runs on its
// turn, one at a time, so nothing here is shared or locked.
class router_actor final : public actor {
 public:
  router_actor(router_options options, routee_factory factory);

  error pre_start(actor_context& ctx) override;
  void receive(receive_context& ctx) override;

 private:
  void route(receive_context& ctx);
  void to_all(receive_context& ctx);
  void scatter(receive_context& ctx);
  void tail_chop(receive_context& ctx);
  // Publishes the message as a dead letter and fails an ask with `why`.
  static void refuse(receive_context& ctx, const error& why);
  // Strategies that send copies: refuses (dead letter) when no routee is left or the message
  // cannot be copied; true when the message may go out.
  static bool can_fan_out(receive_context& ctx, bool have_routees, std::string_view who);
  // The time a scatter or tail ask may take: `within`, or less if the ask's deadline is sooner.
  std::chrono::nanoseconds budget(const receive_context& ctx) const;
  // Live routees only; null when none is left.
  const pid* next_in_turn() noexcept;
  const pid* at_random() noexcept;
  const pid* by_key(std::string_view key) const noexcept;
  bool remove_routee(const pid& gone);
  void rebuild_ring();
  std::vector<pid> live_routees() const;
  std::uint64_t random() noexcept;

  router_options options_;
  routee_factory factory_;
  std::vector<pid> routees_;  // the pool, in spawn order; a routee leaves when it stops
  // consistent_hash: (point, index into routees_), sorted by point.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> ring_;
  std::size_t next_ = 0;   // round_robin: the next routee
  std::uint64_t rng_ = 0;  // random, tail_chopping's order: splitmix64 state
  bool watching_ = false;  // the routees are watched (done on the first message)
};

}  // namespace detail

// Spawns a router named `name` (a top-level actor) and its pool of options.pool_size routees of
// type Routee, each built from copies of `args`. Errors: invalid_argument (pool_size 0,
// consistent_hash without a key or with no virtual nodes, scatter_gather_first or
// tail_chopping with a duration <= 0), the errors of actor_system::spawn, and init_failure
// when a routee fails to start (the routees already started are stopped).
template <class Routee, class... Args>
result<pid> spawn_router(actor_system& sys, std::string_view name, router_options options,
                         Args&&... args) {
  static_assert(std::is_base_of_v<actor, Routee>, "spawn_router<T>: T must derive from akt::actor");
  static_assert((std::is_copy_constructible_v<std::decay_t<Args>> && ...),
                "spawn_router: every routee is built from copies of the arguments");
  static_assert(std::is_constructible_v<Routee, const std::decay_t<Args>&...>,
                "spawn_router: the routee must be constructible from copies of the arguments");
  if (error err = detail::validate(options)) return err;
  // Shared by the factory's copies (the router keeps one for its restarts).
  auto shared_args =
      std::make_shared<const std::tuple<std::decay_t<Args>...>>(std::forward<Args>(args)...);
  detail::routee_factory factory = [shared_args](actor_system& s, detail::actor_cell* router,
                                                 std::string_view routee_name,
                                                 const supervisor& sup) {
    return std::apply(
        [&](const auto&... a) {
          return detail::spawn_actor<Routee>(detail::core_of(s), router, routee_name,
                                             spawn_options{.supervisor = sup}, a...);
        },
        *shared_args);
  };
  return sys.spawn<detail::router_actor>(name, spawn_options{}, std::move(options),
                                         std::move(factory));
}

}  // namespace akt
