#pragma once
// Coroutine handlers for grains: the grain side of akt/actor/coroutine.hpp (read its contract;
// what differs is here).
//
//   void on_receive(akt::grain_context& ctx) override {
//     if (auto* t = ctx.get_if<transfer>()) akt::run(move(akt::grain_async_context(ctx), *t));
//   }
//   akt::task<> move(akt::grain_async_context ctx, transfer t) {
//     auto r = co_await ctx.ask_grain<long>(t.from, withdraw{t.amount});
//     if (r) ctx.reply(*r); else ctx.reply_error(r.error());
//   }
//
// Contract (beyond coroutine.hpp's)
// - A co_await of ask_grain / ask_actor is grain_context::request_grain / request_actor: the
//   grain's reentrancy decides. Off: the request is refused and the co_await yields
//   errc::reentrancy_disabled at once, without suspending (so do the in-flight limit and an
//   unreachable grain). allow_all: the grain keeps handling other messages while the coroutine
//   waits. stash_non_reentrant: they wait in order until it resumes. grain_request_options
//   (timeout, per-request mode) apply as for request_grain.
// - grain_async_context takes the answer owed for the message (grain_context::defer_response) when
//   it is built: answer through it, before or after any co_await; dropped unanswered it gives
//   errc::no_reply. turn() is the grain_context of the turn running the coroutine now.
// - An activation that ends (deactivation, shutdown) with a coroutine waiting never resumes it:
//   the frame is destroyed when the request's continuation is dropped (at the reply or its
//   timeout, or with the cell), with the grain instance possibly gone already; the locals'
//   destructors must not touch the grain.
// - Failure: grains have no supervisor. An exception that escapes the coroutine answers the
//   owed call with errc::handler_failed (as one escaping on_receive does) and is logged.

#include <chrono>
#include <coroutine>
#include <optional>
#include <type_traits>
#include <utility>

#include "akt/actor/coroutine.hpp"
#include "akt/grain/grain_context.hpp"

namespace akt {

template <class R, class M>
class grain_ask_awaitable;

// A grain coroutine's view of its grain, valid across co_awaits. Pass it by value.
class grain_async_context final : public detail::coroutine_context_base {
 public:
  explicit grain_async_context(grain_context& ctx) : turn_(&ctx), reply_(ctx.defer_reply()) {}
  grain_async_context(grain_async_context&&) noexcept = default;
  grain_async_context& operator=(grain_async_context&&) = delete;
  ~grain_async_context() = default;

  // The grain_context of the turn running the coroutine now: valid until the next co_await.
  grain_context& turn() const noexcept { return *turn_; }
  grain_identity self() const { return turn_->self(); }
  actor_system& system() const noexcept { return turn_->system(); }

  // The answer owed for the message the coroutine was started for (see reply_handle).
  template <class T>
  void reply(T&& value) {
    reply_.reply(std::forward<T>(value));
  }
  void ack() { reply_.ack(); }
  void reply_error(error e) { reply_.reply_error(std::move(e)); }
  reply_handle& owed() noexcept { return reply_; }

  // co_await yields result<R>: the answer, or the request's error (request_timeout after
  // options.timeout, reentrancy_disabled, dead, unhandled, no_reply, ...).
  template <class R = akt::message, class T>
  grain_ask_awaitable<R, std::decay_t<T>> ask_grain(const grain_identity& to, T&& msg,
                                                    grain_request_options options = {}) {
    return {this, &to, nullptr, std::forward<T>(msg), options};
  }
  template <class R = akt::message, class T>
  grain_ask_awaitable<R, std::decay_t<T>> ask_actor(const pid& to, T&& msg,
                                                    grain_request_options options = {}) {
    return {this, nullptr, &to, std::forward<T>(msg), options};
  }

 private:
  template <class R, class M>
  friend class grain_ask_awaitable;
  void fail_owed(const error& err) noexcept override {
    try {
      reply_.reply_error(err);
    } catch (...) {  // only the dead letter of a one-way tell allocates: nothing more to do
    }
  }

  grain_context* turn_;  // re-pointed by each awaitable when it resumes the coroutine
  reply_handle reply_;
};

// co_await ctx.ask_grain<R>(to, msg) / ctx.ask_actor<R>(to, msg) -> result<R>.
template <class R, class M>
class [[nodiscard]] grain_ask_awaitable {
 public:
  using akt_turn_awaitable = void;
  grain_ask_awaitable(grain_async_context* ctx, const grain_identity* grain, const pid* actor,
                      M msg, grain_request_options options)
      : ctx_(ctx), msg_(std::move(msg)), options_(options) {
    if (grain != nullptr) grain_.emplace(*grain);
    if (actor != nullptr) actor_ = *actor;
  }

  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    leaf_ = h;
    auto then = [this, ref = detail::frame_ref(detail::root_of(h))](grain_context& g,
                                                                    result<R> reply) mutable {
      ctx_->turn_ = &g;
      result_.emplace(std::move(reply));
      detail::resume_on_turn(std::move(ref), leaf_);
    };
    result<request_handle> sent = grain_ ? ctx_->turn_->template request_grain<R>(
                                               *grain_, std::move(msg_), std::move(then), options_)
                                         : ctx_->turn_->template request_actor<R>(
                                               actor_, std::move(msg_), std::move(then), options_);
    if (sent) return true;
    result_.emplace(sent.error());  // refused: go on at once with the error
    return false;
  }
  result<R> await_resume() { return std::move(*result_); }

 private:
  grain_async_context* ctx_;
  std::optional<grain_identity> grain_;
  pid actor_;
  M msg_;
  grain_request_options options_;
  std::coroutine_handle<> leaf_;
  std::optional<result<R>> result_;
};

}  // namespace akt
