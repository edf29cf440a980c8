#pragma once
// The fixed header of every frame on an akt connection (docs/design.md, "Frames").
//
// Contract: pure functions over bytes; no allocation, no I/O, safe from any thread. decode
// never reads past the bytes it is given and rejects a header it cannot trust (wrong version,
// unknown type or lane, a body above the limit) with a reason, so a peer's bytes never decide
// how much memory the reader takes.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace akt::remote::detail {

inline constexpr std::uint8_t k_wire_version = 1;
inline constexpr std::size_t k_header_bytes = 16;

enum class frame_type : std::uint8_t {
  hello = 1,
  hello_ack = 2,
  hello_reject = 3,
  tell = 4,
  ask = 5,
  reply = 6,
  error_reply = 7,
  credit = 8,
  ping = 9,
  pong = 10,
  control = 11,
  control_reply = 12,
  terminated = 13,
};
inline constexpr std::uint8_t k_last_frame_type = 13;

enum class lane : std::uint8_t { control = 0, ordinary = 1 };
inline constexpr std::size_t k_lanes = 2;

// frame_header::flags. Hints and marks a receiver may ignore: an unknown bit is not an error
// (a flag that changes a frame's meaning goes in its body, under a new wire version).
inline constexpr std::uint8_t k_flag_refused = 1;  // error_reply: refused before any handler ran
// ask: a thread sleeps until the answer comes (reply_route::caller_blocked), so the answer is
// written at once rather than batched, and an ask forwarded to a third node keeps the mark.
inline constexpr std::uint8_t k_flag_caller_blocked = 2;

struct frame_header {
  std::uint32_t length = 0;  // body bytes after the header
  std::uint8_t version = k_wire_version;
  frame_type type = frame_type::tell;
  std::uint8_t flags = 0;
  lane on = lane::ordinary;
  std::uint64_t correlation = 0;
};

inline void store_u32(unsigned char* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline void store_u64(unsigned char* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline std::uint32_t load_u32(const unsigned char* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline std::uint64_t load_u64(const unsigned char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline void encode_header(const frame_header& h, unsigned char* out) noexcept {
  store_u32(out, h.length);
  out[4] = h.version;
  out[5] = static_cast<unsigned char>(h.type);
  out[6] = h.flags;
  out[7] = static_cast<unsigned char>(h.on);
  store_u64(out + 8, h.correlation);
}

// Decodes the k_header_bytes at `in`. Returns an empty reason when the header is acceptable,
// else why not (the connection is then closed with that reason).
inline std::string_view decode_header(const unsigned char* in, std::uint32_t max_body,
                                      frame_header& h) noexcept {
  h.length = load_u32(in);
  h.version = in[4];
  h.flags = in[6];
  h.correlation = load_u64(in + 8);
  if (h.version != k_wire_version) return "unsupported wire version";
  if (in[5] == 0 || in[5] > k_last_frame_type) return "unknown frame type";
  h.type = static_cast<frame_type>(in[5]);
  if (in[7] >= k_lanes) return "unknown lane";
  h.on = static_cast<lane>(in[7]);
  if (h.length > max_body) return "frame above the size limit";
  return {};
}

// Calls f(header, frame) for each whole frame at the start of `bytes`, a buffer of frames this
// node encoded itself (a closed connection's leftovers, a lane's backlog); `frame` spans the
// header and the body. Stops at the first frame that is cut or does not decode.
template <class F>
void for_each_frame(std::span<const unsigned char> bytes, F&& f) {
  std::size_t at = 0;
  while (bytes.size() - at >= k_header_bytes) {
    frame_header h;
    if (!decode_header(bytes.data() + at, ~std::uint32_t{0}, h).empty()) return;
    const std::size_t size = k_header_bytes + h.length;
    if (bytes.size() - at < size) return;
    f(h, bytes.subspan(at, size));
    at += size;
  }
}

}  // namespace akt::remote::detail
