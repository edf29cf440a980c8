#include "akt/actor/receive_context.hpp"

#include <algorithm>
#include <thread>
#include <utility>

#include "actor/blocking_ask.hpp"
#include "actor/cell_extras.hpp"
#include "actor/delivery_fields.hpp"
#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "akt/actor/actor_system.hpp"
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
    detail::reply_route* s = reply_;
    reply_ = nullptr;
    s->complete(r);
  }
  if (sender_ != nullptr) release_sender();
  if (AKT_UNLIKELY((flags_ & flag_traced) != 0)) drop_trace();
  // receiver_ is rewritten by every delivery and deadline_ns_ is only read under
  // flag_has_deadline, so neither is cleared: a tell then never touches the second line.
  flags_ = 0;
  msg_.reset();
  next.store(nullptr, std::memory_order_relaxed);
  // home_shard_ is kept (it is const), and reply_closed_ deliberately stays as it is: the next
  // ask build clears it, plain tells never read it.
}

void receive_context::drop_trace() noexcept {
  delete trace_;
  trace_ = nullptr;
  flags_ &= ~flag_traced;
}

void receive_context::release_sender() noexcept {
  detail::release(sender_);
  sender_ = nullptr;
}

std::optional<std::chrono::steady_clock::time_point> receive_context::deadline() const noexcept {
  if (!has_deadline()) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns_));
}

actor_system& receive_context::system() const noexcept { return *receiver_->system()->owner(); }

void receive_context::reply_message(akt::message value) {
  detail::system_core* sys = receiver_->system();
  if (reply_ != nullptr && !reply_closed_) {
    sys->complete_reply(*this, std::move(value));
    return;
  }
  if ((flags_ & flag_ask) != 0) {
    // A second reply to an ask (or one after the asker gave up): undeliverable.
    sys->dead_letter(std::move(value), detail::share_pid(receiver_), pid(), errc::request_timeout);
    return;
  }
  if (sender_ != nullptr) {
    (void)detail::deliver(receiver_, sender_, detail::make_envelope(sender_, std::move(value)));
    return;
  }
  // Nobody to reply to.
  sys->dead_letter(std::move(value), detail::share_pid(receiver_), pid(), errc::empty_pid);
}

void receive_context::reply_error(error err) {
  if (reply_ != nullptr && !reply_closed_) receiver_->system()->complete_reply(*this, err);
}

void receive_context::ack() {
  if (reply_ != nullptr && !reply_closed_)
    receiver_->system()->complete_reply(*this, akt::message());
}

reply_handle receive_context::defer_reply() {
  reply_handle h;
  h.self_ = self();
  h.ask_ = (flags_ & flag_ask) != 0;
  if (has_deadline()) h.deadline_ns_ = deadline_ns_;
  if (reply_ != nullptr && !reply_closed_) {
    h.route_ = std::exchange(reply_, nullptr);
    reply_closed_ = true;  // later ctx.reply calls are second replies
  } else if (!h.ask_) {
    h.sender_ = sender();
  }
  return h;
}

reply_handle::reply_handle(reply_handle&& o) noexcept
    : route_(std::exchange(o.route_, nullptr)),
      self_(std::move(o.self_)),
      sender_(std::move(o.sender_)),
      grain_(std::move(o.grain_)),
      deadline_ns_(o.deadline_ns_),
      ask_(o.ask_),
      ack_only_(o.ack_only_) {}

reply_handle& reply_handle::operator=(reply_handle&& o) noexcept {
  if (this != &o) {
    if (route_ != nullptr) reply_error(errc::no_reply);  // the answer owed is abandoned
    route_ = std::exchange(o.route_, nullptr);
    self_ = std::move(o.self_);
    sender_ = std::move(o.sender_);
    grain_ = std::move(o.grain_);
    deadline_ns_ = o.deadline_ns_;
    ask_ = o.ask_;
    ack_only_ = o.ack_only_;
  }
  return *this;
}

reply_handle::~reply_handle() {
  if (route_ != nullptr) reply_error(errc::no_reply);
}

std::optional<std::chrono::steady_clock::time_point> reply_handle::deadline() const noexcept {
  if (deadline_ns_ == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns_));
}

bool reply_handle::cancelled() const noexcept {
  return route_ == nullptr || (deadline_ns_ != 0 && detail::now_ns() >= deadline_ns_);
}

void reply_handle::ack() {
  if (route_ != nullptr) reply_message(akt::message());
}

void reply_handle::reply_message(akt::message value) {
  if (!self_) return;                                // a default handle owes nothing to anyone
  if (ack_only_) value.reset();                      // an acknowledged grain tell carries no value
  if (!grain_.empty() && route_ == nullptr) return;  // a grain answers only a waiting caller
  detail::system_core* sys = detail::cell_of(self_)->system();
  if (route_ != nullptr) {
    // As system_core::complete_reply: a reply the asker gave up on is a dead letter.
    result<akt::message> r(std::move(value));
    if (!std::exchange(route_, nullptr)->complete(r) && r.has_value()) {
      sys->dead_letter(std::move(*r), self_, pid(), errc::request_timeout);
    }
    return;
  }
  if (ask_) {  // a second reply to an ask
    sys->dead_letter(std::move(value), self_, pid(), errc::request_timeout);
    return;
  }
  if (sender_) {
    (void)detail::deliver(detail::cell_of(self_), detail::cell_of(sender_),
                          detail::make_envelope(detail::cell_of(sender_), std::move(value)));
    return;
  }
  sys->dead_letter(std::move(value), self_, pid(), errc::empty_pid);
}

void reply_handle::reply_error(error err) {
  if (!err) err = error(errc::handler_failed, "reply_error() without an error");
  if (route_ != nullptr) {
    result<akt::message> r(std::move(err));
    (void)std::exchange(route_, nullptr)->complete(r);
    return;
  }
  if (grain_.empty() || !self_ || ask_) return;
  // A grain's one-way tell: nobody waits, so the failure is published, naming the grain (once).
  pid self = std::move(self_);
  detail::cell_system(detail::cell_of(self))
      ->dead_letter(akt::message(), pid(), self, error(err.code(), grain_ + ": " + err.message()));
}

void receive_context::unhandled() {
  detail::system_core* sys = receiver_->system();
  if (sys->events_->has_subscribers<unhandled_message>()) {
    sys->events_->publish(unhandled_message{self(), std::string(msg_.type_name())});
  }
  sys->dead_letter(*this, errc::unhandled);
}

void receive_context::stop_self() { (void)self().stop(); }

void receive_context::fail(error err) {
  if (!err) err = error(errc::handler_failed, "fail() without an error");
  receiver_->report_failure(std::move(err));
}

std::vector<pid> receive_context::children() const {
  std::vector<pid> out;
  if (const detail::cell_extras* x = receiver_->extras_if_any()) {
    for (detail::actor_cell* c : x->children) out.push_back(detail::share_pid(c));
  }
  return out;
}

result<pid> receive_context::child(std::string_view name) const {
  if (const detail::cell_extras* x = receiver_->extras_if_any()) {
    for (detail::actor_cell* c : x->children) {
      if (c->name() == name && c->life() == detail::life_state::alive) return detail::share_pid(c);
    }
  }
  return error(errc::actor_not_found, std::string(name));
}

pid receive_context::parent() const noexcept { return detail::share_pid(receiver_->parent()); }

void receive_context::watch(const pid& target) {
  detail::actor_cell* t = detail::cell_of(target);
  if (t == nullptr || t == receiver_) return;
  auto& watching = receiver_->extras().watching;
  if (std::find(watching.begin(), watching.end(), t) != watching.end()) return;
  t->add_ref();
  watching.push_back(t);
  t->post_system(detail::watch_request{self()});
}

void receive_context::unwatch(const pid& target) {
  detail::actor_cell* t = detail::cell_of(target);
  detail::cell_extras* x = receiver_->extras_if_any();
  if (t == nullptr || x == nullptr) return;
  auto it = std::find(x->watching.begin(), x->watching.end(), t);
  if (it == x->watching.end()) return;
  x->watching.erase(it);
  t->post_system(detail::unwatch_request{self()});
  t->release();
}

void receive_context::stash() {
  receiver_->extras().stash.push_back(detail::clone_for_stash(*this));
}

bool receive_context::unstash() {
  detail::cell_extras* x = receiver_->extras_if_any();
  if (x == nullptr || x->stash.empty()) return false;
  x->unstashed.push_back(x->stash.front());
  x->stash.pop_front();
  return true;
}

std::size_t receive_context::unstash_all() {
  detail::cell_extras* x = receiver_->extras_if_any();
  if (x == nullptr) return 0;
  const std::size_t n = x->stash.size();
  while (!x->stash.empty()) {
    x->unstashed.push_back(x->stash.front());
    x->stash.pop_front();
  }
  return n;
}

std::size_t receive_context::stash_size() const noexcept {
  const detail::cell_extras* x = receiver_->extras_if_any();
  return x == nullptr ? 0 : x->stash.size();
}

void receive_context::become(behavior b) {
  detail::cell_extras& x = receiver_->extras();
  auto next = std::make_unique<behavior>(std::move(b));
  if (x.behaviors.empty()) {
    x.behaviors.push_back(std::move(next));
  } else {
    x.retired.push_back(std::move(x.behaviors.back()));  // it may be the one running
    x.behaviors.back() = std::move(next);
  }
}

void receive_context::become_stacked(behavior b) {
  receiver_->extras().behaviors.push_back(std::make_unique<behavior>(std::move(b)));
}

void receive_context::unbecome() {
  detail::cell_extras* x = receiver_->extras_if_any();
  if (x == nullptr || x->behaviors.empty()) return;
  x->retired.push_back(std::move(x->behaviors.back()));  // it may be the one running
  x->behaviors.pop_back();
}

error receive_context::forward(const pid& to) {
  if (!to) return errc::empty_pid;
  // A clone from the target's shard carrying the payload, the original sender and the reply
  // route (so an asker gets its answer from `to`).
  auto* env = static_cast<receive_context*>(detail::acquire_envelope(detail::cell_of(to)));
  env->msg_ = std::move(msg_);
  if (sender_ != nullptr) {
    sender_->add_ref();
    env->sender_ = sender_;
  }
  env->reply_ = std::exchange(reply_, nullptr);
  env->reply_closed_ = false;
  env->deadline_ns_ = deadline_ns_;
  env->flags_ = flags_;
  return detail::cell_of(to)->deliver(env);
}

namespace {
// The reply route of a request made from inside an actor: the reply comes back to the
// requester as a system message, and its continuation runs on the requester's turn.
class request_route final : public detail::reply_route {
 public:
  request_route(pid requester, std::uint64_t id) : requester_(std::move(requester)), id_(id) {}
  bool complete(result<akt::message>& value) noexcept override {
    detail::cell_of(requester_)->post_system(detail::request_reply{id_, std::move(value)});
    delete this;
    return true;
  }

 private:
  pid requester_;
  std::uint64_t id_;
};
}  // namespace

request_handle receive_context::request_erased(const pid& to, envelope_ptr e,
                                               std::chrono::nanoseconds timeout,
                                               detail::continuation then, request_options options,
                                               error refused, detail::envelope_sink sink) {
  detail::actor_cell* self_cell = receiver_;
  detail::cell_extras& x = self_cell->extras();
  const std::uint64_t id = x.next_request_id++;
  detail::pending_request& req = x.requests[id];
  req.then = std::move(then);
  req.stash_others = options.stash_others;
  req.trace = detail::capture_trace();
  if (options.stash_others) ++x.awaiting;
  if (e == nullptr) {  // refused at once: the continuation gets the error, later, like any reply
    if (!refused) refused = errc::empty_pid;
    self_cell->post_system(detail::request_reply{id, refused});
    return request_handle(self_cell, id, std::move(refused));
  }
  // Owned by e until delivered: a throw from here (allocations) recycles it.
  auto* env = static_cast<receive_context*>(e.get());
  env->reply_ = new request_route(self(), id);
  env->reply_closed_ = false;
  env->flags_ |= flag_ask;
  // A request made while handling an ask inherits that ask's deadline when it is the earlier
  // one: nobody waits for the answer after the asker gave up (the same rule across nodes, where
  // the deadline travels as the time left).
  const bool own = timeout > std::chrono::nanoseconds::zero();
  if (own || has_deadline()) {  // the clock is read only when a deadline is involved
    const std::int64_t now = self_cell->system()->timers_.now_ns();
    std::int64_t deadline = own ? now + timeout.count() : 0;
    if (has_deadline() && (deadline == 0 || deadline_ns_ < deadline)) deadline = deadline_ns_;
    env->deadline_ns_ = deadline;
    env->flags_ |= flag_has_deadline;
    pid me = self();
    req.timer = self_cell->system()->timers_.schedule_after(
        std::chrono::nanoseconds(std::max<std::int64_t>(deadline - now, 0)),
        [me, id] { detail::cell_of(me)->post_system(detail::request_expired{id}); });
  }
  self_cell->add_ref();
  env->sender_ = self_cell;
  if (sink.deliver != nullptr) {
    sink.deliver(sink.ctx, static_cast<receive_context*>(e.release()));
    return request_handle(self_cell, id);
  }
  (void)detail::cell_of(to)->deliver(
      static_cast<receive_context*>(e.release()));  // a refusal
                                                    // completes the route
  return request_handle(self_cell, id);
}

result<schedule_ref> receive_context::schedule_once(akt::message msg,
                                                    std::chrono::nanoseconds delay) {
  return receiver_->system()->scheduler_.schedule_once(self(), std::move(msg), delay, receiver_);
}

result<schedule_ref> receive_context::schedule(akt::message msg,
                                               std::chrono::nanoseconds interval) {
  return receiver_->system()->scheduler_.schedule_every(self(), std::move(msg), interval,
                                                        receiver_);
}

result<schedule_ref> receive_context::schedule_with_cron(akt::message msg,
                                                         std::string_view expression,
                                                         std::string_view zone) {
  return receiver_->system()->scheduler_.schedule_cron(self(), std::move(msg), expression, zone,
                                                       receiver_);
}

bool request_handle::cancel() {
  if (owner_ == nullptr || id_ == 0) return false;
  detail::cell_extras* x = owner_->extras_if_any();
  if (x == nullptr) return false;
  auto it = x->requests.find(id_);
  if (it == x->requests.end()) return false;
  if (it->second.stash_others && x->awaiting > 0) --x->awaiting;
  if (it->second.timer) owner_->system()->timers_.cancel(it->second.timer);
  x->requests.erase(it);
  return true;
}

namespace {
// Every envelope is a receive_context: reset it and give it to the pool of its home shard (the
// tag picks the pool: a grain envelope never lands in the actor pool).
void recycle_context(envelope* e) noexcept {
  auto* ctx = static_cast<receive_context*>(e);
  detail::context_access::reset(*ctx);
  detail::envelope_pool_of(ctx->home_shard()).put(ctx);
}
// Installed before main (dynamic initialisation of this translation unit, which every program
// that builds envelopes links), so before any thread could recycle one.
[[maybe_unused]] const bool recycler_installed =
    (detail::install_envelope_recycler(&recycle_context), true);
}  // namespace

namespace detail {

void add_ref(actor_cell* c) noexcept { c->add_ref(); }
void release(actor_cell* c) noexcept { c->release(); }

void fill_envelope(receive_context& env, delivery_fields& f) noexcept {
  if (f.sender != nullptr) context_access::sender(env) = std::exchange(f.sender, nullptr);
  if (f.route != nullptr) {
    context_access::reply(env) = std::exchange(f.route, nullptr);
    context_access::reply_closed(env) = false;
    context_access::flags(env) |= envelope::flag_ask;
  }
  if (f.deadline_ns != 0) {
    context_access::deadline(env) = f.deadline_ns;
    context_access::flags(env) |= envelope::flag_has_deadline;
  }
  context_access::flags(env) |= f.flags;
  if (f.trace) {
    context_access::trace(env) = f.trace.release();
    context_access::flags(env) |= envelope::flag_traced;
  }
}

envelope* acquire_envelope(actor_cell* to) {
  const std::uint32_t home = to->home_shard();  // tagged for a grain: the grain pool
  return envelope_pool_of(home).get(home);
}

error deliver(actor_cell* from, actor_cell* to, envelope_ptr e) noexcept {
  auto* env = static_cast<receive_context*>(e.release());
  if (from != nullptr) {
    from->add_ref();
    context_access::sender(*env) = from;
  }
  return to->deliver(env);
}

error ask_refusal(std::chrono::nanoseconds timeout) noexcept {
  if (timeout <= std::chrono::nanoseconds::zero()) return errc::invalid_timeout;
  if (!may_wait_for_reply()) return errc::blocking_on_worker;
  return {};
}

void begin_ask(actor_cell* to, receive_context& env, std::chrono::nanoseconds timeout,
               std::uint32_t extra_flags, bool deadline_travels, pending_ask& p) {
  context_access::receiver(env) = to;
  // A grain's acknowledged tell takes its slot from the ack-slot pool, on its envelope's shard
  // (goakt-context-pools.md section 11); other asks use the thread's cached slot.
  p.turns = &to->system()->dispatcher_;
  p.pooled_slot = (extra_flags & envelope::flag_grain_ack) != 0;
  p.remote = to->is_remote();
  p.slot = p.pooled_slot ? acquire_ack_slot(env.home_shard()) : thread_reply_slot();
  p.deadline = now_ns() + timeout.count();
  context_access::reply(env) = p.slot;
  context_access::reply_closed(env) = false;
  context_access::flags(env) |= envelope::flag_ask | extra_flags;
  if (deadline_travels) {
    // The receiver compares it with the system's clock (virtual under manual time).
    context_access::deadline(env) = to->system()->timers_.now_ns() + timeout.count();
    context_access::flags(env) |= envelope::flag_has_deadline;
  }
}

result<message> finish_ask(pending_ask& p) {
  reply_slot* const slot = p.slot;
  dispatcher& d = *p.turns;
  if (d.manual()) {
    // Deterministic mode: nobody else runs turns, so the asker does, until the reply is there.
    while (!slot->ready() && now_ns() < p.deadline) {
      if (!d.run_one()) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  bool abandoned = false;
  result<message> r = slot->await(p.deadline, abandoned, !p.remote);
  // An abandoned slot belongs to its completer (who deletes it): a late ack must never land in
  // a slot that a later tell took from the pool.
  if (!abandoned) {
    if (p.pooled_slot)
      return_ack_slot(slot);
    else
      return_thread_reply_slot(slot);
  }
  return r;
}

result<message> ask(actor_cell* to, envelope_ptr e, std::chrono::nanoseconds timeout,
                    std::uint32_t extra_flags, bool deadline_travels) {
  auto* env = static_cast<receive_context*>(e.get());  // e owns it until the delivery
  if (error refusal = ask_refusal(timeout)) {
    context_access::receiver(*env) = to;
    to->system()->dead_letter(*env, refusal);
    return refusal;  // e recycles the envelope
  }
  pending_ask p;
  begin_ask(to, *env, timeout, extra_flags, deadline_travels, p);
  (void)to->deliver(static_cast<receive_context*>(e.release()));  // a refusal completes
                                                                  // the slot with its reason
  return finish_ask(p);
}

std::vector<result<message>> ask_batch(actor_cell* to, std::vector<message>&& msgs,
                                       std::chrono::nanoseconds timeout) {
  std::vector<result<message>> out;
  out.reserve(msgs.size());
  if (timeout <= std::chrono::nanoseconds::zero() || on_worker_thread()) {
    const errc why = on_worker_thread() ? errc::blocking_on_worker : errc::invalid_timeout;
    for (auto& m : msgs) {
      envelope_ptr e = make_envelope(to, std::move(m));
      auto* env = static_cast<receive_context*>(e.get());
      context_access::receiver(*env) = to;
      to->system()->dead_letter(*env, why);
      out.emplace_back(why);  // e recycles the envelope
    }
    return out;
  }
  const std::int64_t deadline = now_ns() + timeout.count();
  std::vector<reply_slot*> slots;
  slots.reserve(msgs.size());
  for (auto& m : msgs) {
    envelope_ptr e = make_envelope(to, std::move(m));
    auto* env = static_cast<receive_context*>(e.get());
    auto slot_owner = std::make_unique<reply_slot>();
    slots.push_back(slot_owner.get());
    reply_slot* slot = slot_owner.release();
    context_access::receiver(*env) = to;
    context_access::reply(*env) = slot;
    context_access::reply_closed(*env) = false;
    context_access::deadline(*env) = to->system()->timers_.now_ns() + timeout.count();
    context_access::flags(*env) |= envelope::flag_has_deadline | envelope::flag_ask;
    (void)to->deliver(static_cast<receive_context*>(e.release()));
  }
  for (reply_slot* slot : slots) {
    bool abandoned = false;
    out.push_back(slot->await(deadline, abandoned));
    if (!abandoned) delete slot;
  }
  return out;
}

std::string_view cell_name(const actor_cell* c) noexcept { return c->name(); }

std::string cell_path(const actor_cell* c) {
  if (c->is_remote()) return std::string(c->path());  // a proxy's path is its full address
  std::string p = "akt://";
  p += c->system()->name_;
  p += c->is_grain() ? "/grain/" : "/user/";
  p += c->path();
  return p;
}

bool cell_alive(const actor_cell* c) noexcept {
  const life_state l = c->life();
  if (l == life_state::remote) return c->system()->remote()->alive(c);
  return l == life_state::alive;
}

system_core* cell_system(const actor_cell* c) noexcept { return c->system(); }

// A copy of src for a second queue (stash): same payload (moved), sender, receiver, reply route
// and deadline, from src's home shard in src's pool. The clone's late-reply guard starts cleared:
// a recycled envelope may carry a tripped guard, and a clone skips the build that would clear it.
receive_context* clone_for_stash(receive_context& src) {
  auto* c = envelope_pool_of(src.home_shard()).get(src.home_shard());
  c->message() = std::move(src.message());
  if (actor_cell* s = context_access::sender(src)) {
    s->add_ref();
    context_access::sender(*c) = s;
  }
  context_access::receiver(*c) = context_access::receiver(src);
  context_access::reply(*c) = std::exchange(context_access::reply(src), nullptr);
  context_access::deadline(*c) = context_access::deadline(src);
  context_access::flags(*c) = context_access::flags(src);
  if ((context_access::flags(src) & envelope::flag_traced) != 0) {
    // The trace goes with the message; src is recycled untraced.
    context_access::trace(*c) = std::exchange(context_access::trace(src), nullptr);
    context_access::flags(src) &= ~envelope::flag_traced;
  }
  context_access::reply_closed(*c) = false;
  return c;
}

}  // namespace detail
}  // namespace akt
