#pragma once
// Manual time: a test moves a system's clock instead of sleeping.
//
//   akt::system_config cfg;
//   cfg.manual_time = true;                      // the timers run on a virtual clock
//   akt::actor_system sys("test", cfg);
//   sys.start();
//   (void)sys.schedule_once(worker, tick{}, std::chrono::hours(1));
//   auto r = akt::testkit::advance(sys, std::chrono::hours(1));  // the tick fires, is handled
//   // here the worker has handled the tick, and everything it caused has been handled too
//
// Contract
// - advance(sys, d): moves the system's virtual time forward by d. Every timer due on the way
//   fires on the calling thread, in deadline order, with the clock set to its (1 ms) tick;
//   after each batch of firings the call waits until the system is quiescent (below), so the
//   timers that those turns arm (a grain's idle timer, a periodic schedule's next fire, a
//   supervisor back-off) are armed at that virtual moment and fire within the same advance when
//   due. When it returns, every effect of the advance has been handled: a test that asserts
//   "nothing happened in an hour" can assert right away. Works with the threaded dispatcher and
//   in deterministic mode (where this thread runs the turns). One thread advances at a time;
//   never from inside an actor, a grain or a timer callback (it would wait for itself).
// - Quiescent: no actor or grain ready or in a turn, and no pipe_to / runtime task on the
//   blocking pool. A system that never gets there (an actor that keeps sending itself
//   messages) makes advance return errc::request_timeout after `settle_within` of real time
//   per wait; the advance itself still completes.
// - settle(sys): advance by zero: fires what is due now and waits for quiescence. Use it after
//   sends from the test, before asserting that nothing else happened.
// - now(sys): the system's time (virtual under manual time, else the steady clock).
// - Errors: errc::invalid_argument when the system was not built with manual_time.

#include <chrono>

#include "akt/actor/actor_system.hpp"
#include "akt/core/result.hpp"

namespace akt::testkit {

struct manual_time_defaults {
  // How long each wait for quiescence may take in real time: generous for a loaded CI machine
  // running sanitizers; only a system that never settles waits this long.
  static constexpr std::chrono::seconds settle_within{30};
};

result<void> advance(actor_system& sys, std::chrono::nanoseconds d,
                     std::chrono::nanoseconds settle_within = manual_time_defaults::settle_within);
result<void> settle(actor_system& sys,
                    std::chrono::nanoseconds settle_within = manual_time_defaults::settle_within);
std::chrono::steady_clock::time_point now(const actor_system& sys);

}  // namespace akt::testkit
