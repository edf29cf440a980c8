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
// - Memory: this header plus sizeof(T) (and its constructor arguments, kept for restarts); the
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
#include <utility>

#include "akt/actor/actor.hpp"
#include "akt/actor/spawn_options.hpp"
#include "akt/dispatch/schedulable.hpp"
#include "akt/mailbox/mpsc_queue.hpp"
#include "akt/mailbox/system_queue.hpp"

namespace akt::detail {

class system_core;
struct cell_extras;
struct request_reply;
struct supervise_siblings;

enum class life_state : std::uint8_t { starting, alive, stopping, dead };
// What the turn owner may process (owner-only): normal, or holding user messages while a
// supervision decision is pending, or waiting for children to stop before a restart.
enum class turn_mode : std::uint8_t { normal, suspended, restarting };

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
  std::uint32_t name_hash() const noexcept { return name_hash_; }
  actor* instance() const noexcept {
    return instance_offset_ == 0 ? nullptr
                                 : reinterpret_cast<actor*>(reinterpret_cast<std::uintptr_t>(this) +
                                                            instance_offset_);
  }
  mailbox* custom_mailbox() const noexcept { return custom_.get(); }

  // Producer side: enqueue (or refuse and dead-letter) and schedule.
  error deliver(receive_context* env) noexcept;
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

  // Spawn: registers the actor, runs pre_start and opens it for messages; on failure stops it.
  error start();

  // ---- turn-owner API (called from receive_context while this actor's handler runs) ----
  cell_extras& extras();
  cell_extras* extras_if_any() const noexcept { return extras_.load(std::memory_order_acquire); }
  void report_failure(error err) noexcept;  // ctx.fail
  void adopt_child(actor_cell* child);      // after a child's successful spawn

 protected:
  actor_cell(system_core* core, actor_cell* parent, std::string_view name, spawn_options&& options);
  ~actor_cell() override;
  void destroy() noexcept override;
  // `a` lives inside this cell's block (actor_cell_for's storage), at a fixed offset.
  void set_instance(actor* a) noexcept {
    instance_offset_ = a == nullptr
                           ? 0
                           : static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(a) -
                                                        reinterpret_cast<std::uintptr_t>(this));
  }
  virtual void destroy_instance() noexcept = 0;
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

  // Layout: fields producers write on every message (the default mailbox's head), then fields
  // producers only read (written at spawn and stop), then cold fields, then the turn owner's
  // fields. Cells are 16-byte aligned, so a field at least 52 bytes after the last field a
  // producer touches per message (life_) never shares its cache line: a turn's per-message reads
  // and writes (inbox_tail_, sysq_, instance_offset_, mode_, extras_) then never pull the line that
  // producers exchange inbox_head_ on. Measured: mode_ on the producers' line cost TellSinglePair
  // a third of its rate.

  // -- producer end --
  std::atomic<mpsc_node*> inbox_head_;  // default mailbox: producers exchange (seq_cst)
  // -- read by producers on every message --
  system_core* const system_;              // holds a reference on the core for the cell's life
  const std::unique_ptr<mailbox> custom_;  // a user-chosen mailbox, or null
  const std::uint32_t home_shard_;         // envelope pool shard of messages to this actor
  std::atomic<life_state> life_{life_state::starting};
  // -- cold: spawn, stop, names, figures --
  std::uint32_t name_hash_;   // of path_, set once in the constructor
  actor_cell* const parent_;  // null for top-level actors; outlives its children
  const std::string path_;
  // -- consumer end (the turn owner) --
  mpsc_node* inbox_tail_;  // default mailbox: current sentinel
  mpsc_node inbox_stub_;
  system_queue sysq_;
  // Where the actor object sits in this block (bytes from `this`); 0 once destroyed. An offset
  // rather than a pointer so that it and mode_ share 8 bytes.
  std::uint32_t instance_offset_ = 0;
  turn_mode mode_ = turn_mode::normal;  // turn owner only, read on every message
  // Figures. Writer: the turn owner (relaxed, no read-modify-write). Readers: anyone.
  std::atomic<std::uint64_t> processed_{0};
  std::atomic<std::int64_t> last_active_ns_{0};  // steady-clock ns at the last turn's start
  // Created on first use by the turn owner (or the spawner); read by others only for figures.
  std::atomic<cell_extras*> extras_{nullptr};
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

 protected:
  void destroy_instance() noexcept override {
    if (instance() != nullptr) {
      std::launder(reinterpret_cast<T*>(storage_))->~T();
      set_instance(nullptr);
    }
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
  // The spawn arguments: each restart builds a fresh instance from copies of them (move-only
  // arguments are moved into the first instance; such an actor cannot be restarted).
  [[no_unique_address]] std::tuple<Args...> args_;
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace akt::detail
