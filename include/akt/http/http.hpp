#pragma once
// The HTTP endpoint of a node: off by default; on with system_config::http.
//
//   akt::system_config cfg;
//   cfg.http = akt::http_config{.port = 9464};   // bind_address 127.0.0.1 by default; port 0:
//   akt::actor_system sys("node-a", cfg);        // any free one, see sys.http_port()
//   sys.start();
//
// Routes (GET or HEAD; any other method on them is 405, any other path 404):
//   /metrics   the system's metrics registry in the Prometheus text format 0.0.4
//   /health    200 "ok" while the system runs (the process is alive and serving)
//   /ready     200 once the node joined its cluster (at once without a cluster section); 503 while
//              it starts or joins, while it is fenced and from the moment stop() begins
//   /api/...   JSON for the dashboard and for scripts: /api/node, /api/cluster, /api/peers,
//              /api/grains, /api/overview (all four in one answer), /api/history (the node's
//              totals sampled every http_config::history_interval, the last history_samples),
//              and /api/member?name=N[&view=history] (member N's /api/node or /api/history,
//              relayed from the endpoint its member record names)
//   /          the live dashboard: one self-contained page (no external request)
//
// The endpoint runs on threads of its own (one accepting, http_config::threads serving), never
// on a dispatcher worker; a request reads the same figures stats() and peers() read, so a node
// that nobody scrapes pays nothing but the idle threads. See docs/guide/08-observability-http.md.

#include "akt/actor/actor_system.hpp"
#include "akt/actor/http_config.hpp"

namespace akt::http {

// The dashboard page as served at / (HTML with its CSS and JavaScript inline).
const char* dashboard_html() noexcept;

namespace detail {
// Defined in the module; referenced below so that every program including this header links
// the module, whose static initialiser installs the http factory.
bool module_linked() noexcept;
inline const bool linked = module_linked();
}  // namespace detail

}  // namespace akt::http
