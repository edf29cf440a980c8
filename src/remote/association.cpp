// The outbound side towards one peer (association.hpp): construction, sends, figures and
// shutdown. The rest lives beside it, one concern a file: association_lanes.cpp (lanes, the
// handshake, the close, reconnects, a lost peer, credits), association_calls.cpp (calls and
// their expiry), association_proxies.cpp (proxies and watches).

#include "remote/association.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "actor/cell_extras.hpp"
#include "actor/reply_slot.hpp"
#include "actor/system_core.hpp"
#include "akt/core/thread.hpp"
#include "remote/peer_services.hpp"
#include "remote/remote_cell.hpp"
#include "remote/wire.hpp"
#include "remote/wire.pb.h"

namespace akt::remote::detail {

using akt::detail::context_access;

// ---------------------------------------------------------------------------------------------

association::association(peer_services& node, std::string host, std::uint16_t port)
    : node_(node),
      host_(std::move(host)),
      port_(port),
      key_(host_ + ":" + std::to_string(port)),
      max_body_(node.config().max_frame_bytes),
      window_(node.config().window_bytes),
      window_full_(errc::window_full,
                   key_ + ": the window is full (the receivers there are behind)"),
      ask_seconds_(node.ask_seconds_of(key_)) {
  spare_calls_.reserve(k_spare_calls);
}

association::~association() = default;

std::string association::system_name() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return system_;
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
    f.claim_token = to.claim_token();
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
  akt::detail::open_span* span = nullptr;
  if (AKT_UNLIKELY((flags & envelope::flag_traced) != 0)) {
    span = open_client_span(context_access::trace(env)->ctx, route != nullptr,
                            to.grain().empty() ? to.path() : to.grain(), f);
  }
  error e = send_user(f, env.message(), route, deadline, &to, span);
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
  akt::detail::open_span* span = nullptr;
  if (AKT_UNLIKELY(akt::detail::tracing_active()) && akt::detail::send_may_be_traced()) {
    // Not an envelope: the context comes from the calling thread (a handler or a trace_scope),
    // or a root is sampled for a call from outside.
    span_context ctx;
    if (const akt::detail::trace_frame* fr = akt::detail::current_trace_frame()) {
      ctx = fr->ctx;
    } else if (akt::detail::tracer* t = node_.core()->tracer();
               t != nullptr && !akt::detail::on_worker_thread() && t->sample_root()) {
      ctx.trace_id = akt::detail::tracer::new_trace_id();
      ctx.flags = span_context::k_trace_sampled;
    }
    if (ctx.trace_id != std::array<std::uint8_t, 16>{})
      span = open_client_span(ctx, route != nullptr, identity, f);
  }
  return send_user(f, msg, route, deadline_ns, nullptr, span);
}

akt::detail::open_span* association::open_client_span(const span_context& ctx, bool ask,
                                                      std::string_view target, envelope_fields& f) {
  akt::detail::tracer* t = node_.core()->tracer();
  if (t == nullptr) return nullptr;
  try {
    auto span = std::make_unique<akt::detail::open_span>();
    span->owner = t;
    akt::span_data& d = span->data;
    d.trace_id = ctx.trace_id;
    d.span_id = akt::detail::tracer::new_span_id();
    d.parent_span_id = ctx.span_id;
    d.name = std::string(ask ? "ask " : "tell ") + std::string(target);
    d.kind = span_kind::client;
    d.start_unix_ns = akt::detail::unix_now_ns();
    d.attributes.emplace_back("akt.node", t->node());
    d.attributes.emplace_back("akt.peer", key_);
    d.attributes.emplace_back("akt.target", std::string(target));
    f.trace_id = ctx.trace_id;
    f.trace_span_id = d.span_id;
    f.trace_flags = ctx.flags;
    return span.release();
  } catch (...) {  // an allocation: the message goes untraced
    return nullptr;
  }
}

error association::send_user(envelope_fields f, const message& msg, akt::detail::reply_route* route,
                             std::int64_t deadline, const remote_cell* to,
                             akt::detail::open_span* span) {
  if (AKT_UNLIKELY(span != nullptr)) {
    // A tell's client span ends once the frame is queued for its connection; an ask's when the
    // call leaves the table (the answer, a timeout, the peer lost). A refusal ends it failed.
    error e = send_user_traced(f, msg, route, deadline, to, span);
    if (e || route == nullptr) akt::detail::finish_open_span(span, static_cast<bool>(e));
    return e;
  }
  akt::detail::open_span* none = nullptr;
  return send_user_traced(f, msg, route, deadline, to, none);
}

error association::send_user_traced(envelope_fields& f, const message& msg,
                                    akt::detail::reply_route* route, std::int64_t deadline,
                                    const remote_cell* to, akt::detail::open_span*& span) {
  const serializer* s = find_serializer(msg);
  if (s == nullptr) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return error(errc::not_serializable,
                 "no serializer for " + std::string(msg.type_name()) +
                     " (register it with akt::remote::register_message or register_protobuf)");
  }
  if (deadline != 0) {
    // Time left, not a clock reading: the nodes' clocks need not agree.
    const std::int64_t left = deadline - node_.core()->now_ns();
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
  // The call owns the span from here (take_call ends it).
  const std::uint64_t id =
      ask ? register_call(route, deadline, false, !backlogged, std::exchange(span, nullptr)) : 0;
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
    if (ask) (void)take_call(id, true);
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

void association::close_unused() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  closing_ = true;
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
  const error stops(errc::system_shutting_down, "the node stops");
  for (auto& c : conns) {
    if (node_.core()->crashing())
      c->abort(stops);  // as a killed process: the peer's connection is reset
    else
      c->close(stops);
  }
  dead_letter_backlog(backlog, error(errc::system_shutting_down,
                                     "the node stopped before " + key_ + " was reachable"));
  for (auto& [id, call] : calls) {
    akt::detail::finish_open_span(call.span, true);
    result<message> r(error(errc::system_shutting_down, "the node stops"));
    (void)call.route->complete(r);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  proxies_.clear();
  grain_proxies_.clear();
}

}  // namespace akt::remote::detail
