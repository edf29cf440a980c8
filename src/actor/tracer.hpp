#pragma once
// The tracing runtime (include/akt/actor/tracing.hpp is the user's side): trace state carried by
// envelopes, the thread's current context, and the tracer that turns finished spans into
// exports.
//
// Cost model. With no tracing system in the process, g_tracing_systems is 0 and the send path
// pays one relaxed load and a predictable branch (tracing_active); the turn pays a test of a
// bit of the envelope's flags word, which it loads anyway. With tracing on, a send that cannot
// be traced (outside any trace while no system samples roots: ratio 0) pays one more relaxed
// load and a thread-local load (send_may_be_traced), inline, and no call. An envelope's trace state
// lives outside the envelope (trace_state, allocated only for a traced message); the envelope keeps
// a pointer to it in what was padding, so sizeof(receive_context) does not change.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "akt/actor/tracing.hpp"

namespace akt {
class receive_context;
namespace detail {

class actor_cell;
class tracer;

// The trace a message belongs to, owned by one envelope (receive_context::trace_, under
// envelope::flag_traced) or by one delivery_fields on its way to an envelope. Plain value, one
// owner at a time.
struct trace_state {
  span_context ctx;  // trace id, the sender's span (the parent), flags
  // A message that arrived from another node: the server span opened at its arrival (its
  // parent: ctx.span_id, the client span on the sender); the handler span is its child. 0: none.
  std::uint64_t server_span = 0;
  std::int64_t server_start_ns = 0;  // unix ns, when server_span != 0
};
struct trace_state_deleter {
  void operator()(trace_state* s) const noexcept { delete s; }
};
using trace_state_ptr = std::unique_ptr<trace_state, trace_state_deleter>;

// The thread's current context: a traced handler's span or a trace_scope. Frames nest through
// `prev` (a handler that runs a nested turn, a scope inside a scope); owned by the stack frame
// that installed it.
struct trace_frame {
  span_context ctx;  // ctx.span_id: the current span (the parent of what is sent now)
  tracer* owner = nullptr;
  trace_frame* prev = nullptr;
};
// Writer and reader: the owning thread only. constinit: no dynamic initialisation, so a use
// from another file is a plain thread-local load, not a call through an init wrapper.
extern constinit thread_local trace_frame* t_current_trace_frame;
inline trace_frame*& current_trace_frame() noexcept { return t_current_trace_frame; }

// The number of live tracers in the process. Writers: tracer's constructor and destructor
// (relaxed: a send that misses a tracer being created is simply not traced). Reader: every send.
extern std::atomic<int> g_tracing_systems;
inline bool tracing_active() noexcept {
  return g_tracing_systems.load(std::memory_order_relaxed) != 0;
}

// The number of live tracers whose sampling ratio is above 0 (which may start a trace at a send
// from outside any actor). Writers: tracer's constructor and destructor, relaxed as above.
extern std::atomic<int> g_root_sampling_systems;

// Whether trace_outgoing could trace a send from this thread now: inside a trace (a traced
// handler or a trace_scope; only a live tracer installs a frame), or while some system samples
// roots. False for every send of a system tracing at ratio 0 outside a trace.
inline bool send_may_be_traced() noexcept {
  return t_current_trace_frame != nullptr ||
         g_root_sampling_systems.load(std::memory_order_relaxed) != 0;
}

// A trace handed to work that runs later, maybe on another thread: a request's continuation, a
// pipe_to task, a one-shot timer, a grain send that waits for its activation. Captured where
// the work is set up (inside a traced handler or a trace_scope; invalid elsewhere, and without
// a thread-local read while no system traces), and installed as that thread's frame while the
// work runs (resumed_trace), so what it sends continues the trace as children of the span that
// set it up.
inline span_context capture_trace() noexcept {
  if (!tracing_active() || t_current_trace_frame == nullptr) return {};
  return t_current_trace_frame->ctx;
}

// Installs ctx as the current thread's frame for its scope when ctx is valid and t (the system's
// tracer) exists; does nothing otherwise. Restores the previous frame on every way out.
class resumed_trace {
 public:
  resumed_trace(tracer* t, const span_context& ctx) noexcept
      : frame_{ctx, t, t_current_trace_frame}, installed_(t != nullptr && ctx.valid()) {
    if (installed_) t_current_trace_frame = &frame_;
  }
  ~resumed_trace() {
    if (installed_) t_current_trace_frame = frame_.prev;
  }
  resumed_trace(const resumed_trace&) = delete;
  resumed_trace& operator=(const resumed_trace&) = delete;

 private:
  trace_frame frame_;
  bool installed_;
};

std::int64_t unix_now_ns() noexcept;

// Set by actor_cell::on_failure (a handler threw or called fail), cleared and read around a
// traced handler: the span's error mark. Thread-local; the untraced path never reads it.
bool& handler_failed_here() noexcept;

// Called on a send while tracing_active() && send_may_be_traced(): gives env (bound for `to`) the
// sending thread's context, or starts a sampled root when it is sent from outside any handler.
// Never throws; an allocation failure leaves the message untraced.
void trace_outgoing(receive_context& env, actor_cell* to) noexcept;

// A span opened on one thread and finished on another (a remote call's client span).
struct open_span {
  span_data data;
  tracer* owner = nullptr;
};
// Finishes s (end time now), exports it and deletes it. Null: nothing.
void finish_open_span(open_span* s, bool failed) noexcept;

// A system's tracer: ids, sampling and the exporter's thread.
//
// Contract:
// - finish (any thread, workers included): blocking only for a push under queue_mutex_, which
//   the exporter holds only to take a batch out (never while exporting); when queue_capacity
//   spans already wait it drops the span and counts it, never waits for room.
// - new_span_id, new_trace_id, sample_root: any thread, lock-free (a thread-local generator).
// - The exporter thread calls the sink and posts OTLP; it ends in stop() after a last flush.
// Memory: at most queue_capacity waiting spans plus the batch being exported.
class tracer {
 public:
  tracer(tracing_config cfg, std::string node);
  ~tracer();
  tracer(const tracer&) = delete;
  tracer& operator=(const tracer&) = delete;

  // Exports what is queued and ends the exporter's thread. Idempotent.
  void stop();

  // False when the ratio is 0: no send outside a trace can start one (g_root_sampling_systems
  // counts the tracers for which it is true).
  bool samples_roots() const noexcept { return sample_threshold_ != 0; }
  bool sample_root() noexcept;
  static std::uint64_t new_span_id() noexcept;
  static std::array<std::uint8_t, 16> new_trace_id() noexcept;

  // Queues a finished span for the exporter (or drops it when the queue is full).
  void finish(span_data&& s) noexcept;

  const std::string& node() const noexcept { return node_; }
  tracing_stats stats() const noexcept;

 private:
  void run();
  void export_batch(std::vector<span_data>& batch);
  bool post_otlp(const std::vector<span_data>& batch, std::size_t from, std::size_t to);

  const tracing_config cfg_;
  const std::string node_;
  const std::uint64_t sample_threshold_;  // a draw below it samples

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::vector<span_data> queue_;  // guarded by queue_mutex_
  bool stopping_ = false;         // guarded by queue_mutex_

  // Counters: written by finishing threads and the exporter (relaxed), read by stats().
  std::atomic<std::uint64_t> finished_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> exported_{0};
  std::atomic<std::uint64_t> failures_{0};

  std::thread thread_;
};

// Encodes spans as an OTLP/JSON ExportTraceServiceRequest (exposed for tests).
std::string otlp_json(const std::vector<span_data>& spans, std::size_t from, std::size_t to,
                      std::string_view service_name);

}  // namespace detail
}  // namespace akt
