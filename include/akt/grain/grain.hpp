#pragma once
// Grains: virtual actors addressed by identity (kind/name), activated by the first message sent
// to them and deactivated when idle (reference: shared/reference/goakt-grains.md).
//
//   struct account : akt::grain {
//     static constexpr std::string_view akt_type_name = "bank.account";  // the kind's name
//     long balance = 0;
//     akt::error on_activate(akt::grain_props& p) override { /* load state */ return {}; }
//     void on_receive(akt::grain_context& ctx) override {
//       akt::match(ctx,
//           [&](const deposit& d, auto& c) { balance += d.amount; c.ack(); },
//           [&](const get_balance&, auto& c) { c.reply(balance); });
//     }
//   };
//   auto acct = akt::get_grain<account>(sys, "acct-42");   // result<grain_ref<account>>
//   acct->tell(deposit{10});                                // waits for ack / reply_error
//   auto b = acct->ask<long>(get_balance{}, 1s);            // result<long>
//
// The framework default-constructs a grain (no factory), so that the same kind can later be
// activated on any node of a cluster; state is loaded in on_activate and external resources
// come from the dependencies registered with the kind (grain_props::dependency).
//
// Promises: at most one activation per identity at a time; one message at a time, in mailbox
// order; on_deactivate last, never while on_receive runs.

#include <any>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "akt/actor/schedule.hpp"
#include "akt/core/error.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"

namespace akt {

class actor_system;
class grain_context;
struct grain_timer_options;

namespace detail {
class grain_host_base;
// When a grain timer or a scheduled grain delivery fires.
struct timer_spec {
  schedule_kind kind = schedule_kind::once;
  std::chrono::nanoseconds period{0};  // the delay (once) or the interval
  std::string_view expression;         // cron
  std::string_view zone;               // cron

  static timer_spec once(std::chrono::nanoseconds delay) noexcept {
    return {schedule_kind::once, delay, {}, {}};
  }
  static timer_spec every(std::chrono::nanoseconds interval) noexcept {
    return {schedule_kind::interval, interval, {}, {}};
  }
  static timer_spec cron(std::string_view expression, std::string_view zone) noexcept {
    return {schedule_kind::cron, {}, expression, zone};
  }
};
result<std::string> grain_timer(grain_host_base* host, message msg, const timer_spec& spec,
                                grain_timer_options options);
error cancel_grain_timer(grain_host_base* host, std::string_view reference);
}  // namespace detail

// kind/name. The kind names a grain type (akt::type_name of the C++ type, or registered
// by name); the name tells one grain of that kind from the others.
struct grain_identity {
  std::string kind;
  std::string name;

  // "kind/name".
  std::string str() const { return kind + '/' + name; }
  friend bool operator==(const grain_identity& a, const grain_identity& b) {
    return a.kind == b.kind && a.name == b.name;
  }
  friend bool operator!=(const grain_identity& a, const grain_identity& b) { return !(a == b); }
};

// External resources handed to a kind's grains (a database handle, a client, configuration),
// by name. Values are shared: every activation of the kind sees the same objects.
class grain_dependencies {
 public:
  template <class T>
  grain_dependencies& add(std::string name, std::shared_ptr<T> value) {
    values_[std::move(name)] = std::move(value);
    return *this;
  }
  // The dependency registered under name with type T, or null (absent, or another type).
  template <class T>
  std::shared_ptr<T> get(std::string_view name) const {
    auto it = values_.find(name);
    if (it == values_.end()) return nullptr;
    if (const auto* p = std::any_cast<std::shared_ptr<T>>(&it->second)) return *p;
    return nullptr;
  }
  bool empty() const noexcept { return values_.empty(); }
  // The names held, sorted. A cluster records them with a grain's claim: a node recreating the
  // grain elsewhere takes the values its own kind registration holds under the same names.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(values_.size());
    for (const auto& [name, value] : values_) out.push_back(name);
    return out;
  }

 private:
  std::map<std::string, std::any, std::less<>> values_;
};

// Whether a grain may make non-blocking requests (grain_context::request_grain / request_actor)
// and what it does while their replies are in flight.
enum class reentrancy_mode : std::uint8_t {
  // Requests are refused (errc::reentrancy_disabled); blocking asks from inside still work.
  off,
  // The grain keeps handling other messages while replies are in flight; request cycles (A asks
  // B while B asks A) complete.
  allow_all,
  // The mailbox pauses until the reply (or the request's timeout): other messages, timer ticks
  // included, wait in order. The continuation runs first.
  stash_non_reentrant,
};

struct grain_reentrancy {
  reentrancy_mode mode = reentrancy_mode::off;
  // Requests in flight at once; one more is refused with errc::reentrancy_in_flight_limit.
  // 0 = no limit.
  std::size_t max_in_flight = 0;
};

// Options of one non-blocking request made from a grain.
struct grain_request_options {
  // The continuation gets errc::request_timeout after this long. Default 5 s; zero: none.
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);
  // This request's mode (allow_all or stash_non_reentrant) instead of the activation's; the
  // activation must have reentrancy on for requests at all.
  std::optional<reentrancy_mode> mode = std::nullopt;
};

// Options of a grain timer (grain_context::schedule_once, ...).
struct grain_timer_options {
  // The timer's reference, for cancel_schedule; a new one replaces (cancels) a timer of the same
  // reference. Empty: the framework makes one up.
  std::string reference;
  // Ticks count as activity (they hold off idle deactivation). Default: they do not.
  bool keep_alive = false;
};

// Options of a grain kind. Each field left unset takes the kind's declared default
// (with_grain_default_options), then the framework's default.
// Where a cluster activates a grain of the kind that no node owns yet (ignored outside a
// cluster). local: on the node the first message is sent from (or the node that asks for it);
// the others choose among the members that list the kind in cluster_config::grain_kinds (and
// have the kind's role, when it names one): in turn, at random, or the one with the fewest
// active grains (the load in its member record).
enum class grain_placement_strategy : std::uint8_t { local, round_robin, random, least_load };

struct grain_options {
  // At most this many messages wait in the mailbox; a send beyond is refused with
  // errc::mailbox_full. Default: unbounded.
  std::optional<std::size_t> mailbox_capacity = std::nullopt;
  // Deactivate after this long without a message. Default: 2 minutes. Zero: never.
  std::optional<std::chrono::nanoseconds> deactivate_after = std::nullopt;
  // How long an activation (all of its tries) may take before the caller gets
  // errc::request_timeout. Default: 5 seconds.
  std::optional<std::chrono::nanoseconds> activation_timeout = std::nullopt;
  // How many times a failing on_activate is tried before the error reaches the caller (at
  // least 1). Default: 1.
  std::optional<unsigned> activation_attempts = std::nullopt;
  // Shared with every activation of the kind through grain_props.
  std::shared_ptr<const grain_dependencies> dependencies = nullptr;
  // Default: off.
  std::optional<grain_reentrancy> reentrancy = std::nullopt;
  // In a cluster: where a grain of the kind is activated (above), and the role a node needs to
  // host it (cluster_config::roles). Default: local, and any node hosting the kind (an empty
  // role sets nothing: a per-call option cannot lift the kind's role).
  std::optional<grain_placement_strategy> placement = std::nullopt;
  std::string role = {};
};

// Settled options (every field decided), as an activation sees them.
struct grain_settings {
  std::size_t mailbox_capacity = 0;  // 0 = unbounded
  std::chrono::nanoseconds deactivate_after = std::chrono::minutes(2);
  std::chrono::nanoseconds activation_timeout = std::chrono::seconds(5);
  unsigned activation_attempts = 1;
  std::shared_ptr<const grain_dependencies> dependencies;
  grain_reentrancy reentrancy;
  grain_placement_strategy placement = grain_placement_strategy::local;
  std::string role = {};
};

// What on_activate and on_deactivate receive.
class grain_props {
 public:
  grain_props(const grain_identity& id, actor_system& sys, const grain_settings& settings,
              std::chrono::steady_clock::time_point deadline,
              detail::grain_host_base* host = nullptr) noexcept
      : id_(id), system_(sys), settings_(settings), deadline_(deadline), host_(host) {}

  const grain_identity& identity() const noexcept { return id_; }
  actor_system& system() const noexcept { return system_; }
  const grain_settings& settings() const noexcept { return settings_; }
  // The activation's fencing token (grain_context::fencing_token); 0 outside a cluster.
  std::int64_t fencing_token() const noexcept;
  // When the caller stops waiting for this activation (on_activate), or time_point::max().
  std::chrono::steady_clock::time_point deadline() const noexcept { return deadline_; }
  template <class T>
  std::shared_ptr<T> dependency(std::string_view name) const {
    return settings_.dependencies ? settings_.dependencies->get<T>(name) : nullptr;
  }

  // Activation timers, as grain_context's (from on_activate: the first tick comes after
  // on_activate succeeded; from on_deactivate: errc::grain_timers_stopped).
  template <class T>
  result<std::string> schedule_once(T&& msg, std::chrono::nanoseconds delay,
                                    grain_timer_options o = {}) {
    return detail::grain_timer(host_, message(std::forward<T>(msg)),
                               detail::timer_spec::once(delay), std::move(o));
  }
  template <class T>
  result<std::string> schedule(T&& msg, std::chrono::nanoseconds interval,
                               grain_timer_options o = {}) {
    return detail::grain_timer(host_, message(std::forward<T>(msg)),
                               detail::timer_spec::every(interval), std::move(o));
  }
  template <class T>
  result<std::string> schedule_with_cron(T&& msg, std::string_view expression,
                                         std::string_view zone = "UTC",
                                         grain_timer_options o = {}) {
    return detail::grain_timer(host_, message(std::forward<T>(msg)),
                               detail::timer_spec::cron(expression, zone), std::move(o));
  }
  error cancel_schedule(std::string_view reference) {
    return detail::cancel_grain_timer(host_, reference);
  }

 private:
  const grain_identity& id_;
  actor_system& system_;
  const grain_settings& settings_;
  std::chrono::steady_clock::time_point deadline_;
  detail::grain_host_base* host_;  // null: no timers (outside an activation)
};

class grain {
 public:
  virtual ~grain() = default;
  // The first message for the identity (or the first after a deactivation) activates it. An
  // error (or an exception) refuses the activation: the caller gets the error, nothing stays
  // registered, and the next message tries again.
  virtual error on_activate(grain_props&) { return {}; }
  virtual void on_receive(grain_context& ctx) = 0;
  // Before the activation goes away (idle, or the system stopping). An error is reported (an
  // event, and in the error actor_system::stop returns), not retried.
  virtual error on_deactivate(grain_props&) { return {}; }
};

// tell_grain's options.
struct grain_tell_options {
  // Return once the message is in the mailbox, without waiting for the grain's no_err / err.
  // A failure the handler reports (err, unhandled, an exception) is then published as a dead
  // letter naming the grain.
  bool one_way = false;
  // How long an acknowledged tell waits for the grain. Default: 5 seconds.
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);
};

// ---- events (actor_system::events()) ----
struct grain_activated {
  grain_identity grain;
};
struct grain_deactivated {
  grain_identity grain;
  error reason;  // ok for an idle or shutdown deactivation whose on_deactivate succeeded
};
struct grain_activation_failed {
  grain_identity grain;
  error reason;
};

// Figures of one activation.
struct grain_stats {
  std::uint64_t processed = 0;  // messages handled by the activation's cell (0 when inactive)
  bool active = false;
};

}  // namespace akt
