#pragma once
// Remoting: actors and grains on other nodes, through system_config::remote.
//
//   akt::system_config cfg;
//   cfg.remote = akt::remote_config{};               // 127.0.0.1, any free port
//   akt::actor_system sys("orders", cfg);
//   sys.start();
//   auto p = sys.lookup("akt://billing@10.0.0.7:7400/user/ledger");   // a round trip
//   (void)p->tell(entry{...});                      // entry registered with a serializer
//
// Messages that cross nodes need a serializer (akt/remote/serialization.hpp): one line for a
// protobuf message (akt::remote::register_protobuf<T>()), an encode/decode pair for a plain
// struct. Delivery is at most once, in order per sender and receiver pair; errors come back as
// the same errc values a local send returns, plus the transport's own (unreachable: not sent;
// connection_lost: sent, may have run; window_full: the peer's receivers are behind).
// docs/guide/06-remoting.md walks through it.
//
// Including this header makes the program link the remote module (its factory registers
// itself before main); <akt/akt.hpp> includes it.

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "akt/actor/actor_system.hpp"
#include "akt/actor/remote_config.hpp"
#include "akt/core/error.hpp"
#include "akt/core/result.hpp"
#include "akt/grain/grain.hpp"
#include "akt/grain/grains.hpp"
#include "akt/remote/serialization.hpp"

namespace akt {

// Published on the event stream when a peer node's connections are up, and when it is lost.
struct peer_connected {
  std::string address;  // akt://system@host:port
  std::uint64_t incarnation = 0;
};
struct peer_disconnected {
  std::string address;
  error reason;  // node_lost (heartbeats, or unreachable past node_lost_after), dead (restarted)
};

namespace remote {

namespace detail {
// Defined in the module; referenced below so that every program including this header links
// the module, whose static initialiser installs the remoting factory.
bool module_linked() noexcept;
inline const bool linked = module_linked();

result<message> ask_grain_on(actor_system& sys, std::string_view node, const grain_identity& id,
                             message msg, std::chrono::nanoseconds timeout);
error tell_grain_on(actor_system& sys, std::string_view node, const grain_identity& id, message msg,
                    const grain_tell_options& opts);
}  // namespace detail

// A node is named as actor_system::address() gives it, "akt://system@host:port", or as
// "host:port", everywhere below (and in actor_system::spawn_on and lookup(node, name)). With the
// akt:// form, lookup and spawn_on also check the node's system name; the grain calls do not.

// Asks the grain `id` hosted on node `node` (activated there on first message, as
// locally). The grain's own errors come back as they would locally; a refusal the node made
// before any handler ran (it is shutting down, the kind is unknown there) carries the mark
// the cluster resends on. Blocking: not from a dispatcher worker.
template <class R = message, class M>
result<R> ask_grain_on(actor_system& sys, std::string_view node, const grain_identity& id, M&& msg,
                       std::chrono::nanoseconds timeout) {
  return akt::detail::reply_as<R>(
      detail::ask_grain_on(sys, node, id, message(std::forward<M>(msg)), timeout));
}

// Tells the grain `id` on node `node`: acknowledged (waits for the grain's ack, like
// tell_grain) or one-way (opts.one_way: returns once the message is queued for the node).
template <class M>
error tell_grain_on(actor_system& sys, std::string_view node, const grain_identity& id, M&& msg,
                    const grain_tell_options& opts = {}) {
  return detail::tell_grain_on(sys, node, id, message(std::forward<M>(msg)), opts);
}

// A pid inside a message: call these from a message's encode / decode functions (the ones given
// to register_message) to write and read a pid field. On the receiving node the pid is usable
// as it was on the sending one: a local actor of that node, or a proxy of the actor on its own
// node (a third node's pid travels as well). A pid can also be sent as a message by itself
// (its serializer "akt.pid" is built in). They work while akt runs the serializer for a send
// to another node or for a message from one; elsewhere encode_pid refuses with
// errc::invalid_argument and decode_pid too.
error encode_pid(byte_writer& w, const pid& p);
result<pid> decode_pid(byte_reader& r);

// Routes grain identities to the node that hosts them: owner(id) names a node (either form
// above), or returns "" (or this node's own address, either form) for identities this node
// hosts. After it,
// ask_grain, tell_grain and grain_ref sends to an identity owned elsewhere go to that node, as
// ask_grain_on / tell_grain_on would. This is the seam the cluster fills from its registry; a
// static owner function (by name prefix, by hash of the name over a fixed list of nodes) is
// the cluster-less use. owner must be cheap and may be called from any thread. Once per system;
// errors: remoting_disabled, invalid_argument (a second placement, or an empty function).
error set_grain_placement(actor_system& sys,
                          std::function<std::string(const grain_identity&)> owner);

}  // namespace remote
}  // namespace akt
