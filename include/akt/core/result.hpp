#pragma once
// result<T>: a T or an akt::error. A small stand-in for C++23 std::expected so that the library
// builds as C++20. Accessing value() of an error result is a precondition violation (asserted).

#include <new>
#include <type_traits>
#include <utility>

#include "akt/core/assert.hpp"
#include "akt/core/error.hpp"

namespace akt {

template <class T>
class [[nodiscard]] result {
  static_assert(!std::is_reference_v<T>, "result<T&> is not supported");

 public:
  result(T value) : has_(true) { new (&value_) T(std::move(value)); }  // NOLINT: implicit
  result(akt::error err) : has_(false) {                               // NOLINT: implicit
    AKT_ASSERT(err.code() != errc::ok);
    new (&err_) akt::error(std::move(err));
  }
  result(errc code) : result(akt::error(code)) {}  // NOLINT: implicit
  template <class U, class = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                              !std::is_same_v<std::decay_t<U>, result> &&
                                              !std::is_same_v<std::decay_t<U>, akt::error> &&
                                              !std::is_same_v<std::decay_t<U>, errc>>>
  result(U&& value) : has_(true) {  // NOLINT: implicit
    new (&value_) T(std::forward<U>(value));
  }

  result(const result& o) requires std::is_copy_constructible_v<T> : has_(o.has_) {
    if (has_)
      new (&value_) T(o.value_);
    else
      new (&err_) akt::error(o.err_);
  }
  result(result&& o) noexcept(std::is_nothrow_move_constructible_v<T>) : has_(o.has_) {
    if (has_)
      new (&value_) T(std::move(o.value_));
    else
      new (&err_) akt::error(std::move(o.err_));
  }
  result& operator=(result o) {
    this->~result();
    new (this) result(std::move(o));
    return *this;
  }
  ~result() {
    if (has_)
      value_.~T();
    else
      err_.akt::error::~error();
  }

  bool has_value() const noexcept { return has_; }
  explicit operator bool() const noexcept { return has_; }

  T& value() & {
    AKT_ASSERT(has_);
    return value_;
  }
  const T& value() const& {
    AKT_ASSERT(has_);
    return value_;
  }
  T&& value() && {
    AKT_ASSERT(has_);
    return std::move(value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  template <class U>
  T value_or(U&& other) const& {
    return has_ ? value_ : static_cast<T>(std::forward<U>(other));
  }

  // The error; errc::ok when the result holds a value.
  akt::error error_or_ok() const { return has_ ? akt::error() : err_; }
  const akt::error& error() const& {
    AKT_ASSERT(!has_);
    return err_;
  }
  errc code() const noexcept { return has_ ? errc::ok : err_.code(); }

 private:
  bool has_;
  union {
    T value_;
    akt::error err_;
  };
};

template <>
class result<void> {  // not nodiscard: a void outcome is often ignored on purpose (stop)
 public:
  result() noexcept = default;
  result(akt::error err) : err_(std::move(err)) {}  // NOLINT: implicit
  result(errc code) : err_(code) {}                 // NOLINT: implicit

  bool has_value() const noexcept { return !err_; }
  explicit operator bool() const noexcept { return !err_; }
  void value() const { AKT_ASSERT(!err_); }
  const akt::error& error() const& { return err_; }
  errc code() const noexcept { return err_.code(); }

 private:
  akt::error err_;
};

}  // namespace akt
