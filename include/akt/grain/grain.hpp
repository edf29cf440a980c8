#pragma once
// Grains: virtual actors addressed by identity (kind/name), activated by the first message sent
// to them and deactivated when idle (reference: shared/reference/goakt-grains.md).
//
//   struct account : akt::grain {
//     long balance = 0;
//     akt::error on_activate(akt::grain_props& p) override { /* load state */ return {}; }
//     void on_receive(akt::grain_context& ctx) override {
//       if (auto* d = ctx.get_if<deposit>()) { balance += d->amount; ctx.no_err(); }
//       else if (ctx.is<get_balance>()) ctx.response(balance);
//       else ctx.unhandled();
//     }
//   };
//   auto id = akt::grain_of<account>(sys, "acct-42");            // result<grain_identity>
//   akt::tell_grain(sys, *id, deposit{10});                      // waits for no_err / err
//   auto b = akt::ask_grain<long>(sys, *id, get_balance{}, 1s);  // result<long>
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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "akt/core/error.hpp"

namespace akt {

class actor_system;
class grain_context;

// kind/name. The kind names a grain type (derived from the C++ type by grain_of, or registered
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

 private:
  std::map<std::string, std::any, std::less<>> values_;
};

// Options of a grain kind. Each field left unset takes the kind's declared default
// (with_grain_default_options), then the framework's default.
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
};

// Settled options (every field decided), as an activation sees them.
struct grain_settings {
  std::size_t mailbox_capacity = 0;  // 0 = unbounded
  std::chrono::nanoseconds deactivate_after = std::chrono::minutes(2);
  std::chrono::nanoseconds activation_timeout = std::chrono::seconds(5);
  unsigned activation_attempts = 1;
  std::shared_ptr<const grain_dependencies> dependencies;
};

// What on_activate and on_deactivate receive.
class grain_props {
 public:
  grain_props(const grain_identity& id, actor_system& sys, const grain_settings& settings,
              std::chrono::steady_clock::time_point deadline) noexcept
      : id_(id), system_(sys), settings_(settings), deadline_(deadline) {}

  const grain_identity& identity() const noexcept { return id_; }
  actor_system& system() const noexcept { return system_; }
  const grain_settings& settings() const noexcept { return settings_; }
  // When the caller stops waiting for this activation (on_activate), or time_point::max().
  std::chrono::steady_clock::time_point deadline() const noexcept { return deadline_; }
  template <class T>
  std::shared_ptr<T> dependency(std::string_view name) const {
    return settings_.dependencies ? settings_.dependencies->get<T>(name) : nullptr;
  }

 private:
  const grain_identity& id_;
  actor_system& system_;
  const grain_settings& settings_;
  std::chrono::steady_clock::time_point deadline_;
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
