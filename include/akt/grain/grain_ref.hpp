#pragma once
// grain_ref<T>: a value handle to one grain identity, shaped like a pid.
//
//   auto acct = akt::get_grain<account>(sys, "acct-42");   // result<grain_ref<account>>
//   acct->tell_one_way(deposit{10});                        // returns once it is queued
//   akt::error e = acct->tell(deposit{5});                  // waits for ack / reply_error
//   akt::result<long> b = acct->ask<long>(balance{}, 1s);
//
// get_grain registers the kind and checks the name; it activates nothing. The grain is
// activated by the first message sent through any ref or call (goakt-grains.md); the function
// that activates at once says so: activate_grain.
//
// A ref remembers the activation its last one-way tell reached and sends the next ones straight
// to it while that activation lives: no directory lookup, no lock, two atomic operations on the
// activation's cell. An activation that ended (idle deactivation, shutdown) is seen at once and
// the send goes through the directory instead, which activates the grain again and refreshes
// the ref. Asks and acknowledged tells always go through the directory.
//
// Thread safety: a grain_ref is a value. Copies are cheap (a string and a pid) and independent;
// one object, like a std::string, is not for concurrent use: its one-way tells update its
// memory of the activation, so threads that send through the same grain give each its own copy.

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

#include "akt/actor/receive_context.hpp"
#include "akt/grain/grain_context.hpp"
#include "akt/grain/grains.hpp"

namespace akt {

template <class T>
class grain_ref {
 public:
  grain_ref() = default;
  grain_ref(actor_system& sys, grain_identity id) : sys_(&sys), id_(std::move(id)) {}
  grain_ref(const grain_ref& o) : sys_(o.sys_), id_(o.id_) {}  // the copy starts a fresh route
  grain_ref(grain_ref&&) noexcept = default;
  grain_ref& operator=(const grain_ref& o) {
    if (this != &o) *this = grain_ref(o);
    return *this;
  }
  grain_ref& operator=(grain_ref&&) noexcept = default;

  const grain_identity& identity() const noexcept { return id_; }
  explicit operator bool() const noexcept { return sys_ != nullptr; }

  // One-way: returns once the message is in the mailbox (activating the grain if needed).
  // Errors before the enqueue (a failed activation, mailbox_full, system_shutting_down) reach
  // the caller; a failure of the handler is published as a dead letter naming the grain.
  template <class M>
  error tell_one_way(M&& msg) {
    if (sys_ == nullptr) return errc::empty_pid;
    // direct_tell consumes msg only when it returns true; otherwise msg is still whole here.
    if (error out; detail::direct_tell(route_, std::forward<M>(msg), out)) return out;
    return detail::tell_grain_via(*sys_, id_, message(std::forward<M>(msg)), route_, nullptr);
  }
  // Acknowledged by default (waits for ack / reply_error, at most opts.timeout), as tell_grain;
  // with opts.one_way, tell_one_way.
  template <class M>
  error tell(M&& msg, grain_tell_options opts = {}) {
    if (sys_ == nullptr) return errc::empty_pid;
    if (opts.one_way) return tell_one_way(std::forward<M>(msg));
    return tell_grain(*sys_, id_, std::forward<M>(msg), opts);
  }
  // Blocking ask, as ask_grain (for code outside the system: on a worker, blocking_on_worker).
  template <class R = message, class M>
  result<R> ask(M&& msg, std::chrono::nanoseconds timeout) const {
    if (sys_ == nullptr) return errc::empty_pid;
    return ask_grain<R>(*sys_, id_, std::forward<M>(msg), timeout);
  }
  // Non-blocking request from a grain's turn, as grain_context::request_grain.
  template <class R = message, class M, class F>
  request_handle request(grain_context& ctx, M&& msg, F&& then,
                         grain_request_options options = {}) const {
    return ctx.request_grain<R>(id_, std::forward<M>(msg), std::forward<F>(then), options);
  }
  // Non-blocking request from an actor's turn, as receive_context::request: then(ctx, reply)
  // runs later on the actor. A grain that needs an activation is activated on this worker first.
  template <class R = message, class M, class F>
  request_handle request(receive_context& ctx, M&& msg, std::chrono::nanoseconds timeout, F&& then,
                         request_options options = {}) const {
    return detail::request_grain_from_actor(
        ctx, id_, message(std::forward<M>(msg)), timeout,
        [f = std::forward<F>(then)](receive_context& c, result<message> reply) mutable {
          f(c, detail::reply_as<R>(std::move(reply)));
        },
        options);
  }

  friend bool operator==(const grain_ref& a, const grain_ref& b) {
    return a.sys_ == b.sys_ && a.id_ == b.id_;
  }

 private:
  actor_system* sys_ = nullptr;
  grain_identity id_;
  detail::grain_route route_;  // the activation the last one-way tell reached
};

// A ref to grain `name` of kind T (registering the kind if needed); activates nothing.
// Errors: invalid_actor_name, duplicate_type_name.
template <class T>
result<grain_ref<T>> get_grain(actor_system& sys, std::string_view name) {
  if (error e = register_grain_kind<T>(sys)) return e;
  if (error e = detail::check_grain_name(name)) return e;
  return grain_ref<T>(sys,
                      grain_identity{std::string(detail::grain_kind_name<T>()), std::string(name)});
}

}  // namespace akt
