#pragma once
// akt::type_name<T>(): the stable name of a type, as grain kinds, dead letters, error details
// and (with remoting) the wire know it.
//
// A type gets a stable name in one of two ways:
//
//   struct deposit {
//     static constexpr std::string_view akt_type_name = "bank.deposit";   // a member, or
//     long amount;
//   };
//   AKT_TYPE_NAME(bank::withdraw, "bank.withdraw")                         // a specialisation
//
// (the macro specialises akt::type_name_of<T>; write it at global scope). A type without one
// falls back to the name the compiler derives from its declaration (for example
// "bank::deposit" or "{anonymous}::counter"). That fallback is good enough for logs and for one
// process, but it differs between compilers and changes when the type is renamed or moved, so
// it is never relied on across processes: a name that must be the same on every node (a grain
// kind in a cluster, a message on the wire) is given explicitly. Two different types that
// register the same stable name (two grain kinds, say) are refused at registration with
// errc::duplicate_type_name.
//
// Everything here is constexpr and costs nothing at run time.

#include <string_view>
#include <type_traits>

namespace akt {

// Specialise with `static constexpr std::string_view value = "...";` (or use AKT_TYPE_NAME).
template <class T>
struct type_name_of {};

namespace detail {

// The compiler's name for T, from the pretty function string.
template <class T>
constexpr std::string_view compiler_type_name() noexcept {
#if defined(__clang__) || defined(__GNUC__)
  std::string_view s = __PRETTY_FUNCTION__;
  const std::string_view key = "T = ";
  const auto start = s.find(key);
  if (start == std::string_view::npos) return s;
  s.remove_prefix(start + key.size());
  const auto end = s.find_first_of(";]");
  return s.substr(0, end);
#else
  return "?";
#endif
}

template <class T>
concept has_member_type_name = requires {
  { T::akt_type_name } -> std::convertible_to<std::string_view>;
};
template <class T>
concept has_specialised_type_name = requires {
  { type_name_of<T>::value } -> std::convertible_to<std::string_view>;
};

}  // namespace detail

// True when T has a stable name (a member akt_type_name or a type_name_of specialisation).
template <class T>
inline constexpr bool has_stable_type_name_v =
    detail::has_specialised_type_name<std::remove_cv_t<T>> ||
    detail::has_member_type_name<std::remove_cv_t<T>>;

// T's stable name if it has one (the specialisation wins over the member), else the compiler's.
template <class T>
constexpr std::string_view type_name() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (detail::has_specialised_type_name<U>) {
    return std::string_view(type_name_of<U>::value);
  } else if constexpr (detail::has_member_type_name<U>) {
    return std::string_view(U::akt_type_name);
  } else {
    return detail::compiler_type_name<U>();
  }
}

}  // namespace akt

// Gives `type` the stable name `name` (a string literal). At global scope.
#define AKT_TYPE_NAME(type, name)                   \
  template <>                                       \
  struct akt::type_name_of<type> {                  \
    static constexpr std::string_view value = name; \
  };
