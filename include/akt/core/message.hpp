#pragma once
// akt::message: a type-erased, move-only value with inline storage.
//
// A value whose type fits in inline_capacity bytes, is at most 8-aligned and is nothrow
// move-constructible lives inside the message: building, moving and destroying it allocates
// nothing. Larger values are boxed on the heap (one allocation). Type checks compare the address
// of a per-type table, so get_if<T>() costs one pointer compare and needs no RTTI.

#include <cstddef>
#include <cstring>
#include <new>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "akt/core/type_name.hpp"

namespace akt {

namespace detail {

struct message_vtable {
  std::string_view name;
  // Move-constructs the value from src storage into dst storage and destroys the source.
  void (*relocate)(void* dst, void* src) noexcept;
  // Null for values stored inline whose destructor does nothing (reset skips the call).
  void (*destroy)(void* storage) noexcept;
  // Copy-constructs into dst storage; null when the type is not copy-constructible.
  void (*copy)(void* dst, const void* src);
  // Address of the value held in storage (the storage itself, or the boxed pointer).
  void* (*address)(void* storage) noexcept;
};

inline constexpr std::size_t message_inline_capacity = 56;

template <class T>
inline constexpr bool message_fits_inline =
    sizeof(T) <= message_inline_capacity && alignof(T) <= alignof(std::max_align_t) &&
    alignof(T) <= 8 && std::is_nothrow_move_constructible_v<T>;

template <class T>
struct message_ops {
  static constexpr bool inline_ = message_fits_inline<T>;

  static T* at(void* storage) noexcept {
    if constexpr (inline_)
      return std::launder(static_cast<T*>(storage));
    else
      return *static_cast<T**>(storage);
  }
  static void relocate(void* dst, void* src) noexcept {
    if constexpr (inline_) {
      T* s = at(src);
      new (dst) T(std::move(*s));
      s->~T();
    } else {
      std::memcpy(dst, src, sizeof(T*));
    }
  }
  static void destroy(void* storage) noexcept {
    if constexpr (inline_)
      at(storage)->~T();
    else
      delete at(storage);
  }
  static void copy(void* dst, const void* src) requires std::is_copy_constructible_v<T> {
    const T* s = at(const_cast<void*>(src));
    if constexpr (inline_)
      new (dst) T(*s);
    else
      *static_cast<T**>(dst) = new T(*s);
  }
  static void* address(void* storage) noexcept { return at(storage); }

  static constexpr auto copy_fn() noexcept -> void (*)(void*, const void*) {
    if constexpr (std::is_copy_constructible_v<T>)
      return &copy;
    else
      return nullptr;
  }

  static constexpr auto destroy_fn() noexcept -> void (*)(void*) noexcept {
    if constexpr (inline_ && std::is_trivially_destructible_v<T>)
      return nullptr;
    else
      return &destroy;
  }

  static constexpr message_vtable table{akt::type_name<T>(), &relocate, destroy_fn(), copy_fn(),
                                        &address};
};

struct message_access;

}  // namespace detail

class message {
 public:
  static constexpr std::size_t inline_capacity = detail::message_inline_capacity;

  message() noexcept = default;

  template <class T, class D = std::decay_t<T>,
            class = std::enable_if_t<!std::is_same_v<D, message> && !std::is_pointer_v<D>>>
  message(T&& value) {  // NOLINT: implicit by design, tell(pid, my_struct{...})
    construct<D>(std::forward<T>(value));
  }

  message(message&& other) noexcept { steal(other); }
  message& operator=(message&& other) noexcept {
    if (this != &other) {
      reset();
      steal(other);
    }
    return *this;
  }
  message(const message&) = delete;
  message& operator=(const message&) = delete;
  ~message() { reset(); }

  template <class T, class... Args>
  T& emplace(Args&&... args) {
    reset();
    construct<T>(std::forward<Args>(args)...);
    return *get_if<T>();
  }

  void reset() noexcept {
    if (vt_) {
      if (vt_->destroy) vt_->destroy(storage_);
      vt_ = nullptr;
    }
  }

  bool empty() const noexcept { return vt_ == nullptr; }
  explicit operator bool() const noexcept { return vt_ != nullptr; }

  template <class T>
  bool is() const noexcept {
    return vt_ == &detail::message_ops<T>::table;
  }

  template <class T>
  T* get_if() noexcept {
    return is<T>() ? detail::message_ops<T>::at(storage_) : nullptr;
  }
  template <class T>
  const T* get_if() const noexcept {
    return is<T>() ? detail::message_ops<T>::at(const_cast<unsigned char*>(storage_)) : nullptr;
  }

  // Name of the held type ("" when empty), for diagnostics.
  std::string_view type_name() const noexcept { return vt_ ? vt_->name : std::string_view(); }

  // Whether the held type is stored inside the message (no heap box).
  template <class T>
  static constexpr bool stored_inline() noexcept {
    return detail::message_ops<T>::inline_;
  }

  bool copyable() const noexcept { return vt_ && vt_->copy; }
  // A copy of this message, or nothing when it is empty or its type is not copyable.
  std::optional<message> try_clone() const {
    if (!copyable()) return std::nullopt;
    message out;
    vt_->copy(out.storage_, storage_);
    out.vt_ = vt_;
    return out;
  }

 private:
  friend struct detail::message_access;
  template <class T, class... Args>
  void construct(Args&&... args) {
    static_assert(!std::is_reference_v<T> && !std::is_array_v<T>);
    if constexpr (detail::message_ops<T>::inline_) {
      new (storage_) T(std::forward<Args>(args)...);
    } else {
      T* boxed = new T(std::forward<Args>(args)...);
      std::memcpy(storage_, &boxed, sizeof(boxed));
    }
    vt_ = &detail::message_ops<T>::table;
  }
  void steal(message& other) noexcept {
    if (other.vt_) {
      other.vt_->relocate(storage_, other.storage_);
      vt_ = other.vt_;
      other.vt_ = nullptr;
    }
  }

  const detail::message_vtable* vt_ = nullptr;
  alignas(8) unsigned char storage_[inline_capacity];
};

static_assert(sizeof(message) == 64, "a message is one cache line");

namespace detail {
// akt's own access to a message's type (the serializers of the remote module find a message's
// serializer by it); not for users.
struct message_access {
  static const message_vtable* vtable(const message& m) noexcept { return m.vt_; }
};
}  // namespace detail

}  // namespace akt
