#include "akt/actor/event_stream.hpp"

#include <thread>

namespace akt {

namespace {
// The entry whose callback this thread is running (so unsubscribe from inside it doesn't wait
// for itself).
thread_local const void* t_running_entry = nullptr;
}  // namespace

void subscription::reset() noexcept {
  if (stream_) {
    stream_->unsubscribe(id_);
    stream_.reset();
  }
}

std::uint64_t event_stream::add(const void* tag, std::function<void(const void*)> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto e = std::make_shared<entry>();
  e->tag = tag;
  e->id = next_id_++;
  e->fn = std::move(fn);
  auto next = std::make_shared<list>(*entries_);
  next->push_back(std::move(e));
  const std::uint64_t id = next->back()->id;
  entries_ = std::move(next);
  count_.store(entries_->size(), std::memory_order_release);
  return id;
}

void event_stream::unsubscribe(std::uint64_t id) noexcept {
  std::shared_ptr<entry> removed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto next = std::make_shared<list>();
    for (const auto& e : *entries_) {
      if (e->id == id)
        removed = e;
      else
        next->push_back(e);
    }
    entries_ = std::move(next);
    count_.store(entries_->size(), std::memory_order_release);
  }
  if (!removed) return;
  removed->active.store(false, std::memory_order_seq_cst);
  if (t_running_entry == removed.get()) return;
  while (removed->in_flight.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
}

void event_stream::publish_erased(const void* tag, const void* event) {
  std::shared_ptr<const list> snapshot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    snapshot = entries_;
  }
  for (const auto& e : *snapshot) {
    if (e->tag != tag) continue;
    e->in_flight.fetch_add(1, std::memory_order_seq_cst);
    if (e->active.load(std::memory_order_seq_cst)) {
      const void* outer = t_running_entry;
      t_running_entry = e.get();
      try {
        e->fn(event);
      } catch (...) {
        t_running_entry = outer;
        e->in_flight.fetch_sub(1, std::memory_order_seq_cst);
        throw;
      }
      t_running_entry = outer;
    }
    e->in_flight.fetch_sub(1, std::memory_order_seq_cst);
  }
}

bool event_stream::has(const void* tag) const {
  if (count_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& e : *entries_) {
    if (e->tag == tag) return true;
  }
  return false;
}

}  // namespace akt
