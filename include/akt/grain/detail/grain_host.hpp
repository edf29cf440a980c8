#pragma once
// The runtime half of the grain API: the host actor that runs a grain inside an actor cell, the
// cell that holds it, and the directory's and grain_ref's records. Templates in grains.hpp
// instantiate them, so they are in a header; nothing here is for users (namespace detail).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "akt/actor/actor.hpp"
#include "akt/actor/actor_system.hpp"
#include "akt/actor/detail/actor_cell.hpp"
#include "akt/actor/schedule.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"
#include "akt/grain/grain.hpp"
#include "akt/grain/grain_context.hpp"

namespace akt {
namespace detail {

struct grain_kind;
struct grain_timer_table;

// The activation a grain_ref last reached: its cell and the generation under which it was open
// for direct sends. Empty, or stale, means the next send asks the directory (which refreshes
// it). Owned by one grain_ref object: not for concurrent use.
struct grain_route {
  pid cell;                                      // keeps the cell (and *direct) alive
  std::atomic<std::uint32_t>* direct = nullptr;  // the cell's direct word (below)
  // The host's reservation counter and mailbox capacity (read-only for the cell's life), copied
  // so that a direct send touches no line the activation's turn writes. Valid while the route's
  // generation is open: the host lives as long as its activation's instance.
  std::atomic<std::int64_t>* queued = nullptr;
  std::uint32_t capacity = 0;
  std::uint32_t generation = 0;
};

// The direct word of a grain's cell (actor_cell::grain_direct, on the line producers write):
// [generation:16][closed:1][senders:15]. Open (closed bit clear, the low 16 bits of the current
// activation's generation) only while an instance lives. Writers: senders through a grain_ref
// (+1 / -1 around one enqueue; acquire / release) and the turn (opens it after an activation
// succeeded; closes it when the activation ends, then waits until no sender is inside, so every
// direct enqueue is in the mailbox before the activation checks that its mailbox is empty and
// leaves the directory). It lives in the cell, not in the host, because the host is destroyed
// when the cell stops while a grain_ref may still hold the cell (and read the word, to find it
// closed). The senders' count bounds concurrent direct senders to one grain at 32767 threads.
// The generation only tells a route that its activation ended; a wrapped one that matches again
// is harmless: an open word means the route's cell holds the identity's live activation, which
// is where the directory would send too.
inline constexpr std::uint32_t k_direct_closed = std::uint32_t{1} << 15;
inline constexpr std::uint32_t k_direct_senders = k_direct_closed - 1;
inline constexpr std::uint32_t direct_generation(std::uint32_t word) noexcept { return word >> 16; }
// The open word of an activation's generation (its low 16 bits), with no sender counted.
inline constexpr std::uint32_t direct_open(std::uint32_t generation) noexcept {
  return (generation & 0xffffu) << 16;
}

// A direct sender's entry: counts it in when route's activation is open under route's
// generation (true: leave_direct after the enqueue); false, counting nothing, when not.
inline bool enter_direct(const grain_route& route) noexcept {
  const std::uint32_t d = route.direct->fetch_add(1, std::memory_order_acquire);
  if ((d & k_direct_closed) == 0 && direct_generation(d) == route.generation) return true;
  route.direct->fetch_sub(1, std::memory_order_release);
  return false;
}
// Release: the enqueue before it is in the mailbox before close_direct sees this sender leave.
inline void leave_direct(const grain_route& route) noexcept {
  route.direct->fetch_sub(1, std::memory_order_release);
}

// The direct path of a grain_ref's one-way tell, inline so that the message goes into its
// envelope as its own type (no type-erased move through akt::message): into route's activation
// while it is open under route's generation, for an unbounded mailbox. False when the route is
// empty, stale or bounded (msg is untouched; the caller takes the directory path, which
// refreshes the route and reserves room in a bounded mailbox); true when sent or refused (out).
// The protocol is direct_send's (grain_send.cpp): the word counts this sender in around its
// enqueue, so that a closing activation waits until the enqueue is in its mailbox.
template <class M>
bool direct_tell(grain_route& route, M&& msg, error& out) {
  actor_cell* const cell = detail::cell_of(route.cell);
  if (cell == nullptr || route.capacity != 0 || !enter_direct(route)) return false;
  envelope* env = nullptr;
  try {
    env = detail::make_envelope(cell, std::forward<M>(msg)).release();
  } catch (...) {
    leave_direct(route);
    throw;
  }
  auto* rc = static_cast<receive_context*>(env);
  const bool queued = cell->deliver_if_open(rc);
  leave_direct(route);
  out = queued ? error() : cell->deliver(rc);  // a closed cell: refused, with its dead letter
  return true;
}

// Signals the end of an activation to the resolvers that wait for it.
struct activation_gate {
  std::atomic<int> done{0};  // writer: the activating thread (release); readers: waiters (acquire)
  error result;              // written before done
};

// The directory's record of one activation, embedded in the activation itself so that the
// directory allocates nothing per grain. Fields are guarded by the directory (its shard lock).
struct directory_link {
  actor_cell* cell = nullptr;             // the activation; its path is the key
  directory_link* next = nullptr;         // the shard's chain
  std::uint32_t hash = 0;                 // of the key
  std::shared_ptr<activation_gate> gate;  // set while the activation runs
};

// The actor that hosts one activation of a grain (inside the activation's cell). The grain
// object lives in the derived grain_host<T>, so a fresh instance can be built in place when
// the identity is activated again.
class grain_host_base : public actor {
 public:
  explicit grain_host_base(const grain_kind* kind) noexcept : kind_(kind) {}
  ~grain_host_base() override;
  error pre_start(actor_context& ctx) final;
  void receive(receive_context& ctx) final;
  void post_stop(actor_context& ctx) final;

  // For the grain layer (turn owner only, or before start).
  const grain_kind* kind() const noexcept { return kind_; }
  const grain_settings& settings() const noexcept { return *settings_; }
  // The activation's reentrancy: set at runtime, or the settings'.
  grain_reentrancy reentrancy() const noexcept {
    if (reentrancy_mode_ < 0) return settings_->reentrancy;
    return {static_cast<reentrancy_mode>(reentrancy_mode_), reentrancy_max_};
  }
  void set_reentrancy(grain_reentrancy r) noexcept {
    reentrancy_mode_ = static_cast<std::int8_t>(r.mode);
    reentrancy_max_ = static_cast<std::uint32_t>(r.max_in_flight);
  }
  // The hosting cell (set with the directory link, before start).
  actor_cell* cell() const noexcept { return link_.cell; }
  // The current activation's fencing token (see claim_token_); any thread.
  std::int64_t fencing_token() const noexcept {
    return claim_token_.load(std::memory_order_relaxed);
  }

 protected:
  virtual grain* build_instance() = 0;
  virtual void drop_instance() noexcept = 0;
  virtual grain* instance() noexcept = 0;

 private:
  friend struct grain_host_access;
  // Builds the instance and runs on_activate (its attempts, within the activation timeout);
  // on success arms the idle timer. Publishes grain_activated or grain_activation_failed.
  error activate(actor_system& sys, actor_cell* cell);
  // Runs on_deactivate for the current instance (once) and drops it; publishes
  // grain_deactivated. for_stop: a failure is also named in actor_system::stop's error.
  // keep_admission: the gate is not told yet (an idle deactivation, until the cell has left the
  // directory).
  error deactivate(actor_system& sys, actor_cell* cell, bool for_stop, bool keep_admission = false);

  // Deactivates for a stop (the shutdown marker, or the cell stopped some other way): runs
  // on_deactivate unless the shutdown abandoned the grain, and leaves the directory.
  void deactivate_for_stop(actor_system& sys, actor_cell* cell);
  // Ends the activation without on_deactivate: cancels its timers (later ones are refused until
  // the next activation) and drops the instance.
  void end_activation() noexcept;
  // Tells the activation gate, once, that the admitted activation ended (no-op otherwise).
  void release_admission(const grain_identity& id) noexcept;
  // Whether the current activation may still run a handler: true without a fence; else the
  // node is not fenced and still in the epoch the activation was made under.
  bool fence_holds() const noexcept;
  // Drops the current activation without on_deactivate because its node is fenced (or rejoined
  // under a new epoch), as a crash would: what follows is handled as for a dormant activation.
  void drop_for_fence(actor_system& sys, actor_cell* cell);
  // Cancels the activation's timers.
  void stop_timers() noexcept;
  // Opens direct sends for the current generation (after an activation succeeded), and closes
  // them, waiting until no direct sender is inside (see k_direct_closed).
  void open_direct() noexcept;
  void close_direct() noexcept;
  // One more message handled (turn owner), and the count's low bits for the idle check.
  void note_handled() noexcept {
    handled_.store(handled_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  std::uint32_t handled_low() const noexcept {
    return static_cast<std::uint32_t>(handled_.load(std::memory_order_relaxed));
  }
  // Hands the message to on_receive (exceptions become the caller's error); whether it answered.
  bool run_on_receive(receive_context& ctx, actor_cell* cell, bool acknowledged);

  const grain_kind* kind_;
  // User messages (and keep-alive timer ticks) this cell handled, in all its activations.
  // Writer: the turn owner, per message, on the host's first line, which no sender writes; a
  // relaxed load and store, not a read-modify-write: the single writer makes it the plain
  // increment it was. Readers: the turn (the idle check), and a metrics scrape under the
  // directory's lock (akt_grain_messages_total; relaxed: a count, it orders nothing).
  std::atomic<std::uint64_t> handled_{0};
  directory_link link_;  // this activation's entry in the grain directory (and its cell)
  // The activation's settled options. Turn owner: written by the layer before start, and again
  // by the turn when a fresh activation starts in place after an idle deactivation (it gets the
  // kind's options, not those of the call that created the cell). Senders never read it: they
  // read mailbox_capacity_.
  std::shared_ptr<const grain_settings> settings_;
  // Turn owner: the activation's timers (allocated on first use, so idle grains without timers
  // pay one pointer).
  grain_timer_table* timers_ = nullptr;  // owned (a raw pointer: the type is private)
  // During start only: where pre_start leaves on_activate's own error for the activating caller.
  error* activation_error_ = nullptr;
  // Turn owner: set when a reactivation failed; every waiting message gets this error.
  error failing_;
  // Messages sent through the grain API and not yet received, for the mailbox capacity.
  // Writers: senders (+1, acq_rel, undone when over capacity) and the turn (-1 per user
  // message; a message sent to the cell's pid directly was never counted, so the value can dip
  // below zero and then allows that many extra). A send is refused when its +1 finds the
  // capacity taken.
  std::atomic<std::int64_t> queued_{0};
  // Turn owner: which activation of this cell is current; a timer tick of an earlier one is
  // dropped.
  std::uint32_t generation_ = 0;
  // Turn owner: the reentrancy set at runtime for this activation (grain_context::
  // enable_reentrancy); mode -1 = the settings'. Packed: it is in every idle grain.
  std::uint32_t reentrancy_max_ = 0;
  std::int8_t reentrancy_mode_ = -1;
  bool timers_stopped_ = false;  // turn owner: on_deactivate began; no new timers
  bool admitted_ = false;        // turn owner: the activation gate admitted the current one
  // Turn owner: handled_ (its low 32 bits) when the idle timer was armed. Here, in the padding
  // after the flags, so that the 64-bit handled_ costs an idle grain no byte.
  std::uint32_t handled_at_arm_ = 0;
  // The fencing token the gate gave the current activation (a cluster claim's revision); 0
  // without one. Writer: the activation's thread (pre_start, or the turn: a fence drop clears
  // it, a fresh admission sets it); readers: the turn (grain_context::fencing_token) and
  // senders delivering from other nodes, under the directory's lock (grain_send.cpp). A sender
  // racing a fence drop may read either value: both refuse or deliver safely, because a
  // message delivered to a dropped activation is refused by the fence at its turn. Relaxed:
  // it orders nothing else.
  std::atomic<std::int64_t> claim_token_{0};
  // Turn owner: the membership epoch the current activation was made under (grain_fence);
  // 0 without a fence, or with no activation: a plain system tests this byte and nothing else.
  std::uint32_t fence_epoch_ = 0;
  // The mailbox's capacity (0 = unbounded), for the senders' reservations: written by the layer
  // before start, then read-only for the cell's life (a fresh activation in place keeps the
  // mailbox, so it keeps its capacity). 32 bits so that it fits the padding after the flags;
  // a larger capacity is saturated (four billion waiting messages is unbounded in practice).
  std::uint32_t mailbox_capacity_ = 0;
};

template <class T>
class grain_host final : public grain_host_base {
 public:
  using grain_host_base::grain_host_base;

 protected:
  grain* build_instance() override {
    g_.emplace();
    return &*g_;
  }
  void drop_instance() noexcept override { g_.reset(); }
  grain* instance() noexcept override { return g_ ? &*g_ : nullptr; }

 private:
  std::optional<T> g_;
};

// The cell of one grain activation: the cell header (whose producers' line holds the direct
// word, k_direct_*), then the host, right after the header like any actor object, so that the
// turn finds it without a virtual call. That call read the cell's first line, which senders
// write on every message; with the word on the host's line besides, a grain_ref tell ran at
// 0.4 of an actor tell with one pair (docs/benchmarks.md, "The turn off the senders' line").
// Grains are never restarted.
template <class T>
class grain_cell final : public actor_cell {
 public:
  grain_cell(system_core* core, std::string_view identity, const grain_kind* kind)
      : actor_cell(core, nullptr, identity, spawn_options{}) {
    // Closed until the first activation opens it (before the cell is shared).
    grain_direct().store(k_direct_closed, std::memory_order_relaxed);
    set_instance(new (storage_) grain_host<T>(kind));
  }
  ~grain_cell() override { destroy_instance(); }

 protected:
  void destroy_instance() noexcept override {
    if (instance() != nullptr) {
      std::launder(reinterpret_cast<grain_host<T>*>(storage_))->~grain_host<T>();
      set_instance(nullptr);
    }
  }
  // Only for a grain type aligned beyond 128 bytes, whose host cannot sit at instance_offset.
  actor* locate_instance() const noexcept override {
    return std::launder(reinterpret_cast<grain_host<T>*>(const_cast<unsigned char*>(storage_)));
  }
  void rebuild_instance() override { throw std::logic_error("grains are not restarted"); }

 private:
  alignas(grain_host<T>) unsigned char storage_[sizeof(grain_host<T>)];
};

using grain_cell_factory = actor_cell* (*)(system_core* core, std::string_view identity,
                                           const grain_kind* kind);

template <class T>
actor_cell* make_grain_cell(system_core* core, std::string_view identity, const grain_kind* kind) {
  return new grain_cell<T>(core, identity, kind);
}

// Registers (or finds) kind `name`; with defaults, they become the kind's declared options.
result<const grain_kind*> register_kind(actor_system& sys, std::string_view name,
                                        grain_cell_factory factory, const grain_options* defaults);
result<grain_identity> resolve_grain(actor_system& sys, const grain_kind* kind,
                                     std::string_view name, const grain_options& per_call);
result<message> ask_grain_message(actor_system& sys, const grain_identity& id, message msg,
                                  std::chrono::nanoseconds timeout);
error tell_grain_message(actor_system& sys, const grain_identity& id, message msg,
                         const grain_tell_options& opts, actor_cell* sender);
// The name rule of grain names (as actor names'): invalid_actor_name.
error check_grain_name(std::string_view name);
// A one-way tell that goes straight to route's activation while it is open for direct sends,
// and through the directory otherwise (refreshing route).
error tell_grain_via(actor_system& sys, const grain_identity& id, message msg, grain_route& route,
                     actor_cell* sender);
// From an actor's turn: the activation for id (activating it if needed, on this worker), then
// a receive_context::request to it.
request_handle request_grain_from_actor(receive_context& ctx, const grain_identity& id, message msg,
                                        std::chrono::nanoseconds timeout, continuation then,
                                        request_options options);
result<schedule_ref> schedule_grain(actor_system& sys, const grain_identity& id, message msg,
                                    const timer_spec& spec);

template <class T>
constexpr std::string_view grain_kind_name() noexcept {
  static_assert(std::is_base_of_v<grain, T>, "a grain kind must derive from akt::grain");
  static_assert(std::is_default_constructible_v<T>,
                "grains are default-constructed by the framework; initialise in on_activate");
  return akt::type_name<T>();
}

}  // namespace detail

}  // namespace akt
