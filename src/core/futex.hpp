#pragma once
// Thin wrappers over Linux futexes for timed waits (std::atomic::wait has no timeout).

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace akt::detail {

// Sleeps while *addr == expected, until woken or until the absolute CLOCK_MONOTONIC deadline
// (steady-clock nanoseconds). Returns false when the deadline passed. Spurious returns happen.
inline bool futex_wait_until(std::atomic<std::uint32_t>* addr, std::uint32_t expected,
                             std::int64_t deadline_ns) noexcept {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000);
  const long rc = syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr),
                          FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected, &ts, nullptr,
                          FUTEX_BITSET_MATCH_ANY);
  return !(rc == -1 && errno == ETIMEDOUT);
}

inline void futex_wake_all(std::atomic<std::uint32_t>* addr) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAKE | FUTEX_PRIVATE_FLAG,
          INT_MAX, nullptr, nullptr, 0);
}

}  // namespace akt::detail
