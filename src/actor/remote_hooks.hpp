#pragma once
// The actor layer's seam to the remote module, which sits above it: the runtime calls these
// where a message, a system message or a lookup concerns another node. The remote module
// installs its factory before main (include/akt/remote/remote.hpp makes every program that
// includes it link the module); actor_system::start builds the extension when the config has
// remote settings.
//
// Contract: one extension per system, built by start() before any actor runs and destroyed
// with the system's core (proxies may outlive stop() and still call it: after shut_down it
// refuses everything). Every member may be called from any thread unless it says otherwise.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "akt/actor/pid.hpp"
#include "akt/actor/remote_config.hpp"
#include "akt/core/message.hpp"
#include "akt/core/result.hpp"

namespace akt {
class receive_context;
class actor_system;
namespace detail {

class actor_cell;
class system_core;

class remote_extension {
 public:
  virtual ~remote_extension() = default;

  // A message for a proxy (to->is_remote()): consumes env. On a refusal the extension
  // publishes the dead letter and completes env's reply route with the reason itself.
  virtual error deliver(actor_cell* to, receive_context* env) noexcept = 0;
  // A system message for a proxy (watch, unwatch, terminated_notice to a remote watcher).
  virtual void post_system(actor_cell* to, message& msg, actor_cell* from) noexcept = 0;
  // On the receiver's turn, before its handler: turns an envelope with flag_encoded into its
  // message. False when it could not (the envelope was dead-lettered and an ask answered).
  virtual bool decode(receive_context& env) noexcept = 0;
  // Best effort, for a dead letter: decodes a payload still in wire form in place (leaves it as
  // it is when it cannot).
  virtual void decode_for_dead_letter(message& m) noexcept = 0;
  // A local actor stopped (from its last turn): its uid leaves the export table.
  virtual void on_actor_stopped(actor_cell* c) noexcept = 0;
  // Whether a proxy's actor is believed alive (not terminated, its node not lost).
  virtual bool alive(const actor_cell* proxy) const noexcept = 0;
  // Whether a user message to a proxy would find room in the window to its node now.
  virtual bool can_send(const actor_cell* proxy) const noexcept = 0;

  virtual std::string address() const = 0;                        // akt://system@host:port
  virtual std::string address_of(const actor_cell* c) const = 0;  // of a local cell or a proxy
  virtual result<pid> lookup(std::string_view address, std::chrono::nanoseconds timeout) = 0;
  virtual result<pid> lookup(std::string_view node, std::string_view name,
                             std::chrono::nanoseconds timeout) = 0;
  virtual result<pid> spawn_on(std::string_view node, std::string_view kind, std::string_view name,
                               std::chrono::nanoseconds timeout) = 0;
  virtual result<void> stop_remote(actor_cell* proxy, std::chrono::nanoseconds timeout) = 0;
  virtual std::vector<peer_stats> peers() const = 0;

  // stop(), after the actors stopped: flush what is queued for peers until the deadline,
  // dead-letter the rest, close the connections, join the I/O threads. Problems are appended.
  virtual void shut_down(std::chrono::steady_clock::time_point deadline,
                         std::vector<std::string>& problems) noexcept = 0;
};

using remote_factory = result<std::unique_ptr<remote_extension>> (*)(system_core* core,
                                                                     actor_system& sys);
// Written once, before main, by the remote module (a release store read with acquire).
void install_remote_factory(remote_factory f) noexcept;
remote_factory installed_remote_factory() noexcept;

}  // namespace detail
}  // namespace akt
