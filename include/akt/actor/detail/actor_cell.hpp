#pragma once
// actor_cell: the runtime's record of one actor: its mailbox, system queue, dispatch state,
// lifecycle, place in the hierarchy, and the actor object itself (allocated in the same block:
// one allocation per spawn).
//
// Contract
// - deliver (producers): any thread. Lock-free on the default mailbox: one exchange, one load,
//   at most one CAS and one ready-queue push.
// - run_turn and everything it calls: only the worker that owns the current turn (see
//   schedulable.hpp); so the actor object, its behaviours, stash, children list, watchers and
//   pending requests (the "extras") are touched by one thread at a time. Other actors reach
//   them only through system messages.
// - life_: starting -> alive -> stopping -> dead, written by the turn owner (or the spawner
//   before the first turn), read by producers (acquire) to refuse messages to stopped actors.
// - Memory: this header (128 bytes) plus sizeof(T) (and its constructor arguments, kept for
// restarts); the
//   default mailbox and the system queue are embedded and allocate nothing while empty.
//   Everything only some actors use (children, watchers, stash, behaviours, requests,
//   supervision state) lives in a block allocated on first use.

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "akt/actor/actor.hpp"
#include "akt/actor/spawn_options.hpp"
#include "akt/core/compact_string.hpp"
#include "akt/dispatch/schedulable.hpp"
#include "akt/mailbox/mpsc_queue.hpp"
#include "akt/mailbox/system_queue.hpp"

namespace akt::detail {

class system_core;
struct cell_extras;
struct request_reply;
struct supervise_siblings;

// remote: a proxy for an actor on another node (the remote module's remote_cell). Above dead,
// so every "stopping or later" test on the local paths (the fast path of deliver among them)
// turns a proxy away, and deliver_slow and post_system hand it to the remote module.
enum class life_state : std::uint8_t { starting, alive, stopping, dead, remote };
// What the turn owner may process (owner-only): normal, or holding user messages while a
// supervision decision is pending, or waiting for children to stop before a restart.
enum class turn_mode : std::uint8_t { normal, suspended, restarting };

// Actor kinds for the runtime's metrics: a process-wide id per C++ type of actor, interned on
// first use (a short lock; only when metrics are on). k_no_kind: not an actor kind (grains,
// remote proxies), or the table could not grow.
inline constexpr std::uint32_t k_no_kind = ~std::uint32_t{0};
std::uint32_t intern_actor_kind(const std::type_info& type) noexcept;

class actor_cell : public schedulable {
 public:
  bool run_turn(unsigned budget) override;

  // The last segment of the path.
  std::string_view name() const noexcept;
  // "parent/child" below the user guardian.
  std::string_view path() const noexcept { return path_; }
  system_core* system() const noexcept { return system_; }
  actor_cell* parent() const noexcept { return parent_; }
  life_state life() const noexcept { return life_.load(std::memory_order_acquire); }
  std::uint32_t home_shard() const noexcept { return home_shard_; }
  // Where actor_cell_for places the actor object: right after this header (an object whose actor
  // base sits elsewhere is found through locate_instance instead).
  static constexpr std::size_t instance_offset = 128;
  // An actor's hash of its path, for the name registry (a grain has none: see grain_direct).
  std::uint32_t name_hash() const noexcept {
    return hash_or_direct_.load(std::memory_order_relaxed);
  }
  // A grain's direct-send word (grain_host.hpp, k_direct_*), in the slot an actor keeps its name
  // hash in: grains are never in the name registry. For the grain module.
  std::atomic<std::uint32_t>& grain_direct() noexcept { return hash_or_direct_; }
  // The actor object, or null once it is destroyed (turn owner, or the spawner before start).
  actor* instance() const noexcept {
    const std::uintptr_t w = turn_word_.load(std::memory_order_relaxed);
    if ((w & k_has_instance) == 0) return nullptr;
    if ((w & k_instance_elsewhere) != 0) return locate_instance();
    return reinterpret_cast<actor*>(reinterpret_cast<std::uintptr_t>(this) + instance_offset);
  }
  mailbox* custom_mailbox() const noexcept { return custom_.get(); }

  // Producer side: enqueue (or refuse and dead-letter) and schedule.
  error deliver(receive_context* env) noexcept;
  // deliver's fast path only: false, with nothing done, when the message would need the slow
  // path (a custom mailbox, a closing cell or system). Never publishes anything, so a caller
  // may hold a lock.
  bool deliver_if_open(receive_context* env) noexcept;
  error deliver_slow(receive_context* env) noexcept;
  // Puts a runtime control message (a detail:: type) on the system queue. Any thread.
  void post_system(message msg, actor_cell* from = nullptr) noexcept;

  // Figures, readable from any thread.
  std::size_t mailbox_size() const noexcept;
  std::uint64_t processed() const noexcept { return processed_.load(std::memory_order_relaxed); }
  std::int64_t last_active_ns() const noexcept {
    return last_active_ns_.load(std::memory_order_relaxed);
  }
  std::uint32_t restarts() const noexcept;
  // The kind of the actor (its C++ type) as an intern_actor_kind id, for metrics. Any thread,
  // while the cell lives; it reads the cell's type, never the actor object (which its stop
  // destroys). k_no_kind for cells that are not user actors (grains, remote proxies).
  virtual std::uint32_t kind_id() const noexcept { return k_no_kind; }

  // Spawn: registers the actor (unless register_name is false: grain activations live in the
  // grain directory instead), runs pre_start and opens it for messages; on failure stops it.
  error start(bool register_name = true);

  // A grain activation: its name is the grain identity (kind/name) and its path
  // akt://<system>/grain/<identity>; its messages ride in the grain envelope pool (a new home
  // shard from that pool's round robin, with its tag). Set once, right after construction:
  // before start, before any envelope to the cell is taken.
  void mark_grain() noexcept;
  bool is_grain() const noexcept { return grain_; }
  bool is_remote() const noexcept { return life() == life_state::remote; }
  // Turn owner: true when no user message waits (exact for the default mailbox).
  bool user_backlog_empty() const noexcept { return user_empty(custom_.get()); }

  // ---- turn-owner API (called from receive_context while this actor's handler runs) ----
  cell_extras& extras();
  cell_extras* extras_if_any() const noexcept {
    return reinterpret_cast<cell_extras*>(turn_word_.load(std::memory_order_acquire) & ~k_tag_mask);
  }
  void report_failure(error err) noexcept;  // ctx.fail
  void adopt_child(actor_cell* child);      // after a child's successful spawn

 protected:
  actor_cell(system_core* core, actor_cell* parent, std::string_view name, spawn_options&& options);
  ~actor_cell() override;
  void destroy() noexcept override;
  // `a` lives inside this cell's block (actor_cell_for's storage); null when it was destroyed.
  // A proxy of the remote module: set before the cell is shared; it never starts or stops.
  void mark_remote() noexcept { life_.store(life_state::remote, std::memory_order_release); }

  void set_instance(actor* a) noexcept {
    std::uintptr_t w =
        turn_word_.load(std::memory_order_relaxed) & ~(k_has_instance | k_instance_elsewhere);
    if (a != nullptr) {
      w |= k_has_instance;
      if (reinterpret_cast<std::uintptr_t>(a) !=
          reinterpret_cast<std::uintptr_t>(this) + instance_offset)
        w |= k_instance_elsewhere;
    }
    turn_word_.store(w, std::memory_order_release);
  }
  virtual void destroy_instance() noexcept = 0;
  // The actor object of a type whose actor base is not at instance_offset (over-aligned types,
  // or types deriving from actor as a second base). Called only while one exists.
  virtual actor* locate_instance() const noexcept = 0;
  // Builds a fresh actor object from the spawn arguments (restart). May throw.
  virtual void rebuild_instance() = 0;

 private:
  friend struct cell_ops;

  receive_context* dequeue_user(mailbox* custom) noexcept;
  receive_context* next_user(mailbox* custom, bool& from_mailbox) noexcept;
  bool user_empty(mailbox* custom) const noexcept;
  // Ends the turn (see schedulable::finish_turn); true when it reclaimed the actor. With
  // count_user false, only system messages count as work (user messages are being held).
  bool finish_or_reclaim(bool count_user) noexcept;
  void invoke(receive_context& env) noexcept;
  // invoke, timed for akt_actor_handler_seconds: the turn calls it for one message in
  // metrics.handler_sample_every per thread (see run_turn).
  void invoke_sampled(receive_context& env) noexcept;
  // invoke inside a handler span, for a message under envelope::flag_traced (tracer.cpp).
  void invoke_traced(receive_context& env) noexcept;
  void handle_system(receive_context& env) noexcept;
  void queue_reply(std::uint64_t id, result<message> reply, actor_cell* from) noexcept;
  void run_continuation(receive_context& env, request_reply& r);
  // Supervision.
  const supervisor& effective_supervisor() const noexcept;
  void on_failure(receive_context* env, const std::exception_ptr& exception, error err) noexcept;
  void apply_directive(directive d, const error& reason) noexcept;
  void suspend(std::string why) noexcept;
  void on_escalation(const pid& child, const error& reason) noexcept;
  void on_supervise_siblings(const supervise_siblings& s) noexcept;
  void restart(const error& reason) noexcept;
  void begin_restart() noexcept;
  void complete_restart() noexcept;
  void drop_requests() noexcept;
  // Lifecycle.
  void on_child_stopped(actor_cell* child) noexcept;
  void passivate() noexcept;
  void arm_passivation(std::int64_t due_ns) noexcept;
  void on_passivation_check() noexcept;
  void stop_now(const error& reason) noexcept;
  void finish_stop() noexcept;
  void drain_to_dead_letters() noexcept;

  turn_mode mode() const noexcept {
    return static_cast<turn_mode>(turn_word_.load(std::memory_order_relaxed) & k_mode_mask);
  }
  void set_mode(turn_mode m) noexcept {
    const std::uintptr_t w = turn_word_.load(std::memory_order_relaxed) & ~k_mode_mask;
    turn_word_.store(w | static_cast<std::uintptr_t>(m), std::memory_order_release);
  }

  // turn_word_: the extras pointer (16-byte aligned) with the turn owner's flags in its low bits.
  static constexpr std::uintptr_t k_mode_mask = 3;           // turn_mode
  static constexpr std::uintptr_t k_has_instance = 4;        // the actor object exists
  static constexpr std::uintptr_t k_instance_elsewhere = 8;  // see locate_instance
  static constexpr std::uintptr_t k_tag_mask = 15;

  // Layout (offsets on a 64-bit target; 128 bytes in all, checked in actor_cell.cpp). Cells are
  // 16-byte aligned, so the cache line holding the last byte producers touch on every message
  // (a grain's direct word, at 44 to 47) ends at most 49 bytes later, at 96. The turn owner's
  // per-message fields start at 96 and so never share a line with inbox_head_, which producers
  // exchange: measured, the turn mode on that line cost TellSinglePair a third of its rate.
  // Between the two sit fields that are cold or written once per turn (a turn already writes
  // that line: dispatch_ at its end). What the turn reads on every message besides the mailbox
  // (its mode, whether the actor object exists, the extras) is packed into one word,
  // turn_word_.

  // -- producer end: written on every message --
  std::atomic<mpsc_node*> inbox_head_;  // 16: default mailbox; producers exchange (seq_cst)
  // -- read by producers on every message, written at spawn and stop --
  system_core* const system_;              // 24: holds a reference on the core for the cell's life
  const std::unique_ptr<mailbox> custom_;  // 32: a user-chosen mailbox, or null
  // 40: envelope pool home shard of messages to this actor, with the grain pool's tag for a
  // grain. Written by the constructor and, for a grain, by mark_grain, both before the cell is
  // shared with another thread; read-only afterwards.
  std::uint16_t home_shard_;
  std::atomic<life_state> life_{life_state::starting};  // 42
  bool grain_ = false;                                  // 43: cold, set before start
  // -- cold, or written once per turn --
  // 44: an actor's hash of path_: written once in the constructor, before the cell is shared;
  // read by the name registry (relaxed: a plain load). A grain, never in the name registry,
  // keeps here the word its grain_refs' direct sends go through (writers and readers in
  // grain_host.hpp, k_direct_*). Those senders write it twice per message and own this line
  // anyway (inbox_head_); on a line the turn owner reads per message it halved a grain_ref
  // tell's rate (docs/benchmarks.md, "The turn off the senders' line").
  std::atomic<std::uint32_t> hash_or_direct_;
  const compact_string path_;  // 48: "parent/child" below the user guardian
  actor_cell* const parent_;   // 64: null for top-level actors; outlives its children
  // 72: the first sentinel only. Later sentinels are envelopes (recycled one dequeue later), so
  // producers write this node's link once, for the first message, and nothing touches it after.
  mpsc_node inbox_stub_;
  // 80, 88: figures. Writer: the turn owner, once per turn (relaxed, no read-modify-write).
  // Readers: anyone.
  std::atomic<std::uint64_t> processed_{0};
  std::atomic<std::int64_t> last_active_ns_{0};  // steady-clock ns at the last turn's start
  // -- consumer end: the turn owner, every message --
  mpsc_node* inbox_tail_;  // 96: default mailbox: current sentinel
  system_queue sysq_;      // 104
  // 120: extras pointer | flags (k_* above). Writer: the turn owner (or the spawner before the
  // first turn), release. Readers: the turn owner (relaxed); others read only the extras pointer,
  // for figures (acquire, pairs with the release that published the block).
  std::atomic<std::uintptr_t> turn_word_{0};
};

template <class T, class... Args>
class actor_cell_for final : public actor_cell {
 public:
  template <class... A>
  actor_cell_for(system_core* core, actor_cell* parent, std::string_view name,
                 spawn_options&& options, A&&... args)
      : actor_cell(core, parent, name, std::move(options)), args_(std::forward<A>(args)...) {
    if constexpr (rebuildable)
      build();
    else
      set_instance(
          std::apply([this](auto&... a) { return new (storage_) T(std::move(a)...); }, args_));
  }
  ~actor_cell_for() override { destroy_instance(); }
  std::uint32_t kind_id() const noexcept override {
    static const std::uint32_t id = intern_actor_kind(typeid(T));
    return id;
  }

 protected:
  void destroy_instance() noexcept override {
    if (instance() != nullptr) {
      std::launder(reinterpret_cast<T*>(storage_))->~T();
      set_instance(nullptr);
    }
  }
  actor* locate_instance() const noexcept override {
    return std::launder(reinterpret_cast<T*>(const_cast<unsigned char*>(storage_)));
  }
  void rebuild_instance() override {
    destroy_instance();
    if constexpr (rebuildable)
      build();
    else
      throw std::logic_error("restart needs copyable constructor arguments");
  }

 private:
  static constexpr bool rebuildable = std::is_constructible_v<T, const Args&...>;
  void build() {
    set_instance(std::apply([this](const auto&... a) { return new (storage_) T(a...); }, args_));
  }
  // The actor object first: right after the header (at instance_offset) when alignof(T) <= 128.
  alignas(T) unsigned char storage_[sizeof(T)];
  // The spawn arguments: each restart builds a fresh instance from copies of them (move-only
  // arguments are moved into the first instance; such an actor cannot be restarted).
  [[no_unique_address]] std::tuple<Args...> args_;
};

}  // namespace akt::detail
