#pragma once
// The frames of an akt connection as bytes (docs/design.md, "Frames"): encoders that append
// one whole frame (header and body) to a byte_writer, decoders of a frame body, and the
// frame_reader that cuts a received byte stream into frames.
//
// Contract: the encoders and decoders are pure functions over the bytes they are given, safe
// from any thread; decoders never read past the body and answer a reason (a static string,
// empty when the body is sound) instead of trusting a peer's lengths. An encoder that fails
// leaves the writer as it found it. frame_reader has one owner (the connection's I/O thread).
//
// Protobuf stays behind this header: it names google::protobuf::MessageLite by a forward
// declaration only; the generated classes are in "remote/wire.pb.h".

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "akt/core/error.hpp"
#include "akt/core/message.hpp"
#include "akt/remote/serialization.hpp"
#include "remote/frame.hpp"

namespace google::protobuf {
class MessageLite;
}

namespace akt::remote::detail {

// How an envelope names its receiver on the destination node.
enum class envelope_target : std::uint8_t { uid = 0, grain = 1 };

// envelope_fields::flags
inline constexpr std::uint8_t k_envelope_acknowledged = 1;  // a grain tell that wants its ack
// A grain envelope routed by a cluster claim: its token (the claim's create revision, a
// positive varint) follows the flags; the owner refuses the message (marked not_owner) unless
// its activation holds that claim.
inline constexpr std::uint8_t k_envelope_claimed = 2;
// A traced message: its W3C trace context follows the claim token (or the flags): the trace id
// (16 bytes, nonzero), the sender's span id (8 bytes little-endian, nonzero) and the trace flags
// (1 byte). 25 bytes, present only on traced messages.
inline constexpr std::uint8_t k_envelope_traced = 4;
inline constexpr std::size_t k_trace_context_bytes = 25;
inline constexpr std::uint8_t k_envelope_known_flags =
    k_envelope_acknowledged | k_envelope_claimed | k_envelope_traced;

// The fields of a tell or ask body before the payload. target_grain views bytes the caller
// keeps alive (on decode: the frame body).
struct envelope_fields {
  envelope_target target_kind = envelope_target::uid;
  std::uint64_t target_uid = 0;        // target_kind uid
  std::string_view target_grain;       // target_kind grain: "kind/name"
  std::uint64_t sender_uid = 0;        // 0: no sender
  std::uint64_t deadline_left_ns = 0;  // an ask's time left when sent; 0: none
  std::uint8_t flags = 0;
  std::int64_t claim_token = 0;  // grain targets with k_envelope_claimed: positive
  std::uint64_t type_id = 0;     // the payload's type; encoders take it from the serializer
  // Encoders write a trace context when trace_span_id != 0 (the flag follows it, as for the
  // claim); the decoder sets them under k_envelope_traced, else clears them.
  std::array<std::uint8_t, 16> trace_id{};
  std::uint64_t trace_span_id = 0;
  std::uint8_t trace_flags = 0;
};

// ---- encoders: each appends one frame to w ----

// A tell (frame type 4) or an ask (5) of m, which s serializes. A tell's correlation is 0
// unless it wants an answer (an acknowledged grain tell). Errors: the serializer's, or
// invalid_argument for a body above 4 GiB; on error w is unchanged.
error encode_tell(byte_writer& w, std::uint64_t correlation, const envelope_fields& f,
                  const serializer& s, const message& m);
error encode_ask(byte_writer& w, std::uint64_t correlation, const envelope_fields& f,
                 const serializer& s, const message& m, std::uint8_t header_flags = 0);
// The same with a payload already encoded (f.type_id names its type): forwarding, tests.
error encode_envelope_bytes(byte_writer& w, frame_type type, std::uint64_t correlation,
                            const envelope_fields& f, byte_span payload);

// A reply (6) to the ask `correlation`: type id, then m's payload.
error encode_reply(byte_writer& w, std::uint64_t correlation, const serializer& s,
                   const message& m);
error encode_reply_bytes(byte_writer& w, std::uint64_t correlation, std::uint64_t type_id,
                         byte_span payload);
// An error reply (7): the code (not ok) and its detail; `refused` sets k_flag_refused.
void encode_error_reply(byte_writer& w, std::uint64_t correlation, errc code,
                        std::string_view detail, bool refused);
// A credit grant (8) for `granted`'s window, sent on that lane's connection.
void encode_credit(byte_writer& w, lane granted, std::uint64_t bytes);
// Ping (9) and pong (10): empty bodies; the sequence number rides in the correlation field.
void encode_ping(byte_writer& w, lane on, std::uint64_t sequence);
void encode_pong(byte_writer& w, lane on, std::uint64_t sequence);
// A frame whose body is a protobuf message: hello, hello_ack, hello_reject, control,
// control_reply, terminated. invalid_argument when the message is above protobuf's 2 GiB.
error encode_proto_frame(byte_writer& w, frame_type type, lane on, std::uint64_t correlation,
                         const google::protobuf::MessageLite& body);

// ---- decoders of a frame body: an empty reason when sound, else why not ----

// A tell or ask body. payload views the rest of the body (possibly empty).
std::string_view decode_envelope(byte_span body, envelope_fields& f, byte_span& payload) noexcept;
std::string_view decode_reply(byte_span body, std::uint64_t& type_id, byte_span& payload) noexcept;
// An unknown errc value, or ok, is a protocol error. detail views the body.
std::string_view decode_error_reply(byte_span body, errc& code, std::string_view& detail) noexcept;
std::string_view decode_credit(byte_span body, lane& granted, std::uint64_t& bytes) noexcept;
// Ping and pong: the body must be empty.
std::string_view decode_empty(byte_span body) noexcept;
// A protobuf body into out (one of the akt.remote messages).
std::string_view decode_proto(byte_span body, google::protobuf::MessageLite& out);

// Cuts a byte stream into frames without copying them.
//
// Contract: one owner (the connection's I/O thread); not thread-safe. Use: prepare(n) gives
// space for up to n received bytes (asio reads straight into it), commit(k) says k of them
// arrived, then next() until it says partial (or failed). A frame's body is a view into the
// reader's buffer, valid until the next prepare(). Memory: the buffer grows on demand and
// never beyond k_header_bytes + max_body + read_chunk (a frame it waits for plus one read),
// provided every complete frame is taken before the next prepare(). A header that
// decode_header rejects fails the reader for good: the connection is to be closed with
// failure() as the reason. Allocation: only when the buffer grows.
class frame_reader {
 public:
  enum class status : std::uint8_t { frame, partial, failed };

  // max_body: the largest body accepted (before the handshake, a small limit; then the
  // negotiated one, see set_max_body). read_chunk: the most one prepare() hands out.
  explicit frame_reader(std::uint32_t max_body, std::size_t read_chunk = k_default_read_chunk);

  // Writable space for at most n bytes (n is capped at read_chunk); never empty when n > 0.
  std::span<unsigned char> prepare(std::size_t n);
  // k (<= the size of the last prepare()) bytes were written there.
  void commit(std::size_t k) noexcept;

  // The next complete frame, if one is buffered.
  status next(frame_header& h, byte_span& body) noexcept;
  // Why the reader failed; empty while it has not.
  std::string_view failure() const noexcept { return failure_; }

  // Raises or lowers the accepted body size (after the handshake). Frames already buffered
  // are judged by the new limit.
  void set_max_body(std::uint32_t max_body) noexcept { max_body_ = max_body; }
  std::uint32_t max_body() const noexcept { return max_body_; }
  // Bytes received and not yet handed out as frames.
  std::size_t buffered() const noexcept { return end_ - begin_; }
  std::size_t capacity() const noexcept { return buf_.size(); }

  // One read's worth: large enough that a busy connection needs few system calls, small
  // enough that an idle connection's buffer stays small.
  static constexpr std::size_t k_default_read_chunk = 64 * 1024;

 private:
  std::vector<unsigned char> buf_;
  std::size_t begin_ = 0;     // first byte not yet handed out
  std::size_t end_ = 0;       // one past the last received byte
  std::size_t prepared_ = 0;  // the size of the last prepare(), which commit() may not exceed
  std::uint32_t max_body_;
  std::size_t read_chunk_;
  std::string_view failure_;
};

}  // namespace akt::remote::detail
