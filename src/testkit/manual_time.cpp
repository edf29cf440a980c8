#include "akt/testkit/manual_time.hpp"

#include <thread>

#include "actor/system_core.hpp"

namespace akt::testkit {

namespace {

// How long to sleep between looks at a system that is not quiescent yet: short, since the
// wait is for turns that are already running.
constexpr auto k_settle_poll = std::chrono::microseconds(50);

// Waits until the system is quiescent (see the header), running the turns here in the
// deterministic mode. False when it was not within `within`.
bool wait_quiescent(detail::system_core& core, std::chrono::nanoseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    if (core.dispatcher_.manual()) {
      while (core.dispatcher_.run_one()) {
      }
    }
    // One word counts ready and running actors and pool tasks, and each piece of work is
    // counted before the work that caused it stops counting: zero is a quiescent moment.
    if (core.work_.load(std::memory_order_seq_cst) == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(k_settle_poll);
  }
}

}  // namespace

result<void> advance(actor_system& sys, std::chrono::nanoseconds d,
                     std::chrono::nanoseconds settle_within) {
  detail::system_core& core = *akt::detail::core_of(sys);
  if (!core.timers_.manual_time()) {
    return error(errc::invalid_argument, "advance needs a system with system_config::manual_time");
  }
  if (d < std::chrono::nanoseconds::zero()) {
    return error(errc::invalid_argument, "time only moves forward");
  }
  bool settled = true;
  const auto settle_now = [&] { settled = wait_quiescent(core, settle_within) && settled; };
  settle_now();  // what the test sent before: handled at the time it was sent
  (void)core.timers_.advance_time(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(d), settle_now);
  if (!settled) {
    return error(errc::request_timeout, "the system did not become quiescent within " +
                                            std::to_string(settle_within.count() / 1'000'000) +
                                            " ms during an advance");
  }
  return {};
}

result<void> settle(actor_system& sys, std::chrono::nanoseconds settle_within) {
  return advance(sys, std::chrono::nanoseconds::zero(), settle_within);
}

std::chrono::steady_clock::time_point now(const actor_system& sys) {
  return akt::detail::core_of(sys)->timers_.now();
}

}  // namespace akt::testkit
