#pragma once
// inbound_link: one connection a peer opened to this node, as this node reads it. The first
// frame is the peer's hello (answered with hello_ack, or hello_reject and a close); after it
// come the peer's frames: messages for local actors and grains, answers to this node's calls,
// control requests, terminations. The link routes them; it decodes no user payload (that is
// the receiver's turn), except answers, which have no turn to wait for.
//
// Contract: on_frame / on_closed run on the connection's I/O thread (one at a time). grant()
// runs on any thread (a receiver's turn, a stopping actor's drain): it adds the bytes and sends
// one credit frame back on this connection per grant_threshold bytes, so credits cost no
// system call per message. The link never blocks: a bounded mailbox that is full refuses the
// message (mailbox_full) instead of holding the connection.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "actor/delivery_fields.hpp"
#include "akt/actor/pid.hpp"
#include "akt/remote/serialization.hpp"
#include "remote/payload.hpp"
#include "remote/transport.hpp"

namespace akt::remote::detail {

class remote_node;
class association;
struct envelope_fields;

class inbound_link final : public connection::handler,
                           public credit_sink,
                           public std::enable_shared_from_this<inbound_link> {
 public:
  inbound_link(remote_node& node, std::shared_ptr<connection> c);

  void on_frame(connection& c, const frame_header& h, byte_span body) override;
  void on_closed(connection& c, const error& why) override;
  void grant(std::uint32_t bytes) noexcept override;

  void close(const error& why);
  // Whether the peer's hello came (any thread).
  bool greeted() const noexcept { return greeted_.load(std::memory_order_acquire); }

 private:
  void on_hello(connection& c, byte_span body);
  void on_envelope(connection& c, const frame_header& h, byte_span body);
  void on_control(connection& c, const frame_header& h, byte_span body);
  // The sender (a proxy, referenced), answer route, deadline and flags (remote_origin,
  // grain_ack) that the wire fields f of frame h give a delivery, to an actor or a grain alike.
  akt::detail::delivery_fields delivery_of(const frame_header& h, const envelope_fields& f);
  // A message for a grain of this node ("kind/name").
  void deliver_to_grain(const frame_header& h, const envelope_fields& f, byte_span payload,
                        std::uint32_t credit);
  pid target(std::uint64_t uid);
  // An ask refused before any handler ran, answered here (the refusal mark set).
  void refuse(const frame_header& h, const error& why);

  remote_node& node_;
  std::weak_ptr<connection> conn_;
  // I/O thread only (the connection's strand):
  // Writer: the connection's I/O thread, at the hello (release); readers: that thread and the
  // node's hello deadline (acquire).
  std::atomic<bool> greeted_{false};
  std::shared_ptr<association> origin_;             // the peer, as this node sends to it
  std::unordered_map<std::uint64_t, pid> targets_;  // uid -> local actor, a cache
  // Credits not yet sent back. Writers: grant() on any thread (fetch_add / exchange).
  std::atomic<std::uint64_t> ungranted_{0};
  std::uint64_t grant_threshold_ = 1;  // written before the first message, with the hello
};

}  // namespace akt::remote::detail
