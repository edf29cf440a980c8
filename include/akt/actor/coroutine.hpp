#pragma once
// Coroutine handlers: a handler starts an akt::task that co_awaits requests and delays without
// blocking its worker; every part after a co_await runs later, on the actor's own turn.
//
//   void receive(akt::receive_context& ctx) override {
//     if (auto* q = ctx.get_if<quote>()) akt::run(price(akt::async_context(ctx), *q));
//   }
//   akt::task<> price(akt::async_context ctx, quote q) {  // the context by value
//     akt::result<double> p = co_await ctx.ask<double>(pricer_, q, 1s);
//     if (p) ctx.reply(*p * q.amount); else ctx.reply_error(p.error());
//   }
//
// Contract
// - Threads. A coroutine runs only on its actor's turns: its first part inside akt::run, within
//   the handler that called it; each later part as the continuation of the request (or delay)
//   it waited for (receive_context::request, whose continuations run on the requester, one at a
//   time). So no part of a coroutine ever runs concurrently with another message of its actor,
//   and its frame is owned by one turn at a time. Nothing here is for use from other threads.
// - Reentrancy. By default a waiting coroutine holds the actor's other user messages: they stay
//   queued, in order, and run after the coroutine finishes or waits no more (as
//   request_options::stash_others). coroutine_options::reentrant lets them run while it waits
//   (other coroutines may then start and interleave at co_await points, never in between).
//   Replies to requests, terminated notices and system messages are never held.
// - The context. The receive_context of the handler is recycled after its turn: a coroutine
//   gets an async_context (by value) instead, which async_context::turn() re-points to the
//   context of the turn that resumed it (valid until the next co_await). It takes the reply
//   owed for the message when it is built (receive_context::defer_reply), so the coroutine can
//   answer an ask after any number of co_awaits; dropped unanswered it answers errc::no_reply.
//   Copy what you need out of the message before the first co_await.
// - Ownership and cancellation. Whoever resumes a coroutine owns its frame until it waits again:
//   a waiting coroutine is owned by the pending request's continuation (a reference count on the
//   outermost frame). A continuation that never runs (the actor stopped or restarted, a grain
//   activation ended) destroys the frame with it: the coroutine is cancelled at its co_await,
//   its locals are destroyed (a reply handle then answers no_reply), nothing runs further and
//   nothing leaks. A stopping actor destroys its waiting frames before post_stop, with the
//   instance still alive; an actor cell destroyed with requests still pending destroys them on
//   the thread that drops it (no other turn runs then).
// - Failure. An exception that escapes the coroutine reaches the actor's supervisor as one thrown
//   by a handler: from the first part through the handler that called run, later from the
//   continuation. An ask it still owes an answer to gets errc::handler_failed first.
// - Only the awaitables of this header (and of grain_coroutine.hpp), and nested akt::task, may be
//   co_awaited: a foreign awaitable could resume the coroutine off its actor's turn (it is a
//   compile error).
// - Allocation: the coroutine frame (once per coroutine, not per co_await); each co_await of a
//   request costs what receive_context::request costs plus one small continuation block (its
//   std::function holds a frame reference); a delay costs a request entry and a timer.
// - GCC 12 bug (not akt's): a braced temporary holding a std::string inside a co_await operand,
//   co_await ctx.ask<R>(to, query{name}, t), is copied bitwise into the frame and its string is
//   then freed wrongly (ASan: bad-free). Build such a message as a named local first. Scalars
//   and heap-free types are unaffected; GCC 13 and Clang do not have the bug.
// - Nested tasks: co_await sub(ctx) runs sub as part of the same coroutine (symmetric transfer,
//   no scheduling); its exceptions propagate to the awaiting coroutine. Pass sub the same
//   async_context by reference (it lives in the outer frame).

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "akt/actor/receive_context.hpp"

namespace akt {

template <class T = void>
class task;
class async_context;

namespace detail {

// The context of a coroutine as its frame's promise sees it: what to answer when the coroutine
// fails with an answer still owed.
class coroutine_context_base {
 public:
  virtual void fail_owed(const error& err) noexcept = 0;

 protected:
  coroutine_context_base() = default;
  coroutine_context_base(const coroutine_context_base&) = default;
  ~coroutine_context_base() = default;
};

template <class A>
concept turn_awaitable = requires {
  typename std::remove_cvref_t<A>::akt_turn_awaitable;
};

// Promise state common to every task. root, parent and context are set before the coroutine
// first runs and never change; refs is the outermost frame's reference count (frame_ref).
struct promise_base {
  promise_base* root = this;                  // the outermost coroutine of the chain (owns it)
  std::coroutine_handle<> self;               // this frame
  std::coroutine_handle<> parent;             // the coroutine awaiting this one; empty for a root
  coroutine_context_base* context = nullptr;  // the first async_context parameter, if any
  std::exception_ptr exception;
  std::uint32_t refs = 0;  // root only: live frame_refs (turn-owner only, so not atomic)

  // The promise sees the frame's copies of the coroutine's parameters: it remembers the first
  // context among them (the answer to fail when the coroutine throws).
  template <class... Args>
  void bind(Args&... args) noexcept {
    (bind_one(args), ...);
  }
  template <class A>
  void bind_one(A& a) noexcept {
    if constexpr (std::is_base_of_v<coroutine_context_base, A>) {
      if (context == nullptr) context = &a;
    }
  }

  std::suspend_always initial_suspend() noexcept { return {}; }
  struct final_awaiter {
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      promise_base& p = h.promise();
      return p.parent ? p.parent : std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };
  final_awaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { exception = std::current_exception(); }

  // By value: the awaiter is then one object, moved into place once. (GCC 12 copies an awaiter
  // it is handed by reference, which left the copy's members pointing into the original.)
  template <class A>
  std::remove_cvref_t<A> await_transform(A&& a) noexcept(
      std::is_nothrow_constructible_v<std::remove_cvref_t<A>, A&&>) {
    static_assert(turn_awaitable<A>,
                  "an akt::task may co_await only akt awaitables (ask, delay, ...) and akt::task: "
                  "others could resume it off its actor's turn");
    return std::forward<A>(a);
  }
};

// A counted reference on the outermost frame of a coroutine; the last one destroys the frame
// (the whole chain: nested tasks are owned by their awaiters in it). Copyable because
// std::function requires it; only the owning actor's turns copy or drop one.
class frame_ref {
 public:
  frame_ref() = default;
  explicit frame_ref(promise_base* root) noexcept : root_(root) {
    if (root_ != nullptr) ++root_->refs;
  }
  frame_ref(const frame_ref& o) noexcept : frame_ref(o.root_) {}
  frame_ref(frame_ref&& o) noexcept : root_(std::exchange(o.root_, nullptr)) {}
  frame_ref& operator=(frame_ref o) noexcept {
    std::swap(root_, o.root_);
    return *this;
  }
  ~frame_ref() { reset(); }
  void reset() noexcept {
    promise_base* r = std::exchange(root_, nullptr);
    if (r != nullptr && --r->refs == 0) r->self.destroy();
  }
  promise_base* root() const noexcept { return root_; }

 private:
  promise_base* root_ = nullptr;
};

template <class P>
promise_base* root_of(std::coroutine_handle<P> h) noexcept {
  return static_cast<promise_base&>(h.promise()).root;
}

// Resumes `leaf` (a coroutine of the chain `ref` holds) on the current turn. When the chain has
// finished, fails what its context still owes if it threw, destroys the frame and rethrows (so
// the turn's supervision sees the exception); otherwise the frame now belongs to the request
// it waits for.
void resume_on_turn(frame_ref ref, std::coroutine_handle<> leaf);

// receive_context::request with an envelope ask() filled already, so that the awaitable holds
// only the envelope, the target and the result. env may be null (an empty pid).
void coroutine_request(receive_context& turn, const pid& to, envelope_ptr env,
                       std::chrono::nanoseconds timeout, continuation then, bool stash_others);

// A request entry without a target that completes (errc::request_timeout) after `delay`; its
// continuation runs on `turn`'s actor like a reply's. stash_others as for requests.
void await_delay(receive_context& turn, std::chrono::nanoseconds delay, continuation then,
                 bool stash_others);

template <class T>
struct task_result {
  std::optional<T> value;
  template <class U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
  T take() { return std::move(*value); }
};
template <>
struct task_result<void> {
  void return_void() noexcept {}
  void take() noexcept {}
};

}  // namespace detail

// The return type of a coroutine handler (and of coroutines it awaits). Lazy: nothing runs until
// akt::run starts it (a root) or a coroutine co_awaits it (nested). Move-only; destroying a task
// that never started destroys its frame.
template <class T>
class [[nodiscard]] task {
 public:
  struct promise_type : detail::promise_base, detail::task_result<T> {
    template <class... Args>
    explicit promise_type(Args&... args) noexcept {
      bind(args...);
    }
    task get_return_object() noexcept {
      auto h = std::coroutine_handle<promise_type>::from_promise(*this);
      self = h;
      return task(h);
    }
  };
  using akt_turn_awaitable = void;

  task(task&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  task& operator=(task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ~task() {
    if (h_) h_.destroy();
  }

  // Awaiting a nested task: it runs now, as part of the awaiting coroutine.
  struct awaiter {
    std::coroutine_handle<promise_type> child;
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
      auto& pp = static_cast<detail::promise_base&>(parent.promise());
      promise_type& cp = child.promise();
      cp.root = pp.root;
      cp.parent = parent;
      if (cp.context == nullptr) cp.context = pp.context;
      return child;
    }
    T await_resume() {
      if (child.promise().exception) std::rethrow_exception(child.promise().exception);
      return child.promise().take();
    }
  };
  awaiter operator co_await() && noexcept { return awaiter{h_}; }

  // Internal (akt::run): hands the frame over.
  std::coroutine_handle<promise_type> release() noexcept { return std::exchange(h_, nullptr); }

 private:
  explicit task(std::coroutine_handle<promise_type> h) noexcept : h_(h) {}
  std::coroutine_handle<promise_type> h_;
};

// Starts a coroutine handler: runs it now, within the current turn, up to its first co_await
// (or its end). Call it from a handler (or a continuation) of the actor the coroutine's
// async_context was made for. An exception from that first part propagates out of run (to the
// handler, so to supervision); one from a later part reaches supervision from its turn.
inline void run(task<void> t) {
  auto h = t.release();
  if (!h) return;
  detail::promise_base& p = h.promise();
  detail::resume_on_turn(detail::frame_ref(&p), h);
}

// Options of a coroutine (async_context).
struct coroutine_options {
  // Let this actor's other messages run while the coroutine waits. Default: they stay queued,
  // in order, until it finishes.
  bool reentrant = false;
};

template <class R>
class ask_awaitable;
class delay_awaitable;

// A coroutine's view of its actor, valid across co_awaits (see the contract above). Build one
// from the handler's context and pass it to the coroutine by value; it then lives in the
// coroutine's frame, where the awaitables it returns point to it.
class async_context final : public detail::coroutine_context_base {
 public:
  // Takes the reply owed for ctx's message (defer_reply).
  explicit async_context(receive_context& ctx, coroutine_options options = {})
      : turn_(&ctx), reply_(ctx.defer_reply()), options_(options) {}
  async_context(async_context&&) noexcept = default;
  async_context& operator=(async_context&&) = delete;
  ~async_context() = default;

  // The context of the turn running the coroutine now: valid until the next co_await.
  receive_context& turn() const noexcept { return *turn_; }
  pid self() const noexcept { return turn_->self(); }
  actor_system& system() const noexcept { return turn_->system(); }
  const coroutine_options& options() const noexcept { return options_; }

  // The answer owed for the message the coroutine was started for: to the asker for an ask,
  // else to the sending actor by tell (as receive_context::reply).
  template <class T>
  void reply(T&& value) {
    reply_.reply(std::forward<T>(value));
  }
  void reply_error(error err) { reply_.reply_error(std::move(err)); }
  reply_handle& reply() noexcept { return reply_; }

  // Sends msg as an ask; the co_await yields result<R> (the reply as R, or request_timeout after
  // timeout (0: none), dead, unhandled, no_reply, unexpected_reply, empty_pid, ...).
  template <class R = akt::message, class T>
  ask_awaitable<R> ask(const pid& to, T&& msg, std::chrono::nanoseconds timeout);
  // Resumes after `d`, on this actor's turn (the held messages stay held meanwhile unless the
  // coroutine is reentrant).
  delay_awaitable delay(std::chrono::nanoseconds d) noexcept;

 private:
  template <class R>
  friend class ask_awaitable;
  friend class delay_awaitable;
  void fail_owed(const error& err) noexcept override { reply_.reply_error(err); }

  receive_context* turn_;  // re-pointed by each awaitable when it resumes the coroutine
  reply_handle reply_;
  coroutine_options options_;
};

// co_await ctx.ask<R>(to, msg, timeout) -> result<R>. The message is already in its envelope
// (see coroutine_request); a request is sent only when the awaitable is awaited.
template <class R>
class [[nodiscard]] ask_awaitable {
 public:
  using akt_turn_awaitable = void;
  // An awaitable that is never awaited recycles its envelope (env_'s deleter).
  ask_awaitable(async_context* ctx, const pid& to, envelope_ptr env,
                std::chrono::nanoseconds timeout) noexcept
      : ctx_(ctx), to_(to), env_(std::move(env)), timeout_(timeout) {}
  ask_awaitable(ask_awaitable&& o) noexcept = default;
  ask_awaitable& operator=(ask_awaitable&&) = delete;

  bool await_ready() const noexcept { return false; }
  template <class P>
  void await_suspend(std::coroutine_handle<P> h) {
    leaf_ = h;
    detail::coroutine_request(
        *ctx_->turn_, to_, std::move(env_), timeout_,
        [this, ref = detail::frame_ref(detail::root_of(h))](receive_context& c,
                                                            result<akt::message> reply) mutable {
          ctx_->turn_ = &c;
          result_.emplace(detail::reply_as<R>(std::move(reply)));
          detail::resume_on_turn(std::move(ref), leaf_);
        },
        !ctx_->options_.reentrant);
  }
  result<R> await_resume() { return std::move(*result_); }

 private:
  async_context* ctx_;
  pid to_;
  envelope_ptr env_;
  std::chrono::nanoseconds timeout_;
  std::coroutine_handle<> leaf_;
  std::optional<result<R>> result_;
};

// co_await ctx.delay(d).
class [[nodiscard]] delay_awaitable {
 public:
  using akt_turn_awaitable = void;
  delay_awaitable(async_context* ctx, std::chrono::nanoseconds d) noexcept : ctx_(ctx), d_(d) {}

  bool await_ready() const noexcept { return false; }
  template <class P>
  void await_suspend(std::coroutine_handle<P> h) {
    leaf_ = h;
    detail::await_delay(
        *ctx_->turn_, d_,
        [this, ref = detail::frame_ref(detail::root_of(h))](receive_context& c,
                                                            result<akt::message>) mutable {
          ctx_->turn_ = &c;
          detail::resume_on_turn(std::move(ref), leaf_);
        },
        !ctx_->options_.reentrant);
  }
  void await_resume() const noexcept {}

 private:
  async_context* ctx_;
  std::chrono::nanoseconds d_;
  std::coroutine_handle<> leaf_;
};

template <class R, class T>
ask_awaitable<R> async_context::ask(const pid& to, T&& msg, std::chrono::nanoseconds timeout) {
  envelope_ptr env =
      to ? detail::make_envelope(detail::cell_of(to), std::forward<T>(msg)) : nullptr;
  return ask_awaitable<R>(this, to, std::move(env), timeout);
}

inline delay_awaitable async_context::delay(std::chrono::nanoseconds d) noexcept {
  return delay_awaitable(this, d);
}

namespace detail {
// Whether a tell to p would find room now: false only for a pid on another node whose
// outbound window is full (the receivers there are behind) or whose node is unreachable.
bool window_open(const pid& p) noexcept;
}  // namespace detail

// Tells msg to `to` once the way to it has room. For a pid on another node whose window is
// full (a tell would be refused with errc::window_full: its receivers are behind), the coroutine
// waits, checking every `step`, up to max_wait, without blocking its worker; then it tells.
// The result is the tell's: ok, or its refusal (window_full again after max_wait, dead, ...).
// A local pid is told at once.
//
//   akt::error e = co_await akt::tell_when_ready(ctx, remote, sample, 1s);
template <class T>
task<error> tell_when_ready(async_context& ctx, pid to, T msg, std::chrono::nanoseconds max_wait,
                            std::chrono::nanoseconds step = std::chrono::milliseconds(1)) {
  for (std::chrono::nanoseconds waited{0}; !detail::window_open(to) && waited < max_wait;
       waited += step) {
    co_await ctx.delay(step);
  }
  co_return ctx.turn().tell(to, std::move(msg));
}

}  // namespace akt
