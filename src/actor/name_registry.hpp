#pragma once
// name_registry: the live actors of one system by name.
//
// Contract: every member may be called from any thread. Blocking: one short mutex section per
// call, on one of 64 shards picked by the name's hash, so spawns and lookups of different names
// rarely meet. The registry holds one reference on each cell it contains.
// Memory: an open-addressing table of cell pointers per shard (linear probing, backward-shift
// deletion, load factor <= 3/4): about 11-16 bytes per actor; the key is the cell's own name.

#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

#include "akt/actor/pid.hpp"

namespace akt::detail {

class actor_cell;

class name_registry {
 public:
  static constexpr std::size_t shard_count = 64;  // power of two; spreads spawn contention

  name_registry() = default;
  name_registry(const name_registry&) = delete;
  name_registry& operator=(const name_registry&) = delete;
  ~name_registry();

  static std::uint32_t hash(std::string_view name) noexcept;

  // Inserts c under c->name(); false when the name is taken. Takes a reference on success.
  bool insert(actor_cell* c);
  // The cell registered under name with a new reference, or null.
  actor_cell* find(std::string_view name, std::uint32_t h) const;
  // Removes c if it is the cell registered under its name; releases the registry's reference.
  bool erase(actor_cell* c);
  // Every registered actor.
  std::vector<pid> snapshot() const;
  std::size_t size() const;
  // Calls f(const actor_cell&) for every registered actor, one shard at a time under that
  // shard's lock (so f must be short and must not spawn, stop or look up actors). No reference
  // is taken: a cell is alive while it is registered, and erase waits for the lock.
  template <class F>
  void for_each_cell(F&& f) const {
    for (const auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (const actor_cell* c : s.slots) {
        if (c != nullptr) f(*c);
      }
    }
  }

 private:
  struct alignas(64) shard {
    mutable std::mutex mutex;
    std::vector<actor_cell*> slots;  // null = free
    std::size_t used = 0;
  };
  static void grow(shard& s);
  static std::size_t probe_start(std::uint32_t h, std::size_t mask) noexcept {
    return (h >> 6) & mask;  // the low 6 bits chose the shard
  }

  shard shards_[shard_count];
};

}  // namespace akt::detail
