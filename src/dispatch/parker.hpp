#pragma once
// parker: a one-permit sleep slot for one worker thread (like Rust's thread::park).
//
// Contract: park() by the owning thread only; unpark() from any thread. An unpark that comes
// before the park is not lost: the permit makes the next park return at once. Blocking (futex
// through std::atomic::wait); spurious returns are possible, so callers re-check their condition.

#include <atomic>
#include <cstdint>

namespace akt::detail {

class parker {
 public:
  void park() noexcept {
    while (permit_.exchange(0, std::memory_order_acquire) == 0) {
      permit_.wait(0, std::memory_order_acquire);
    }
  }
  void unpark() noexcept {
    if (permit_.exchange(1, std::memory_order_release) == 0) permit_.notify_one();
  }

 private:
  // Writers: unpark (exchange 1, release), park (exchange 0, acquire).
  std::atomic<std::uint32_t> permit_{0};
};

}  // namespace akt::detail
