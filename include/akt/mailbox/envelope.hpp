#pragma once
// envelope: the part of a message in flight that mailboxes see. The actor runtime's
// receive_context derives from it and adds the sender, the receiver, the reply route and the
// deadline. An envelope is an intrusive queue node: it is in at most one queue at a time (the
// pool, one mailbox, or in the hands of one dispatcher turn).

#include <atomic>
#include <cstdint>
#include <memory>

#include "akt/core/message.hpp"

namespace akt {

namespace detail {
class actor_cell;
class reply_route;
}  // namespace detail

// Base of every node of the intrusive queues in this module.
struct mpsc_node {
  // Written by the queue that holds the node (producer: release store of the link; consumer:
  // reset), read by that queue's consumer (acquire).
  std::atomic<mpsc_node*> next{nullptr};
};

class envelope : public mpsc_node {
 public:
  enum flag : std::uint32_t {
    flag_remote_origin = 1u << 0,  // arrived over remoting: a bounded mailbox must not block it
    flag_has_deadline = 1u << 1,   // an ask with a deadline (the deadline lives further out)
    flag_ask = 1u << 2,            // built by an ask: replies go to its reply slot, never by tell
    flag_grain_ack = 1u << 3,      // a grain's acknowledged tell (an ask answered by no_err/err)
    // The payload is still in its wire form (remote_origin): the receiver's turn decodes it
    // before the handler, so the I/O thread only frames and routes.
    flag_encoded = 1u << 4,
    // The message belongs to a trace: the receive_context holds its trace state (a pointer kept
    // outside the first cache line, read only under this flag). See src/actor/tracer.hpp.
    flag_traced = 1u << 5,
  };

  const akt::message& payload() const noexcept { return msg_; }
  akt::message& payload() noexcept { return msg_; }

  // Identity of the sending actor, or null when sent from outside any actor. Only compared,
  // never dereferenced by mailboxes (the fair mailbox keys its sub-queues by it).
  const void* sender_key() const noexcept { return sender_; }

  // Home shard in the envelope pool: stamped at allocation, never changed (reset keeps it).
  std::uint32_t home_shard() const noexcept { return home_shard_; }

  bool remote_origin() const noexcept { return (flags_ & flag_remote_origin) != 0; }

 protected:
  explicit envelope(std::uint32_t home_shard) noexcept : home_shard_(home_shard) {}
  ~envelope() = default;

  // Layout: everything a tell of a small payload touches (these fields and the first 16 bytes
  // of the payload) fits in the first 64 bytes, so such a message moves one cache line from the
  // sender's core to the receiver's and back, not two.
  detail::actor_cell* sender_ = nullptr;    // strong reference, managed by receive_context
  detail::actor_cell* receiver_ = nullptr;  // no reference: the receiver's mailbox holds us
  detail::reply_route* reply_ = nullptr;    // where the reply goes, while one is owed
  const std::uint32_t home_shard_;
  std::uint32_t flags_ = 0;
  akt::message msg_;
};

namespace detail {
// How envelopes go back to their pool. The pools hold the actor layer's envelopes
// (receive_context, which derives from envelope), so they live in the actor module, above this
// one: the actor layer installs its recycler here once, before any envelope exists (a static
// initializer of src/actor/receive_context.cpp), and mailboxes call it through recycle. Written
// once before main, read-only after: no synchronisation needed.
using envelope_recycler = void (*)(envelope*) noexcept;
extern envelope_recycler g_envelope_recycler;
void install_envelope_recycler(envelope_recycler r) noexcept;
}  // namespace detail

// Resets an envelope that no queue holds any more and returns it to its home pool shard (or
// frees it when the shard is full). Mailboxes call it for envelopes they are done with, one
// dequeue after handing them out; the dispatcher never does.
inline void recycle(envelope* e) noexcept { detail::g_envelope_recycler(e); }

// An envelope that nobody has enqueued yet, owned: destroying it recycles the envelope (and
// what it holds). Every send builds one (detail::make_envelope) and hands it to a mailbox with
// release() only once the enqueue takes it, so an exception between taking an envelope from
// the pool and delivering it (a message whose copy or move throws) loses nothing to the pool.
struct envelope_deleter {
  void operator()(envelope* e) const noexcept { recycle(e); }
};
using envelope_ptr = std::unique_ptr<envelope, envelope_deleter>;

}  // namespace akt
