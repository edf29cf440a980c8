// The outbound side towards one peer (association.hpp): lanes, handshake, calls, proxies,
// watches and credits.

#include "remote/association.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "actor/cell_extras.hpp"
#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "remote/peer_services.hpp"
#include "remote/remote_cell.hpp"
#include "remote/wire.hpp"
#include "remote/wire.pb.h"

namespace akt::remote::detail {

using akt::detail::context_access;

namespace {
// Proxies kept per peer before the ones nobody else holds are dropped (a proxy is only a cache
// entry then: the next message from that uid makes a new one).
constexpr std::size_t k_proxy_cache = 4096;
}  // namespace

// ---------------------------------------------------------------------------------------------
// The handler of one outbound lane: the handshake answer, credits, and the close.

class association::lane_handler final : public connection::handler {
 public:
  lane_handler(std::weak_ptr<association> a, lane l) : assoc_(std::move(a)), lane_(l) {}

  void on_frame(connection& c, const frame_header& h, byte_span body) override {
    auto a = assoc_.lock();
    if (!a) return;
    switch (h.type) {
      case frame_type::hello_ack: {
        akt::remote::hello_ack ack;
        if (!decode_proto(body, ack).empty()) {
          c.close(error(errc::protocol_error, "malformed hello_ack"));
          return;
        }
        up_ = true;
        a->on_lane_up(lane_, c.shared_from_this(), ack.incarnation(), ack.system(),
                      ack.window_bytes(), ack.max_frame_bytes());
        return;
      }
      case frame_type::hello_reject: {
        akt::remote::hello_reject rej;
        std::string why = decode_proto(body, rej).empty() ? rej.reason() : "malformed reject";
        refused_ = true;
        a->on_lane_refused(lane_, error(errc::protocol_error, "the peer refused: " + why));
        c.close(error(errc::protocol_error, "handshake refused: " + why));
        return;
      }
      case frame_type::credit: {
        lane granted;
        std::uint64_t bytes = 0;
        if (decode_credit(body, granted, bytes).empty()) a->on_credit(granted, bytes);
        return;
      }
      default:
        c.close(error(errc::protocol_error, "unexpected frame on an outbound connection"));
    }
  }
  void on_closed(connection& c, const error& why) override {
    if (auto a = assoc_.lock(); a && !refused_) a->on_lane_closed(lane_, &c, why);
  }

 private:
  std::weak_ptr<association> assoc_;
  const lane lane_;
  bool up_ = false;  // I/O thread of this connection only
  bool refused_ = false;
};

// ---------------------------------------------------------------------------------------------

association::association(peer_services& node, std::string host, std::uint16_t port)
    : node_(node),
      host_(std::move(host)),
      port_(port),
      key_(host_ + ":" + std::to_string(port)),
      max_body_(node.config().max_frame_bytes),
      window_(node.config().window_bytes),
      window_full_(errc::window_full,
                   key_ + ": the window is full (the receivers there are behind)") {
  spare_calls_.reserve(k_spare_calls);
}

association::~association() = default;

std::string association::system_name() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return system_;
}

void association::ensure_connected() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closing_) return;
  for (std::size_t i = 0; i < k_lanes; ++i) {
    if (lanes_[i].state == lane_state::idle) connect_lane(static_cast<lane>(i));
  }
}

void association::connect_idle_locked() {
  for (std::size_t i = 0; i < k_lanes; ++i) {
    if (lanes_[i].state == lane_state::idle) connect_lane(static_cast<lane>(i));
  }
}

error association::wait_until_up(std::chrono::nanoseconds timeout) {
  ensure_connected();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closing_) return errc::system_shutting_down;
      if (lanes_[0].state == lane_state::up && lanes_[1].state == lane_state::up) return {};
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return error(errc::unreachable, "no connection to " + key_ + " within the timeout");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

void association::connect_lane(lane l) {
  lane_slot& s = lanes_[static_cast<int>(l)];
  s.state = lane_state::connecting;
  std::weak_ptr<association> self = weak_from_this();
  const auto timeout = node_.config().connect_timeout;
  async_connect(node_.io(), host_, port_, node_.tls(), node_.limits(), timeout,
                [self, l, timeout, &node = node_](result<std::shared_ptr<connection>> r) {
                  auto a = self.lock();
                  if (!a) {
                    if (r) (*r)->close(error(errc::system_shutting_down, "association gone"));
                    return;
                  }
                  if (!r) {
                    a->on_lane_closed(l, nullptr, r.error());
                    return;
                  }
                  std::shared_ptr<connection> c = std::move(*r);
                  c->start(std::make_shared<lane_handler>(self, l));
                  const remote_config& cfg = node.config();
                  c->set_heartbeat(cfg.heartbeat_interval, cfg.heartbeat_misses);
                  akt::remote::hello h;
                  h.set_min_version(k_wire_version);
                  h.set_max_version(k_wire_version);
                  h.set_system(node.system_name());
                  h.set_incarnation(node.incarnation());
                  h.set_host(node.advertised_host());
                  h.set_port(node.advertised_port());
                  h.set_lane(static_cast<std::uint32_t>(l));
                  h.set_max_frame_bytes(cfg.max_frame_bytes);
                  h.set_window_bytes(cfg.window_bytes);
                  (void)c->send([&](std::vector<unsigned char>& out) {
                    byte_writer w(out);
                    (void)encode_proto_frame(w, frame_type::hello, l, 0, h);
                  });
                  // No answer in time: the lane closes and reconnects like any failed attempt.
                  std::weak_ptr<connection> weak = c;
                  node.after(timeout, [weak, a] {
                    if (auto conn = weak.lock()) {
                      std::lock_guard<std::mutex> lock(a->mutex_);
                      const bool answered =
                          std::any_of(std::begin(a->lanes_), std::end(a->lanes_),
                                      [&](const lane_slot& s) { return s.conn == conn; });
                      if (answered) return;
                      conn->close(error(errc::unreachable, "no handshake answer in time"));
                    }
                  });
                });
}

void association::on_lane_up(lane l, std::shared_ptr<connection> c, std::uint64_t incarnation,
                             std::string system, std::uint64_t window,
                             std::uint32_t max_frame_bytes) {
  bool first_up = false;
  std::uint64_t previous = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) {
      c->close(error(errc::system_shutting_down, "closing"));
      return;
    }
    previous = incarnation_.load(std::memory_order_relaxed);
  }
  if (previous != 0 && previous != incarnation) {
    lose_peer(error(errc::dead, "the node at " + key_ + " restarted"));
  }
  std::unique_lock<std::mutex> lock(mutex_);
  incarnation_.store(incarnation, std::memory_order_release);
  system_ = std::move(system);
  if (window != 0 && l == lane::ordinary)
    window_.store(std::min<std::uint64_t>(window_.load(std::memory_order_relaxed), window),
                  std::memory_order_relaxed);
  // Frames queued before the peer said its limit were held to this node's own: those above the
  // peer's are refused now rather than sent (the peer would close the connection on them).
  std::vector<unsigned char> oversized;
  if (max_frame_bytes != 0 && max_frame_bytes < max_body_) max_body_ = max_frame_bytes;
  for (lane_slot& each : lanes_) take_oversized(each.backlog, max_body_, oversized);
  lane_slot& s = lanes_[static_cast<int>(l)];
  const bool was_lost = lost_;
  lost_ = false;
  lost_hint_.store(false, std::memory_order_relaxed);
  s.state = lane_state::up;
  s.conn = c;
  s.backoff = std::chrono::milliseconds(0);
  if (l == lane::ordinary) in_flight_.store(0, std::memory_order_relaxed);  // a fresh window
  if (!s.backlog.empty()) {
    std::vector<unsigned char> pending;
    pending.swap(s.backlog);
    (void)c->send([&](std::vector<unsigned char>& out) {
      out.insert(out.end(), pending.begin(), pending.end());
    });
    if (l == lane::ordinary) {
      in_flight_.fetch_add(static_cast<std::int64_t>(pending.size()), std::memory_order_relaxed);
    }
    std::lock_guard<std::mutex> calls_lock(calls_mutex_);  // order: mutex_, then calls_mutex_
    for (auto& [id, call] : calls_) call.sent = true;
  }
  const bool all_up = lanes_[0].state == lane_state::up && lanes_[1].state == lane_state::up;
  if (all_up) {
    first_up = !announced_up_ || was_lost;
    announced_up_ = true;
    down_since_ = {};
  }
  const std::string address = "akt://" + system_ + "@" + key_;
  lock.unlock();
  if (!oversized.empty()) {
    const error why(errc::message_too_large, key_ + ": above the frame limit of " +
                                                 std::to_string(max_frame_bytes) +
                                                 " bytes the peer announced at its handshake");
    dead_letter_backlog(oversized, why);
    fail_calls_in(oversized, why);
  }
  // Published outside the lock: a subscriber may ask this association for its figures.
  if (all_up && first_up) node_.publish_connected(address, incarnation);
}

error association::too_large(std::size_t body) const {
  return error(errc::message_too_large,
               key_ + ": a frame of " + std::to_string(body) + " bytes is above the limit of " +
                   std::to_string(max_body_) + " bytes both nodes accept (max_frame_bytes)");
}

void association::take_oversized(std::vector<unsigned char>& backlog, std::uint32_t limit,
                                 std::vector<unsigned char>& out) {
  bool any = false;
  for_each_frame(backlog, [&](const frame_header& h, byte_span) { any |= h.length > limit; });
  if (!any) return;
  std::vector<unsigned char> kept;
  kept.reserve(backlog.size());
  for_each_frame(backlog, [&](const frame_header& h, byte_span frame) {
    std::vector<unsigned char>& to = h.length > limit ? out : kept;
    to.insert(to.end(), frame.begin(), frame.end());
  });
  backlog.swap(kept);
}

void association::on_lane_refused(lane l, const error& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lanes_[static_cast<int>(l)].state = lane_state::backoff;
  }
  node_.log(log_level::warning, "handshake with " + key_ + ": " + why.message());
  lose_peer(why);
  schedule_reconnect(l);
}

std::vector<unsigned char> association::resendable(const std::vector<unsigned char>& bytes) {
  std::vector<unsigned char> out;
  for_each_frame(bytes, [&](const frame_header& h, byte_span frame) {
    switch (h.type) {
      case frame_type::hello:
      case frame_type::hello_ack:
      case frame_type::hello_reject:
      case frame_type::credit:
      case frame_type::ping:
      case frame_type::pong:
        return;  // the closed connection's own
      default:
        out.insert(out.end(), frame.begin(), frame.end());
    }
  });
  return out;
}

void association::on_lane_closed(lane l, connection* c, const error& why) {
  bool heartbeat_lost = false;
  // What the connection still held: frames never written go out again on the next connection
  // (ahead of what was sent since, which waits in the backlog), so a reconnect loses nothing;
  // frames of the write in flight may have arrived, so their tells are dead letters
  // (connection_lost: delivery unknown) rather than sent twice.
  std::vector<unsigned char> unsent, uncertain;
  if (c != nullptr) c->take_leftovers(unsent, uncertain);
  if (!uncertain.empty()) {
    const error lost(errc::connection_lost, key_ +
                                                ": the connection closed while this was being "
                                                "written (" +
                                                why.message() + ")");
    dead_letter_backlog(uncertain, lost);
    fail_calls_in(uncertain, lost);
  }
  error dropped;  // set when nothing more goes out on this lane's behalf: why
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lane_slot& s = lanes_[static_cast<int>(l)];
    const bool stale = c != nullptr && s.conn.get() != c && s.state == lane_state::up;
    if (closing_) {
      s.state = lane_state::idle;
      s.conn.reset();
      unsent.insert(unsent.end(), s.backlog.begin(), s.backlog.end());
      s.backlog.clear();
      dropped = error(errc::system_shutting_down, "the node stopped");
    } else if (lost_ && !stale) {
      // The peer is lost (declared lost while this connection was up, or its other lane's
      // heartbeat failed first): nothing more goes to it. The next send reconnects.
      if (s.conn) {
        const connection::figures f = s.conn->stats();
        frames_out_closed_.fetch_add(f.frames_out, std::memory_order_relaxed);
        bytes_out_closed_.fetch_add(f.bytes_out, std::memory_order_relaxed);
        writes_closed_.fetch_add(f.writes, std::memory_order_relaxed);
      }
      s.conn.reset();
      s.state = lane_state::idle;
      dropped = error(errc::unreachable, key_ + " is lost (" + why.message() + ")");
    } else if (stale) {
      // An old connection: the lane sends on a newer one already, and what this one held would
      // arrive behind what was sent there since.
      dropped = error(errc::unreachable, key_ + ": " + why.message());
    } else {
      const std::vector<unsigned char> again = resendable(unsent);
      s.backlog.insert(s.backlog.begin(), again.begin(), again.end());
      if (s.conn) {
        const connection::figures f = s.conn->stats();
        frames_out_closed_.fetch_add(f.frames_out, std::memory_order_relaxed);
        bytes_out_closed_.fetch_add(f.bytes_out, std::memory_order_relaxed);
        writes_closed_.fetch_add(f.writes, std::memory_order_relaxed);
      }
      const bool was_up = s.state == lane_state::up;
      s.conn.reset();
      s.state = lane_state::backoff;
      if (was_up) reconnects_.fetch_add(1, std::memory_order_relaxed);
      if (down_since_ == std::chrono::steady_clock::time_point{})
        down_since_ = std::chrono::steady_clock::now();
      heartbeat_lost = why == errc::node_lost;
    }
  }
  if (dropped) {
    dead_letter_backlog(unsent, dropped);
    return;
  }
  if (heartbeat_lost) {
    lose_peer(why);
  } else {
    check_lost_deadline();
  }
  schedule_reconnect(l);
}

void association::schedule_reconnect(lane l) {
  std::chrono::milliseconds delay;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lane_slot& s = lanes_[static_cast<int>(l)];
    if (closing_) return;
    const remote_config& cfg = node_.config();
    s.backoff =
        s.backoff.count() == 0 ? cfg.reconnect_min : std::min(s.backoff * 2, cfg.reconnect_max);
    delay = s.backoff;
  }
  std::weak_ptr<association> self = weak_from_this();
  node_.after(delay, [self, l] {
    auto a = self.lock();
    if (!a) return;
    std::lock_guard<std::mutex> lock(a->mutex_);
    lane_slot& s = a->lanes_[static_cast<int>(l)];
    if (a->closing_ || s.state != lane_state::backoff) return;
    if (a->lost_ && s.backlog.empty() && a->watches_.empty()) {
      s.state = lane_state::idle;  // nobody waits: the next send reconnects
      return;
    }
    a->connect_lane(l);
  });
  // While down, check the lost deadline again once it may have passed.
  node_.after(node_.config().node_lost_after + std::chrono::milliseconds(1), [self] {
    if (auto a = self.lock()) a->check_lost_deadline();
  });
}

void association::check_lost_deadline() {
  bool lose = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_ || lost_ || down_since_ == std::chrono::steady_clock::time_point{}) return;
    lose = std::chrono::steady_clock::now() - down_since_ >= node_.config().node_lost_after;
  }
  if (lose) {
    lose_peer(error(errc::node_lost, key_ + " unreachable for " +
                                         std::to_string(node_.config().node_lost_after.count()) +
                                         " ms"));
  }
}

void association::lose_peer(const error& why) {
  std::vector<unsigned char> backlog;
  std::vector<watch> watches;
  std::unordered_map<std::uint64_t, pid> proxies;
  std::unordered_map<std::uint64_t, pending_call> calls;
  bool announce = false;
  std::string address;
  // A restart (why == dead): the peer is there again, as a new node. What waits in the
  // backlogs was never sent and goes to it (old uids find no actor there); only what was sent
  // to the old process is lost.
  const bool restarted = why == errc::dead;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_ && !restarted) return;
    announce = !lost_ && announced_up_;
    announced_up_ = false;
    if (!restarted) {
      lost_ = true;
      lost_hint_.store(true, std::memory_order_relaxed);
      backlog.swap(lanes_[static_cast<int>(lane::ordinary)].backlog);
      lanes_[static_cast<int>(lane::control)].backlog.clear();
    }
    address = "akt://" + system_ + "@" + key_;
    watches.swap(watches_);
    proxies.swap(proxies_);
  }
  if (announce) node_.publish_disconnected(address, why);
  {
    std::lock_guard<std::mutex> lock(calls_mutex_);
    if (!restarted) {
      calls.swap(calls_);
    } else {
      for (auto it = calls_.begin(); it != calls_.end();) {
        if (it->second.sent) {
          calls.emplace(it->first, it->second);
          it = calls_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  // Nothing of the old peer is reachable any more: its proxies answer dead from now on.
  for (auto& [uid, p] : proxies)
    static_cast<remote_cell*>(akt::detail::cell_of(p))->mark_terminated();
  dead_letter_backlog(backlog, error(errc::unreachable, key_ + ": " + why.message()));
  for (auto& [id, call] : calls) {
    // Sent: it may have run before the peer went (connection_lost); never sent: unreachable.
    result<message> r(restarted   ? why
                      : call.sent ? error(errc::connection_lost, why.message())
                                  : error(errc::unreachable, key_ + ": " + why.message()));
    (void)call.route->complete(r);  // an error: nothing to dead-letter if nobody waits
  }
  const error reason = why == errc::dead ? error(errc::node_lost, why.message()) : why;
  for (watch& w : watches) {
    akt::detail::cell_of(w.watcher)->post_system(akt::detail::terminated_notice{w.target, reason});
  }
}

void association::declare_lost(const error& why) {
  std::vector<std::shared_ptr<connection>> open;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return;
    for (lane_slot& s : lanes_) {
      if (s.conn) open.push_back(s.conn);
    }
  }
  lose_peer(why);
  // Closed after lose_peer set lost_: what they still hold is dead-lettered (on_lane_closed),
  // not queued again for a node that left.
  for (auto& c : open) c->close(why);
}

void association::fail_calls_in(const std::vector<unsigned char>& bytes, const error& why) {
  for_each_frame(bytes, [&](const frame_header& h, byte_span) {
    // Our own requests only: their correlation is a call of this association. (A reply or a
    // control_reply carries the peer's correlation; the peer's call times out over there.)
    if (h.type == frame_type::ask || h.type == frame_type::control) {
      complete_call(h.correlation, result<message>(why));
    }
  });
}

void association::dead_letter_backlog(const std::vector<unsigned char>& bytes, const error& why) {
  akt::detail::system_core* core = node_.core();
  codec_scope scope(&node_);
  for_each_frame(bytes, [&](const frame_header& h, byte_span frame) {
    if (h.type != frame_type::tell) return;  // asks fail as calls; the rest is not a message
    envelope_fields f;
    byte_span payload;
    if (!decode_envelope(frame.subspan(k_header_bytes), f, payload).empty()) return;
    result<message> m = decode_message(f.type_id, payload);
    core->dead_letter(m ? std::move(*m) : message(), pid(), proxy(f.target_uid, ""), why);
  });
}

// ---------------------------------------------------------------------------------------------
// sends

error association::send_envelope(remote_cell& to, receive_context& env) {
  akt::detail::system_core* core = node_.core();
  envelope_fields f;
  if (to.grain().empty()) {
    f.target_kind = envelope_target::uid;
    f.target_uid = to.uid();
  } else {  // a grain's proxy: to the peer's activation of that identity
    f.target_kind = envelope_target::grain;
    f.target_grain = to.grain();
  }
  akt::detail::actor_cell* sender = context_access::sender(env);
  if (sender != nullptr && !sender->is_remote()) f.sender_uid = node_.export_sender(sender);
  const std::uint32_t flags = context_access::flags(env);
  if ((flags & envelope::flag_grain_ack) != 0) f.flags |= k_envelope_acknowledged;
  akt::detail::reply_route* route =
      context_access::reply_closed(env) ? nullptr : context_access::reply(env);
  const std::int64_t deadline =
      (flags & envelope::flag_has_deadline) != 0 ? context_access::deadline(env) : 0;
  (void)core;
  error e = send_user(f, env.message(), route, deadline, &to);
  if (!e && route != nullptr) {
    context_access::reply(env) = nullptr;  // the call holds it now
    context_access::reply_closed(env) = true;
  }
  return e;
}

error association::send_to_grain(std::string_view identity, const message& msg,
                                 akt::detail::reply_route* route, std::int64_t deadline_ns,
                                 bool acknowledged) {
  envelope_fields f;
  f.target_kind = envelope_target::grain;
  f.target_grain = identity;
  if (acknowledged) f.flags |= k_envelope_acknowledged;
  return send_user(f, msg, route, deadline_ns, nullptr);
}

error association::send_user(envelope_fields f, const message& msg, akt::detail::reply_route* route,
                             std::int64_t deadline, const remote_cell* to) {
  const serializer* s = find_serializer(msg);
  if (s == nullptr) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return error(errc::not_serializable,
                 "no serializer for " + std::string(msg.type_name()) +
                     " (register it with akt::remote::register_message or register_protobuf)");
  }
  if (deadline != 0) {
    // Time left, not a clock reading: the nodes' clocks need not agree.
    const std::int64_t left = deadline - node_.core()->timers_.now_ns();
    f.deadline_left_ns = left > 0 ? static_cast<std::uint64_t>(left) : 1;
  }
  const bool ask = route != nullptr;
  const bool urgent = ask && route->caller_blocked();
  std::lock_guard<std::mutex> lock(mutex_);
  if (closing_) return errc::system_shutting_down;
  if (to != nullptr) {
    if (to->terminated()) return error(errc::dead, std::string(to->path()));
    const std::uint64_t inc = incarnation_.load(std::memory_order_relaxed);
    if (to->incarnation() != 0 && inc != 0 && to->incarnation() != inc) {
      return error(errc::dead, std::string(to->path()) + ": its node restarted");
    }
  }
  if (lost_) {
    connect_idle_locked();
    refused_.fetch_add(1, std::memory_order_relaxed);
    return error(errc::unreachable, key_ + " is lost");
  }
  const std::uint64_t window = window_.load(std::memory_order_relaxed);
  if (in_flight_.load(std::memory_order_relaxed) >= static_cast<std::int64_t>(window)) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return window_full_;  // built once: a sender that retries must not allocate per refusal
  }
  lane_slot& ord = lanes_[static_cast<int>(lane::ordinary)];
  const bool backlogged = ord.state != lane_state::up;
  if (backlogged && ord.backlog.size() >= window) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return error(errc::window_full, key_ + ": " + std::to_string(ord.backlog.size()) +
                                        " bytes wait for the connection");
  }
  // Registered before it is written, so that a fast answer finds it.
  const std::uint64_t id = ask ? register_call(route, deadline, false, !backlogged) : 0;
  std::size_t bytes = 0;
  codec_scope scope(&node_);  // for a pid inside the message (encode_pid)
  error e = append_locked(
      lane::ordinary,
      [&](byte_writer& w) {
        const std::size_t before = w.size();
        error enc = ask ? encode_ask(w, id, f, *s, msg, urgent ? k_flag_caller_blocked : 0)
                        : encode_tell(w, 0, f, *s, msg);
        bytes = w.size() - before;
        return enc;
      },
      urgent);
  if (e) {
    if (ask) (void)take_call(id);
    refused_.fetch_add(1, std::memory_order_relaxed);
    return e;
  }
  // A backlogged frame is counted when the backlog goes out (on_lane_up).
  if (!backlogged)
    in_flight_.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  messages_out_.fetch_add(1, std::memory_order_relaxed);
  return {};
}

error association::call_control(const google::protobuf::MessageLite& request,
                                akt::detail::reply_route* route, std::int64_t deadline_ns) {
  bool sent = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sent = lanes_[static_cast<int>(lane::control)].state == lane_state::up;
  }
  const std::uint64_t id = register_call(route, deadline_ns, true, sent);
  error e = send_frame(lane::control, [&](byte_writer& w) {
    return encode_proto_frame(w, frame_type::control, lane::control, id, request);
  });
  if (e) (void)take_call(id);
  return e;
}

// ---------------------------------------------------------------------------------------------
// calls

std::uint64_t association::register_call(akt::detail::reply_route* route, std::int64_t deadline_ns,
                                         bool control, bool sent) {
  std::lock_guard<std::mutex> lock(calls_mutex_);
  const std::uint64_t id = next_call_++;
  const pending_call call{route, deadline_ns, control, sent};
  if (spare_calls_.empty()) {
    calls_.emplace(id, call);
    return id;
  }
  call_map::node_type entry = std::move(spare_calls_.back());
  spare_calls_.pop_back();
  entry.key() = id;
  entry.mapped() = call;
  calls_.insert(std::move(entry));
  return id;
}

akt::detail::reply_route* association::take_call(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(calls_mutex_);
  auto it = calls_.find(id);
  if (it == calls_.end()) return nullptr;
  call_map::node_type entry = calls_.extract(it);
  akt::detail::reply_route* r = entry.mapped().route;
  if (spare_calls_.size() < k_spare_calls) spare_calls_.push_back(std::move(entry));
  return r;
}

void association::complete_call(std::uint64_t id, result<message> value) {
  akt::detail::reply_route* route = take_call(id);
  if (route == nullptr) return;  // answered already, expired, or failed: a late answer is dropped
  if (!route->complete(value) && value.has_value()) {
    node_.core()->dead_letter(std::move(*value), pid(), pid(), errc::request_timeout);
  }
}

void association::expire_calls(std::int64_t now_ns) {
  std::vector<akt::detail::reply_route*> expired;
  {
    std::lock_guard<std::mutex> lock(calls_mutex_);
    for (auto it = calls_.begin(); it != calls_.end();) {
      if (it->second.deadline_ns != 0 && it->second.deadline_ns <= now_ns) {
        expired.push_back(it->second.route);
        it = calls_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (akt::detail::reply_route* r : expired) {
    result<message> v(error(errc::request_timeout, "no answer from " + key_ + " in time"));
    (void)r->complete(v);
  }
}

// ---------------------------------------------------------------------------------------------
// proxies and watches

pid association::proxy(std::uint64_t uid, std::string_view path) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = proxies_.find(uid); it != proxies_.end()) return it->second;
  if (proxies_.size() >= k_proxy_cache) {
    std::erase_if(proxies_, [](const auto& entry) {
      return akt::detail::cell_of(entry.second)->ref_count() == 1;  // only this map holds it
    });
  }
  std::string address = "akt://" + system_ + "@" + key_ + "/";
  if (!path.empty())
    address += path;
  else
    address += "~" + std::to_string(uid);  // a sender known by uid alone
  auto* cell = new remote_cell(node_.core(), address, shared_from_this(), uid,
                               incarnation_.load(std::memory_order_relaxed));
  pid p = akt::detail::share_pid(cell);  // a new cell holds no reference yet
  proxies_.emplace(uid, p);
  return p;
}

pid association::grain_proxy(std::string_view identity) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = grain_proxies_.find(std::string(identity)); it != grain_proxies_.end())
    return it->second;
  if (grain_proxies_.size() >= k_proxy_cache) {
    std::erase_if(grain_proxies_, [](const auto& entry) {
      return akt::detail::cell_of(entry.second)->ref_count() == 1;  // only this map holds it
    });
  }
  std::string address = "akt://" + system_ + "@" + key_ + "/grain/" + std::string(identity);
  auto* cell = new remote_cell(node_.core(), address, shared_from_this(), identity);
  pid p = akt::detail::share_pid(cell);  // a new cell holds no reference yet
  grain_proxies_.emplace(std::string(identity), p);
  return p;
}

void association::observe_incarnation(std::uint64_t incarnation) {
  const std::uint64_t known = incarnation_.load(std::memory_order_acquire);
  if (known != 0 && known != incarnation) {
    lose_peer(error(errc::dead, "the node at " + key_ + " restarted"));
    // The outbound lanes still talk to... the restarted node's new process, or not: reconnect.
    std::lock_guard<std::mutex> lock(mutex_);
    for (lane_slot& s : lanes_) {
      if (s.conn) s.conn->close(error(errc::dead, "the peer restarted"));
    }
  }
}

void association::add_watch(const pid& watcher, const pid& target) {
  std::lock_guard<std::mutex> lock(mutex_);
  watches_.push_back({watcher, target});
}

void association::remove_watch(const pid& watcher, const pid& target) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(watches_.begin(), watches_.end(), [&](const watch& w) {
    return w.watcher == watcher && w.target == target;
  });
  if (it != watches_.end()) watches_.erase(it);
}

void association::on_terminated(std::uint64_t uid, std::uint64_t watcher_uid, const error& reason) {
  pid watcher = node_.exports().resolve(watcher_uid);
  pid target;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto pit = proxies_.find(uid);
    if (pit == proxies_.end()) return;
    target = pit->second;
    auto it = std::find_if(watches_.begin(), watches_.end(), [&](const watch& w) {
      return w.target == target && (watcher_uid == 0 || w.watcher == watcher);
    });
    if (it == watches_.end()) return;
    if (!watcher) watcher = it->watcher;
    watches_.erase(it);
  }
  static_cast<remote_cell*>(akt::detail::cell_of(target))->mark_terminated();
  if (watcher) {
    akt::detail::cell_of(watcher)->post_system(akt::detail::terminated_notice{target, reason});
  }
}

void association::on_credit(lane l, std::uint64_t bytes) noexcept {
  if (l != lane::ordinary) return;
  in_flight_.fetch_sub(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// figures, shutdown

peer_stats association::stats() const {
  peer_stats s;
  std::lock_guard<std::mutex> lock(mutex_);
  s.address = "akt://" + system_ + "@" + key_;
  s.incarnation = incarnation_.load(std::memory_order_relaxed);
  s.connected = !lost_ && lanes_[0].state == lane_state::up && lanes_[1].state == lane_state::up;
  s.messages_out = messages_out_.load(std::memory_order_relaxed);
  s.frames_out = frames_out_closed_.load(std::memory_order_relaxed);
  s.bytes_out = bytes_out_closed_.load(std::memory_order_relaxed);
  s.writes = writes_closed_.load(std::memory_order_relaxed);
  for (const lane_slot& l : lanes_) {
    if (!l.conn) continue;
    const connection::figures f = l.conn->stats();
    s.frames_out += f.frames_out;
    s.bytes_out += f.bytes_out;
    s.writes += f.writes;
  }
  s.messages_in = messages_in_.load(std::memory_order_relaxed);
  s.bytes_in = bytes_in_.load(std::memory_order_relaxed);
  s.frames_in = s.messages_in;
  s.reconnects = reconnects_.load(std::memory_order_relaxed);
  s.refused = refused_.load(std::memory_order_relaxed);
  return s;
}

void association::shut_down(std::chrono::steady_clock::time_point deadline) {
  // What the lanes hold goes out first, while the deadline allows.
  for (;;) {
    std::size_t pending = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const lane_slot& s : lanes_) {
        if (s.conn && s.state == lane_state::up) pending += s.conn->pending_bytes();
      }
    }
    if (pending == 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<unsigned char> backlog;
  std::unordered_map<std::uint64_t, pending_call> calls;
  std::vector<std::shared_ptr<connection>> conns;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    backlog.swap(lanes_[static_cast<int>(lane::ordinary)].backlog);
    for (lane_slot& s : lanes_) {
      if (s.conn) conns.push_back(std::move(s.conn));
      s.state = lane_state::idle;
    }
    watches_.clear();
  }
  {
    std::lock_guard<std::mutex> lock(calls_mutex_);
    calls.swap(calls_);
  }
  for (auto& c : conns) c->close(error(errc::system_shutting_down, "the node stops"));
  dead_letter_backlog(backlog, error(errc::system_shutting_down,
                                     "the node stopped before " + key_ + " was reachable"));
  for (auto& [id, call] : calls) {
    result<message> r(error(errc::system_shutting_down, "the node stops"));
    (void)call.route->complete(r);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  proxies_.clear();
  grain_proxies_.clear();
}

}  // namespace akt::remote::detail
