// Tests for the wire codec (src/remote/wire.hpp): every frame type through its encoder, the
// frame_reader and its decoder; the reader fed in every split; and hostile bytes (oversize,
// wrong version, unknown type or lane, truncated bodies, malformed varints), which must give a
// reason and never crash.

#include <gtest/gtest.h>
#include <akt/remote/serialization.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "remote/frame.hpp"
#include "remote/wire.hpp"
#include "remote/wire.pb.h"

namespace {

using akt::errc;
using akt::error;
using akt::message;
using akt::remote::byte_reader;
using akt::remote::byte_span;
using akt::remote::byte_writer;
using akt::remote::find_serializer;
using akt::remote::type_id_of;
using namespace akt::remote::detail;

using bytes = std::vector<unsigned char>;

struct received {
  frame_header h;
  bytes body;
};

// Feeds `stream` to a reader in pieces of the sizes `split` picks, and takes every frame.
template <class Split>
std::vector<received> read_all(const bytes& stream, Split split, std::uint32_t max_body = 1 << 20,
                               std::string_view* failure = nullptr) {
  frame_reader reader(max_body, 4096);
  std::vector<received> out;
  std::size_t at = 0;
  while (at < stream.size()) {
    const std::size_t want = std::min(split(), stream.size() - at);
    auto space = reader.prepare(want);
    const std::size_t n = std::min(space.size(), want);
    std::copy_n(stream.begin() + static_cast<std::ptrdiff_t>(at), n, space.begin());
    reader.commit(n);
    at += n;
    frame_header h;
    byte_span body;
    for (;;) {
      const auto st = reader.next(h, body);
      if (st == frame_reader::status::partial) break;
      if (st == frame_reader::status::failed) {
        if (failure) *failure = reader.failure();
        return out;
      }
      out.push_back({h, bytes(body.begin(), body.end())});
    }
  }
  EXPECT_EQ(reader.buffered(), 0u) << "bytes left after the last frame";
  return out;
}

std::vector<received> read_whole(const bytes& stream) {
  return read_all(stream, [&] { return stream.size() + 1; });
}

received only_frame(const bytes& stream) {
  auto frames = read_whole(stream);
  EXPECT_EQ(frames.size(), 1u);
  return frames.empty() ? received{} : frames.front();
}

// A stream of one frame of every type.
bytes every_frame() {
  byte_writer w;
  const auto* str = find_serializer(message(std::string()));
  envelope_fields f;
  f.target_uid = 7;
  f.sender_uid = 9;
  EXPECT_FALSE(encode_tell(w, 0, f, *str, message(std::string("tell"))));
  f.target_kind = envelope_target::grain;
  f.target_grain = "counter/a";
  f.deadline_left_ns = 5'000'000'000;
  f.flags = k_envelope_acknowledged;
  EXPECT_FALSE(encode_ask(w, 42, f, *str, message(std::string("ask"))));
  EXPECT_FALSE(
      encode_reply(w, 42, *find_serializer(message(std::int64_t{})), message(std::int64_t{-1})));
  encode_error_reply(w, 43, errc::mailbox_full, "full", true);
  encode_credit(w, lane::ordinary, 1 << 16);
  encode_ping(w, lane::control, 1);
  encode_pong(w, lane::control, 1);
  akt::remote::hello hello;
  hello.set_system("sys");
  EXPECT_FALSE(encode_proto_frame(w, frame_type::hello, lane::control, 0, hello));
  akt::remote::hello_ack ack;
  ack.set_incarnation(~0ull);
  EXPECT_FALSE(encode_proto_frame(w, frame_type::hello_ack, lane::control, 0, ack));
  akt::remote::hello_reject reject;
  reject.set_reason("wrong system");
  EXPECT_FALSE(encode_proto_frame(w, frame_type::hello_reject, lane::control, 0, reject));
  akt::remote::control control;
  control.mutable_lookup()->set_name("echo");
  EXPECT_FALSE(encode_proto_frame(w, frame_type::control, lane::control, 5, control));
  akt::remote::control_reply reply;
  reply.set_found(true);
  EXPECT_FALSE(encode_proto_frame(w, frame_type::control_reply, lane::control, 5, reply));
  akt::remote::terminated terminated;
  terminated.set_uid(7);
  EXPECT_FALSE(encode_proto_frame(w, frame_type::terminated, lane::control, 0, terminated));
  return w.take();
}

void expect_same(const std::vector<received>& a, const std::vector<received>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].h.type, b[i].h.type) << i;
    EXPECT_EQ(a[i].h.on, b[i].h.on) << i;
    EXPECT_EQ(a[i].h.flags, b[i].h.flags) << i;
    EXPECT_EQ(a[i].h.correlation, b[i].h.correlation) << i;
    EXPECT_EQ(a[i].body, b[i].body) << i;
  }
}

// ---- round trips ----

TEST(Wire_Frames, TellToAUidRoundTripsEveryField) {
  byte_writer w;
  envelope_fields f;
  f.target_uid = 0x1122334455667788ull;
  f.sender_uid = 3;
  const auto* s = find_serializer(message(std::string()));
  ASSERT_FALSE(encode_tell(w, 0, f, *s, message(std::string("hi"))));
  const received r = only_frame(w.take());
  EXPECT_EQ(r.h.type, frame_type::tell);
  EXPECT_EQ(r.h.on, lane::ordinary);
  EXPECT_EQ(r.h.correlation, 0u);
  EXPECT_EQ(r.h.length, r.body.size());
  envelope_fields got;
  byte_span payload;
  ASSERT_EQ(decode_envelope(r.body, got, payload), "");
  EXPECT_EQ(got.target_kind, envelope_target::uid);
  EXPECT_EQ(got.target_uid, f.target_uid);
  EXPECT_EQ(got.sender_uid, 3u);
  EXPECT_EQ(got.deadline_left_ns, 0u);
  EXPECT_EQ(got.flags, 0);
  EXPECT_EQ(got.type_id, type_id_of("akt.string"));
  auto m = akt::remote::decode_message(got.type_id, payload);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(*m->get_if<std::string>(), "hi");
}

TEST(Wire_Frames, AskToAGrainRoundTripsIdentityDeadlineAndFlags) {
  byte_writer w;
  envelope_fields f;
  f.target_kind = envelope_target::grain;
  f.target_grain = "account/alice";
  f.deadline_left_ns = ~0ull;  // the longest varint
  f.flags = k_envelope_acknowledged;
  const auto* s = find_serializer(message(1.0));
  ASSERT_FALSE(encode_ask(w, 99, f, *s, message(2.5), k_flag_caller_blocked));
  const received r = only_frame(w.take());
  EXPECT_EQ(r.h.type, frame_type::ask);
  EXPECT_EQ(r.h.correlation, 99u);
  EXPECT_EQ(r.h.flags, k_flag_caller_blocked);
  envelope_fields got;
  byte_span payload;
  ASSERT_EQ(decode_envelope(r.body, got, payload), "");
  EXPECT_EQ(got.target_kind, envelope_target::grain);
  EXPECT_EQ(got.target_grain, "account/alice");
  EXPECT_EQ(got.sender_uid, 0u);
  EXPECT_EQ(got.deadline_left_ns, ~0ull);
  EXPECT_EQ(got.flags, k_envelope_acknowledged);
  EXPECT_EQ(got.type_id, type_id_of("akt.double"));
  EXPECT_EQ(*akt::remote::decode_message(got.type_id, payload)->get_if<double>(), 2.5);
}

TEST(Wire_Frames, PreEncodedEnvelopesAndRepliesRoundTrip) {
  byte_writer w;
  envelope_fields f;
  f.target_uid = 1;
  f.type_id = 1234;
  const bytes payload = {1, 2, 3};
  ASSERT_FALSE(encode_envelope_bytes(w, frame_type::tell, 0, f, payload));
  ASSERT_FALSE(encode_reply_bytes(w, 8, 5678, payload));
  const auto frames = read_whole(w.take());
  ASSERT_EQ(frames.size(), 2u);
  envelope_fields got;
  byte_span p;
  ASSERT_EQ(decode_envelope(frames[0].body, got, p), "");
  EXPECT_EQ(got.type_id, 1234u);
  EXPECT_EQ(bytes(p.begin(), p.end()), payload);
  std::uint64_t id = 0;
  ASSERT_EQ(decode_reply(frames[1].body, id, p), "");
  EXPECT_EQ(id, 5678u);
  EXPECT_EQ(bytes(p.begin(), p.end()), payload);
  EXPECT_EQ(frames[1].h.correlation, 8u);
}

TEST(Wire_Frames, ReplyRoundTripsTypeAndPayload) {
  byte_writer w;
  const auto* s = find_serializer(message(std::vector<std::uint8_t>{}));
  ASSERT_FALSE(encode_reply(w, 77, *s, message(std::vector<std::uint8_t>{4, 5})));
  const received r = only_frame(w.take());
  EXPECT_EQ(r.h.type, frame_type::reply);
  EXPECT_EQ(r.h.correlation, 77u);
  std::uint64_t id = 0;
  byte_span payload;
  ASSERT_EQ(decode_reply(r.body, id, payload), "");
  auto m = akt::remote::decode_message(id, payload);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(*m->get_if<std::vector<std::uint8_t>>(), (std::vector<std::uint8_t>{4, 5}));
}

TEST(Wire_Frames, ErrorReplyKeepsCodeDetailAndTheRefusalMark) {
  for (const bool refused : {false, true}) {
    byte_writer w;
    encode_error_reply(w, 5, errc::actor_not_found, "no uid 12", refused);
    const received r = only_frame(w.take());
    EXPECT_EQ(r.h.type, frame_type::error_reply);
    EXPECT_EQ(r.h.correlation, 5u);
    EXPECT_EQ((r.h.flags & k_flag_refused) != 0, refused);
    errc code = errc::ok;
    std::string_view detail;
    ASSERT_EQ(decode_error_reply(r.body, code, detail), "");
    EXPECT_EQ(code, errc::actor_not_found);
    EXPECT_EQ(detail, "no uid 12");
  }
  // The last code errc has travels too.
  byte_writer w;
  encode_error_reply(w, 1, errc::protocol_error, "", false);
  errc code = errc::ok;
  std::string_view detail;
  EXPECT_EQ(decode_error_reply(only_frame(w.take()).body, code, detail), "");
  EXPECT_EQ(code, errc::protocol_error);
}

TEST(Wire_Frames, CreditPingAndPongRoundTrip) {
  byte_writer w;
  encode_credit(w, lane::control, 123456789012ull);
  encode_ping(w, lane::ordinary, 17);
  encode_pong(w, lane::ordinary, 17);
  const auto frames = read_whole(w.take());
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].h.type, frame_type::credit);
  EXPECT_EQ(frames[0].h.on, lane::control);
  lane granted = lane::ordinary;
  std::uint64_t credit = 0;
  ASSERT_EQ(decode_credit(frames[0].body, granted, credit), "");
  EXPECT_EQ(granted, lane::control);
  EXPECT_EQ(credit, 123456789012ull);
  for (int i : {1, 2}) {
    EXPECT_EQ(frames[i].h.type, i == 1 ? frame_type::ping : frame_type::pong);
    EXPECT_EQ(frames[i].h.correlation, 17u);
    EXPECT_EQ(frames[i].h.length, 0u);
    EXPECT_EQ(decode_empty(frames[i].body), "");
  }
}

TEST(Wire_Frames, HandshakeFramesRoundTrip) {
  akt::remote::hello hello;
  hello.set_min_version(1);
  hello.set_max_version(1);
  hello.set_system("orders");
  hello.set_incarnation(0xfedcba9876543210ull);
  hello.set_host("10.0.0.1");
  hello.set_port(4711);
  hello.set_lane(1);
  hello.set_max_frame_bytes(1 << 20);
  hello.set_window_bytes(1ull << 33);
  akt::remote::hello_ack ack;
  ack.set_system("orders");
  ack.set_incarnation(3);
  ack.set_max_frame_bytes(1 << 19);
  ack.set_window_bytes(1 << 22);
  akt::remote::hello_reject reject;
  reject.set_reason("wrong system");
  byte_writer w;
  ASSERT_FALSE(encode_proto_frame(w, frame_type::hello, lane::ordinary, 0, hello));
  ASSERT_FALSE(encode_proto_frame(w, frame_type::hello_ack, lane::ordinary, 0, ack));
  ASSERT_FALSE(encode_proto_frame(w, frame_type::hello_reject, lane::ordinary, 0, reject));
  const auto frames = read_whole(w.take());
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].h.type, frame_type::hello);
  EXPECT_EQ(frames[1].h.type, frame_type::hello_ack);
  EXPECT_EQ(frames[2].h.type, frame_type::hello_reject);
  akt::remote::hello hello_back;
  ASSERT_EQ(decode_proto(frames[0].body, hello_back), "");
  EXPECT_EQ(hello_back.SerializeAsString(), hello.SerializeAsString());
  EXPECT_EQ(hello_back.incarnation(), 0xfedcba9876543210ull);
  EXPECT_EQ(hello_back.host(), "10.0.0.1");
  akt::remote::hello_ack ack_back;
  ASSERT_EQ(decode_proto(frames[1].body, ack_back), "");
  EXPECT_EQ(ack_back.max_frame_bytes(), 1u << 19);
  akt::remote::hello_reject reject_back;
  ASSERT_EQ(decode_proto(frames[2].body, reject_back), "");
  EXPECT_EQ(reject_back.reason(), "wrong system");
}

TEST(Wire_Frames, ControlFramesRoundTripEveryRequest) {
  std::vector<akt::remote::control> requests(5);
  requests[0].mutable_lookup()->set_name("echo");
  requests[1].mutable_watch()->set_target_uid(1);
  requests[1].mutable_watch()->set_watcher_uid(2);
  requests[2].mutable_unwatch()->set_target_uid(3);
  requests[3].mutable_spawn()->set_kind("worker");
  requests[3].mutable_spawn()->set_name("w1");
  requests[4].mutable_stop()->set_target_uid(4);
  akt::remote::control_reply reply;
  reply.set_found(true);
  reply.set_uid(11);
  reply.set_path("/user/echo");
  reply.set_error_code(static_cast<std::uint32_t>(errc::actor_not_found));
  reply.set_error_detail("none");
  akt::remote::terminated terminated;
  terminated.set_uid(11);
  terminated.set_reason_code(static_cast<std::uint32_t>(errc::dead));
  terminated.set_detail("stopped");

  byte_writer w;
  for (std::size_t i = 0; i < requests.size(); ++i)
    ASSERT_FALSE(encode_proto_frame(w, frame_type::control, lane::control, i + 1, requests[i]));
  ASSERT_FALSE(encode_proto_frame(w, frame_type::control_reply, lane::control, 1, reply));
  ASSERT_FALSE(encode_proto_frame(w, frame_type::terminated, lane::control, 0, terminated));
  const auto frames = read_whole(w.take());
  ASSERT_EQ(frames.size(), 7u);
  const akt::remote::control::RequestCase cases[] = {
      akt::remote::control::kLookup, akt::remote::control::kWatch, akt::remote::control::kUnwatch,
      akt::remote::control::kSpawn, akt::remote::control::kStop};
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(frames[i].h.type, frame_type::control);
    EXPECT_EQ(frames[i].h.on, lane::control);
    EXPECT_EQ(frames[i].h.correlation, i + 1);
    akt::remote::control back;
    ASSERT_EQ(decode_proto(frames[i].body, back), "");
    EXPECT_EQ(back.request_case(), cases[i]);
    EXPECT_EQ(back.SerializeAsString(), requests[i].SerializeAsString());
  }
  akt::remote::control_reply reply_back;
  ASSERT_EQ(decode_proto(frames[5].body, reply_back), "");
  EXPECT_EQ(reply_back.path(), "/user/echo");
  EXPECT_EQ(reply_back.error_code(), static_cast<std::uint32_t>(errc::actor_not_found));
  akt::remote::terminated terminated_back;
  ASSERT_EQ(decode_proto(frames[6].body, terminated_back), "");
  EXPECT_EQ(terminated_back.detail(), "stopped");
}

struct refuses {
  static constexpr std::string_view akt_type_name = "test.wire.refuses";
};

TEST(Wire_Frames, AFailedEncodeLeavesTheWriterAsItWas) {
  ASSERT_FALSE(akt::remote::register_message<refuses>(
      [](const refuses&, byte_writer& w) -> error {
        w.put_u64(1);  // half-written before it fails
        return error(errc::invalid_argument, "no");
      },
      [](byte_reader&) -> akt::result<refuses> { return refuses{}; }));
  byte_writer w;
  encode_ping(w, lane::control, 1);
  const std::size_t before = w.size();
  const auto* s = find_serializer(message(refuses{}));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(encode_tell(w, 0, envelope_fields{}, *s, message(refuses{})), errc::invalid_argument);
  EXPECT_EQ(encode_reply(w, 1, *s, message(refuses{})), errc::invalid_argument);
  EXPECT_EQ(w.size(), before);
  EXPECT_EQ(read_whole(w.take()).size(), 1u);
}

// ---- the reader ----

TEST(Wire_Reader, ByteByByteYieldsTheSameFrames) {
  const bytes stream = every_frame();
  const auto whole = read_whole(stream);
  // One frame of each of the 13 types.
  std::vector<int> types;
  for (const auto& f : whole) types.push_back(static_cast<int>(f.h.type));
  std::sort(types.begin(), types.end());
  ASSERT_EQ(types.size(), 13u);
  for (std::size_t i = 0; i < types.size(); ++i) EXPECT_EQ(types[i], static_cast<int>(i) + 1);
  expect_same(read_all(stream, [] { return std::size_t{1}; }), whole);
}

TEST(Wire_Reader, RandomSplitsYieldTheSameFrames) {
  bytes stream;
  for (int i = 0; i < 20; ++i) {
    const bytes one = every_frame();
    stream.insert(stream.end(), one.begin(), one.end());
  }
  const auto whole = read_whole(stream);
  ASSERT_EQ(whole.size(), 260u);
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    const std::size_t most = std::size_t{1} << (round % 12);
    expect_same(read_all(stream, [&] { return 1 + rng() % most; }), whole);
  }
}

TEST(Wire_Reader, APartialFrameWaitsForTheRest) {
  byte_writer w;
  encode_credit(w, lane::ordinary, 5);
  const bytes stream = w.take();
  frame_reader reader(1024);
  frame_header h;
  byte_span body;
  for (std::size_t i = 0; i + 1 < stream.size(); ++i) {
    auto space = reader.prepare(1);
    space[0] = stream[i];
    reader.commit(1);
    EXPECT_EQ(reader.next(h, body), frame_reader::status::partial) << i;
  }
  auto space = reader.prepare(1);
  space[0] = stream.back();
  reader.commit(1);
  ASSERT_EQ(reader.next(h, body), frame_reader::status::frame);
  EXPECT_EQ(h.type, frame_type::credit);
  EXPECT_EQ(reader.next(h, body), frame_reader::status::partial);
}

TEST(Wire_Reader, MemoryStaysWithinOneFramePlusOneReadAndShrinksAfter) {
  constexpr std::uint32_t max_body = 100000;
  constexpr std::size_t chunk = 1000;
  byte_writer w;
  const bytes big(max_body - 8, 0xaa);
  ASSERT_FALSE(encode_reply_bytes(w, 1, 2, big));
  encode_ping(w, lane::control, 3);
  const bytes stream = w.take();
  frame_reader reader(max_body, chunk);
  std::size_t at = 0;
  std::size_t most = 0;
  int frames = 0;
  while (at < stream.size()) {
    auto space = reader.prepare(chunk * 2);  // asks for more than a chunk: gets a chunk
    EXPECT_LE(space.size(), chunk);
    const std::size_t n = std::min(space.size(), stream.size() - at);
    std::copy_n(stream.begin() + static_cast<std::ptrdiff_t>(at), n, space.begin());
    reader.commit(n);
    at += n;
    most = std::max(most, reader.capacity());
    frame_header h;
    byte_span body;
    while (reader.next(h, body) == frame_reader::status::frame) ++frames;
  }
  EXPECT_EQ(frames, 2);
  EXPECT_LE(most, k_header_bytes + max_body + chunk);
  (void)reader.prepare(chunk);
  EXPECT_LE(reader.capacity(), 2 * chunk);
}

// A header with the given fields, raw.
bytes raw_header(std::uint32_t length, std::uint8_t version, std::uint8_t type,
                 std::uint8_t lane_byte) {
  bytes h(k_header_bytes, 0);
  store_u32(h.data(), length);
  h[4] = version;
  h[5] = type;
  h[7] = lane_byte;
  return h;
}

TEST(Wire_Reader, HeadersItCannotTrustFailTheReaderWithAReason) {
  struct bad_case {
    bytes header;
    std::string_view reason;
  };
  const bad_case cases[] = {
      {raw_header(1025, 1, 4, 1), "frame above the size limit"},
      {raw_header(0xffffffff, 1, 4, 1), "frame above the size limit"},
      {raw_header(0, 2, 4, 1), "unsupported wire version"},
      {raw_header(0, 0, 4, 1), "unsupported wire version"},
      {raw_header(0, 1, 0, 1), "unknown frame type"},
      {raw_header(0, 1, 14, 1), "unknown frame type"},
      {raw_header(0, 1, 4, 2), "unknown lane"},
  };
  for (const auto& c : cases) {
    // A good frame first: it is delivered, then the bad header stops the reader.
    byte_writer w;
    encode_ping(w, lane::control, 1);
    bytes stream = w.take();
    stream.insert(stream.end(), c.header.begin(), c.header.end());
    stream.resize(stream.size() + 64, 0);
    std::string_view failure;
    const auto frames = read_all(
        stream, [] { return std::size_t{7}; }, 1024, &failure);
    EXPECT_EQ(frames.size(), 1u);
    EXPECT_EQ(failure, c.reason);
  }
  frame_reader reader(16);
  auto space = reader.prepare(k_header_bytes);
  const bytes bad = raw_header(0, 9, 4, 1);
  std::copy(bad.begin(), bad.end(), space.begin());
  reader.commit(k_header_bytes);
  frame_header h;
  byte_span body;
  EXPECT_EQ(reader.next(h, body), frame_reader::status::failed);
  EXPECT_EQ(reader.next(h, body), frame_reader::status::failed);  // for good
  EXPECT_EQ(reader.failure(), "unsupported wire version");
}

// ---- hostile bodies ----

TEST(Wire_Decoders, HeaderFlagsALaterVersionAddsAreIgnored) {
  // Header flags are hints (frame.hpp): a receiver that does not know a bit still takes the
  // frame, so a node can add one without a new wire version.
  byte_writer w;
  envelope_fields f;
  f.target_uid = 5;
  const auto* s = find_serializer(message(std::int64_t{0}));
  ASSERT_FALSE(encode_ask(w, 3, f, *s, message(std::int64_t{41}), 0xfc));
  const received r = only_frame(w.take());
  EXPECT_EQ(r.h.type, frame_type::ask);
  EXPECT_EQ(r.h.flags, 0xfc);
  envelope_fields got;
  byte_span payload;
  EXPECT_EQ(decode_envelope(r.body, got, payload), "");
  EXPECT_EQ(got.target_uid, 5u);
}

TEST(Wire_Decoders, EveryTruncatedBodyGivesAReason) {
  byte_writer w;
  envelope_fields f;
  f.target_kind = envelope_target::grain;
  f.target_grain = "kind/name";
  f.deadline_left_ns = 1ull << 60;
  f.type_id = 1;
  ASSERT_FALSE(encode_envelope_bytes(w, frame_type::ask, 1, f, {}));
  f.target_kind = envelope_target::uid;
  ASSERT_FALSE(encode_envelope_bytes(w, frame_type::tell, 0, f, {}));
  ASSERT_FALSE(encode_reply_bytes(w, 1, 2, {}));
  encode_error_reply(w, 1, errc::dead, "gone", false);
  encode_credit(w, lane::ordinary, 1);
  const auto frames = read_whole(w.take());
  ASSERT_EQ(frames.size(), 5u);
  for (const auto& fr : frames) {
    for (std::size_t n = 0; n < fr.body.size(); ++n) {
      const byte_span cut(fr.body.data(), n);
      std::string_view why;
      envelope_fields got;
      byte_span payload;
      std::uint64_t u = 0;
      errc code = errc::ok;
      std::string_view detail;
      lane l = lane::control;
      switch (fr.h.type) {
        case frame_type::tell:
        case frame_type::ask:
          why = decode_envelope(cut, got, payload);
          break;
        case frame_type::reply:
          why = decode_reply(cut, u, payload);
          break;
        case frame_type::error_reply:
          why = decode_error_reply(cut, code, detail);
          break;
        default:
          why = decode_credit(cut, l, u);
          break;
      }
      EXPECT_NE(why, "") << static_cast<int>(fr.h.type) << " cut to " << n;
    }
  }
}

TEST(Wire_Decoders, MalformedFieldsGiveAReason) {
  envelope_fields f;
  byte_span payload;
  // Target kind 2.
  const bytes kind2 = {2, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(decode_envelope(kind2, f, payload), "envelope: unknown target kind");
  // Deadline: eleven continuation bytes.
  bytes varint = {0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
  varint.insert(varint.end(), 11, 0x80);
  varint.insert(varint.end(), 9, 0);
  EXPECT_EQ(decode_envelope(varint, f, payload), "envelope: truncated or malformed deadline");
  // A grain identity whose length runs past the body, and an empty one.
  const bytes long_grain = {1, 50, 'a', 'b'};
  EXPECT_NE(decode_envelope(long_grain, f, payload), "");
  bytes empty_grain = {1, 0};
  empty_grain.resize(empty_grain.size() + 8 + 1 + 1 + 8, 0);
  EXPECT_EQ(decode_envelope(empty_grain, f, payload), "envelope: empty grain identity");
  // Unknown envelope flags.
  byte_writer w;
  envelope_fields bad;
  bad.flags = 0x80;
  ASSERT_FALSE(encode_envelope_bytes(w, frame_type::tell, 0, bad, {}));
  EXPECT_EQ(decode_envelope(only_frame(w.take()).body, f, payload), "envelope: unknown flags");
  // Error codes that errc does not have, or ok.
  errc code = errc::dead;
  std::string_view detail;
  for (unsigned char c : {0, 200, 255}) {
    const bytes body = {c, 0};
    EXPECT_EQ(decode_error_reply(body, code, detail), "error reply: unknown error code") << +c;
  }
  EXPECT_EQ(code, errc::dead);  // untouched
  const bytes trailing = {1, 0, 9};
  EXPECT_EQ(decode_error_reply(trailing, code, detail), "error reply: trailing bytes");
  // A credit for lane 2; a ping with a body.
  bytes credit(12, 0);
  credit[0] = 2;
  lane l = lane::control;
  std::uint64_t n = 0;
  EXPECT_EQ(decode_credit(credit, l, n), "credit: unknown lane");
  const bytes one = {1};
  EXPECT_NE(decode_empty(one), "");
  // Protobuf bodies that do not parse.
  akt::remote::hello hello;
  const bytes garbage = {0xff, 0xff, 0xff};
  EXPECT_EQ(decode_proto(garbage, hello), "malformed protobuf body");
  const bytes cut_string = {0x1a, 0x05, 'a'};  // field 3 (system), 5 bytes, 1 present
  EXPECT_EQ(decode_proto(cut_string, hello), "malformed protobuf body");
}

TEST(Wire_Decoders, RandomBodiesNeverCrashAnyDecoder) {
  std::mt19937_64 rng(99);
  bytes body;
  for (int round = 0; round < 20000; ++round) {
    body.resize(rng() % 48);
    for (auto& b : body) b = static_cast<unsigned char>(rng() % 4 == 0 ? 0x80 : rng());
    envelope_fields f;
    byte_span payload;
    std::uint64_t u = 0;
    errc code = errc::ok;
    std::string_view detail;
    lane l = lane::control;
    if (decode_envelope(body, f, payload).empty()) {
      EXPECT_LE(payload.size(), body.size());
      EXPECT_LE(f.target_grain.size(), body.size());
    }
    (void)decode_reply(body, u, payload);
    (void)decode_error_reply(body, code, detail);
    (void)decode_credit(body, l, u);
    akt::remote::control control;
    (void)decode_proto(body, control);
  }
}

}  // namespace
