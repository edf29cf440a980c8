#pragma once
// The messages of the remote benchmarks (akt_bench's Remote* shapes and akt_compare_remote's akt
// side), registered with akt's serializer registry: a small plain struct with an encode/decode
// pair (the "small registered struct"), and the query a client in another process uses
// to learn how many messages a sink has processed. The 1 KB shape sends a std::string (built in).

#include <akt/akt.hpp>
#include <akt/remote/remote.hpp>
#include <cstdint>
#include <string_view>

namespace akt_bench {

// 8 bytes of payload; a tell of it is a 51-byte frame on akt's wire (a 16-byte header, the
// envelope's 27 bytes, the payload).
struct remote_ping {
  static constexpr std::string_view akt_type_name = "akt.bench.ping";
  std::int64_t n = 0;
};

// "How many messages have you processed?": answered with a std::uint64_t. No payload.
struct count_query {
  static constexpr std::string_view akt_type_name = "akt.bench.count_query";
};

// Registers both (once per process; later calls do nothing).
inline void register_remote_messages() {
  static const bool done = [] {
    akt::error e = akt::remote::register_message<remote_ping>(
        [](const remote_ping& p, akt::remote::byte_writer& w) -> akt::error {
          w.put_u64(static_cast<std::uint64_t>(p.n));
          return {};
        },
        [](akt::remote::byte_reader& r) -> akt::result<remote_ping> {
          std::uint64_t v = 0;
          if (!r.get_u64(v)) return akt::error(akt::errc::decode_failed, "short ping");
          return remote_ping{static_cast<std::int64_t>(v)};
        });
    akt::error q = akt::remote::register_message<count_query>(
        [](const count_query&, akt::remote::byte_writer&) -> akt::error { return {}; },
        [](akt::remote::byte_reader&) -> akt::result<count_query> { return count_query{}; });
    return !e && !q;
  }();
  (void)done;
}

}  // namespace akt_bench
