// The completion thread of an in-process store client (client_core.hpp).

#include "cluster/client_core.hpp"

#include <algorithm>

#include "akt/core/assert.hpp"

namespace akt::cluster::detail {

namespace {
// The client whose completion thread this is (written by that thread only, at its start).
thread_local const client_core* t_current = nullptr;
}  // namespace

client_core::client_core(std::string name, std::chrono::milliseconds call_timeout)
    : name_(std::move(name)), call_timeout_(call_timeout) {
  AKT_ASSERT(call_timeout > std::chrono::milliseconds::zero());
  thread_ = std::thread([this] { loop(); });
}

client_core::~client_core() { AKT_ASSERT(!thread_.joinable()); }

bool client_core::on_thread() const noexcept { return t_current == this; }

client_core::clock::time_point client_core::next_reply_due_locked() {
  auto due = clock::now() + std::chrono::milliseconds(delay_ms.load(std::memory_order_relaxed));
  due = std::max(due, last_reply_due_);
  last_reply_due_ = due;
  return due;
}

void client_core::insert_locked(clock::time_point due, item it) {
  items_.emplace(key{due, seq_++}, std::move(it));
  cv_.notify_all();
}

void client_core::post_at(clock::time_point due, task run) {
  std::lock_guard lk(mutex_);
  // During shutdown only a completion may still call (its call is drained as shutting down).
  AKT_ASSERT(!stopping_ || on_thread());
  insert_locked(due, item{std::move(run), nullptr, {}, 0, {}});
}

void client_core::post_reply(task on_time, task timed_out) {
  std::lock_guard lk(mutex_);
  AKT_ASSERT(!stopping_ || on_thread());
  const auto delay = std::chrono::milliseconds(delay_ms.load(std::memory_order_relaxed));
  if (delay > std::chrono::milliseconds::zero() && delay >= call_timeout_) {
    // The reply would come after the caller gave up: it times out, the operation applied.
    insert_locked(clock::now() + call_timeout_, item{std::move(timed_out), nullptr, {}, 0, {}});
    return;
  }
  insert_locked(next_reply_due_locked(), item{std::move(on_time), nullptr, {}, 0, {}});
}

void client_core::post_pump(const std::shared_ptr<watcher>& w, std::function<watch_batch()> fetch) {
  std::lock_guard lk(mutex_);
  if (stopping_ || w->cancelled || w->end_queued) return;
  insert_locked(next_reply_due_locked(), item{{}, w, std::move(fetch), 0, {}});
}

void client_core::post_end(const std::shared_ptr<watcher>& w, error why, revision compact_revision,
                           std::chrono::milliseconds after) {
  AKT_ASSERT(why.code() != errc::ok);
  std::lock_guard lk(mutex_);
  if (stopping_ || w->cancelled || w->end_queued) return;
  w->end_queued = true;
  const auto due =
      after > std::chrono::milliseconds::zero() ? clock::now() + after : next_reply_due_locked();
  insert_locked(due, item{{}, w, nullptr, compact_revision, std::move(why)});
}

void client_core::cancel(watcher& w) {
  std::unique_lock lk(mutex_);
  w.cancelled = true;
  if (on_thread()) return;  // from a completion: the delivery running is this thread's own
  cv_.wait(lk, [&] { return delivering_ != &w; });
}

void client_core::shutdown(const std::vector<std::shared_ptr<watcher>>& live) {
  AKT_ASSERT(!on_thread());
  {
    std::lock_guard lk(mutex_);
    for (const auto& w : live) {
      if (w->cancelled || w->end_queued) continue;
      w->end_queued = true;
      insert_locked(clock::now(), item{{}, w, nullptr, 0, error(errc::system_shutting_down)});
    }
    stopping_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void client_core::loop() {
  t_current = this;
  std::unique_lock lk(mutex_);
  for (;;) {
    if (items_.empty()) {
      if (stopping_) return;
      cv_.wait(lk);
      continue;
    }
    auto first = items_.begin();
    if (!stopping_ && first->first.first > clock::now()) {
      cv_.wait_until(lk, first->first.first);
      continue;
    }
    item it = std::move(first->second);
    items_.erase(first);
    run_locked(lk, it, stopping_);
  }
}

void client_core::run_locked(std::unique_lock<std::mutex>& lk, item& it, bool shutting_down) {
  if (it.run) {
    lk.unlock();
    it.run(shutting_down);
    it.run = nullptr;  // the completion's captures die here, outside the lock
    lk.lock();
    return;
  }
  if (shutting_down && it.fetch) return;  // batches not yet delivered are dropped at shutdown
  deliver_locked(lk, it);
}

void client_core::deliver_locked(std::unique_lock<std::mutex>& lk, item& it) {
  watcher& w = *it.w;
  if (w.cancelled || w.end_ran) return;
  if (it.fetch && w.end_queued) return;  // the watch is ending: it delivers nothing more
  delivering_ = &w;  // cancel() on another thread now waits until this delivery is over
  lk.unlock();
  watch_batch b;
  if (it.fetch) {
    b = it.fetch();
  } else {
    b.end = std::move(it.why);
    b.compact_revision = it.rev;
  }
  bool run_end = false;
  if (b.end) {
    lk.lock();
    run_end = !w.end_ran && !(it.fetch && w.end_queued);
    w.end_ran = w.end_ran || run_end;
    w.end_queued = true;
    lk.unlock();
  }
  if (run_end) {
    w.handler->on_end(std::move(b.end), b.compact_revision);
  } else if (!b.end && !b.events.empty()) {
    w.handler->on_events(b.events, b.header);
  }
  it.fetch = nullptr;
  lk.lock();
  delivering_ = nullptr;
  cv_.notify_all();
}

}  // namespace akt::cluster::detail
