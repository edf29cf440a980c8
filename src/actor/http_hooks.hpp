#pragma once
// The actor layer's seam to the http module, which sits above it (as cluster_hooks.hpp is to the
// cluster module): the http module installs its factory before main (including
// <akt/http/http.hpp>, which <akt/akt.hpp> does, links it); actor_system::start builds the
// extension first of all when the config has an http section, so that /health answers and
// /ready says "not ready" while remoting starts and the node joins its cluster.
//
// Contract: one extension per system; start() builds it (the factory binds the port and starts
// the endpoint's threads) and calls nothing else on it before it returns. begin_stop() and
// close() are called at most once each, by stop() (or by a start() that failed), on the stopping
// thread, in that order. port() from any thread. Destroyed with the system's core, after
// close(); its threads call into the system only between the factory and close().

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "akt/core/result.hpp"

namespace akt {
class actor_system;
namespace detail {

class system_core;

class http_extension {
 public:
  virtual ~http_extension() = default;
  // The bound port (0 once closed).
  virtual std::uint16_t port() const noexcept = 0;
  // stop(), first: the node is shutting down; /ready answers 503 from now on, while the grains
  // deactivate and the node leaves its cluster.
  virtual void begin_stop() noexcept = 0;
  // stop(), after the node left its cluster and before the actors stop: closes the listener,
  // ends the connections and joins the endpoint's threads (a connection in the middle of a
  // request may hold it up to http_config::read_timeout).
  virtual void close(std::vector<std::string>& problems) noexcept = 0;
};

// Builds and starts the endpoint of a starting system; an error (the port cannot be bound)
// refuses the start.
using http_factory = result<std::unique_ptr<http_extension>> (*)(system_core* core,
                                                                 actor_system& sys);
// Written once, before main, by the http module (a release store read with acquire).
void install_http_factory(http_factory f) noexcept;
http_factory installed_http_factory() noexcept;

}  // namespace detail
}  // namespace akt
