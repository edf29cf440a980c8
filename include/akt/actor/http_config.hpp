#pragma once
// HTTP endpoint settings (system_config::http). Plain data in the actor layer because the system
// carries them; the `http` module (include/akt/http/http.hpp) implements the endpoint. A system
// without an http section opens no socket and starts no thread for it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace akt {

struct http_config {
  // Address to bind. The default answers only on this machine: the routes show the node's
  // internals and take no credentials, so exposing them is the operator's explicit choice
  // ("0.0.0.0", or a private interface).
  std::string bind_address = "127.0.0.1";
  // 0: any free port (actor_system::http_port() reports the bound one).
  std::uint16_t port = 0;
  // Largest request body accepted; a request announcing more is answered 413 without its body
  // being read. Every route is a GET: a body is never needed, so the limit is small. (The request
  // line is limited to 8 KiB (414) and the headers to 8 KiB each (400) by the server itself.)
  std::size_t max_request_bytes = 4096;
  // How long the server waits for a client's next bytes of a request, and for a client to take
  // a response's bytes, before it closes the connection: what a slow (or stalled) client can
  // hold one of the server's threads for. Whole seconds are used (rounded up, at least 1 s)
  // except below one second.
  std::chrono::milliseconds read_timeout{std::chrono::seconds(5)};
  std::chrono::milliseconds write_timeout{std::chrono::seconds(5)};
  // How long a connection may stay open before its request begins (whole seconds, at least 1).
  // Each connection serves one request and closes: no idle connection holds a serving thread.
  std::chrono::seconds keep_alive_timeout{2};
  // Threads serving connections (one connection at a time each), besides the one that accepts.
  // They are the endpoint's own: never a dispatcher worker. At least 1.
  unsigned threads = 4;
  // The node's recent history, served at /api/history so that a dashboard opened now shows the
  // last minutes: a sample of its totals (messages processed, dead letters, active grains, live
  // actors) every history_interval, the last history_samples of them (the default: five
  // minutes). One thread of the endpoint takes them; 0 samples keeps none and starts no thread.
  std::chrono::milliseconds history_interval{std::chrono::seconds(1)};
  std::size_t history_samples = 300;
};

}  // namespace akt
