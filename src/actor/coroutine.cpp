// Coroutine handlers (akt/actor/coroutine.hpp): resuming on a turn, and delays as request
// entries that only a timer completes.

#include "akt/actor/coroutine.hpp"

#include <exception>
#include <string>

#include "actor/cell_extras.hpp"
#include "actor/system_core.hpp"
#include "akt/actor/detail/actor_cell.hpp"

namespace akt::detail {

void resume_on_turn(frame_ref ref, std::coroutine_handle<> leaf) {
  leaf.resume();
  promise_base* root = ref.root();
  if (!root->self.done()) return;  // it waits again: a new continuation holds the frame
  std::exception_ptr failure = std::move(root->exception);
  if (failure && root->context != nullptr) {
    // Before the frame (and the reply handle in it, which would answer no_reply) goes.
    root->context->fail_owed(error(errc::handler_failed, what_of(failure)));
  }
  ref.reset();  // the last reference: the frame is destroyed here
  if (failure) std::rethrow_exception(failure);
}

void coroutine_request(receive_context& turn, const pid& to, envelope_ptr env,
                       std::chrono::nanoseconds timeout, continuation then, bool stash_others) {
  (void)context_access::request(turn, to, std::move(env), timeout, std::move(then),
                                request_options{.stash_others = stash_others});
}

void await_delay(receive_context& turn, std::chrono::nanoseconds delay, continuation then,
                 bool stash_others) {
  actor_cell* self = context_access::receiver(turn);
  cell_extras& x = self->extras();
  const std::uint64_t id = x.next_request_id++;
  pending_request& req = x.requests[id];
  req.then = std::move(then);
  req.stash_others = stash_others;
  req.trace = capture_trace();
  if (stash_others) ++x.awaiting;
  // The expiry path of a request (request_expired, then the continuation with request_timeout
  // on this actor's turn), with no message sent: a stop or a restart drops it like a request.
  if (delay <= std::chrono::nanoseconds::zero()) {
    self->post_system(request_expired{id});
    return;
  }
  pid me = detail::share_pid(self);
  req.timer = self->system()->timers_.schedule_after(
      delay, [me, id] { detail::cell_of(me)->post_system(request_expired{id}); });
}

bool window_open(const pid& p) noexcept {
  const actor_cell* c = cell_of(p);
  if (c == nullptr || !c->is_remote()) return true;
  return c->system()->remote()->can_send(c);
}

}  // namespace akt::detail
