// Tests for the serializer registry (include/akt/remote/serialization.hpp): byte_writer and
// byte_reader, the built-in serializers, user structs and protobuf messages, the refusals
// (duplicate name, id collision, unknown type), hostile bytes, and registration racing lookups.

#include <gtest/gtest.h>
#include <akt/remote/serialization.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "serialization_test_messages.pb.h"
#include "support/test_support.hpp"

namespace {

using akt::errc;
using akt::error;
using akt::message;
using akt::result;
using akt::remote::byte_reader;
using akt::remote::byte_span;
using akt::remote::byte_writer;
using akt::remote::decode_message;
using akt::remote::encode_message;
using akt::remote::find_serializer;
using akt::remote::type_id_of;

// encode_message, then decode_message of what it wrote; the decoded message or its error.
result<message> round_trip(message m) {
  auto bytes = encode_message(m);
  if (!bytes) return bytes.error();
  byte_reader r(*bytes);
  std::uint64_t id = 0;
  EXPECT_TRUE(r.get_u64(id));
  return decode_message(id, r.rest());
}

template <class T>
T round_trip_value(T value) {
  result<message> back = round_trip(message(value));
  EXPECT_TRUE(back.has_value()) << back.error_or_ok().message();
  if (!back) return T{};
  const T* v = back->get_if<T>();
  EXPECT_NE(v, nullptr) << "decoded as " << back->type_name();
  return v ? *v : T{};
}

// A plain struct with a stable name and hand-written functions.
struct point {
  static constexpr std::string_view akt_type_name = "test.point";
  std::int32_t x = 0;
  std::int32_t y = 0;
  std::string label;
};

error encode_point(const point& p, byte_writer& w) {
  w.put_u32(static_cast<std::uint32_t>(p.x));
  w.put_u32(static_cast<std::uint32_t>(p.y));
  w.put_string(p.label);
  return {};
}
result<point> decode_point(byte_reader& r) {
  std::uint32_t x = 0, y = 0;
  std::string_view label;
  if (!r.get_u32(x) || !r.get_u32(y) || !r.get_string(label)) return errc::decode_failed;
  return point{static_cast<std::int32_t>(x), static_cast<std::int32_t>(y), std::string(label)};
}

TEST(Serialization_Bytes, WriterAppendsLittleEndianAndReaderReadsItBack) {
  byte_writer w;
  w.put_u8(0xab);
  w.put_u16(0x1234);
  w.put_u32(0xdeadbeef);
  w.put_u64(0x0102030405060708ull);
  w.put_string("hi");
  const std::vector<unsigned char> expect = {0xab, 0x34, 0x12, 0xef, 0xbe, 0xad, 0xde, 8,   7,
                                             6,    5,    4,    3,    2,    1,    2,    'h', 'i'};
  EXPECT_EQ(std::vector<unsigned char>(w.bytes().begin(), w.bytes().end()), expect);

  byte_reader r(w.bytes());
  std::uint8_t a = 0;
  std::uint16_t b = 0;
  std::uint32_t c = 0;
  std::uint64_t d = 0;
  std::string_view s;
  ASSERT_TRUE(r.get_u8(a) && r.get_u16(b) && r.get_u32(c) && r.get_u64(d) && r.get_string(s));
  EXPECT_EQ(a, 0xab);
  EXPECT_EQ(b, 0x1234);
  EXPECT_EQ(c, 0xdeadbeefu);
  EXPECT_EQ(d, 0x0102030405060708ull);
  EXPECT_EQ(s, "hi");
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_FALSE(r.get_u8(a));
}

TEST(Serialization_Bytes, WriterBorrowsTheCallersBufferAndPatchesReservedBytes) {
  std::vector<unsigned char> buf = {9};
  {
    byte_writer w(buf);
    const std::size_t at = w.size();
    w.reserve_bytes(4);
    w.put_string("abc");
    const auto n = static_cast<std::uint32_t>(w.size() - at - 4);
    std::memcpy(w.data() + at, &n, 4);  // little-endian host
    w.truncate(100);                    // beyond the end: no change
    EXPECT_EQ(w.size(), 9u);
  }
  EXPECT_EQ(buf, (std::vector<unsigned char>{9, 4, 0, 0, 0, 3, 'a', 'b', 'c'}));
  byte_writer owner;
  owner.put_u8(1);
  EXPECT_EQ(owner.take(), std::vector<unsigned char>{1});
  EXPECT_EQ(owner.size(), 0u);
}

TEST(Serialization_Bytes, VarintsRoundTripAtEveryLength) {
  for (int bits = 0; bits <= 64; ++bits) {
    const std::uint64_t v = bits == 64 ? ~0ull : (1ull << bits) - 1;
    byte_writer w;
    w.put_varint(v);
    EXPECT_EQ(w.size(), bits == 0 ? 1u : static_cast<std::size_t>((bits + 6) / 7));
    byte_reader r(w.bytes());
    std::uint64_t back = 1;
    ASSERT_TRUE(r.get_varint(back)) << bits;
    EXPECT_EQ(back, v);
    EXPECT_EQ(r.remaining(), 0u);
  }
}

TEST(Serialization_Bytes, MalformedOrTruncatedVarintsAreRefusedAndConsumeNothing) {
  std::uint64_t v = 0;
  // Eleven continuation bytes: longer than any 64-bit value.
  const std::vector<unsigned char> too_long(11, 0x80);
  byte_reader r1(too_long);
  EXPECT_FALSE(r1.get_varint(v));
  EXPECT_EQ(r1.remaining(), 11u);
  // Ten bytes whose last carries more than the 64th bit.
  std::vector<unsigned char> overflow(9, 0xff);
  overflow.push_back(0x02);
  byte_reader r2(overflow);
  EXPECT_FALSE(r2.get_varint(v));
  EXPECT_EQ(r2.remaining(), 10u);
  // Ten bytes with a continuation bit on the last.
  std::vector<unsigned char> open(10, 0xff);
  byte_reader r3(open);
  EXPECT_FALSE(r3.get_varint(v));
  // Cut short.
  const std::vector<unsigned char> cut = {0x80, 0x80};
  byte_reader r4(cut);
  EXPECT_FALSE(r4.get_varint(v));
  EXPECT_EQ(r4.remaining(), 2u);
  byte_reader empty(byte_span{});
  EXPECT_FALSE(empty.get_varint(v));
}

TEST(Serialization_Bytes, ReaderNeverReadsPastTheEndWhateverALengthSays) {
  byte_writer w;
  w.put_varint(~0ull);  // a string "of 2^64-1 bytes"
  w.put_u8('x');
  byte_reader r(w.bytes());
  std::string_view s;
  EXPECT_FALSE(r.get_string(s));
  EXPECT_EQ(r.remaining(), w.size());  // nothing consumed
  byte_span span;
  EXPECT_FALSE(r.get_bytes(w.size() + 1, span));
  unsigned char dst[4];
  const std::vector<unsigned char> three = {1, 2, 3};
  byte_reader r2(three);
  EXPECT_FALSE(r2.get_bytes(dst, 4));
  std::uint32_t u = 0;
  EXPECT_FALSE(r2.get_u32(u));
  EXPECT_EQ(r2.remaining(), 3u);
  EXPECT_TRUE(r2.get_bytes(dst, 3));
  EXPECT_EQ(dst[2], 3);
}

TEST(Serialization_TypeId, IsFnv1a64OfTheName) {
  EXPECT_EQ(type_id_of(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(type_id_of("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(type_id_of("foobar"), 0x85944171f73967e8ull);
  static_assert(type_id_of("akt.string") == type_id_of("akt.string"));
}

TEST(Serialization_Builtins, AreRegisteredUnderTheirAktNamesWithoutAnyCall) {
  const std::pair<message, std::string_view> cases[] = {
      {message(std::string("x")), "akt.string"},
      {message(std::int32_t{1}), "akt.int32"},
      {message(1), "akt.int32"},  // int is int32_t
      {message(std::int64_t{1}), "akt.int64"},
      {message(1L), "akt.int64"},  // long is int64_t on Linux
      {message(1LL), "akt.longlong"},
      {message(std::uint32_t{1}), "akt.uint32"},
      {message(std::uint64_t{1}), "akt.uint64"},
      {message(true), "akt.bool"},
      {message(1.5), "akt.double"},
      {message(std::vector<std::uint8_t>{1}), "akt.bytes"},
  };
  for (const auto& [m, name] : cases) {
    const auto* s = find_serializer(m);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->name, name);
    EXPECT_EQ(s->id, type_id_of(name));
    EXPECT_EQ(find_serializer(s->id), s);
  }
  EXPECT_EQ(find_serializer(message()), nullptr);
}

TEST(Serialization_Builtins, StringsRoundTripIncludingEmptyBinaryAndLong) {
  EXPECT_EQ(round_trip_value(std::string()), "");
  EXPECT_EQ(round_trip_value(std::string("hello")), "hello");
  const std::string binary("a\0b\xff", 4);
  EXPECT_EQ(round_trip_value(binary), binary);
  const std::string long_one(100000, 'z');
  EXPECT_EQ(round_trip_value(long_one), long_one);
}

TEST(Serialization_Builtins, IntegersRoundTripAtTheirLimits) {
  using i32 = std::numeric_limits<std::int32_t>;
  using i64 = std::numeric_limits<std::int64_t>;
  for (std::int32_t v : {i32::min(), -1, 0, 1, i32::max()}) EXPECT_EQ(round_trip_value(v), v);
  for (std::int64_t v : {i64::min(), std::int64_t{-1}, std::int64_t{0}, i64::max()})
    EXPECT_EQ(round_trip_value(v), v);
  for (long long v : {std::numeric_limits<long long>::min(), 0LL, 42LL})
    EXPECT_EQ(round_trip_value(v), v);
  for (std::uint32_t v : {0u, 7u, std::numeric_limits<std::uint32_t>::max()})
    EXPECT_EQ(round_trip_value(v), v);
  for (std::uint64_t v : {std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max()})
    EXPECT_EQ(round_trip_value(v), v);
}

TEST(Serialization_Builtins, BoolsAndDoublesRoundTripBitForBit) {
  EXPECT_TRUE(round_trip_value(true));
  EXPECT_FALSE(round_trip_value(false));
  for (double v : {0.0, -0.0, 1.5, -1e308, std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::denorm_min()}) {
    const double back = round_trip_value(v);
    EXPECT_EQ(std::memcmp(&back, &v, sizeof v), 0) << v;
  }
  EXPECT_TRUE(std::isnan(round_trip_value(std::numeric_limits<double>::quiet_NaN())));
}

TEST(Serialization_Builtins, ByteVectorsRoundTrip) {
  EXPECT_EQ(round_trip_value(std::vector<std::uint8_t>{}), std::vector<std::uint8_t>{});
  std::vector<std::uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(round_trip_value(all), all);
}

TEST(Serialization_Struct, RoundTripsThroughItsRegisteredFunctions) {
  ASSERT_FALSE(akt::remote::register_message<point>(&encode_point, &decode_point));
  const point back = round_trip_value(point{-3, 4, "here"});
  EXPECT_EQ(back.x, -3);
  EXPECT_EQ(back.y, 4);
  EXPECT_EQ(back.label, "here");
  const auto* s = find_serializer(message(point{}));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name, "test.point");
  EXPECT_EQ(s->id, type_id_of("test.point"));
}

struct lambda_coded {
  static constexpr std::string_view akt_type_name = "test.lambda_coded";
  std::uint64_t v = 0;
};

TEST(Serialization_Struct, CaptureLessLambdasRegister) {
  const error e = akt::remote::register_message<lambda_coded>(
      [](const lambda_coded& m, byte_writer& w) -> error {
        w.put_varint(m.v);
        return {};
      },
      [](byte_reader& r) -> result<lambda_coded> {
        lambda_coded m;
        if (!r.get_varint(m.v)) return errc::decode_failed;
        return m;
      });
  ASSERT_FALSE(e) << e.message();
  EXPECT_EQ(round_trip_value(lambda_coded{1ull << 40}).v, 1ull << 40);
}

TEST(Serialization_Struct, RegisteringTheSameTypeTwiceIsANoOp) {
  ASSERT_FALSE(akt::remote::register_message<point>(&encode_point, &decode_point));
  const auto* first = find_serializer(message(point{}));
  EXPECT_FALSE(akt::remote::register_message<point>(&encode_point, &decode_point));
  EXPECT_EQ(find_serializer(message(point{})), first);
}

TEST(Serialization_Protobuf, MessageRoundTripsUnderItsFullName) {
  ASSERT_FALSE(akt::remote::register_protobuf<akt_test::order>());
  EXPECT_FALSE(akt::remote::register_protobuf<akt_test::order>());  // idempotent
  akt_test::order o;
  o.set_item("tea");
  o.set_quantity(3);
  o.add_prices(-5);
  o.add_prices(1LL << 50);
  const auto* s = find_serializer(message(o));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name, "akt_test.order");
  EXPECT_EQ(s->id, type_id_of("akt_test.order"));
  const akt_test::order back = round_trip_value(o);
  EXPECT_EQ(back.item(), "tea");
  EXPECT_EQ(back.quantity(), 3u);
  ASSERT_EQ(back.prices_size(), 2);
  EXPECT_EQ(back.prices(1), 1LL << 50);
  // Its bytes are protobuf's own.
  auto bytes = encode_message(message(o));
  ASSERT_TRUE(bytes.has_value());
  EXPECT_EQ(std::string(bytes->begin() + 8, bytes->end()), o.SerializeAsString());
}

// Two types that claim one stable name.
struct dup_first {
  static constexpr std::string_view akt_type_name = "test.dup";
};
struct dup_second {
  static constexpr std::string_view akt_type_name = "test.dup";
};

TEST(Serialization_Refusals, ADifferentTypeUnderATakenNameIsADuplicateTypeName) {
  auto enc = [](const auto&, byte_writer&) -> error { return {}; };
  ASSERT_FALSE(akt::remote::register_message<dup_first>(
      enc, [](byte_reader&) -> result<dup_first> { return dup_first{}; }));
  const error e = akt::remote::register_message<dup_second>(
      enc, [](byte_reader&) -> result<dup_second> { return dup_second{}; });
  EXPECT_EQ(e, errc::duplicate_type_name);
  EXPECT_NE(e.detail().find("dup_first"), std::string_view::npos) << e.message();
  EXPECT_NE(e.detail().find("dup_second"), std::string_view::npos) << e.message();
  EXPECT_NE(e.detail().find("test.dup"), std::string_view::npos) << e.message();
  // The first registration stands.
  const auto* s = find_serializer(type_id_of("test.dup"));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->vt, &akt::detail::message_ops<dup_first>::table);
  EXPECT_EQ(find_serializer(message(dup_second{})), nullptr);
}

struct collider {
  static constexpr std::string_view akt_type_name = "test.collider";
};

TEST(Serialization_Refusals, ANameWhoseTypeIdIsTakenIsATypeIdCollision) {
  // Two real names with one FNV-1a-64 hash are out of reach, so the id is forced.
  akt::remote::serializer s;
  s.name = "test.collider";
  s.id = type_id_of("akt.string");
  s.vt = &akt::detail::message_ops<collider>::table;
  s.cpp_type = "collider";
  s.encode_thunk = &akt::remote::detail::encode_thunk<collider>;
  s.decode_thunk = &akt::remote::detail::decode_thunk<collider>;
  const error e = akt::remote::detail::register_serializer(s);
  EXPECT_EQ(e, errc::type_id_collision);
  EXPECT_NE(e.detail().find("test.collider"), std::string_view::npos) << e.message();
  EXPECT_NE(e.detail().find("akt.string"), std::string_view::npos) << e.message();
  EXPECT_EQ(find_serializer(type_id_of("akt.string"))->name, "akt.string");
  EXPECT_EQ(find_serializer(message(collider{})), nullptr);
}

TEST(Serialization_Refusals, ATypeUnderASecondNameIsADuplicate) {
  // akt.string's type, std::string, registered again under another name.
  akt::remote::serializer s = *find_serializer(message(std::string()));
  s.name = "test.another_string";
  s.id = type_id_of(s.name);
  EXPECT_EQ(akt::remote::detail::register_serializer(s), errc::duplicate_type_name);
  EXPECT_EQ(find_serializer(s.id), nullptr);
}

TEST(Serialization_Refusals, IncompleteSerializersAreInvalidArguments) {
  akt::remote::serializer s;
  s.name = "test.incomplete";
  s.id = type_id_of(s.name);
  EXPECT_EQ(akt::remote::detail::register_serializer(s), errc::invalid_argument);
  s.id = 0;
  s.vt = &akt::detail::message_ops<collider>::table;
  s.encode_thunk = &akt::remote::detail::encode_thunk<collider>;
  s.decode_thunk = &akt::remote::detail::decode_thunk<collider>;
  EXPECT_EQ(akt::remote::detail::register_serializer(s), errc::invalid_argument);
}

struct unregistered {
  int v = 0;
};

TEST(Serialization_Refusals, UnregisteredTypesAndUnknownIdsAreNotSerializable) {
  EXPECT_EQ(encode_message(message(unregistered{})).code(), errc::not_serializable);
  EXPECT_EQ(encode_message(message()).code(), errc::not_serializable);
  EXPECT_EQ(decode_message(type_id_of("test.nobody"), {}).code(), errc::not_serializable);
}

TEST(Serialization_Refusals, EncodingAMessageOfAnotherTypeIsAnInvalidArgument) {
  const auto* s = find_serializer(message(std::string()));
  byte_writer w;
  EXPECT_EQ(s->encode(message(1), w), errc::invalid_argument);
}

// Every proper prefix of a valid encoding, and the encoding with a byte too many.
void expect_cuts_fail(const message& m) {
  auto bytes = encode_message(m);
  ASSERT_TRUE(bytes.has_value());
  byte_reader r(*bytes);
  std::uint64_t id = 0;
  ASSERT_TRUE(r.get_u64(id));
  const byte_span payload = r.rest();
  for (std::size_t n = 0; n < payload.size(); ++n) {
    EXPECT_EQ(decode_message(id, payload.first(n)).code(), errc::decode_failed)
        << m.type_name() << " cut to " << n;
  }
  std::vector<unsigned char> longer(payload.begin(), payload.end());
  longer.push_back(0);
  EXPECT_EQ(decode_message(id, longer).code(), errc::decode_failed) << m.type_name();
}

TEST(Serialization_Hostile, TruncatedOrOverlongPayloadsAreDecodeFailed) {
  ASSERT_FALSE(akt::remote::register_message<point>(&encode_point, &decode_point));
  expect_cuts_fail(message(std::string("abc")));
  expect_cuts_fail(message(std::int32_t{-7}));
  expect_cuts_fail(message(std::int64_t{-7}));
  expect_cuts_fail(message(7LL));
  expect_cuts_fail(message(std::uint32_t{7}));
  expect_cuts_fail(message(std::uint64_t{7}));
  expect_cuts_fail(message(true));
  expect_cuts_fail(message(2.5));
  expect_cuts_fail(message(std::vector<std::uint8_t>{1, 2, 3}));
  expect_cuts_fail(message(point{1, 2, "p"}));
  // A bool is 0 or 1.
  const std::vector<unsigned char> two = {2};
  EXPECT_EQ(decode_message(type_id_of("akt.bool"), two).code(), errc::decode_failed);
  // A length that claims more than there is.
  const std::vector<unsigned char> liar = {0xff, 0xff, 0xff, 0xff, 0x0f, 'a'};
  EXPECT_EQ(decode_message(type_id_of("akt.string"), liar).code(), errc::decode_failed);
  EXPECT_EQ(decode_message(type_id_of("akt.bytes"), liar).code(), errc::decode_failed);
}

TEST(Serialization_Hostile, RandomBytesNeverCrashAnyDecoder) {
  ASSERT_FALSE(akt::remote::register_message<point>(&encode_point, &decode_point));
  ASSERT_FALSE(akt::remote::register_protobuf<akt_test::order>());
  const std::string_view names[] = {"akt.string", "akt.int32",  "akt.int64",     "akt.longlong",
                                    "akt.uint32", "akt.uint64", "akt.bool",      "akt.double",
                                    "akt.bytes",  "test.point", "akt_test.order"};
  std::mt19937_64 rng(20240611);
  std::vector<unsigned char> bytes;
  for (int round = 0; round < 3000; ++round) {
    bytes.resize(rng() % 40);
    for (auto& b : bytes) b = static_cast<unsigned char>(rng());
    for (std::string_view name : names) {
      const result<message> m = decode_message(type_id_of(name), bytes);
      if (!m) {
        EXPECT_EQ(m.code(), errc::decode_failed) << name;
      }
    }
  }
}

struct thrower {
  static constexpr std::string_view akt_type_name = "test.thrower";
};

TEST(Serialization_Hostile, ADecoderThatThrowsOrFailsOtherwiseIsDecodeFailed) {
  ASSERT_FALSE(akt::remote::register_message<thrower>(
      [](const thrower&, byte_writer&) -> error { return {}; },
      [](byte_reader& r) -> result<thrower> {
        if (r.remaining() == 0) throw std::runtime_error("boom");
        return error(errc::invalid_argument, "not a thrower");
      }));
  const auto empty = decode_message(type_id_of("test.thrower"), {});
  EXPECT_EQ(empty.code(), errc::decode_failed);
  EXPECT_NE(empty.error().detail().find("boom"), std::string_view::npos);
  const std::vector<unsigned char> one = {1};
  const auto other = decode_message(type_id_of("test.thrower"), one);
  EXPECT_EQ(other.code(), errc::decode_failed);
  EXPECT_NE(other.error().detail().find("not a thrower"), std::string_view::npos);
}

// ---- registration racing lookups ----

template <int I>
struct stress_name {
  static constexpr char value[] = {'t',
                                   'e',
                                   's',
                                   't',
                                   '.',
                                   's',
                                   't',
                                   'r',
                                   'e',
                                   's',
                                   's',
                                   '.',
                                   static_cast<char>('0' + I / 10),
                                   static_cast<char>('0' + I % 10),
                                   '\0'};
};
template <int I>
struct stress_msg {
  static constexpr std::string_view akt_type_name = stress_name<I>::value;
  std::uint32_t value = I;
};

template <int I>
error register_stress() {
  return akt::remote::register_message<stress_msg<I>>(
      [](const stress_msg<I>& m, byte_writer& w) -> error {
        w.put_u32(m.value);
        return {};
      },
      [](byte_reader& r) -> result<stress_msg<I>> {
        stress_msg<I> m;
        if (!r.get_u32(m.value)) return errc::decode_failed;
        return m;
      });
}

constexpr int k_stress_types = 48;

template <std::size_t... Is>
constexpr auto stress_registrations(std::index_sequence<Is...>) {
  return std::array<error (*)(), sizeof...(Is)>{&register_stress<static_cast<int>(Is)>...};
}
template <std::size_t... Is>
std::array<message, sizeof...(Is)> stress_messages(std::index_sequence<Is...>) {
  return {message(stress_msg<static_cast<int>(Is)>{})...};
}

TEST(Serialization_Concurrency, RegistrationsRacingLookupsAlwaysSeeWholeTables) {
  constexpr auto registrations = stress_registrations(std::make_index_sequence<k_stress_types>{});
  const auto samples = stress_messages(std::make_index_sequence<k_stress_types>{});
  std::atomic<int> registrars_done{0};
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  constexpr int k_registrars = 2;
  constexpr int k_readers = 2;

  const bool in_time =
      akt::test::run_bounded(k_registrars + k_readers, std::chrono::seconds(60), stop, [&](int t) {
        if (t < k_registrars) {
          // Both registrars register every type, in opposite orders: half the calls race a
          // registration of the same type, and must answer ok (idempotent) all the same.
          for (int i = 0; i < k_stress_types; ++i) {
            const int k = t == 0 ? i : k_stress_types - 1 - i;
            if (registrations[static_cast<std::size_t>(k)]()) failures.fetch_add(1);
          }
          registrars_done.fetch_add(1);
          return;
        }
        // Readers: until both registrars are done, and a while after, look up built-ins and
        // whatever stress type is there, and use what they found.
        int after = 0;
        std::vector<unsigned char> buf;
        while (!stop.load() && after < 200) {
          if (registrars_done.load() == k_registrars) ++after;
          const auto* s = find_serializer(message(std::string("abc")));
          if (s == nullptr || s->name != "akt.string") failures.fetch_add(1);
          for (const message& m : samples) {
            const auto* found = find_serializer(m);
            if (found == nullptr) continue;  // not registered yet
            if (found->id != type_id_of(found->name) || find_serializer(found->id) != found ||
                found->vt != akt::detail::message_access::vtable(m))
              failures.fetch_add(1);
            byte_writer w(buf);
            buf.clear();
            if (found->encode(m, w)) failures.fetch_add(1);
            byte_reader r(w.bytes());
            const result<message> back = found->decode(r);
            if (!back || back->type_name() != found->name) failures.fetch_add(1);
          }
        }
      });
  EXPECT_TRUE(in_time);
  EXPECT_EQ(failures.load(), 0);
  for (const message& m : samples) {
    const auto* s = find_serializer(m);
    ASSERT_NE(s, nullptr) << m.type_name();
    EXPECT_EQ(s->name, m.type_name());
  }
}

}  // namespace
