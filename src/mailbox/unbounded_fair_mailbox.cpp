#include "akt/mailbox/unbounded_fair_mailbox.hpp"

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
  recycler_.flush();
  for (table* t = first_; t != nullptr;) {
    for (std::size_t i = 0; i < t->capacity; ++i)
      delete t->values[i].load(std::memory_order_relaxed);
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

unbounded_fair_mailbox::sub_queue* unbounded_fair_mailbox::find(const void* key,
                                                                std::size_t h) const noexcept {
  for (table* t = first_; t != nullptr; t = t->next.load(std::memory_order_acquire)) {
    const std::size_t mask = t->capacity - 1;
    for (std::size_t i = 0; i < t->capacity; ++i) {
      const std::size_t slot = (h + i) & mask;
      const void* k = t->keys[slot].load(std::memory_order_acquire);
      if (k == key) return t->values[slot].load(std::memory_order_relaxed);
      if (k == nullptr) break;  // insert-only linear probing: not in this table
    }
  }
  return nullptr;
}

unbounded_fair_mailbox::sub_queue* unbounded_fair_mailbox::find_or_insert(const void* key) {
  if (key == nullptr) return &outside_;
  const std::size_t h = hash(key);
  if (sub_queue* q = find(key, h)) return q;
  std::lock_guard<std::mutex> lock(insert_mutex_);
  if (sub_queue* q = find(key, h)) return q;  // inserted while we waited
  table* t = first_;
  while (t->next.load(std::memory_order_relaxed) != nullptr)
    t = t->next.load(std::memory_order_relaxed);
  if ((t->used + 1) * 2 > t->capacity) {
    auto* bigger = new table(t->capacity * 2);
    t->next.store(bigger, std::memory_order_release);
    t = bigger;
  }
  const std::size_t mask = t->capacity - 1;
  std::size_t slot = h & mask;
  while (t->keys[slot].load(std::memory_order_relaxed) != nullptr) slot = (slot + 1) & mask;
  auto* q = new sub_queue();
  t->values[slot].store(q, std::memory_order_relaxed);
  t->keys[slot].store(key, std::memory_order_release);  // publishes the value with the key
  ++t->used;
  senders_.fetch_add(1, std::memory_order_relaxed);
  return q;
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
  recycler_.flush();
  auto* q = static_cast<sub_queue*>(active_.pop());
  if (q == nullptr) return nullptr;
  mpsc_node* n = q->queue.pop();
  if (n == nullptr) {
    // A push into this sub-queue is still linking: serve the others, retry later.
    active_.push(q);
    return nullptr;
  }
  size_.fetch_sub(1, std::memory_order_seq_cst);
  if (q->pending.fetch_sub(1, std::memory_order_acq_rel) > 1) active_.push(q);
  return recycler_.hand_out(static_cast<envelope*>(n));
}

std::size_t unbounded_fair_mailbox::size() const {
  const std::int64_t n = size_.load(std::memory_order_relaxed);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

void unbounded_fair_mailbox::dispose() { disposed_.store(true, std::memory_order_release); }

}  // namespace akt
