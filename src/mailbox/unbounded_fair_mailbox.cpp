#include "akt/mailbox/unbounded_fair_mailbox.hpp"

#include <thread>

namespace akt {

namespace {
// Initial slots of the sender table; doubles when a table is half full.
constexpr std::size_t k_initial_table_slots = 16;
}  // namespace

unbounded_fair_mailbox::table::table(std::size_t cap)
    : capacity(cap),
      keys(new std::atomic<const void*>[cap]),
      values(new std::atomic<sub_queue*>[cap]) {
  for (std::size_t i = 0; i < cap; ++i) {
    keys[i].store(nullptr, std::memory_order_relaxed);
    values[i].store(nullptr, std::memory_order_relaxed);
  }
}

unbounded_fair_mailbox::unbounded_fair_mailbox() : first_(new table(k_initial_table_slots)) {}

unbounded_fair_mailbox::~unbounded_fair_mailbox() {
  while (dequeue() != nullptr) {
  }
  auto release = [](sub_queue* q) {
    if (mpsc_node* s = q->queue.take_sentinel()) recycle(static_cast<envelope*>(s));
  };
  release(&outside_);
  for (table* t = first_; t != nullptr;) {
    for (std::size_t i = 0; i < t->capacity; ++i) {
      if (sub_queue* q = t->values[i].load(std::memory_order_relaxed)) {
        release(q);
        delete q;
      }
    }
    table* next = t->next.load(std::memory_order_relaxed);
    delete t;
    t = next;
  }
}

std::size_t unbounded_fair_mailbox::hash(const void* key) noexcept {
  auto x = reinterpret_cast<std::uintptr_t>(key);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<std::size_t>(x);
}

unbounded_fair_mailbox::sub_queue* unbounded_fair_mailbox::find_or_insert(const void* key) {
  if (key == nullptr) return &outside_;
  const std::size_t h = hash(key);
  auto await_value = [](std::atomic<sub_queue*>& v) {
    sub_queue* q = v.load(std::memory_order_acquire);
    while (q == nullptr) {  // the inserter is between its key CAS and its value store
      std::this_thread::yield();
      q = v.load(std::memory_order_acquire);
    }
    return q;
  };
  table* t = first_;
  for (;;) {
    const std::size_t mask = t->capacity - 1;
    for (std::size_t i = 0; i < t->capacity; ++i) {
      const std::size_t slot = (h + i) & mask;
      const void* k = t->keys[slot].load(std::memory_order_acquire);
      if (k == key) return await_value(t->values[slot]);
      if (k != nullptr) continue;
      // Free slot: the key is in no earlier slot of this table. Insert here unless the table is
      // half full, in which case the key belongs in a later table.
      if (t->used.load(std::memory_order_relaxed) * 2 >= t->capacity) break;
      if (t->keys[slot].compare_exchange_strong(k, key, std::memory_order_acq_rel)) {
        t->used.fetch_add(1, std::memory_order_relaxed);
        auto* q = new sub_queue();
        t->values[slot].store(q, std::memory_order_release);
        senders_.fetch_add(1, std::memory_order_relaxed);
        return q;
      }
      if (k == key) return await_value(t->values[slot]);
      // Another key took the slot: keep probing.
    }
    table* next = t->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      auto* bigger = new table(t->capacity * 2);
      if (t->next.compare_exchange_strong(next, bigger, std::memory_order_acq_rel)) {
        next = bigger;
      } else {
        delete bigger;
      }
    }
    t = next;
  }
}

error unbounded_fair_mailbox::enqueue(envelope* e) {
  if (disposed_.load(std::memory_order_acquire)) return errc::mailbox_disposed;
  sub_queue* q = find_or_insert(e->sender_key());
  size_.fetch_add(1, std::memory_order_seq_cst);
  q->queue.push(e);
  if (q->pending.fetch_add(1, std::memory_order_acq_rel) == 0) active_.push(q);
  return {};
}

envelope* unbounded_fair_mailbox::dequeue() {
  auto* q = static_cast<sub_queue*>(active_.pop());
  if (q == nullptr) return nullptr;
  mpsc_node* retired = nullptr;
  mpsc_node* n = q->queue.pop(retired);
  if (n == nullptr) {
    // An earlier push into this sub-queue is still linking: serve the others, retry later.
    active_.push(q);
    return nullptr;
  }
  if (retired != nullptr) recycle(static_cast<envelope*>(retired));
  size_.fetch_sub(1, std::memory_order_seq_cst);
  if (q->pending.fetch_sub(1, std::memory_order_acq_rel) > 1) active_.push(q);
  return static_cast<envelope*>(n);
}

std::size_t unbounded_fair_mailbox::size() const {
  const std::int64_t n = size_.load(std::memory_order_relaxed);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

void unbounded_fair_mailbox::dispose() { disposed_.store(true, std::memory_order_release); }

}  // namespace akt
