#pragma once
// The export table: uid <-> local actor, for the actors whose pids left this node (as a sender,
// inside a message, as a lookup's answer, as a watcher). Peers address actors on the wire by
// uid (docs/design.md, "Frames"); the uid of an actor is never given to another one, so a pid
// of a stopped actor can never reach a new actor that reuses its memory or its name.
//
// Contract: any thread; one mutex (a sender that has no cached uid, an inbound frame whose
// link has no cached pid, a stopping actor). Entries do not own their actor: an actor leaves
// the table in its last turn (remote_node::on_actor_stopped), before its cell can be freed, so
// a cell found under the lock is alive and resolve() can take a reference. Only live actors
// (life_state::alive) are exported. Memory: one entry per exported live actor.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "akt/actor/detail/actor_cell.hpp"
#include "akt/actor/pid.hpp"

namespace akt::remote::detail {

class export_table {
 public:
  // first_uid: where this node's uids start. Drawn from the node's incarnation, so that the
  // uids of a restarted node are not those of its previous life: a message for an actor of the
  // old incarnation finds no actor (actor_not_found) instead of a new one.
  explicit export_table(std::uint64_t first_uid) : next_uid_(first_uid == 0 ? 1 : first_uid) {}

  // The actor's uid, assigned on first export; 0 when the actor is not alive (not exported).
  std::uint64_t export_cell(akt::detail::actor_cell* c) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = by_cell_.find(c); it != by_cell_.end()) return it->second;
    if (c->life() != akt::detail::life_state::alive) return 0;
    const std::uint64_t uid = next_uid_++;
    by_cell_.emplace(c, uid);
    by_uid_.emplace(uid, c);
    return uid;
  }
  // The actor exported as uid, or an empty pid when it stopped or never was.
  pid resolve(std::uint64_t uid) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_uid_.find(uid);
    return it == by_uid_.end() ? pid() : akt::detail::share_pid(it->second);
  }
  // The uid of an exported actor, 0 if it was never exported (no assignment).
  std::uint64_t uid_of(const akt::detail::actor_cell* c) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_cell_.find(c);
    return it == by_cell_.end() ? 0 : it->second;
  }
  // From the actor's last turn.
  void remove(const akt::detail::actor_cell* c) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_cell_.find(c);
    if (it == by_cell_.end()) return;
    by_uid_.erase(it->second);
    by_cell_.erase(it);
  }
  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return by_uid_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const akt::detail::actor_cell*, std::uint64_t> by_cell_;
  std::unordered_map<std::uint64_t, akt::detail::actor_cell*> by_uid_;
  std::uint64_t next_uid_;
};

}  // namespace akt::remote::detail
