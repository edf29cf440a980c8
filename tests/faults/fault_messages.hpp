#pragma once
// The one message of the fault harness and the grain kind's name, shared by the node program
// (fault_node_main.cpp) and the driver (kill_nine_test.cpp): each message names itself with an
// id, which the grain applies to the fenced store (fault_evidence.hpp), so the checker can tell
// which calls were applied and how often.

#include <akt/core/error.hpp>
#include <akt/remote/serialization.hpp>

#include <cstdint>
#include <string_view>

namespace akt::faults {

// The grain kind every node process hosts ("counter" in the words).
inline constexpr std::string_view k_counter_kind = "faults.counter";
// Heartbeats every 100 ms; a connection that hears nothing for this many is closed as lost.
// Ten (1 s), not the 3 of a quick detector: five ASan node processes starting or stopping on two
// cores stall a sound connection for over 300 ms, and a rolling restart then showed one
// connection_lost and one unreachable refusal per grain in flight, at startup, with no fault
// injected. A killed node's sockets close at once; a paused or partitioned one is found lost
// after 1 s of silence instead of 0.3 s, well inside the TTL-based bounds those tests check.
inline constexpr unsigned k_heartbeat_misses = 10;

// Apply message `id` (unique per grain: the driver counts 1, 2, ... per grain, never sending an
// id twice).
struct apply_msg {
  static constexpr std::string_view akt_type_name = "faults.apply";
  std::uint64_t id = 0;
};

// The detail a grain's reply_error carries when the fenced store refused the write (a newer
// activation opened the grain): the driver counts such a call as refused, never applied.
inline constexpr std::string_view k_store_refused = "fenced store refused";

inline akt::error register_fault_messages() {
  return akt::remote::register_message<apply_msg>(
      [](const apply_msg& m, akt::remote::byte_writer& w) -> akt::error {
        w.put_u64(m.id);
        return {};
      },
      [](akt::remote::byte_reader& r) -> akt::result<apply_msg> {
        std::uint64_t id = 0;
        if (!r.get_u64(id)) return akt::errc::decode_failed;
        return apply_msg{id};
      });
}

}  // namespace akt::faults
