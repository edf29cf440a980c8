#include "akt/remote/serialization.hpp"

#include <atomic>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>

#include "akt/core/assert.hpp"
#include "grain/grain_seams.hpp"

namespace akt::remote {

namespace {

// One published state of the registry: two open-addressing tables (linear probing, at most
// half full, so every probe ends at an empty slot) over the same serializers, one keyed by the
// message vtable (send side), one by the wire type id (receive side). Immutable once published.
struct snapshot {
  unsigned shift = 0;  // 64 - log2(capacity): a key's home slot is the top bits of key * k_mix
  std::size_t mask = 0;
  std::unique_ptr<const serializer*[]> by_vt;
  std::unique_ptr<const serializer*[]> by_id;
  std::vector<const serializer*> all;  // registration order; what the next snapshot copies
};

// Fibonacci hashing: spreads vtable addresses (8-aligned, close together) and test-chosen ids.
constexpr std::uint64_t k_mix = 0x9e3779b97f4a7c15ull;
// The smallest table: 16 slots cover the built-ins and a few user types without a rebuild of
// the arrays' size on every registration.
constexpr unsigned k_min_capacity_log2 = 4;

std::size_t home(std::uint64_t key, unsigned shift) noexcept {
  return static_cast<std::size_t>((key * k_mix) >> shift);
}

// The snapshot lookups read. Written only by registry::add under its mutex (release, after the
// snapshot is fully built); read by every lookup (acquire, pairing with that release, so the
// tables and the serializers they point to are visible). Null until the registry exists.
std::atomic<const snapshot*> g_current{nullptr};

std::string hex_id(std::uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, id);
  return buf;
}

// ---- built-in serializers ----

template <class U>
error put_fixed(const U& v, byte_writer& w) {
  if constexpr (sizeof(U) == 4)
    w.put_u32(static_cast<std::uint32_t>(v));
  else
    w.put_u64(static_cast<std::uint64_t>(v));
  return {};
}
template <class U>
result<U> get_fixed(byte_reader& r) {
  if constexpr (sizeof(U) == 4) {
    std::uint32_t v = 0;
    if (!r.get_u32(v)) return errc::decode_failed;
    return static_cast<U>(v);
  } else {
    std::uint64_t v = 0;
    if (!r.get_u64(v)) return errc::decode_failed;
    return static_cast<U>(v);
  }
}

error put_string(const std::string& v, byte_writer& w) {
  w.put_string(v);
  return {};
}
result<std::string> get_string(byte_reader& r) {
  std::string_view v;
  if (!r.get_string(v)) return errc::decode_failed;
  return std::string(v);
}

error put_bool(const bool& v, byte_writer& w) {
  w.put_u8(v ? 1 : 0);
  return {};
}
result<bool> get_bool(byte_reader& r) {
  std::uint8_t v = 0;
  if (!r.get_u8(v) || v > 1) return errc::decode_failed;
  return v == 1;
}

error put_double(const double& v, byte_writer& w) {
  w.put_u64(std::bit_cast<std::uint64_t>(v));
  return {};
}
result<double> get_double(byte_reader& r) {
  std::uint64_t v = 0;
  if (!r.get_u64(v)) return errc::decode_failed;
  return std::bit_cast<double>(v);
}

error put_byte_vector(const std::vector<std::uint8_t>& v, byte_writer& w) {
  w.put_varint(v.size());
  w.put_bytes(v.data(), v.size());
  return {};
}
result<std::vector<std::uint8_t>> get_byte_vector(byte_reader& r) {
  std::uint64_t n = 0;
  byte_span bytes;
  if (!r.get_varint(n) || n > r.remaining() || !r.get_bytes(static_cast<std::size_t>(n), bytes))
    return errc::decode_failed;
  return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}

// activate_grain's probe (grain_seams.hpp) carries nothing.
error put_probe(const akt::detail::grain_activate_probe&, byte_writer&) { return {}; }
result<akt::detail::grain_activate_probe> get_probe(byte_reader&) {
  return akt::detail::grain_activate_probe{};
}

// A built-in is registered like a user type but under an akt.* name of our choosing, since
// the standard types have no stable name of their own.
template <class T>
serializer builtin(std::string_view name, error (*encode)(const T&, byte_writer&),
                   result<T> (*decode)(byte_reader&)) {
  serializer s;
  s.name = std::string(name);
  s.id = type_id_of(name);
  s.vt = &akt::detail::message_ops<T>::table;
  s.cpp_type = akt::detail::compiler_type_name<T>();
  s.encode_thunk = &detail::encode_thunk<T>;
  s.decode_thunk = &detail::decode_thunk<T>;
  s.encode_target = reinterpret_cast<serializer::erased_fn>(encode);
  s.decode_target = reinterpret_cast<serializer::erased_fn>(decode);
  return s;
}

// The process-wide registry. Contract: add() from any thread (serialised by mutex_; blocking
// but short: O(registered types)); it never frees a serializer or a snapshot, so lookups, which
// never touch this object, can hold what they read forever. Created on first use (registration
// or lookup) and never destroyed, so lookups from threads still running at exit stay safe.
class registry {
 public:
  static registry& instance() {
    static registry* const r = new registry();
    return *r;
  }

  error add(serializer s) {
    if (s.name.empty() || s.id == 0 || s.vt == nullptr || s.encode_thunk == nullptr ||
        s.decode_thunk == nullptr)
      return error(errc::invalid_argument,
                   "a serializer needs a name, a non-zero id, a type and both functions");
    std::lock_guard<std::mutex> lock(mutex_);
    // Only add() writes g_current, and only under mutex_: relaxed reads our own last store.
    const snapshot* cur = g_current.load(std::memory_order_relaxed);
    if (cur != nullptr) {
      for (const serializer* e : cur->all) {
        if (e->name != s.name) continue;
        if (e->vt == s.vt && e->id == s.id) return {};  // the same registration again
        return error(errc::duplicate_type_name, "type name '" + s.name + "' is registered by " +
                                                    std::string(e->cpp_type) + ", refused for " +
                                                    std::string(s.cpp_type));
      }
      for (const serializer* e : cur->all) {
        if (e->vt != s.vt) continue;
        return error(errc::duplicate_type_name, "type " + std::string(s.cpp_type) +
                                                    " is registered as '" + e->name +
                                                    "', refused as '" + s.name + "'");
      }
      for (const serializer* e : cur->all) {
        if (e->id != s.id) continue;
        return error(errc::type_id_collision, "type id " + hex_id(s.id) + " of '" + s.name + "' (" +
                                                  std::string(s.cpp_type) + ") is taken by '" +
                                                  e->name + "' (" + std::string(e->cpp_type) + ")");
      }
    }
    owned_.push_back(std::make_unique<const serializer>(std::move(s)));
    auto next = build(cur, owned_.back().get());
    g_current.store(next.get(), std::memory_order_release);
    snapshots_.push_back(std::move(next));
    return {};
  }

 private:
  registry() {
    auto must = [this](serializer s) {
      const error e = add(std::move(s));
      AKT_ASSERT(!e);
      (void)e;
    };
    must(builtin<std::string>("akt.string", &put_string, &get_string));
    must(builtin<std::int32_t>("akt.int32", &put_fixed<std::int32_t>, &get_fixed<std::int32_t>));
    must(builtin<std::int64_t>("akt.int64", &put_fixed<std::int64_t>, &get_fixed<std::int64_t>));
    must(
        builtin<std::uint32_t>("akt.uint32", &put_fixed<std::uint32_t>, &get_fixed<std::uint32_t>));
    must(
        builtin<std::uint64_t>("akt.uint64", &put_fixed<std::uint64_t>, &get_fixed<std::uint64_t>));
    // On LP64 Linux std::int64_t is `long`, and `long long` a distinct type that a user's
    // `5LL` produces; it travels under a name of its own with the same encoding.
    if constexpr (!std::is_same_v<long long, std::int64_t>)
      must(builtin<long long>("akt.longlong", &put_fixed<long long>, &get_fixed<long long>));
    must(builtin<bool>("akt.bool", &put_bool, &get_bool));
    must(builtin<double>("akt.double", &put_double, &get_double));
    must(builtin<std::vector<std::uint8_t>>("akt.bytes", &put_byte_vector, &get_byte_vector));
    must(builtin<akt::detail::grain_activate_probe>(
        akt::detail::grain_activate_probe::akt_type_name, &put_probe, &get_probe));
  }

  static std::unique_ptr<snapshot> build(const snapshot* cur, const serializer* added) {
    auto next = std::make_unique<snapshot>();
    if (cur != nullptr) next->all = cur->all;
    next->all.push_back(added);
    unsigned log2 = k_min_capacity_log2;
    while ((std::size_t{1} << log2) < 2 * next->all.size()) ++log2;
    const std::size_t capacity = std::size_t{1} << log2;
    next->shift = 64 - log2;
    next->mask = capacity - 1;
    next->by_vt = std::make_unique<const serializer*[]>(capacity);  // value-initialised: null
    next->by_id = std::make_unique<const serializer*[]>(capacity);
    for (const serializer* e : next->all) {
      std::size_t i = home(reinterpret_cast<std::uintptr_t>(e->vt), next->shift);
      while (next->by_vt[i] != nullptr) i = (i + 1) & next->mask;
      next->by_vt[i] = e;
      i = home(e->id, next->shift);
      while (next->by_id[i] != nullptr) i = (i + 1) & next->mask;
      next->by_id[i] = e;
    }
    return next;
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<const serializer>> owned_;  // every serializer, never freed
  std::vector<std::unique_ptr<snapshot>> snapshots_;      // every snapshot, never freed
};

const snapshot* current() noexcept {
  const snapshot* s = g_current.load(std::memory_order_acquire);
  if (AKT_LIKELY(s != nullptr)) return s;
  registry::instance();  // registers the built-ins, which publishes the first snapshot
  return g_current.load(std::memory_order_acquire);
}

}  // namespace

namespace detail {
error register_serializer(serializer s) { return registry::instance().add(std::move(s)); }
}  // namespace detail

const serializer* find_serializer(const message& m) noexcept {
  const akt::detail::message_vtable* vt = akt::detail::message_access::vtable(m);
  if (vt == nullptr) return nullptr;
  const snapshot* s = current();
  for (std::size_t i = home(reinterpret_cast<std::uintptr_t>(vt), s->shift);;
       i = (i + 1) & s->mask) {
    const serializer* e = s->by_vt[i];
    if (e == nullptr || e->vt == vt) return e;
  }
}

const serializer* find_serializer(std::uint64_t id) noexcept {
  const snapshot* s = current();
  for (std::size_t i = home(id, s->shift);; i = (i + 1) & s->mask) {
    const serializer* e = s->by_id[i];
    if (e == nullptr || e->id == id) return e;
  }
}

result<std::vector<unsigned char>> encode_message(const message& m) {
  const serializer* s = find_serializer(m);
  if (s == nullptr) {
    return error(errc::not_serializable, m.empty()
                                             ? std::string("empty message")
                                             : "no serializer for " + std::string(m.type_name()));
  }
  byte_writer w;
  w.put_u64(s->id);
  if (error e = s->encode(m, w)) return e;
  return w.take();
}

result<message> decode_message(std::uint64_t type_id, byte_span payload) {
  const serializer* s = find_serializer(type_id);
  if (s == nullptr)
    return error(errc::not_serializable, "no serializer for type id " + hex_id(type_id));
  byte_reader r(payload);
  try {
    result<message> m = s->decode(r);
    if (!m) return m;
    if (r.remaining() != 0) {
      return error(errc::decode_failed,
                   s->name + ": " + std::to_string(r.remaining()) + " bytes left over");
    }
    return m;
  } catch (const std::exception& e) {
    // The bytes come from a peer: a decoder that throws on them (std::bad_alloc on a length
    // it believed) fails this message, not the caller.
    return error(errc::decode_failed, s->name + ": " + e.what());
  }
}

}  // namespace akt::remote
