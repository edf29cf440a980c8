#pragma once
// grain_directory: the map from a grain identity ("kind/name") to its activation.
//
// The grain layer finds activations only through this interface. This node's implementation
// (make_local_grain_directory) keeps the map in memory; a cluster implementation will keep the
// owner of each identity in the coordination store and activate on the owner's node, behind the
// same calls and with the same errors.
//
// Contract: every member may be called from any thread. At most one activation per key is in
// the directory at a time: resolve activates a key that has none exactly once, and concurrent
// resolvers of that key wait for that activation's outcome (they get its error when it fails,
// and nothing stays registered). No user code runs under the directory's locks.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "akt/actor/pid.hpp"
#include "akt/core/result.hpp"
#include "akt/grain/grains.hpp"

namespace akt::detail {

class actor_cell;

class grain_directory {
 public:
  // How to make the activation of a key that has none. create() runs under the directory's
  // exclusion for the key and must be quick (no user code); start() runs without it.
  class activator {
   public:
    // A new, unstarted cell whose path is the key, and its link (link->cell set); the directory
    // keeps the cell's reference.
    virtual result<directory_link*> create() = 0;
    // Runs the activation (on_activate). On failure it must call withdraw(cell) while the
    // cell's link still exists (before the cell destroys its actor); the error then reaches
    // every resolver that waited for it.
    virtual error start(actor_cell* cell) = 0;

   protected:
    ~activator() = default;
  };

  // What to do with an activation while the directory guarantees that it stays: quick, and no
  // user code (it may run under the directory's lock).
  class visitor {
   public:
    virtual error visit(actor_cell* cell) = 0;

   protected:
    ~visitor() = default;
  };

  virtual ~grain_directory() = default;

  // Calls v.visit on key's activation, activating it through `how` when there is none. Returns
  // visit's error, or the activation's.
  virtual error with_activation(std::string_view key, activator& how, visitor& v) = 0;

  // The activation of key if one is active (none is started), or an empty pid.
  virtual pid find(std::string_view key) = 0;
  // Withdraws cell's entry, if it is still the entry of its key. With require_empty only while
  // cell's mailbox is empty (the caller owns cell's turn), returning false when it is not.
  virtual bool release(actor_cell* cell, bool require_empty) = 0;
  // Whether cell's entry has left its gate, i.e. its activating sender has visited it (put its
  // message in). The caller owns cell's turn. An idle check asks before it deactivates: an
  // activation that went idle before its first message arrived is not idle.
  virtual bool opened(actor_cell* cell) = 0;
  // Removes the entry of a failing activation (see activator::start); the directory's
  // reference is dropped by the with_activation that ran it.
  virtual void withdraw(actor_cell* cell) = 0;
  // The active cells (not those still activating).
  virtual std::vector<pid> active() = 0;
  // Calls v.visit on every active cell (not those still activating), each under its shard's
  // lock, so the cell and its host stay while it is visited; visit must be quick (a metrics
  // scrape reads a few fields) and its error is ignored. No allocation, no reference taken.
  virtual void each_active(visitor& v) = 0;
  // Whether the directory holds no entry at all, activations still in progress included: a
  // shutdown waits for those too, so that it can roll them back.
  virtual bool none_left() = 0;
  // How many activations are listed (a moment's count; each shard's lock in turn).
  virtual std::size_t count() = 0;
};

// link_of finds the link embedded in an activation's cell.
std::unique_ptr<grain_directory> make_local_grain_directory(
    directory_link& (*link_of)(actor_cell*));

}  // namespace akt::detail
