#pragma once
// event_stream: typed publish/subscribe inside one actor system.
//
// Contract
// - subscribe<E>(fn) and the returned subscription's destructor may be called from any thread,
//   also from inside a callback. publish may be called from any thread.
// - Callbacks run synchronously on the publishing thread (often a dispatcher worker): keep them
//   short and never block in them. A callback sees every event of its type published after its
//   subscribe returned; once its unsubscribe returned it is never called again (unsubscribe waits
//   for calls in progress on other threads, but not for the one it is called from).
// - Publishing takes a snapshot of the subscriber list (one mutex acquisition); the runtime only
//   publishes off the hot path (dead letters, lifecycle events).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "akt/core/message.hpp"

namespace akt {

class event_stream;

// Unsubscribes when destroyed (or on reset()). Movable, not copyable.
class subscription {
 public:
  subscription() = default;
  subscription(subscription&& o) noexcept
      : stream_(std::exchange(o.stream_, nullptr)), id_(o.id_) {}
  subscription& operator=(subscription&& o) noexcept {
    if (this != &o) {
      reset();
      stream_ = std::exchange(o.stream_, nullptr);
      id_ = o.id_;
    }
    return *this;
  }
  ~subscription() { reset(); }
  void reset() noexcept;
  bool active() const noexcept { return stream_ != nullptr; }

 private:
  friend class event_stream;
  subscription(std::shared_ptr<event_stream> s, std::uint64_t id)
      : stream_(std::move(s)), id_(id) {}
  std::shared_ptr<event_stream> stream_;
  std::uint64_t id_ = 0;
};

class event_stream : public std::enable_shared_from_this<event_stream> {
 public:
  template <class E>
  subscription subscribe(std::function<void(const E&)> fn) {
    const void* tag = &detail::message_ops<E>::table;
    auto erased = [f = std::move(fn)](const void* e) { f(*static_cast<const E*>(e)); };
    return subscription(shared_from_this(), add(tag, std::move(erased)));
  }

  template <class E>
  void publish(const E& event) {
    publish_erased(&detail::message_ops<E>::table, &event);
  }

  // True when anyone listens for E (lets publishers skip building an event).
  template <class E>
  bool has_subscribers() const {
    return has(&detail::message_ops<E>::table);
  }

  void unsubscribe(std::uint64_t id) noexcept;

 private:
  struct entry {
    const void* tag;
    std::uint64_t id;
    std::function<void(const void*)> fn;
    std::atomic<bool> active{true};  // writer: unsubscribe; readers: publishers
    std::atomic<int> in_flight{0};   // publishers inside fn (seq_cst with active)
  };
  using list = std::vector<std::shared_ptr<entry>>;

  std::uint64_t add(const void* tag, std::function<void(const void*)> fn);
  void publish_erased(const void* tag, const void* event);
  bool has(const void* tag) const;

  mutable std::mutex mutex_;
  std::shared_ptr<const list> entries_ = std::make_shared<const list>();  // copy-on-write
  std::uint64_t next_id_ = 1;                                             // guarded by mutex_
  // Entries in entries_; written under mutex_, read without it so that has() on a stream with
  // no subscribers costs one load.
  std::atomic<std::size_t> count_{0};
};

}  // namespace akt
