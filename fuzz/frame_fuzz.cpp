// libFuzzer target for everything a peer's bytes reach before an actor sees them: the
// frame_reader, every frame body decoder, the protobuf handshake and control messages, and the
// serializers' decoders. Built and run by scripts/fuzz.sh; seeds in fuzz/corpus/frame/.
//
// Input: one byte that picks how the stream is split into reads and the reader's body limit,
// then the byte stream as a connection would receive it. Beyond "no crash, no sanitizer
// report", it checks that a body which decodes re-encodes to a body that decodes the same.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <akt/remote/serialization.hpp>

#include "remote/frame.hpp"
#include "remote/wire.hpp"
#include "remote/wire.pb.h"

namespace {

using namespace akt::remote;
using namespace akt::remote::detail;

// A fuzz finding that is not a crash: abort so libFuzzer keeps the input.
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "frame_fuzz: invariant broken: %s\n", what);
    std::abort();
  }
}

// The wire's own protobuf messages as serializers too, so payloads reach protobuf decoders
// through the registry's path as well as through decode_proto.
std::vector<std::uint64_t> register_types() {
  (void)register_protobuf<akt::remote::hello>();
  (void)register_protobuf<akt::remote::control>();
  (void)register_protobuf<akt::remote::terminated>();
  std::vector<std::uint64_t> ids;
  for (const char* name : {"akt.string", "akt.int32", "akt.int64", "akt.longlong", "akt.uint32",
                           "akt.uint64", "akt.bool", "akt.double", "akt.bytes", "akt.remote.hello",
                           "akt.remote.control", "akt.remote.terminated"})
    ids.push_back(type_id_of(name));
  return ids;
}

// A payload through its own type's decoder and through every known one.
void decode_payload(std::uint64_t type_id, byte_span payload) {
  static const std::vector<std::uint64_t> ids = register_types();
  const auto m = decode_message(type_id, payload);
  if (!m) {
    check(m.code() == akt::errc::decode_failed || m.code() == akt::errc::not_serializable,
          "decode_message failed with an unexpected code");
  } else {
    // What decoded encodes again, and that decodes too.
    const auto again = encode_message(*m);
    check(again.has_value(), "a decoded message does not encode");
    byte_reader r(*again);
    std::uint64_t id = 0;
    check(r.get_u64(id) && id == type_id, "re-encoded under another type id");
    check(decode_message(id, r.rest()).has_value(), "a re-encoded message does not decode");
  }
  for (const std::uint64_t id : ids) (void)decode_message(id, payload);
}

void decode_envelope_body(const frame_header& h, byte_span body) {
  envelope_fields f;
  byte_span payload;
  if (!decode_envelope(body, f, payload).empty()) return;
  check(payload.data() >= body.data() && payload.size() <= body.size(), "payload outside body");
  // The same fields encode to the same body.
  byte_writer w;
  check(!encode_envelope_bytes(w, h.type, h.correlation, f, payload), "envelope re-encode");
  check(w.size() >= k_header_bytes, "envelope frame without a header");
  const byte_span again = w.bytes().subspan(k_header_bytes);
  envelope_fields g;
  byte_span payload2;
  check(decode_envelope(again, g, payload2).empty(), "re-encoded envelope does not decode");
  check(g.target_kind == f.target_kind && g.target_uid == f.target_uid &&
            g.target_grain == f.target_grain && g.sender_uid == f.sender_uid &&
            g.deadline_left_ns == f.deadline_left_ns && g.flags == f.flags &&
            g.type_id == f.type_id && g.trace_id == f.trace_id &&
            g.trace_span_id == f.trace_span_id && g.trace_flags == f.trace_flags &&
            payload2.size() == payload.size() &&
            (payload.empty() || std::memcmp(payload.data(), payload2.data(), payload.size()) == 0),
        "envelope fields changed in a round trip");
  decode_payload(f.type_id, payload);
}

template <class Proto>
void decode_proto_body(byte_span body) {
  Proto p;
  if (!decode_proto(body, p).empty()) return;
  byte_writer w;
  check(!encode_proto_frame(w, frame_type::control, lane::control, 0, p), "proto re-encode");
  Proto q;
  check(decode_proto(w.bytes().subspan(k_header_bytes), q).empty(),
        "re-encoded protobuf does not parse");
}

void decode_frame(const frame_header& h, byte_span body) {
  switch (h.type) {
    case frame_type::tell:
    case frame_type::ask:
      decode_envelope_body(h, body);
      break;
    case frame_type::reply: {
      std::uint64_t id = 0;
      byte_span payload;
      if (decode_reply(body, id, payload).empty()) decode_payload(id, payload);
      break;
    }
    case frame_type::error_reply: {
      akt::errc code = akt::errc::ok;
      std::string_view detail;
      if (decode_error_reply(body, code, detail).empty()) {
        check(code != akt::errc::ok, "an error reply decoded as ok");
        byte_writer w;
        encode_error_reply(w, h.correlation, code, detail, (h.flags & k_flag_refused) != 0);
        akt::errc code2 = akt::errc::ok;
        std::string_view detail2;
        check(decode_error_reply(w.bytes().subspan(k_header_bytes), code2, detail2).empty() &&
                  code2 == code && (detail.size() > 4096 || detail2 == detail),
              "error reply changed in a round trip");
      }
      break;
    }
    case frame_type::credit: {
      lane granted = lane::control;
      std::uint64_t bytes = 0;
      (void)decode_credit(body, granted, bytes);
      break;
    }
    case frame_type::ping:
    case frame_type::pong:
      (void)decode_empty(body);
      break;
    case frame_type::hello:
      decode_proto_body<akt::remote::hello>(body);
      break;
    case frame_type::hello_ack:
      decode_proto_body<akt::remote::hello_ack>(body);
      break;
    case frame_type::hello_reject:
      decode_proto_body<akt::remote::hello_reject>(body);
      break;
    case frame_type::control:
      decode_proto_body<akt::remote::control>(body);
      break;
    case frame_type::control_reply:
      decode_proto_body<akt::remote::control_reply>(body);
      break;
    case frame_type::terminated:
      decode_proto_body<akt::remote::terminated>(body);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // Mode byte: bits 0-1 the split (whole, byte by byte, 7-byte reads, pseudo-random reads),
  // bit 7 a tiny body limit (64 bytes) instead of 64 KiB, so both limits are exercised.
  const std::uint8_t mode = data[0];
  const unsigned char* stream = data + 1;
  const std::size_t n = size - 1;
  frame_reader reader((mode & 0x80) != 0 ? 64 : 64 * 1024, 4096);
  std::uint32_t lcg = mode * 2654435761u + 1;
  std::size_t at = 0;
  std::size_t frames = 0;
  while (at < n) {
    std::size_t want = n - at;
    switch (mode & 3) {
      case 1:
        want = 1;
        break;
      case 2:
        want = 7;
        break;
      case 3:
        lcg = lcg * 1664525u + 1013904223u;
        want = 1 + (lcg >> 24) % 300;
        break;
      default:
        break;
    }
    const auto space = reader.prepare(std::min(want, n - at));
    check(!space.empty(), "prepare gave no space");
    const std::size_t k = std::min(space.size(), n - at);
    std::memcpy(space.data(), stream + at, k);
    reader.commit(k);
    at += k;
    check(reader.capacity() <= k_header_bytes + reader.max_body() + 4096, "reader above bound");
    frame_header h;
    byte_span body;
    for (;;) {
      const auto st = reader.next(h, body);
      if (st == frame_reader::status::partial) break;
      if (st == frame_reader::status::failed) {
        check(!reader.failure().empty(), "failed without a reason");
        return 0;
      }
      check(body.size() == h.length && h.length <= reader.max_body(), "frame length");
      ++frames;
      decode_frame(h, body);
    }
  }
  (void)frames;
  return 0;
}
