#pragma once
// association: this node's outbound side towards one peer node (docs/design.md, "Nodes and
// associations"). Two lanes (control, ordinary), each one TCP (or TLS) connection that this
// node opened and that carries this node's frames to the peer; the peer answers on its own
// association back to this node. Also: the calls (asks, lookups, spawns) waiting for the peer's
// answer, the proxies of the peer's actors, the watches of them, and the credit window.
//
// Contract
// - Any thread may send (send_envelope, send_frame); sends on one lane are written in the
//   order they were made (one mutex per association orders them with the lane's state): FIFO
//   per sender, and per association.
// - Lane states: idle -> connecting -> handshaking -> up; a closed lane goes back to idle and
//   reconnects after a back-off that doubles from reconnect_min to reconnect_max. While a lane
//   is not up its frames wait in its backlog (bounded: the window for the ordinary lane), in
//   order, and go out first once it is up.
// - The peer is lost when a lane missed its heartbeats, or stayed down for node_lost_after:
//   the backlog's tells are dead-lettered (unreachable: never sent), calls waiting for an
//   answer fail (connection_lost: they may have run), watchers of the peer's actors get
//   terminated with node_lost. Later sends are refused (unreachable) and try to connect again.
// - Membership may declare the peer lost at once (declare_lost): the same outcomes, without
//   waiting for node_lost_after; a connection that closes while the peer is lost sends nothing
//   more (its unsent tells are dead-lettered).
// - A peer that answers the handshake with another incarnation restarted: what belonged to
//   the old one is lost as above, and proxies of the old incarnation answer dead.
// - Credits: each user message sent on the ordinary lane counts its frame bytes in flight until
//   the peer grants them back (when the message left its receiver's mailbox); a send that finds
//   the window full is refused at once (window_full). Memory: window + one frame per lane.
// - Frame limit: a frame whose body is above the limit both nodes accept (max_body_) is
//   refused before it is queued (message_too_large; the caller dead-letters it), so the peer
//   never closes the connection on it; frames queued before the handshake are judged again by
//   the peer's limit when it is known (tells dead-lettered, asks failed, the rest sent).
// - Callbacks from connections run on I/O threads and never block.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "actor/tracer.hpp"
#include "akt/actor/pid.hpp"
#include "akt/actor/remote_config.hpp"
#include "akt/core/result.hpp"
#include "akt/metrics/registry.hpp"
#include "akt/remote/serialization.hpp"
#include "remote/transport.hpp"
#include "remote/wire.hpp"

namespace akt {
class receive_context;
namespace detail {
class reply_route;
}
}  // namespace akt

namespace akt::remote::detail {

class peer_services;
class remote_cell;

// Bounds the control lane's backlog while it is down (lookups, watches, answers): past it,
// further control frames are refused with window_full.
inline constexpr std::size_t k_control_backlog = 1u << 20;

class association : public std::enable_shared_from_this<association> {
 public:
  association(peer_services& node, std::string host, std::uint16_t port);
  ~association();

  const std::string& host() const noexcept { return host_; }
  std::uint16_t port() const noexcept { return port_; }
  const std::string& key() const noexcept { return key_; }  // host:port

  // Starts connecting the lanes that are idle (a no-op when they are up or on their way).
  void ensure_connected();
  // Waits (blocking, outside the dispatcher) until the ordinary and control lanes are up, or
  // the timeout: ok, or unreachable / the handshake's refusal.
  error wait_until_up(std::chrono::nanoseconds timeout);

  // A user message for the proxy `to`: encodes env (its payload, sender, ask correlation and
  // time left) on the ordinary lane. On success env's reply route (an ask) belongs to this
  // association until the peer answers; env itself is left to the caller to recycle. On a
  // refusal nothing was sent and env is untouched.
  error send_envelope(remote_cell& to, receive_context& env);
  // A message for the peer's grain `identity` (kind/name): an ask when route is set (deadline
  // on the timer service clock, 0: none; acknowledged: a tell that waits for the grain's ack),
  // else one-way. On success route belongs to this association until the peer answers.
  error send_to_grain(std::string_view identity, const message& msg,
                      akt::detail::reply_route* route, std::int64_t deadline_ns, bool acknowledged);
  // A control request with an answer: route completes with message(control_reply) or an error.
  error call_control(const google::protobuf::MessageLite& request, akt::detail::reply_route* route,
                     std::int64_t deadline_ns);
  // A frame of the node's own (control without answer, replies, terminated). fill(byte_writer&)
  // appends one whole frame and returns ok, or an error after which nothing is sent. `urgent`:
  // the answer to an ask whose caller is blocked (connection::send).
  template <class F>
  error send_frame(lane l, F&& fill, bool urgent = false);

  // The answer to call `id` (a reply, an error reply, a control reply), from an inbound link;
  // answered false: a local failure (the connection went), which is no round trip.
  void complete_call(std::uint64_t id, result<message> value, bool answered = true);
  // Calls past their deadline (the node's sweep): completed with request_timeout.
  void expire_calls(std::int64_t now_ns);
  // Whether the node may forget this peer (the node's sweep): lost for at least `after`, no
  // lane connected, connecting or holding a backlog, no watch and no call waiting. Drops the
  // cached proxies nobody else holds (each holds the association, so an unused association is
  // held only by the node's table afterwards); a proxy a user keeps keeps it. Any thread.
  bool forgettable(std::chrono::steady_clock::time_point now, std::chrono::milliseconds after);

  // The proxy of the peer's actor `uid` (one per uid while this association lives).
  pid proxy(std::uint64_t uid, std::string_view path);
  // The proxy of the peer's grain `identity` (kind/name), cached like the actors' proxies; with
  // claim_token (a cluster claim's revision), sends through it carry that token, and the cache
  // keeps the proxy of the latest token it was asked for.
  pid grain_proxy(std::string_view identity, std::int64_t claim_token = 0);
  // The peer's incarnation as the last handshake reported it (0 before the first).
  std::uint64_t incarnation() const noexcept {
    return incarnation_.load(std::memory_order_acquire);
  }
  std::string system_name() const;  // the peer's system name ("" before the handshake)
  // The peer said (in an inbound handshake) that it runs as `incarnation` now.
  void observe_incarnation(std::uint64_t incarnation);

  // Membership says the peer left (remote_node::declare_lost): it is lost now, as if it had
  // stayed unreachable for node_lost_after (calls written fail connection_lost, the others
  // unreachable, queued tells are dead-lettered, watchers get terminated with node_lost), and
  // connections still up to it are closed. Sends are refused (unreachable) until a handshake
  // with the node succeeds again. Any thread; not under mutex_.
  void declare_lost(const error& why);

  // Watches of the peer's actors by local actors, for the node-lost notice.
  void add_watch(const pid& watcher, const pid& target);
  void remove_watch(const pid& watcher, const pid& target);
  // The peer reported that its actor `uid` stopped: terminated to that local watcher.
  void on_terminated(std::uint64_t uid, std::uint64_t watcher_uid, const error& reason);

  // Whether a user message would find room: not lost, and the window not full (a hint: another
  // sender may take the room first).
  bool window_open() const noexcept {
    return !lost_hint_.load(std::memory_order_relaxed) &&
           in_flight_.load(std::memory_order_relaxed) <
               static_cast<std::int64_t>(window_.load(std::memory_order_relaxed));
  }
  // A credit frame from the peer: bytes of ours it took from its mailboxes.
  void on_credit(lane l, std::uint64_t bytes) noexcept;
  // Figures of messages that came from this peer (inbound links count them here).
  void count_in(std::uint64_t frames, std::uint64_t bytes) noexcept {
    messages_in_.fetch_add(frames, std::memory_order_relaxed);
    bytes_in_.fetch_add(bytes, std::memory_order_relaxed);
  }
  peer_stats stats() const;

  // stop(): waits until what was sent is written (or the deadline), then closes; what is left
  // is dead-lettered, calls fail with system_shutting_down.
  void shut_down(std::chrono::steady_clock::time_point deadline);
  // An association made after its node began to shut down: closed from birth (no lane
  // connects, sends are refused with system_shutting_down, no proxy is cached), so it holds no
  // cell that would keep the system's core alive.
  void close_unused() noexcept;

  // Called by the lanes' handlers (I/O threads).
  class lane_handler;
  // max_frame_bytes: the largest body the peer accepts (its hello_ack; 0: not said).
  void on_lane_up(lane l, std::shared_ptr<connection> c, std::uint64_t incarnation,
                  std::string system, std::uint64_t window, std::uint32_t max_frame_bytes);
  void on_lane_closed(lane l, connection* c, const error& why);
  void on_lane_refused(lane l, const error& why);

 private:
  struct pending_call {
    akt::detail::reply_route* route = nullptr;
    std::int64_t deadline_ns = 0;  // timer service clock; 0: none
    bool control = false;
    // Written to a connection when registered (else it waited in a backlog): a restart of the
    // peer fails only these; the others go to the new incarnation.
    bool sent = false;
    // An ask's registration (steady clock ns) while metrics are on, for its round trip
    // (akt_remote_ask_seconds); 0: not timed (metrics off, or a control call).
    std::int64_t asked_ns = 0;
    // A traced call's client span (owned; finished when the call leaves the table); null when
    // the call is not traced.
    akt::detail::open_span* span = nullptr;
  };
  enum class lane_state : std::uint8_t { idle, connecting, up, backoff };
  struct lane_slot {
    lane_state state = lane_state::idle;
    std::shared_ptr<connection> conn;  // while up
    std::vector<unsigned char> backlog;
    std::chrono::milliseconds backoff{0};
  };

  void connect_lane(lane l);  // with mutex_ held; state idle -> connecting
  // Connects the lanes that are idle (mutex_ held): a send to a lost peer tries again.
  void connect_idle_locked();
  void schedule_reconnect(lane l);
  // Declares the peer lost (reason node_lost, unreachable or dead for a new incarnation).
  void lose_peer(const error& why);
  void check_lost_deadline();
  std::uint64_t register_call(akt::detail::reply_route* route, std::int64_t deadline_ns,
                              bool control, bool sent, akt::detail::open_span* span = nullptr);
  // Removes call `id`: its route (null when it is gone), its asked_ns in *asked_ns; failed: how
  // the call's client span (if traced) ends.
  akt::detail::reply_route* take_call(std::uint64_t id, bool failed = false,
                                      std::int64_t* asked_ns = nullptr);
  // Appends a frame to lane l (mutex_ held): to its connection when up, else its backlog. A
  // frame whose body is above max_body_ is taken back and refused (message_too_large): the
  // peer would close the connection on it, and every frame behind it with it.
  template <class F>
  error append_locked(lane l, F&& fill, bool urgent = false);
  // The common part of the two sends above (f: everything but the type id and deadline).
  error send_user(envelope_fields f, const message& msg, akt::detail::reply_route* route,
                  std::int64_t deadline, const remote_cell* to,
                  akt::detail::open_span* span = nullptr);
  // A client span for a traced message to `target` (null when ctx is not a trace or tracing is
  // off here); writes the context the peer gets into f.
  error send_user_traced(envelope_fields& f, const message& msg, akt::detail::reply_route* route,
                         std::int64_t deadline, const remote_cell* to,
                         akt::detail::open_span*& span);
  akt::detail::open_span* open_client_span(const span_context& ctx, bool ask,
                                           std::string_view target, envelope_fields& f);
  // The refusal of a frame of `body` bytes (the cold path of append_locked).
  error too_large(std::size_t body) const;
  // Moves the frames of `backlog` whose body is above `limit` to `out` (mutex_ held).
  static void take_oversized(std::vector<unsigned char>& backlog, std::uint32_t limit,
                             std::vector<unsigned char>& out);
  // The frames of `bytes` worth sending again on a new connection (messages, answers, control,
  // terminations; not a connection's own handshake, credits and pings).
  static std::vector<unsigned char> resendable(const std::vector<unsigned char>& bytes);
  // Fails the calls whose ask or control frames are in `bytes` (a write that may or may not have
  // arrived) with `why`, so their callers hear of it now rather than at their deadline.
  void fail_calls_in(const std::vector<unsigned char>& bytes, const error& why);
  // Dead letters for the tells in a backlog that will never be sent.
  void dead_letter_backlog(const std::vector<unsigned char>& bytes, const error& why);

  peer_services& node_;  // the node, through the narrow interface it gives associations
  const std::string host_;
  const std::uint16_t port_;
  const std::string key_;

  mutable std::mutex mutex_;  // lanes_, system_, lost_, down_since_, watches_, proxies_
  lane_slot lanes_[k_lanes];
  std::string system_;
  bool lost_ = false;
  std::chrono::steady_clock::time_point lost_at_{};  // when lost_ was last set
  std::atomic<bool> lost_hint_{false};  // lost_, for window_open (written with it, relaxed)
  bool closing_ = false;
  // The largest frame body both nodes accept: this node's max_frame_bytes, lowered to the
  // peer's at its handshake. Before the first handshake frames are held to this node's own
  // limit and judged again by the peer's when the backlog goes out (on_lane_up).
  std::uint32_t max_body_;
  bool announced_up_ = false;  // peer_connected published, peer_disconnected not yet
  std::chrono::steady_clock::time_point down_since_{};  // a lane went down; epoch: all up
  std::atomic<std::uint64_t> incarnation_{0};       // writer: handshakes under mutex_; readers: any
  std::unordered_map<std::uint64_t, pid> proxies_;  // uid -> proxy
  std::unordered_map<std::string, pid> grain_proxies_;  // kind/name -> proxy; guarded by mutex_
  struct watch {
    pid watcher;  // local
    pid target;   // proxy
  };
  std::vector<watch> watches_;

  using call_map = std::unordered_map<std::uint64_t, pending_call>;
  // Bounds the spare entries kept for reuse (below): at most this many map nodes (about 40
  // bytes each) per peer beyond the calls in flight.
  static constexpr std::size_t k_spare_calls = 64;

  std::mutex calls_mutex_;  // calls_, spare_calls_, next_call_
  call_map calls_;
  // Entries of answered calls, reused by the next calls: a steady stream of asks then allocates
  // nothing for its entries (capacity reserved up front, so keeping one allocates nothing).
  std::vector<call_map::node_type> spare_calls_;
  std::uint64_t next_call_ = 1;

  // Ordinary-lane bytes sent and not yet granted back. Writers: senders (+, under mutex_), the
  // I/O thread (- on credit, relaxed: a sender that reads a stale value is refused one window
  // early or late by one message at most, which the bound tolerates).
  std::atomic<std::int64_t> in_flight_{0};
  // The window: the config's, lowered to the peer's at its handshake. Writer: on_lane_up (under
  // mutex_); readers: senders (relaxed: a stale value only moves the bound by one handshake).
  std::atomic<std::uint64_t> window_{0};
  const error window_full_;  // the refusal of a send into a full window

  std::atomic<std::uint64_t> messages_out_{0}, refused_{0}, reconnects_{0};
  std::atomic<std::uint64_t> messages_in_{0}, bytes_in_{0};
  std::atomic<std::uint64_t> frames_out_closed_{0}, bytes_out_closed_{0}, writes_closed_{0};
  // This peer's series of akt_remote_ask_seconds (empty while metrics are off): set by the
  // constructor, then observed from the I/O threads that complete asks (lock-free).
  const akt::metrics::histogram ask_seconds_;
};

template <class F>
error association::append_locked(lane l, F&& fill, bool urgent) {
  lane_slot& s = lanes_[static_cast<int>(l)];
  const std::uint32_t max_body = max_body_;
  // One compare on the length just written: nothing more on the way of a frame that fits.
  auto oversized = [max_body](std::size_t frame) { return frame > k_header_bytes + max_body; };
  if (s.state == lane_state::up && s.conn) {
    error filled;
    error e = s.conn->send(
        [&](std::vector<unsigned char>& out) {
          const std::size_t before = out.size();
          byte_writer w(out);
          filled = fill(w);
          if (!filled && oversized(out.size() - before)) {
            filled = too_large(out.size() - before - k_header_bytes);
          }
          if (filled) out.resize(before);
        },
        urgent);
    if (filled) return filled;
    if (e != errc::connection_lost) return e;
    // Closed under us: the lane's close callback is on its way; keep the frame, in order.
  }
  if (l == lane::control && s.backlog.size() >= k_control_backlog) {
    return error(errc::window_full,
                 "the control lane to " + key_ + " is down and its backlog full");
  }
  const std::size_t before = s.backlog.size();
  byte_writer w(s.backlog);
  error filled = fill(w);
  if (!filled && oversized(s.backlog.size() - before)) {
    filled = too_large(s.backlog.size() - before - k_header_bytes);
  }
  if (filled) {
    s.backlog.resize(before);
    return filled;
  }
  connect_idle_locked();  // both lanes: a peer is connected when both are up
  return {};
}

template <class F>
error association::send_frame(lane l, F&& fill, bool urgent) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closing_) return errc::system_shutting_down;
  if (lost_) {
    connect_idle_locked();
    return errc::unreachable;
  }
  return append_locked(l, std::forward<F>(fill), urgent);
}

}  // namespace akt::remote::detail
