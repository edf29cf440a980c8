#pragma once
// akt::match: message dispatch by overload, for actors and grains alike.
//
//   void receive(akt::receive_context& ctx) override {
//     akt::match(ctx,
//         [&](const deposit& d) { balance_ += d.amount; },
//         [&](const get_balance&, auto& c) { c.reply(balance_); },
//         [&](withdraw& w, akt::receive_context& c) { ... });
//   }
//
// Each handler takes the message by reference (const T&, T&, or T&& to move out of it) and,
// optionally, the context as a second argument (its own type, or auto&). The first handler
// whose message type is the message's exact type runs; when none matches, ctx.unhandled() is
// called, as the rule for both actors and grains says. The handlers are tried in order, so
// match compiles to the same chain of type checks (one pointer compare each, see
// akt::message::get_if) as the hand-written if / else-if on ctx.get_if<T>().
//
// akt::handlers{...} keeps the same set of handlers as an object (a member of an actor, say);
// calling it with a context does what match does.
//
// Ctx is any context with get_if<T>() and unhandled(): akt::receive_context and
// akt::grain_context. Returns whether a handler ran.

#include <tuple>
#include <type_traits>
#include <utility>

namespace akt {

namespace detail {

template <class>
struct handler_signature;
#define AKT_DETAIL_HANDLER_SIGNATURE(QUALIFIERS)              \
  template <class C, class R, class M, class... Rest>         \
  struct handler_signature<R (C::*)(M, Rest...) QUALIFIERS> { \
    using message_arg = M;                                    \
  };
AKT_DETAIL_HANDLER_SIGNATURE()
AKT_DETAIL_HANDLER_SIGNATURE(const)
AKT_DETAIL_HANDLER_SIGNATURE(noexcept)
AKT_DETAIL_HANDLER_SIGNATURE(const noexcept)
#undef AKT_DETAIL_HANDLER_SIGNATURE

// The call operator of handler F for context Ctx: the plain one, or, for a generic handler
// whose context parameter is auto&, its instantiation for Ctx.
template <class F, class Ctx>
constexpr auto handler_call_operator() noexcept {
  if constexpr (requires { &F::operator(); }) {
    return &F::operator();
  } else {
    static_assert(
        requires { &F::template operator()<Ctx>; },
        "a match handler takes the message by a named type (not auto) as its first "
        "argument, and optionally the context (its type or auto&) as its second");
    return &F::template operator()<Ctx>;
  }
}

// The decayed message type handler F handles.
template <class F, class Ctx>
using handled_message_t = std::remove_cvref_t<
    typename handler_signature<decltype(handler_call_operator<F, Ctx>())>::message_arg>;

template <class Ctx, class F>
bool try_handler(Ctx& ctx, F& f) {
  using M = handled_message_t<F, Ctx>;
  using Arg = typename handler_signature<decltype(handler_call_operator<F, Ctx>())>::message_arg;
  M* m = ctx.template get_if<M>();
  if (m == nullptr) return false;
  // A handler that takes M&& may move out of the message.
  using Pass = std::conditional_t<std::is_rvalue_reference_v<Arg>, M&&, M&>;
  if constexpr (std::is_invocable_v<F&, Pass, Ctx&>) {
    f(static_cast<Pass>(*m), ctx);
  } else {
    static_assert(std::is_invocable_v<F&, Pass>,
                  "a match handler is called as f(message) or f(message, ctx)");
    f(static_cast<Pass>(*m));
  }
  return true;
}

}  // namespace detail

// Runs the first handler whose message type matches; none: ctx.unhandled(). Whether one ran.
template <class Ctx, class... Fs>
bool match(Ctx& ctx, Fs&&... fs) {
  if ((detail::try_handler(ctx, fs) || ...)) return true;
  ctx.unhandled();
  return false;
}

// A set of handlers kept as an object; h(ctx) is match(ctx, handlers...).
template <class... Fs>
class handlers {
 public:
  explicit handlers(Fs... fs) : fs_(std::move(fs)...) {}
  template <class Ctx>
  bool operator()(Ctx& ctx) {
    return std::apply([&](auto&... f) { return match(ctx, f...); }, fs_);
  }

 private:
  std::tuple<Fs...> fs_;
};
template <class... Fs>
handlers(Fs...) -> handlers<Fs...>;

}  // namespace akt
