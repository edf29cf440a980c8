#pragma once
// Helpers shared by the tests: bounded waits and an event collector. Every concurrent test
// bounds its own run time with these instead of sleeping for a fixed time.

#include <akt/actor/actor_system.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace akt::test {

using namespace std::chrono_literals;

// Polls pred until it holds or the timeout passes; returns its last value.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// Runs body(i) for i in [0, n) on n threads. Every body must return soon after `stop` is set.
// Returns false (and sets stop) if they do not all finish within `timeout`, so a stuck run ends
// with a failure instead of hanging the suite.
template <class Body>
bool run_bounded(int n, std::chrono::milliseconds timeout, std::atomic<bool>& stop, Body body) {
  std::vector<std::future<void>> done;
  done.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) done.push_back(std::async(std::launch::async, body, i));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool in_time = true;
  for (auto& f : done) {
    if (f.wait_until(deadline) != std::future_status::ready) {
      in_time = false;
      break;
    }
  }
  stop.store(true);
  for (auto& f : done) f.get();
  return in_time;
}

// Collects events of type E published on a system's event stream (copies what it needs through
// `project`, since events may hold move-only messages).
template <class E, class Item>
class collector {
 public:
  collector(akt::actor_system& sys, std::function<Item(const E&)> project)
      : project_(std::move(project)), sub_(sys.events().subscribe<E>([this](const E& e) {
          Item item = project_(e);
          {
            std::lock_guard<std::mutex> lock(mutex_);
            items_.push_back(std::move(item));
          }
          cv_.notify_all();
        })) {}

  // Waits until at least n items arrived (or the timeout passed); returns the count.
  std::size_t wait_for(std::size_t n,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, timeout, [&] { return items_.size() >= n; });
    return items_.size();
  }
  std::vector<Item> items() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return items_;
  }
  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return items_.size();
  }

 private:
  std::function<Item(const E&)> project_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Item> items_;
  akt::subscription sub_;
};

// What a test usually wants to know about a dead letter.
struct dead_letter_info {
  std::string type;
  akt::errc reason;
  std::string receiver;
  long value = -1;  // the payload when it is a long, an int or a test::tag
};

}  // namespace akt::test
