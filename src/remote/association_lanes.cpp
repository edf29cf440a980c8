// The outbound side towards one peer (association.hpp): its lanes, the handshake, the close,
// reconnects, a lost peer, and credits.

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
// lanes and the handshake

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
      lost_at_ = std::chrono::steady_clock::now();
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
    akt::detail::finish_open_span(call.span, true);
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
      complete_call(h.correlation, result<message>(why), false);
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

void association::on_credit(lane l, std::uint64_t bytes) noexcept {
  if (l != lane::ordinary) return;
  in_flight_.fetch_sub(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
}

}  // namespace akt::remote::detail
