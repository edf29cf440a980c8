#pragma once
// The answers of the http module's routes that read the system (/ready and the /api JSON),
// apart from the server that sends them, so that they are tested and read on their own.
//
// Contract: any thread (the endpoint's); each call reads what stats(), peers(), the cluster's
// membership view and the grain directory already keep, under their own locks, and allocates
// its answer. Called only while the system's core lives (the endpoint closes before it goes).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/node_history.hpp"

namespace akt {
class actor_system;
namespace detail {
class system_core;
}
}  // namespace akt

namespace akt::http::detail {

struct api_context {
  actor_system& sys;
  akt::detail::system_core* core;
  std::chrono::steady_clock::time_point started;  // when the endpoint started (uptime)
  std::uint16_t http_port = 0;
  bool stopping = false;  // stop() began
};

// Whether the node should receive traffic, and why not: "starting" (start() has not finished),
// "joining" (a cluster node that has not joined yet), "fenced", "shutting down"; "ready" when it
// is.
struct readiness {
  bool ready = false;
  std::string_view reason;
};
readiness ready_state(const api_context& c);

std::string node_json(const api_context& c);      // /api/node
std::string cluster_json(const api_context& c);   // /api/cluster
std::string peers_json(const api_context& c);     // /api/peers
std::string grains_json(const api_context& c);    // /api/grains
std::string overview_json(const api_context& c);  // /api/overview: the four above in one

// The node's totals now, as /api/node reports them: one sample of /api/history.
history_sample sample_of(const api_context& c);

// Where /api/member?name=N finds member N's /api/node: this node itself, or the HTTP endpoint
// its member record names. status 200 when there is one; otherwise 404 with why (no cluster, no
// such member, a member without an endpoint). Only members' recorded endpoints are ever asked:
// the route reaches no address a request names.
struct member_target {
  int status = 200;
  std::string why;
  bool self = false;
  std::string host;
  std::uint16_t port = 0;
};
member_target member_endpoint(const api_context& c, std::string_view name);

}  // namespace akt::http::detail
