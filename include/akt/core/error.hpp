#pragma once
// Runtime outcomes as values: errc names what happened, error carries it with an optional
// human-readable detail. Errors are cheap to create and copy on the common path (no detail);
// a detail string costs one allocation and is only attached on failure paths.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

namespace akt {

enum class errc : std::uint8_t {
  ok = 0,
  dead,                  // the target actor is stopped or stopping
  request_timeout,       // an ask was not answered before its deadline
  mailbox_full,          // a bounded mailbox refused the message
  system_shutting_down,  // the actor system is stopping or stopped
  system_not_started,    // the actor system was never started
  actor_already_exists,  // a live actor already holds that name
  invalid_actor_name,    // the name is empty, too long or has characters outside the allowed set
  actor_not_found,       // no live actor has that name
  unhandled,             // the handler declared the message unhandled
  no_reply,              // the handler returned without replying to an ask
  invalid_timeout,       // a timeout of zero or less
  init_failure,          // pre_start failed or threw; the actor was not started
  handler_failed,        // the handler threw an exception while processing the message
  blocking_on_worker,    // a blocking call was made from a dispatcher worker thread
  empty_pid,             // the pid does not refer to an actor
  unexpected_reply,      // the reply does not have the type the caller asked for
  mailbox_disposed,      // the mailbox was disposed; nothing more is accepted
  invalid_cron,          // a cron expression does not parse; the detail names the position
  invalid_time_zone,     // the time zone name is unknown
  invalid_argument,      // an argument is out of range (an empty router, a zero interval, ...)
  schedule_not_found,    // no active schedule has that reference
  request_canceled,      // an asynchronous request was cancelled before its reply
  retry_limit_exceeded,  // a supervised actor failed more often than its retry limit allows
  grain_kind_unknown,    // no grain kind of that name is registered on this system
  reentrancy_disabled,   // a grain made a non-blocking request without reentrancy enabled
  reentrancy_in_flight_limit,  // a grain already has its maximum of requests in flight
  grain_timers_stopped,        // a grain timer was asked for while the activation ends
  duplicate_type_name,         // another type already registered that stable type name
  // Remoting
  not_serializable,   // no serializer is registered for the message's type
  decode_failed,      // a received payload could not be decoded into its registered type
  type_id_collision,  // two stable type names hash to the same wire id
  invalid_address,    // an actor address does not parse (akt://system@host:port/path)
  remoting_disabled,  // the system was configured without remoting
  unreachable,        // not delivered: the peer could not be reached (safe to send again)
  connection_lost,    // the connection failed after the message was sent: it may have run
  node_lost,          // the peer node was declared lost (heartbeats, or down past the grace)
  window_full,        // the outbound window to the peer is full (back-pressure)
  protocol_error,     // a peer broke the wire protocol (bad frame, version, handshake)
  message_too_large,  // the encoded message exceeds the frame limit both nodes agreed on
  // Cluster
  cluster_registry_timeout,  // a coordination store call did not complete within its timeout
  cluster_unavailable,       // no coordination store could be reached (at start, within the wait)
  not_owner,               // refused before any handler ran: this node is fenced or no longer owns
                           // the grain (marked: the caller reads the registry again)
  cluster_compacted,       // a watch asked for revisions the store has compacted: read again
  lease_not_found,         // the lease expired or was revoked (a keep-alive or put on it fails)
  invalid_cluster_config,  // the cluster section of system_config is invalid; the detail names
                           // the field
  cluster_quorum_timeout,  // grain activations waited for cluster_config::min_peers members
                           // longer than the activation barrier's timeout
};

// Short stable name of the code, for logs and tests ("dead", "mailbox_full", ...).
std::string_view to_string(errc code) noexcept;

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc code) noexcept {
  return {static_cast<int>(code), error_category()};
}

namespace detail {
struct error_access;
}

class [[nodiscard]] error {
 public:
  error() noexcept = default;
  error(errc code) noexcept : code_(code) {}  // NOLINT: implicit by design, errors are values
  error(errc code, std::string detail)
      : code_(code), detail_(std::make_shared<const std::string>(std::move(detail))) {}

  errc code() const noexcept { return code_; }
  // The detail given at construction, or an empty view.
  std::string_view detail() const noexcept {
    return detail_ ? std::string_view(*detail_) : std::string_view();
  }
  // "code" or "code: detail".
  std::string message() const;
  explicit operator bool() const noexcept { return code_ != errc::ok; }

  friend bool operator==(const error& a, const error& b) noexcept { return a.code_ == b.code_; }
  friend bool operator==(const error& a, errc b) noexcept { return a.code_ == b; }

 private:
  friend struct detail::error_access;
  errc code_ = errc::ok;
  // Set on a refusal made before any handler ran (the message was not processed, so it is safe
  // to send again): the "refused" mark of goakt-grains.md, which remoting carries on the wire.
  // Internal: it never changes how an error compares or prints.
  bool refused_ = false;
  std::shared_ptr<const std::string> detail_;
};

namespace detail {
// akt's own access to the refusal mark; not for users.
struct error_access {
  static bool refused(const error& e) noexcept { return e.refused_; }
  static error mark_refused(error e) noexcept {
    e.refused_ = true;
    return e;
  }
};
}  // namespace detail

}  // namespace akt

template <>
struct std::is_error_code_enum<akt::errc> : std::true_type {};
