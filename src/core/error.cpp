#include "akt/core/error.hpp"

namespace akt {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::ok:
      return "ok";
    case errc::dead:
      return "dead";
    case errc::request_timeout:
      return "request_timeout";
    case errc::mailbox_full:
      return "mailbox_full";
    case errc::system_shutting_down:
      return "system_shutting_down";
    case errc::system_not_started:
      return "system_not_started";
    case errc::actor_already_exists:
      return "actor_already_exists";
    case errc::invalid_actor_name:
      return "invalid_actor_name";
    case errc::actor_not_found:
      return "actor_not_found";
    case errc::unhandled:
      return "unhandled";
    case errc::no_reply:
      return "no_reply";
    case errc::invalid_timeout:
      return "invalid_timeout";
    case errc::init_failure:
      return "init_failure";
    case errc::handler_failed:
      return "handler_failed";
    case errc::blocking_on_worker:
      return "blocking_on_worker";
    case errc::empty_pid:
      return "empty_pid";
    case errc::unexpected_reply:
      return "unexpected_reply";
    case errc::mailbox_disposed:
      return "mailbox_disposed";
    case errc::invalid_cron:
      return "invalid_cron";
    case errc::invalid_time_zone:
      return "invalid_time_zone";
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::schedule_not_found:
      return "schedule_not_found";
    case errc::request_canceled:
      return "request_canceled";
    case errc::retry_limit_exceeded:
      return "retry_limit_exceeded";
    case errc::grain_kind_unknown:
      return "grain_kind_unknown";
    case errc::reentrancy_disabled:
      return "reentrancy_disabled";
    case errc::reentrancy_in_flight_limit:
      return "reentrancy_in_flight_limit";
    case errc::grain_timers_stopped:
      return "grain_timers_stopped";
    case errc::duplicate_type_name:
      return "duplicate_type_name";
    case errc::not_serializable:
      return "not_serializable";
    case errc::decode_failed:
      return "decode_failed";
    case errc::type_id_collision:
      return "type_id_collision";
    case errc::invalid_address:
      return "invalid_address";
    case errc::remoting_disabled:
      return "remoting_disabled";
    case errc::unreachable:
      return "unreachable";
    case errc::connection_lost:
      return "connection_lost";
    case errc::node_lost:
      return "node_lost";
    case errc::window_full:
      return "window_full";
    case errc::protocol_error:
      return "protocol_error";
    case errc::message_too_large:
      return "message_too_large";
    case errc::cluster_registry_timeout:
      return "cluster_registry_timeout";
    case errc::cluster_unavailable:
      return "cluster_unavailable";
    case errc::not_owner:
      return "not_owner";
    case errc::cluster_compacted:
      return "cluster_compacted";
    case errc::lease_not_found:
      return "lease_not_found";
    case errc::invalid_cluster_config:
      return "invalid_cluster_config";
    case errc::cluster_quorum_timeout:
      return "cluster_quorum_timeout";
  }
  return "unknown";
}

std::string error::message() const {
  std::string out(to_string(code_));
  if (detail_ && !detail_->empty()) {
    out += ": ";
    out += *detail_;
  }
  return out;
}

namespace {
class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "akt"; }
  std::string message(int code) const override {
    return std::string(to_string(static_cast<errc>(code)));
  }
};
}  // namespace

const std::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace akt
