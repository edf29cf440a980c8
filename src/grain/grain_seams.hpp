#pragma once
// The grain layer's seams: the narrow surface through which the modules above it (remote,
// cluster) take part in routing and activating grains, without the layer's internals
// (grain_layer.hpp is private to src/grain/).
//
// Routing. Every way into a grain (ask, tell, one-way and grain_ref tells, blocking asks from a
// grain, requests from grains and actors, coroutine asks, pipes, schedules, activate_grain) asks
// one function, route_grain (grain_send.cpp), where the identity lives. Without a placement
// installed the answer is "here" at the cost of one acquire load. With one, the placement
// answers:
//   - local: this node hosts it: the local paths run as without a placement;
//   - remote: another node owns it: the message goes to `target`, a pid (a proxy of the remote
//     module) through which a tell, an ask or a request reaches the owner's activation with the
//     ordinary actor machinery; nothing is activated here;
//   - claim: nobody is known to own it: this node may activate it once the activation gate
//     (below) admits it, which may wait on the store. On a dispatcher worker (a grain's or an
//     actor's turn) such a send never activates in place: tells, requests and a grain's
//     bounded blocking ask go to deliver_to_grain's queue, which activates on the runtime's
//     blocking pool and delivers in arrival order; activate_grain answers blocking_on_worker.
//     Elsewhere (a thread outside the system, the blocking pool) the activation runs on the
//     calling thread, which may wait.
//
// Activation gate. Before on_activate runs on this node, on both activation paths (a new cell
// from the directory, and the fresh instance in place after an idle deactivation that a send
// raced), the layer calls admit(id); an error refuses the activation: every sender waiting for
// it gets the error, marked as refused before any handler ran. After every activation ends
// (deactivated, or admitted but failed), released(id) is called once. admit may wait (on the
// store) except on a dispatcher worker (akt::detail::on_worker_thread()): the in-place
// activation runs on the grain's own turn, and a placement that answered local lets a worker
// activate; there it must answer from what it holds, or refuse (marked: the sender may resend).
//
// Delivery from other nodes: deliver_to_grain, below.
//
// Contract: install each seam once, before the grains are used; the layer owns it and calls it
// from any thread, concurrently.

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "actor/delivery_fields.hpp"
#include "akt/actor/pid.hpp"
#include "akt/core/error.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"
#include "akt/grain/grains.hpp"

namespace akt {
namespace detail {

class actor_cell;
class reply_route;
class system_core;

// Where an identity's messages go (see the header comment).
struct grain_place {
  enum class where : std::uint8_t { local, remote, claim };
  where at = where::local;
  pid target;  // remote only: the messages for the grain are delivered to this pid
  // remote only: the owner's claim (its fencing token, the claim's create revision) that the
  // placement routed by; it travels with the message, and an owner that no longer holds that
  // claim refuses it (marked not_owner). 0: none (a placement without claims).
  std::int64_t token = 0;
};

// What a second send of a message needs, kept before the first one (grain_placement::keep):
// a copy of the value when its type is copyable, else its encoded bytes with the function that
// decodes them. A value, so that keeping a small copyable message (the common case: every ask
// to a remote owner keeps one) allocates nothing beyond what the copy itself needs.
class kept_message {
 public:
  using decode_fn = result<message> (*)(std::uint64_t type, const std::vector<unsigned char>&);
  kept_message() = default;  // nothing kept: no second send
  explicit kept_message(message copy) : copy_(std::move(copy)), kept_(true) {}
  kept_message(std::uint64_t type, std::vector<unsigned char> bytes, decode_fn decode)
      : type_(type), bytes_(std::move(bytes)), decode_(decode), kept_(decode != nullptr) {}

  explicit operator bool() const noexcept { return kept_; }
  // The message again; once.
  result<message> take() {
    kept_ = false;
    if (decode_ != nullptr) return decode_(type_, bytes_);
    return std::move(copy_);
  }

 private:
  message copy_;
  std::uint64_t type_ = 0;
  std::vector<unsigned char> bytes_;
  decode_fn decode_ = nullptr;
  bool kept_ = false;
};

class grain_placement {
 public:
  virtual ~grain_placement() = default;
  // Any thread; called once per routed send that does not take a grain_ref's direct path, so it
  // must be cheap (a cache hit, not a store round).
  virtual grain_place place(const grain_identity& id) = 0;

  // Resending (goakt-grains.md "Activation guarantee"). A call that sends to another node keeps
  // its message first (keep; null: no second send), and when the send failed asks
  // resend_place whether the failure allows one more send and where to: the placement
  // releases the claim it routed by when the rule allows (a marked refusal: not_owner or
  // system_shutting_down; unreachable with the owner's node gone from membership), reads the
  // owner again, and answers the new place; nullopt: return the error. It may wait on the
  // store: never called on a dispatcher worker. The defaults keep nothing and resend nothing
  // (a placement that never resends must not pay for a copy per send).
  virtual kept_message keep(const message&) { return {}; }
  virtual std::optional<grain_place> resend_place(const grain_identity&, const grain_place&,
                                                  const error&) {
    return std::nullopt;
  }
};

class grain_activation_gate {
 public:
  virtual ~grain_activation_gate() = default;
  // Before on_activate of id runs on this node; an error refuses the activation. Blocks only
  // off the dispatcher workers (see above). The value is the activation's fencing token (a
  // cluster's claim revision: grain_context::fencing_token), 0 when there is none. An
  // activation that ended idle and is made again in place before its cell left the directory
  // keeps its admission (and its token): the gate is not asked again for it.
  virtual result<std::int64_t> admit(const grain_identity& id) = 0;
  // Once after each admitted activation ends (deactivated, failed, rolled back).
  virtual void released(const grain_identity& id) noexcept = 0;
};

// Fencing (the cluster's membership): whether this node may still start a grain handler. The
// grain layer asks before every handler of an activation made under a fence (on_activate,
// on_receive for messages and timer ticks, on_deactivate, a request's continuation): while the
// node is fenced, or once it rejoined under a new epoch, the activation is dropped without
// on_deactivate (as a crashed node's would be) and its messages are refused with a marked
// errc::not_owner; new activations are refused the same way until it rejoins.
class grain_fence {
 public:
  grain_fence() noexcept : coarse_lag_ns_(coarse_resolution_ns()) {}
  virtual ~grain_fence() = default;
  // The node's membership epoch (a small counter of this process, never 0) while its lease is
  // provably alive; 0 while it is fenced. Any thread, wait-free: a clock read and two loads,
  // inline, because it runs before every grain handler of a cluster node.
  std::uint32_t valid_epoch() const noexcept {
    const std::int64_t until = valid_until_ns_.load(std::memory_order_acquire);
    if (coarse_now_ns() + coarse_lag_ns_ > until) return 0;
    return epoch_.load(std::memory_order_acquire);
  }

  // The fence reads the clock before every grain handler, so the read must be cheap: the coarse
  // monotonic clock is the steady clock's timeline (CLOCK_MONOTONIC on Linux) read from the
  // vDSO without a clock source access, at the kernel tick's resolution (1 to 10 ms). It lags
  // the steady clock by at most that resolution, which valid_epoch adds back: the fence may come
  // up to one tick early, never late. (A steady_clock read cost 34-55 ns per grain message on
  // this project's VMs: 11 % of a busy grain's CPU.)
  static std::int64_t coarse_now_ns() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }

 protected:
  // Set by the fence's owner (the cluster's membership, which says who writes them and when).
  // valid_until_ns_: steady-clock ns until which the lease is provably alive, 0: fenced.
  // epoch_: the membership epoch, stored before the valid_until_ns_ of the same join (release);
  // valid_epoch loads valid_until_ns_ then epoch_ (acquire), so a reader that sees the new
  // validity sees the new epoch.
  std::atomic<std::int64_t> valid_until_ns_{0};
  std::atomic<std::uint32_t> epoch_{0};

 private:
  static std::int64_t coarse_resolution_ns() noexcept {
    timespec res{};
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0) return 10'000'000;
    return static_cast<std::int64_t>(res.tv_sec) * 1'000'000'000 + res.tv_nsec;
  }
  const std::int64_t coarse_lag_ns_;  // the coarse clock's resolution, read once
};

// The settings of grain kind `kind` as this node declared them (the cluster records them with a
// claim); null when this node does not host the kind. Any thread.
std::shared_ptr<const grain_settings> grain_kind_settings(system_core* core, std::string_view kind);

// The claim token of the delivery whose activation the gate is asked to admit on this thread
// (grain_delivery::claim_token of a message routed by a claim made for this node by another:
// the gate adopts that claim instead of making one); 0 for every other activation.
std::int64_t routed_claim_token() noexcept;

// How many activations this node has now (the cluster's member record carries it as its
// load). Any thread; O(activations): call it seldom.
std::size_t active_grain_count(system_core* core);

// Makes every activation of this node take a turn soon (an internal message that runs no
// handler): the fence then drops those made under an epoch that is no longer valid, instead of
// waiting for their next message. Any thread.
void nudge_grains(system_core* core);

// The message activate_grain sends to the owner of an identity that another node owns: the
// owner's host activates the grain (as for any first message) and answers `true` without
// running on_receive. Remoting carries it under the built-in name "akt.grain.activate".
struct grain_activate_probe {
  static constexpr std::string_view akt_type_name = "akt.grain.activate";
};

// Install the seams (owned by the layer from then on). False when one is installed already.
bool install_grain_placement(system_core* core, std::unique_ptr<grain_placement> p);
bool install_grain_gate(system_core* core, std::unique_ptr<grain_activation_gate> g);
// Not owned: f must outlive every grain turn of the system (the cluster's extension does: it
// is destroyed with the system's core, after the dispatcher stopped).
bool install_grain_fence(system_core* core, const grain_fence* f);

// Where id lives now: the one routing function (grain_send.cpp).
grain_place route_grain(system_core* core, const grain_identity& id);

// A message for a grain that arrived from elsewhere (another node, through the remote module),
// with what its envelope must carry (delivery_fields: the sender, the reply route, the deadline,
// the flags). The sender's reference (if any) and the reply route belong to the delivery until
// it reaches an envelope (fill_envelope).
struct grain_delivery : delivery_fields {
  message msg;
  // The claim the sender routed by (grain_place::token); nonzero: an activation of this node
  // admitted under another token (or none) refuses the message with a marked not_owner instead
  // of handling it, and none is activated for it.
  std::int64_t claim_token = 0;
};
// The seam remote senders (and, next, the cluster) reach a grain of this node through: the
// message goes into the identity's activation like a one-way tell, with d's sender, answer
// route and deadline. It never runs on_activate on the calling thread (an I/O thread): an
// identity without an activation is activated on the blocking pool. A refusal is dead-lettered
// and answers the route, with the refusal mark (not processed, safe to send again).
void deliver_to_grain(system_core* core, const grain_identity& id, grain_delivery d);

}  // namespace detail
}  // namespace akt
