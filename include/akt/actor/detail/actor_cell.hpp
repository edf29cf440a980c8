#pragma once
// actor_cell: the runtime's record of one actor: its mailbox, system queue, dispatch state,
// lifecycle and the actor object itself (allocated in the same block: one allocation per spawn).
//
// Contract
// - deliver (producers): any thread. Lock-free on the default mailbox: one exchange, one load,
//   at most one CAS and one ready-queue push.
// - run_turn, and everything it calls: only the worker that owns the current turn (see
//   schedulable.hpp); so the actor object is touched by one thread at a time.
// - life_: starting -> alive -> stopping -> dead, written by the turn owner (or the spawner
//   before the first turn), read by producers (acquire) to refuse messages to stopped actors.
// - Memory: this header plus sizeof(T); the default mailbox and the system queue are embedded
//   and allocate nothing while empty. Idle, the cell keeps at most the last envelope it
//   processed (the mailbox sentinel).

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "akt/actor/actor.hpp"
#include "akt/actor/spawn_options.hpp"
#include "akt/dispatch/schedulable.hpp"
#include "akt/mailbox/mpsc_queue.hpp"
#include "akt/mailbox/system_queue.hpp"

namespace akt::detail {

class system_core;

enum class life_state : std::uint8_t { starting, alive, stopping, dead };

class actor_cell : public schedulable {
 public:
  bool run_turn(unsigned budget) override;

  std::string_view name() const noexcept { return name_; }
  system_core* system() const noexcept { return system_; }
  life_state life() const noexcept { return life_.load(std::memory_order_acquire); }
  std::uint32_t home_shard() const noexcept { return home_shard_; }
  std::uint32_t name_hash() const noexcept { return name_hash_; }
  actor* instance() noexcept { return instance_; }
  mailbox* custom_mailbox() const noexcept { return custom_.get(); }

  // Producer side: enqueue (or refuse and dead-letter) and schedule.
  error deliver(receive_context* env) noexcept;
  error deliver_slow(receive_context* env) noexcept;
  // Queued user messages (approximate while producers run); 0 for the default mailbox's
  // in-flight pushes.
  std::size_t mailbox_size() const noexcept;

  // Spawn: runs pre_start and opens the actor for messages; on failure stops it.
  error start();

 protected:
  actor_cell(system_core* core, std::string_view name, spawn_options&& options);
  ~actor_cell() override;
  void destroy() noexcept override;
  void set_instance(actor* a) noexcept { instance_ = a; }
  virtual void destroy_instance() noexcept = 0;

 private:
  receive_context* dequeue_user(mailbox* custom) noexcept;
  bool user_empty(mailbox* custom) const noexcept;
  // Ends the turn (see schedulable::finish_turn); true when it reclaimed the actor.
  bool finish_or_reclaim() noexcept;
  void invoke(receive_context& env) noexcept;
  void handle_system(receive_context& env) noexcept;
  void stop_now() noexcept;
  void drain_to_dead_letters() noexcept;

  // Layout: fields producers write on every message (the default mailbox's head), then fields
  // producers only read (written at spawn and stop), then the turn owner's fields. The read-only
  // block keeps the mailbox's two ends at least 64 bytes apart, so a producer's exchange on the
  // head and the consumer's move of the tail never share a cache line.

  // -- producer end --
  std::atomic<mpsc_node*> inbox_head_;  // default mailbox: producers exchange (seq_cst)
  // -- read-mostly --
  system_core* const system_;              // holds a reference on the core for the cell's life
  const std::unique_ptr<mailbox> custom_;  // a user-chosen mailbox, or null
  const std::uint32_t home_shard_;         // envelope pool shard of messages to this actor
  std::atomic<life_state> life_{life_state::starting};
  const std::uint32_t name_hash_;
  const std::string name_;
  // -- consumer end (the turn owner) --
  mpsc_node* inbox_tail_;  // default mailbox: current sentinel
  mpsc_node inbox_stub_;
  system_queue sysq_;
  actor* instance_ = nullptr;  // the actor object inside this block; null once destroyed
};

template <class T>
class actor_cell_for final : public actor_cell {
 public:
  template <class... Args>
  actor_cell_for(system_core* core, std::string_view name, spawn_options&& options, Args&&... args)
      : actor_cell(core, name, std::move(options)) {
    set_instance(new (storage_) T(std::forward<Args>(args)...));
  }
  ~actor_cell_for() override { destroy_instance(); }

 protected:
  void destroy_instance() noexcept override {
    if (instance() != nullptr) {
      std::launder(reinterpret_cast<T*>(storage_))->~T();
      set_instance(nullptr);
    }
  }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace akt::detail
