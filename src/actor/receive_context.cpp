#include "akt/actor/receive_context.hpp"

#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "akt/actor/detail/actor_cell.hpp"
#include "akt/core/clock.hpp"
#include "akt/core/thread.hpp"

namespace akt {

receive_context::~receive_context() { reset(); }

void* receive_context::operator new(std::size_t size) {
  static_assert(alignof(receive_context) == 64);
  // Through the global (unaligned) operator new, so allocation counters see it.
  void* raw = ::operator new(size + 64);
  // malloc returns 16-aligned blocks, so the aligned address is 16..64 bytes in: room for the
  // original pointer right below it.
  const auto aligned = (reinterpret_cast<std::uintptr_t>(raw) + 64) & ~std::uintptr_t(63);
  reinterpret_cast<void**>(aligned)[-1] = raw;
  return reinterpret_cast<void*>(aligned);
}

void* receive_context::operator new(std::size_t size, std::align_val_t) {
  return operator new(size);
}

void receive_context::operator delete(void* p) noexcept {
  if (p != nullptr) ::operator delete(static_cast<void**>(p)[-1]);
}

void receive_context::operator delete(void* p, std::align_val_t) noexcept { operator delete(p); }

void receive_context::reset() noexcept {
  if (reply_ != nullptr) {
    // Every path completes an ask before recycling; this only guards against a leak.
    result<akt::message> r(errc::no_reply);
    detail::reply_slot* s = reply_;
    reply_ = nullptr;
    s->complete(r);
  }
  if (sender_ != nullptr) release_sender();
  // receiver_ is rewritten by every delivery and deadline_ns_ is only read under
  // flag_has_deadline, so neither is cleared: a tell then never touches the second line.
  flags_ = 0;
  msg_.reset();
  next.store(nullptr, std::memory_order_relaxed);
  // home_shard_ is kept (it is const), and reply_closed_ deliberately stays as it is: the next
  // ask build clears it, plain tells never read it.
}

void receive_context::release_sender() noexcept {
  detail::release(sender_);
  sender_ = nullptr;
}

std::optional<std::chrono::steady_clock::time_point> receive_context::deadline() const noexcept {
  if (!has_deadline()) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns_));
}

actor_system& receive_context::system() const noexcept { return *receiver_->system()->owner_; }

void receive_context::respond_message(akt::message value) {
  detail::system_core* sys = receiver_->system();
  if (reply_ != nullptr && !reply_closed_) {
    sys->complete_reply(*this, std::move(value));
    return;
  }
  if ((flags_ & flag_ask) != 0) {
    // A second reply to an ask (or one after the asker gave up): undeliverable.
    sys->dead_letter(std::move(value), pid::share(receiver_), pid(), errc::request_timeout);
    return;
  }
  if (sender_ != nullptr) {
    envelope* env = detail::acquire_envelope(sender_);
    env->payload() = std::move(value);
    (void)detail::deliver(receiver_, sender_, env);
    return;
  }
  // Nobody to reply to.
  sys->dead_letter(std::move(value), pid::share(receiver_), pid(), errc::empty_pid);
}

void receive_context::respond_error(error err) {
  if (reply_ != nullptr && !reply_closed_) receiver_->system()->complete_reply(*this, err);
}

void receive_context::unhandled() { receiver_->system()->dead_letter(*this, errc::unhandled); }

void receive_context::stop_self() { (void)self().stop(); }

void recycle(envelope* e) noexcept {
  auto* ctx = static_cast<receive_context*>(e);
  ctx->reset();
  detail::envelope_pool().put(ctx);
}

namespace detail {

void add_ref(actor_cell* c) noexcept { c->add_ref(); }
void release(actor_cell* c) noexcept { c->release(); }

envelope* acquire_envelope(actor_cell* to) { return envelope_pool().get(to->home_shard()); }

error deliver(actor_cell* from, actor_cell* to, envelope* e) noexcept {
  auto* env = static_cast<receive_context*>(e);
  if (from != nullptr) {
    from->add_ref();
    context_access::sender(*env) = from;
  }
  return to->deliver(env);
}

result<message> ask(actor_cell* to, envelope* e, std::chrono::nanoseconds timeout) {
  auto* env = static_cast<receive_context*>(e);
  context_access::receiver(*env) = to;
  error refusal;
  if (timeout <= std::chrono::nanoseconds::zero())
    refusal = errc::invalid_timeout;
  else if (on_worker_thread())
    refusal = errc::blocking_on_worker;
  if (refusal) {
    to->system()->dead_letter(*env, refusal);
    recycle(env);
    return refusal;
  }
  reply_slot* slot = thread_reply_slot();
  const std::int64_t deadline = now_ns() + timeout.count();
  context_access::reply(*env) = slot;
  context_access::reply_closed(*env) = false;
  context_access::deadline(*env) = deadline;
  context_access::flags(*env) |= envelope::flag_has_deadline | envelope::flag_ask;
  (void)to->deliver(env);  // a refusal completes the slot with its reason
  bool abandoned = false;
  result<message> r = slot->await(deadline, abandoned);
  if (!abandoned) return_thread_reply_slot(slot);
  return r;
}

std::string_view cell_name(const actor_cell* c) noexcept { return c->name(); }

std::string cell_path(const actor_cell* c) {
  std::string p = "akt://";
  p += c->system()->name_;
  p += "/user/";
  p += c->name();
  return p;
}

bool cell_alive(const actor_cell* c) noexcept { return c->life() == life_state::alive; }

// A copy of src for a second queue (stash): same payload (moved), sender, receiver, reply route
// and deadline, from src's home shard. The clone's late-reply guard starts cleared: a recycled
// envelope may carry a tripped guard, and a clone skips the build that would clear it.
receive_context* clone_for_stash(receive_context& src) {
  auto* c = envelope_pool().get(src.home_shard());
  c->message() = std::move(src.message());
  if (actor_cell* s = context_access::sender(src)) {
    s->add_ref();
    context_access::sender(*c) = s;
  }
  context_access::receiver(*c) = context_access::receiver(src);
  context_access::reply(*c) = std::exchange(context_access::reply(src), nullptr);
  context_access::deadline(*c) = context_access::deadline(src);
  context_access::flags(*c) = context_access::flags(src);
  context_access::reply_closed(*c) = false;
  return c;
}

}  // namespace detail
}  // namespace akt
