#include "actor/name_registry.hpp"

#include "akt/actor/detail/actor_cell.hpp"

namespace akt::detail {

namespace {
constexpr std::size_t k_initial_slots = 16;
}

name_registry::~name_registry() {
  for (auto& s : shards_) {
    for (actor_cell* c : s.slots) {
      if (c != nullptr) c->release();
    }
  }
}

std::uint32_t name_registry::hash(std::string_view name) noexcept {
  // FNV-1a: names are short; this is fast and spreads well enough for linear probing.
  std::uint32_t h = 2166136261u;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 16777619u;
  }
  return h ^ (h >> 16);
}

void name_registry::grow(shard& s) {
  std::vector<actor_cell*> old = std::move(s.slots);
  const std::size_t cap = old.empty() ? k_initial_slots : old.size() * 2;
  s.slots.assign(cap, nullptr);
  const std::size_t mask = cap - 1;
  for (actor_cell* c : old) {
    if (c == nullptr) continue;
    std::size_t i = probe_start(c->name_hash(), mask);
    while (s.slots[i] != nullptr) i = (i + 1) & mask;
    s.slots[i] = c;
  }
}

bool name_registry::insert(actor_cell* c) {
  shard& s = shards_[c->name_hash() & (shard_count - 1)];
  std::lock_guard<std::mutex> lock(s.mutex);
  if ((s.used + 1) * 4 > s.slots.size() * 3) grow(s);
  const std::size_t mask = s.slots.size() - 1;
  std::size_t i = probe_start(c->name_hash(), mask);
  while (actor_cell* other = s.slots[i]) {
    if (other->name_hash() == c->name_hash() && other->path() == c->path()) return false;
    i = (i + 1) & mask;
  }
  c->add_ref();
  s.slots[i] = c;
  ++s.used;
  return true;
}

actor_cell* name_registry::find(std::string_view name, std::uint32_t h) const {
  const shard& s = shards_[h & (shard_count - 1)];
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.slots.empty()) return nullptr;
  const std::size_t mask = s.slots.size() - 1;
  for (std::size_t i = probe_start(h, mask); s.slots[i] != nullptr; i = (i + 1) & mask) {
    actor_cell* c = s.slots[i];
    if (c->name_hash() == h && c->path() == name) {
      c->add_ref();
      return c;
    }
  }
  return nullptr;
}

bool name_registry::erase(actor_cell* c) {
  shard& s = shards_[c->name_hash() & (shard_count - 1)];
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.slots.empty()) return false;
    const std::size_t mask = s.slots.size() - 1;
    std::size_t i = probe_start(c->name_hash(), mask);
    while (s.slots[i] != nullptr && s.slots[i] != c) i = (i + 1) & mask;
    if (s.slots[i] == nullptr) return false;
    // Backward-shift deletion: pull later entries of the probe run into the hole.
    std::size_t hole = i;
    for (std::size_t j = (hole + 1) & mask; s.slots[j] != nullptr; j = (j + 1) & mask) {
      const std::size_t home = probe_start(s.slots[j]->name_hash(), mask);
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const bool home_between = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!home_between) {
        s.slots[hole] = s.slots[j];
        hole = j;
      }
    }
    s.slots[hole] = nullptr;
    --s.used;
  }
  c->release();
  return true;
}

std::vector<pid> name_registry::snapshot() const {
  std::vector<pid> out;
  for (const auto& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (actor_cell* c : s.slots) {
      if (c != nullptr) out.push_back(detail::share_pid(c));
    }
  }
  return out;
}

std::size_t name_registry::size() const {
  std::size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mutex);
    n += s.used;
  }
  return n;
}

}  // namespace akt::detail
