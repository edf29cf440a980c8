// The in-memory grain directory of one node: 64 mutex-guarded shards, each an intrusive chained
// hash table whose nodes are the links embedded in the activations (no allocation per grain).
// An entry being activated carries a gate that concurrent resolvers wait on.

#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "akt/actor/detail/actor_cell.hpp"
#include "grain/grain_directory.hpp"

namespace akt::detail {

namespace {

// Every send hashes its key (kind/name, often 30-60 characters: kinds are C++ type names), so
// the hash reads 8 bytes at a time (the standard library's) rather than byte by byte.
std::uint32_t key_hash(std::string_view key) noexcept {
  const std::size_t h = std::hash<std::string_view>{}(key);
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

constexpr std::uint32_t k_shards = 64;  // power of two; spreads sender lock contention
// Chains per shard when a shard is created; a shard doubles its table when it holds more
// entries than chains, so a lookup walks about one link on average.
constexpr std::size_t k_initial_buckets = 16;

class local_grain_directory final : public grain_directory {
 public:
  explicit local_grain_directory(directory_link& (*link_of)(actor_cell*)) : link_of_(link_of) {}
  ~local_grain_directory() override {
    for (auto& s : shards_) {
      for (directory_link* head : s.buckets) {
        while (head != nullptr) {
          directory_link* next = head->next;
          head->cell->release();
          head = next;
        }
      }
    }
  }

  error with_activation(std::string_view key, activator& how, visitor& v) override {
    const std::uint32_t h = key_hash(key);
    shard& s = shards_[h & (k_shards - 1)];
    for (;;) {
      std::shared_ptr<activation_gate> gate;
      {
        std::unique_lock<std::mutex> lock(s.mutex);
        directory_link* l = s.find(key, h);
        if (l == nullptr) return activate(lock, s, h, how, v);
        if (!l->gate) return v.visit(l->cell);
        gate = l->gate;
      }
      // Someone else is activating it: wait for the outcome, then look again.
      gate->done.wait(0, std::memory_order_acquire);
      if (gate->result) return gate->result;
    }
  }

  pid find(std::string_view key) override {
    const std::uint32_t h = key_hash(key);
    shard& s = shards_[h & (k_shards - 1)];
    std::lock_guard<std::mutex> lock(s.mutex);
    directory_link* l = s.find(key, h);
    if (l == nullptr || l->gate) return pid();
    return detail::share_pid(l->cell);
  }

  bool release(actor_cell* cell, bool require_empty) override {
    directory_link& mine = link_of_(cell);
    shard& s = shards_[mine.hash & (k_shards - 1)];
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (!s.contains(&mine)) return true;
      // An entry still behind its gate is not given up on an empty mailbox: its activating
      // sender has yet to visit it (enqueue its message). An idle check can get here first.
      if (require_empty && (mine.gate || !cell->user_backlog_empty())) return false;
      s.erase(&mine);
    }
    cell->release();
    return true;
  }

  bool opened(actor_cell* cell) override {
    directory_link& mine = link_of_(cell);
    shard& s = shards_[mine.hash & (k_shards - 1)];
    std::lock_guard<std::mutex> lock(s.mutex);
    return !s.contains(&mine) || !mine.gate;
  }

  void withdraw(actor_cell* cell) override {
    directory_link& mine = link_of_(cell);
    shard& s = shards_[mine.hash & (k_shards - 1)];
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.contains(&mine)) s.erase(&mine);
  }

  std::vector<pid> active() override {
    std::vector<pid> out;
    for (auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (directory_link* head : s.buckets) {
        for (directory_link* l = head; l != nullptr; l = l->next) {
          if (!l->gate) out.push_back(detail::share_pid(l->cell));
        }
      }
    }
    return out;
  }

  void each_active(visitor& v) override {
    for (auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (directory_link* head : s.buckets) {
        for (directory_link* l = head; l != nullptr; l = l->next) {
          if (!l->gate) (void)v.visit(l->cell);
        }
      }
    }
  }

  std::size_t count() override {
    std::size_t n = 0;
    for (auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (directory_link* head : s.buckets) {
        for (directory_link* l = head; l != nullptr; l = l->next) n += l->gate ? 0 : 1;
      }
    }
    return n;
  }

  bool none_left() override {
    for (auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (directory_link* head : s.buckets) {
        if (head != nullptr) return false;
      }
    }
    return true;
  }

 private:
  struct alignas(64) shard {
    std::mutex mutex;
    std::vector<directory_link*> buckets;  // guarded; empty until the first entry
    std::size_t count = 0;                 // guarded

    // The bucket of hash h. Shards use the bits above the shard index.
    directory_link*& bucket(std::uint32_t h) noexcept {
      return buckets[(h >> 6) & (buckets.size() - 1)];
    }
    directory_link* find(std::string_view key, std::uint32_t h) noexcept {
      if (buckets.empty()) return nullptr;
      for (directory_link* l = bucket(h); l != nullptr; l = l->next) {
        if (l->hash == h && l->cell->path() == key) return l;
      }
      return nullptr;
    }
    bool contains(const directory_link* target) noexcept {
      if (buckets.empty()) return false;
      for (directory_link* l = bucket(target->hash); l != nullptr; l = l->next) {
        if (l == target) return true;
      }
      return false;
    }
    void insert(directory_link* l) {
      if (buckets.empty()) buckets.assign(k_initial_buckets, nullptr);
      if (count >= buckets.size()) grow();
      directory_link*& head = bucket(l->hash);
      l->next = head;
      head = l;
      ++count;
    }
    void erase(directory_link* target) noexcept {
      for (directory_link** at = &bucket(target->hash); *at != nullptr; at = &(*at)->next) {
        if (*at == target) {
          *at = target->next;
          target->next = nullptr;
          --count;
          return;
        }
      }
    }
    void grow() {
      std::vector<directory_link*> old(buckets.size() * 2, nullptr);
      old.swap(buckets);
      for (directory_link* head : old) {
        while (head != nullptr) {
          directory_link* next = head->next;
          directory_link*& b = bucket(head->hash);
          head->next = b;
          b = head;
          head = next;
        }
      }
    }
  };

  // With `lock` holding s.mutex and no entry for the key: enters the activation with a gate,
  // starts it with the lock released, settles the entry, and visits the new activation.
  error activate(std::unique_lock<std::mutex>& lock, shard& s, std::uint32_t h, activator& how,
                 visitor& v) {
    result<directory_link*> made = how.create();
    if (!made) return made.error();
    directory_link* l = *made;
    actor_cell* cell = l->cell;
    auto gate = std::make_shared<activation_gate>();
    l->hash = h;
    l->gate = gate;
    s.insert(l);
    pid self = detail::share_pid(cell);  // keeps the cell while the lock is released

    lock.unlock();  // the activation runs user code: never under the directory lock
    error failed = how.start(cell);
    if (failed) {
      // The activation withdrew its entry (and its link is gone with its actor).
      gate->result = failed;
    }
    error visited;
    if (!failed) {
      // Open the entry and visit it in one hold of the lock, as a visit of an entry found
      // active is: until the sender's message is in, the activation may not leave (see release).
      lock.lock();
      l->gate.reset();
      visited = v.visit(cell);
      lock.unlock();
    }
    gate->done.store(1, std::memory_order_release);
    gate->done.notify_all();
    if (failed) {
      cell->release();  // the directory's reference
      return failed;
    }
    return visited;
  }

  directory_link& (*const link_of_)(actor_cell*);
  shard shards_[k_shards];
};

}  // namespace

std::unique_ptr<grain_directory> make_local_grain_directory(
    directory_link& (*link_of)(actor_cell*)) {
  return std::make_unique<local_grain_directory>(link_of);
}

}  // namespace akt::detail
