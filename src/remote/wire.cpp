#include "remote/wire.hpp"

#include <google/protobuf/message_lite.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "akt/core/assert.hpp"

namespace akt::remote::detail {

namespace {

// Appends a header whose length is patched by finish_frame; returns where the frame starts.
std::size_t begin_frame(byte_writer& w) {
  const std::size_t start = w.size();
  w.reserve_bytes(k_header_bytes);
  return start;
}

// Writes the header of the frame that starts at `start` now that its body is complete.
error finish_frame(byte_writer& w, std::size_t start, frame_type type, lane on, std::uint8_t flags,
                   std::uint64_t correlation) {
  const std::size_t body = w.size() - start - k_header_bytes;
  if (body > std::numeric_limits<std::uint32_t>::max()) {
    w.truncate(start);
    return error(errc::invalid_argument, "a frame body is at most 4 GiB");
  }
  frame_header h;
  h.length = static_cast<std::uint32_t>(body);
  h.type = type;
  h.flags = flags;
  h.on = on;
  h.correlation = correlation;
  encode_header(h, w.data() + start);
  return {};
}

void put_envelope_head(byte_writer& w, const envelope_fields& f, std::uint64_t type_id) {
  w.put_u8(static_cast<std::uint8_t>(f.target_kind));
  if (f.target_kind == envelope_target::grain)
    w.put_string(f.target_grain);
  else
    w.put_u64(f.target_uid);
  w.put_u64(f.sender_uid);
  w.put_varint(f.deadline_left_ns);
  // The flag follows the token: an encoder given a token sets it, one without clears it.
  const bool claimed = f.target_kind == envelope_target::grain && f.claim_token > 0;
  const bool traced = f.trace_span_id != 0;
  std::uint8_t flags = f.flags & ~(k_envelope_claimed | k_envelope_traced);
  if (claimed) flags |= k_envelope_claimed;
  if (traced) flags |= k_envelope_traced;
  w.put_u8(flags);
  if (claimed) w.put_varint(static_cast<std::uint64_t>(f.claim_token));
  if (traced) {
    w.put_bytes(f.trace_id.data(), f.trace_id.size());
    w.put_u64(f.trace_span_id);
    w.put_u8(f.trace_flags);
  }
  w.put_u64(type_id);
}

error encode_envelope(byte_writer& w, frame_type type, std::uint64_t correlation,
                      const envelope_fields& f, const serializer& s, const message& m,
                      std::uint8_t header_flags) {
  const std::size_t start = begin_frame(w);
  put_envelope_head(w, f, s.id);
  if (error e = s.encode(m, w)) {
    w.truncate(start);
    return e;
  }
  return finish_frame(w, start, type, lane::ordinary, header_flags, correlation);
}

// A frame with no body, or a fixed one the caller appends: cannot exceed the size limit.
void finish_small(byte_writer& w, std::size_t start, frame_type type, lane on, std::uint8_t flags,
                  std::uint64_t correlation) {
  const error e = finish_frame(w, start, type, on, flags, correlation);
  AKT_ASSERT(!e);
  (void)e;
}

bool known_errc(std::uint8_t v) noexcept {
  // to_string names every errc and answers "unknown" for anything else, so a code added to
  // errc later is accepted here without a second list to keep in step.
  return v != 0 && to_string(static_cast<errc>(v)) != "unknown";
}

}  // namespace

error encode_tell(byte_writer& w, std::uint64_t correlation, const envelope_fields& f,
                  const serializer& s, const message& m) {
  return encode_envelope(w, frame_type::tell, correlation, f, s, m, 0);
}

error encode_ask(byte_writer& w, std::uint64_t correlation, const envelope_fields& f,
                 const serializer& s, const message& m, std::uint8_t header_flags) {
  return encode_envelope(w, frame_type::ask, correlation, f, s, m, header_flags);
}

error encode_envelope_bytes(byte_writer& w, frame_type type, std::uint64_t correlation,
                            const envelope_fields& f, byte_span payload) {
  AKT_ASSERT(type == frame_type::tell || type == frame_type::ask);
  const std::size_t start = begin_frame(w);
  put_envelope_head(w, f, f.type_id);
  w.put_bytes(payload.data(), payload.size());
  return finish_frame(w, start, type, lane::ordinary, 0, correlation);
}

error encode_reply(byte_writer& w, std::uint64_t correlation, const serializer& s,
                   const message& m) {
  const std::size_t start = begin_frame(w);
  w.put_u64(s.id);
  if (error e = s.encode(m, w)) {
    w.truncate(start);
    return e;
  }
  return finish_frame(w, start, frame_type::reply, lane::ordinary, 0, correlation);
}

error encode_reply_bytes(byte_writer& w, std::uint64_t correlation, std::uint64_t type_id,
                         byte_span payload) {
  const std::size_t start = begin_frame(w);
  w.put_u64(type_id);
  w.put_bytes(payload.data(), payload.size());
  return finish_frame(w, start, frame_type::reply, lane::ordinary, 0, correlation);
}

void encode_error_reply(byte_writer& w, std::uint64_t correlation, errc code,
                        std::string_view detail, bool refused) {
  AKT_ASSERT(code != errc::ok);
  const std::size_t start = begin_frame(w);
  w.put_u8(static_cast<std::uint8_t>(code));
  // A detail is a human's explanation: cut to a size that cannot matter to the frame limit.
  constexpr std::size_t k_max_detail = 4096;
  w.put_string(detail.substr(0, k_max_detail));
  finish_small(w, start, frame_type::error_reply, lane::ordinary, refused ? k_flag_refused : 0,
               correlation);
}

void encode_credit(byte_writer& w, lane granted, std::uint64_t bytes) {
  const std::size_t start = begin_frame(w);
  w.put_u32(static_cast<std::uint32_t>(granted));
  w.put_u64(bytes);
  finish_small(w, start, frame_type::credit, granted, 0, 0);
}

void encode_ping(byte_writer& w, lane on, std::uint64_t sequence) {
  finish_small(w, begin_frame(w), frame_type::ping, on, 0, sequence);
}

void encode_pong(byte_writer& w, lane on, std::uint64_t sequence) {
  finish_small(w, begin_frame(w), frame_type::pong, on, 0, sequence);
}

error encode_proto_frame(byte_writer& w, frame_type type, lane on, std::uint64_t correlation,
                         const google::protobuf::MessageLite& body) {
  const std::size_t n = body.ByteSizeLong();
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    return error(errc::invalid_argument, "a protobuf body is at most 2 GiB");
  const std::size_t start = begin_frame(w);
  body.SerializeWithCachedSizesToArray(w.reserve_bytes(n));
  return finish_frame(w, start, type, on, 0, correlation);
}

std::string_view decode_envelope(byte_span body, envelope_fields& f, byte_span& payload) noexcept {
  byte_reader r(body);
  std::uint8_t kind = 0;
  if (!r.get_u8(kind)) return "envelope: truncated";
  if (kind == static_cast<std::uint8_t>(envelope_target::uid)) {
    f.target_kind = envelope_target::uid;
    f.target_grain = {};
    if (!r.get_u64(f.target_uid)) return "envelope: truncated target uid";
  } else if (kind == static_cast<std::uint8_t>(envelope_target::grain)) {
    f.target_kind = envelope_target::grain;
    f.target_uid = 0;
    if (!r.get_string(f.target_grain)) return "envelope: truncated or malformed grain identity";
    if (f.target_grain.empty()) return "envelope: empty grain identity";
  } else {
    return "envelope: unknown target kind";
  }
  if (!r.get_u64(f.sender_uid)) return "envelope: truncated sender";
  if (!r.get_varint(f.deadline_left_ns)) return "envelope: truncated or malformed deadline";
  if (!r.get_u8(f.flags)) return "envelope: truncated flags";
  if ((f.flags & ~k_envelope_known_flags) != 0) return "envelope: unknown flags";
  f.claim_token = 0;
  if ((f.flags & k_envelope_claimed) != 0) {
    if (f.target_kind != envelope_target::grain) return "envelope: a claim on an actor target";
    std::uint64_t token = 0;
    if (!r.get_varint(token)) return "envelope: truncated or malformed claim token";
    if (token == 0 || token > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return "envelope: claim token out of range";
    f.claim_token = static_cast<std::int64_t>(token);
  }
  f.trace_id = {};
  f.trace_span_id = 0;
  f.trace_flags = 0;
  if ((f.flags & k_envelope_traced) != 0) {
    if (r.remaining() < k_trace_context_bytes) return "envelope: truncated trace context";
    bool any = false;
    for (std::uint8_t& b : f.trace_id) {
      (void)r.get_u8(b);
      any = any || b != 0;
    }
    (void)r.get_u64(f.trace_span_id);
    (void)r.get_u8(f.trace_flags);
    if (!any || f.trace_span_id == 0) return "envelope: invalid trace context";
  }
  if (!r.get_u64(f.type_id)) return "envelope: truncated type id";
  payload = r.rest();
  return {};
}

std::string_view decode_reply(byte_span body, std::uint64_t& type_id, byte_span& payload) noexcept {
  byte_reader r(body);
  if (!r.get_u64(type_id)) return "reply: truncated type id";
  payload = r.rest();
  return {};
}

std::string_view decode_error_reply(byte_span body, errc& code, std::string_view& detail) noexcept {
  byte_reader r(body);
  std::uint8_t v = 0;
  if (!r.get_u8(v)) return "error reply: truncated";
  if (!known_errc(v)) return "error reply: unknown error code";
  if (!r.get_string(detail)) return "error reply: truncated or malformed detail";
  if (r.remaining() != 0) return "error reply: trailing bytes";
  code = static_cast<errc>(v);
  return {};
}

std::string_view decode_credit(byte_span body, lane& granted, std::uint64_t& bytes) noexcept {
  byte_reader r(body);
  std::uint32_t l = 0;
  if (!r.get_u32(l) || !r.get_u64(bytes)) return "credit: truncated";
  if (l >= k_lanes) return "credit: unknown lane";
  if (r.remaining() != 0) return "credit: trailing bytes";
  granted = static_cast<lane>(l);
  return {};
}

std::string_view decode_empty(byte_span body) noexcept {
  return body.empty() ? std::string_view() : std::string_view("ping/pong: unexpected body");
}

std::string_view decode_proto(byte_span body, google::protobuf::MessageLite& out) {
  // A frame body is at most 4 GiB by its header; protobuf takes an int.
  if (body.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    return "protobuf body above 2 GiB";
  if (!out.ParseFromArray(body.data(), static_cast<int>(body.size())))
    return "malformed protobuf body";
  return {};
}

// ---- frame_reader ----

frame_reader::frame_reader(std::uint32_t max_body, std::size_t read_chunk)
    : max_body_(max_body), read_chunk_(read_chunk == 0 ? k_default_read_chunk : read_chunk) {}

std::span<unsigned char> frame_reader::prepare(std::size_t n) {
  n = std::min(n, read_chunk_);
  if (begin_ == end_) {
    begin_ = end_ = 0;
    // After a large frame, give the memory back once it is consumed: an idle connection keeps
    // one chunk, not the largest frame it ever saw.
    if (buf_.size() > 2 * read_chunk_) std::vector<unsigned char>(read_chunk_).swap(buf_);
  }
  if (buf_.size() - end_ < n) {
    // Compacting moves at most one partial frame (the caller took the complete ones), and only
    // when the space behind it ran out.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buf_.size() - end_ < n) {
      // Doubling keeps a large frame's reads amortised; the bound (header + max body + one
      // chunk) holds whenever the caller took the complete frames first.
      const std::size_t want = end_ + n;
      const std::size_t limit =
          std::max(want, k_header_bytes + std::size_t{max_body_} + read_chunk_);
      buf_.resize(std::min(std::max(want, 2 * buf_.size()), limit));
    }
  }
  prepared_ = n;
  return std::span<unsigned char>(buf_.data() + end_, n);
}

void frame_reader::commit(std::size_t k) noexcept {
  AKT_ASSERT(k <= prepared_);
  k = std::min(k, prepared_);
  end_ += k;
  prepared_ -= k;
}

frame_reader::status frame_reader::next(frame_header& h, byte_span& body) noexcept {
  if (!failure_.empty()) return status::failed;
  const std::size_t have = end_ - begin_;
  if (have < k_header_bytes) return status::partial;
  frame_header got;
  const std::string_view why = decode_header(buf_.data() + begin_, max_body_, got);
  if (!why.empty()) {
    failure_ = why;
    return status::failed;
  }
  if (have - k_header_bytes < got.length) return status::partial;
  h = got;
  body = byte_span(buf_.data() + begin_ + k_header_bytes, got.length);
  begin_ += k_header_bytes + got.length;
  return status::frame;
}

}  // namespace akt::remote::detail
