#include "actor/system_core.hpp"

#include <algorithm>
#include <thread>

#include "actor/reply_slot.hpp"
#include "akt/actor/detail/actor_cell.hpp"

namespace akt::detail {

std::atomic<sharded_pool<receive_context>*> g_envelope_pools[2] = {nullptr, nullptr};

sharded_pool<receive_context>& make_envelope_pool(std::uint32_t which) noexcept {
  const auto create = [which] {
    auto* p =
        new sharded_pool<receive_context>(pool_shard_count_for(std::thread::hardware_concurrency()),
                                          which == 0 ? 0 : k_grain_pool_tag);
    g_envelope_pools[which].store(p, std::memory_order_release);
    return p;
  };
  // One static per pool: a process that never hosts a grain never builds the grain pool.
  if (which == 0) {
    static auto* actors = create();
    return *actors;
  }
  static auto* grains = create();
  return *grains;
}

std::atomic<int> g_system_cores_alive{0};

system_core::system_core(actor_system* owner, std::string name, const system_config& cfg)
    : owner_(owner),
      name_(std::move(name)),
      config_(cfg),
      logger_(cfg.logger ? cfg.logger : std::make_shared<stderr_logger>()),
      default_supervisor_(cfg.default_supervisor),
      timers_(cfg.manual_time),
      blocking_(
          cfg.cluster ? std::max(cfg.blocking_threads, cfg.cluster->activation_threads)
                      : cfg.blocking_threads,
          [this] { return keep_alive(); }, cfg.manual_time ? &work_ : nullptr),
      dispatcher_(dispatcher_config{cfg.workers, cfg.throughput, cfg.spin_rounds, cfg.deterministic,
                                    cfg.manual_time ? &work_ : nullptr}),
      events_(std::make_shared<event_stream>()),
      tracer_(cfg.tracing ? std::make_unique<detail::tracer>(*cfg.tracing, name_) : nullptr) {
  g_system_cores_alive.fetch_add(1, std::memory_order_relaxed);
}

namespace {
// Dead-letter reasons that mean the message was refused before any handler ran (not
// processed, so safe to send again): the refusal mark travels with them to a remote asker.
bool is_refusal(errc c) noexcept {
  switch (c) {
    case errc::dead:
    case errc::mailbox_full:
    case errc::mailbox_disposed:
    case errc::system_shutting_down:
    case errc::system_not_started:
    case errc::request_timeout:  // an expired ask skipped before its handler
    case errc::actor_not_found:
      return true;
    default:
      return false;
  }
}
}  // namespace

void system_core::dead_letter(receive_context& env, const error& reason) noexcept {
  complete_reply(env, is_refusal(reason.code()) ? error_access::mark_refused(reason) : reason);
  dead_letter(std::move(env.message()), detail::share_pid(context_access::sender(env)),
              detail::share_pid(context_access::receiver(env)), reason);
}

void system_core::dead_letter(message msg, pid sender, pid receiver, const error& reason) noexcept {
  dead_letters_.fetch_add(1, std::memory_order_relaxed);
  runtime_metrics_.count_dead_letter(reason.code());
  if (!events_->has_subscribers<akt::dead_letter>()) return;
  // A message from another node may still be in wire form: subscribers see it decoded.
  if (remote_extension* r = remote()) r->decode_for_dead_letter(msg);
  try {
    events_->publish(
        akt::dead_letter{std::move(msg), std::move(sender), std::move(receiver), reason});
  } catch (...) {
    // A subscriber threw; the dead letter was counted. Nothing else to do on this path.
  }
}

void system_core::complete_reply(receive_context& env, result<message> r) noexcept {
  reply_route*& slot = context_access::reply(env);
  if (slot == nullptr || context_access::reply_closed(env)) return;
  reply_route* s = slot;
  slot = nullptr;
  context_access::reply_closed(env) = true;
  if (!s->complete(r) && r.has_value()) {
    // The asker gave up before the reply came: the reply itself is undeliverable.
    dead_letter(std::move(*r), detail::share_pid(context_access::receiver(env)), pid(),
                errc::request_timeout);
  }
}

void system_core::log_record_of(log_level level, std::string_view component, std::string_view actor,
                                std::string_view text) const {
  // The node: its address once remoting runs (what a reader of a cluster's logs tells nodes
  // apart by), else the system's name. Logging is never on the message path: the string is
  // fine.
  const remote_extension* r = remote();
  const std::string node = r != nullptr ? r->address() : std::string();
  log_record rec;
  rec.level = level;
  rec.component = component;
  rec.text = text;
  rec.node = r != nullptr ? std::string_view(node) : std::string_view(name_);
  rec.actor = actor;
  // Inside a traced handler (or a trace_scope), the event belongs to that trace.
  const std::string trace = current_trace_id();
  rec.trace_id = trace;
  try {
    logger_->log(rec);
  } catch (...) {
    // A user logger threw: the event is lost, the runtime goes on (it may be logging a failure).
  }
}

void system_core::on_actor_started() noexcept {
  live_.fetch_add(1, std::memory_order_relaxed);
  spawned_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace akt::detail
