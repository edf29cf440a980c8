#pragma once
// The runtime's clock: steady-clock nanoseconds, used for ask deadlines.

#include <chrono>
#include <cstdint>

namespace akt::detail {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace akt::detail
