#pragma once
// The serializer registry of the remote module (docs/design.md, "Serialization"): the bytes a
// message becomes on the wire, and the process-wide table that maps a type to its serializer.
//
//   struct deposit {
//     static constexpr std::string_view akt_type_name = "bank.deposit";
//     std::int64_t amount;
//   };
//   akt::remote::register_message<deposit>(
//       [](const deposit& d, akt::remote::byte_writer& w) -> akt::error {
//         w.put_u64(static_cast<std::uint64_t>(d.amount));
//         return {};
//       },
//       [](akt::remote::byte_reader& r) -> akt::result<deposit> {
//         std::uint64_t v;
//         if (!r.get_u64(v)) return akt::errc::decode_failed;
//         return deposit{static_cast<std::int64_t>(v)};
//       });
//   akt::remote::register_protobuf<bank::Withdraw>();   // any generated protobuf message
//
// A type crosses processes under its stable name (akt::type_name<T>, or a protobuf message's
// full name) and its type id, the FNV-1a-64 hash of that name; both are the same on every node,
// which is why a compiler-derived name is refused at compile time.
//
// Contract of the registry: registration may be called from any thread at any time; it takes a
// mutex and copies the tables (registration is rare: at start-up, a few dozen types). Lookups
// (find_serializer) may be called from any thread, are wait-free apart from the one-time
// construction of the built-ins, take no lock and allocate nothing: they read an immutable
// snapshot published through an atomic pointer (release by the registrar, acquire by the reader).
// Snapshots and serializers are never freed before the process exits, so a pointer a reader got
// stays valid for the life of the process. Memory: O(registered types) per snapshot, one
// snapshot per registration.
//
// This header does not include protobuf: register_protobuf<T> only names T's own members, so
// the caller's translation unit, which includes T's generated header, brings protobuf in.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "akt/core/error.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"
#include "akt/core/type_name.hpp"

namespace akt::remote {

using byte_span = std::span<const unsigned char>;

// Appends little-endian integers, LEB128 varints and length-prefixed strings to a byte buffer
// that it owns (default constructor) or borrows (the caller's vector, which must outlive it).
// Single owner: not thread-safe. Growth is the vector's (amortised doubling); nothing else is
// allocated. Not copyable or movable, since a borrowing writer holds a pointer.
class byte_writer {
 public:
  byte_writer() noexcept : buf_(&own_) {}
  explicit byte_writer(std::vector<unsigned char>& borrowed) noexcept : buf_(&borrowed) {}
  byte_writer(const byte_writer&) = delete;
  byte_writer& operator=(const byte_writer&) = delete;

  void put_u8(std::uint8_t v) { buf_->push_back(v); }
  void put_u16(std::uint16_t v) { put_le(v); }
  void put_u32(std::uint32_t v) { put_le(v); }
  void put_u64(std::uint64_t v) { put_le(v); }
  // LEB128: seven bits per byte, low groups first, high bit set on every byte but the last.
  void put_varint(std::uint64_t v) {
    unsigned char tmp[10];
    std::size_t n = 0;
    while (v >= 0x80) {
      tmp[n++] = static_cast<unsigned char>(v | 0x80);
      v >>= 7;
    }
    tmp[n++] = static_cast<unsigned char>(v);
    put_bytes(tmp, n);
  }
  void put_bytes(const void* p, std::size_t n) {
    if (n == 0) return;
    std::memcpy(reserve_bytes(n), p, n);
  }
  // varint length, then the bytes.
  void put_string(std::string_view s) {
    put_varint(s.size());
    put_bytes(s.data(), s.size());
  }

  // Appends n bytes (zeroed) and returns where they start, for a caller that writes them
  // itself (a protobuf serializer) or patches them later (a frame's length). The pointer is
  // valid until the next call that appends; keep the offset (size() before the call) instead
  // when more is appended before the patch.
  unsigned char* reserve_bytes(std::size_t n) {
    const std::size_t at = buf_->size();
    buf_->resize(at + n);
    return buf_->data() + at;
  }

  std::size_t size() const noexcept { return buf_->size(); }
  unsigned char* data() noexcept { return buf_->data(); }
  const unsigned char* data() const noexcept { return buf_->data(); }
  byte_span bytes() const noexcept { return byte_span(buf_->data(), buf_->size()); }
  // Drops every byte from offset n on (n <= size()): undoes a frame whose encoding failed.
  void truncate(std::size_t n) noexcept {
    if (n < buf_->size()) buf_->resize(n);
  }
  // Moves the bytes out (the buffer, owned or borrowed, is left empty).
  std::vector<unsigned char> take() noexcept {
    std::vector<unsigned char> out;
    out.swap(*buf_);
    return out;
  }

 private:
  template <class U>
  void put_le(U v) {
    unsigned char* p = reserve_bytes(sizeof(U));
    for (std::size_t i = 0; i < sizeof(U); ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
  }

  std::vector<unsigned char> own_;
  std::vector<unsigned char>* buf_;
};

// Reads what byte_writer writes, from bytes it does not own (they must outlive it). Every get
// returns false, and consumes nothing, when the bytes are too short or malformed: it never reads
// past the end, whatever the bytes say. Single owner; allocates nothing.
class byte_reader {
 public:
  explicit byte_reader(byte_span bytes) noexcept : p_(bytes.data()), end_(p_ + bytes.size()) {}

  bool get_u8(std::uint8_t& v) noexcept { return get_le(v); }
  bool get_u16(std::uint16_t& v) noexcept { return get_le(v); }
  bool get_u32(std::uint32_t& v) noexcept { return get_le(v); }
  bool get_u64(std::uint64_t& v) noexcept { return get_le(v); }
  // At most 10 bytes, and the tenth carries only the top bit of a 64-bit value: anything
  // longer or larger is malformed rather than silently truncated.
  bool get_varint(std::uint64_t& v) noexcept {
    std::uint64_t out = 0;
    const unsigned char* p = p_;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p == end_) return false;
      const unsigned char b = *p++;
      if (shift == 63 && b > 1) return false;
      out |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        p_ = p;
        v = out;
        return true;
      }
    }
    return false;
  }
  // A view of the next n bytes (no copy).
  bool get_bytes(std::size_t n, byte_span& out) noexcept {
    if (remaining() < n) return false;
    out = byte_span(p_, n);
    p_ += n;
    return true;
  }
  // Copies the next n bytes to dst.
  bool get_bytes(void* dst, std::size_t n) noexcept {
    if (remaining() < n) return false;
    if (n != 0) std::memcpy(dst, p_, n);
    p_ += n;
    return true;
  }
  // varint length, then the bytes; a view into the reader's bytes (no copy).
  bool get_string(std::string_view& out) noexcept {
    const unsigned char* const start = p_;
    std::uint64_t n = 0;
    if (!get_varint(n)) return false;
    if (n > remaining()) {
      p_ = start;
      return false;
    }
    out = std::string_view(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(n));
    p_ += n;
    return true;
  }
  bool skip(std::size_t n) noexcept {
    if (remaining() < n) return false;
    p_ += n;
    return true;
  }

  std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - p_); }
  byte_span rest() const noexcept { return byte_span(p_, remaining()); }

 private:
  template <class U>
  bool get_le(U& v) noexcept {
    if (remaining() < sizeof(U)) return false;
    U out = 0;
    for (std::size_t i = sizeof(U); i-- > 0;) out = static_cast<U>((out << 8) | p_[i]);
    p_ += sizeof(U);
    v = out;
    return true;
  }

  const unsigned char* p_;
  const unsigned char* end_;
};

// The wire type id of a stable type name: FNV-1a, 64 bits. Same on every node and compiler.
constexpr std::uint64_t type_id_of(std::string_view name) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// How one type becomes bytes and back. Built by registration, immutable once registered, and
// alive until the process exits. encode and decode cost one indirect call to a trampoline that
// calls the registered function (no std::function).
struct serializer {
  using encode_thunk_fn = error (*)(const serializer&, const message&, byte_writer&);
  using decode_thunk_fn = result<message> (*)(const serializer&, byte_reader&);
  using erased_fn = void (*)();

  std::string name;                                 // the stable name ("akt.string")
  std::uint64_t id = 0;                             // its wire type id (type_id_of(name))
  const akt::detail::message_vtable* vt = nullptr;  // the type inside an akt::message
  std::string_view cpp_type;  // the compiler's name of that type, for error messages

  // Appends m's payload. m must hold this serializer's type (else invalid_argument).
  error encode(const message& m, byte_writer& w) const { return encode_thunk(*this, m, w); }
  // Reads a value from r; decode_failed when the bytes do not make one. The reader may be
  // left anywhere on failure; on success it stands after the value (decode_message also
  // refuses trailing bytes).
  result<message> decode(byte_reader& r) const { return decode_thunk(*this, r); }

  // Set by registration: a trampoline for the type and, for register_message, the user's
  // function it calls (a function pointer, erased to this type and cast back by the thunk).
  encode_thunk_fn encode_thunk = nullptr;
  decode_thunk_fn decode_thunk = nullptr;
  erased_fn encode_target = nullptr;
  erased_fn decode_target = nullptr;
};

namespace detail {

// Registers s under s.name and s.id exactly as given (registration normally computes the id
// from the name; tests force ids through here to check collision handling). Errors:
// duplicate_type_name when the name belongs to another type (or the type to another name),
// type_id_collision when the id belongs to another name, invalid_argument for an empty name,
// id 0 or a missing vtable or function. Registering the same type under the same name again
// is a no-op that returns ok. Any thread.
error register_serializer(serializer s);

template <class T>
error encode_thunk(const serializer& s, const message& m, byte_writer& w) {
  const T* v = m.get_if<T>();
  if (v == nullptr) return error(errc::invalid_argument, "message does not hold " + s.name);
  using fn = error (*)(const T&, byte_writer&);
  return reinterpret_cast<fn>(s.encode_target)(*v, w);
}

template <class T>
result<message> decode_thunk(const serializer& s, byte_reader& r) {
  using fn = result<T> (*)(byte_reader&);
  result<T> v = reinterpret_cast<fn>(s.decode_target)(r);
  if (!v) {
    if (v.code() == errc::decode_failed) return v.error();
    return error(errc::decode_failed, v.error().message());
  }
  return message(std::move(*v));
}

// What register_protobuf needs of T: the members every generated protobuf message has.
template <class T>
concept protobuf_message = requires(T& t, const T& ct, unsigned char* out, const void* in) {
  { ct.ByteSizeLong() } -> std::convertible_to<std::size_t>;
  ct.SerializeWithCachedSizesToArray(out);
  { t.ParseFromArray(in, 0) } -> std::convertible_to<bool>;
  { T::default_instance().GetTypeName() } -> std::convertible_to<std::string>;
};

template <class T>
error protobuf_encode(const serializer& s, const message& m, byte_writer& w) {
  const T* v = m.get_if<T>();
  if (v == nullptr) return error(errc::invalid_argument, "message does not hold " + s.name);
  const std::size_t n = v->ByteSizeLong();
  // protobuf's own limit: a serialized message is at most 2 GiB.
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    return error(errc::invalid_argument, s.name + " is above protobuf's 2 GiB limit");
  // The size ByteSizeLong just cached is the one SerializeWithCachedSizesToArray writes.
  v->SerializeWithCachedSizesToArray(w.reserve_bytes(n));
  return {};
}

template <class T>
result<message> protobuf_decode(const serializer& s, byte_reader& r) {
  const byte_span bytes = r.rest();
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    return error(errc::decode_failed, s.name + ": above protobuf's 2 GiB limit");
  T v;
  if (!v.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return error(errc::decode_failed, s.name + ": not a valid protobuf message");
  r.skip(bytes.size());
  return message(std::move(v));
}

}  // namespace detail

// Registers T, a type with a stable name, with its encoder and decoder (function pointers;
// captureless lambdas convert). See detail::register_serializer for the errors.
template <class T>
error register_message(error (*encode)(const T&, byte_writer&), result<T> (*decode)(byte_reader&)) {
  static_assert(has_stable_type_name_v<T>,
                "a type that crosses processes needs a stable name: give it a member "
                "`static constexpr std::string_view akt_type_name = \"...\";` or AKT_TYPE_NAME");
  static_assert(std::is_same_v<T, std::decay_t<T>>, "register the plain type");
  if (encode == nullptr || decode == nullptr)
    return error(errc::invalid_argument, "register_message needs an encoder and a decoder");
  serializer s;
  s.name = std::string(akt::type_name<T>());
  s.id = type_id_of(s.name);
  s.vt = &akt::detail::message_ops<T>::table;
  s.cpp_type = akt::detail::compiler_type_name<T>();
  s.encode_thunk = &detail::encode_thunk<T>;
  s.decode_thunk = &detail::decode_thunk<T>;
  s.encode_target = reinterpret_cast<serializer::erased_fn>(encode);
  s.decode_target = reinterpret_cast<serializer::erased_fn>(decode);
  return detail::register_serializer(std::move(s));
}

// Registers a generated protobuf message type under its full name ("bank.Withdraw"). One line:
// register_protobuf<bank::Withdraw>(). See detail::register_serializer for the errors.
template <class T>
error register_protobuf() {
  static_assert(detail::protobuf_message<T>, "T must be a generated protobuf message");
  serializer s;
  s.name = T::default_instance().GetTypeName();
  s.id = type_id_of(s.name);
  s.vt = &akt::detail::message_ops<T>::table;
  s.cpp_type = akt::detail::compiler_type_name<T>();
  s.encode_thunk = &detail::protobuf_encode<T>;
  s.decode_thunk = &detail::protobuf_decode<T>;
  return detail::register_serializer(std::move(s));
}

// The serializer of the type m holds, or null (m empty, or its type not registered). Any
// thread; lock-free, no allocation.
const serializer* find_serializer(const message& m) noexcept;
// The serializer registered under wire type id `id`, or null. Any thread; lock-free.
const serializer* find_serializer(std::uint64_t id) noexcept;

// m as the wire carries it outside an envelope: its type id (u64) then its payload.
// not_serializable when m's type is not registered (or m is empty).
result<std::vector<unsigned char>> encode_message(const message& m);
// Decodes a payload of type `type_id`: not_serializable when no serializer has that id,
// decode_failed when the bytes do not make a value or bytes are left over.
result<message> decode_message(std::uint64_t type_id, byte_span payload);

}  // namespace akt::remote
