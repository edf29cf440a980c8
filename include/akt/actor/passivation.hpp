#pragma once
// Passivation: an actor that stops itself cleanly when it is no longer needed.
//   passivation::after_idle(d)      no message for d
//   passivation::after_messages(n)  after processing n messages
//   passivation::never()            long-lived (the default)
// A passivated actor runs post_stop like any stopped actor and publishes actor_passivated.

#include <chrono>
#include <cstdint>

namespace akt {

struct passivation {
  enum class kind : std::uint8_t { never, idle, messages };
  kind mode = kind::never;
  std::chrono::nanoseconds idle_for{0};
  std::uint64_t message_limit = 0;

  static passivation never() { return {}; }
  static passivation after_idle(std::chrono::nanoseconds d) { return {kind::idle, d, 0}; }
  static passivation after_messages(std::uint64_t n) { return {kind::messages, {}, n}; }
};

}  // namespace akt
