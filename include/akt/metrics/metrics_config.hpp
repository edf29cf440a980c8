#pragma once
// metrics_config: whether the runtime publishes its own metrics (system_config::metrics).
//
// Off (the default), the runtime registers no collector and takes no sample: the hot path
// pays nothing. The registry (actor_system::metrics()) works either way for the user's own
// metrics.

#include <cstdint>

namespace akt {

struct metrics_config {
  // On: the runtime's metrics (akt_actors, akt_actor_messages_total, akt_dispatcher_*, ...;
  // docs/guide/08-observability-metrics.md) are collected at every scrape.
  bool enabled = false;
  // Handler time (akt_actor_handler_seconds) is sampled: each worker times one message in this
  // many (two clock reads for the sampled one, none for the others). 1 times every message; 0
  // times none. Bounds the overhead: at 64 the clock costs well under 1 ns per message.
  std::uint32_t handler_sample_every = 64;
};

}  // namespace akt
