#include "akt/testkit/probe.hpp"

#include <atomic>
#include <thread>

#include "actor/system_core.hpp"

namespace akt::testkit {

namespace {

// Control messages from the probe object to its actor: watching must happen inside the
// watcher's own handler.
struct watch_target {
  pid target;
};
struct unwatch_target {
  pid target;
};

class probe_actor final : public actor {
 public:
  explicit probe_actor(std::shared_ptr<detail::probe_queue> q) : queue_(std::move(q)) {}

  void receive(receive_context& ctx) override {
    if (auto* w = ctx.get_if<watch_target>()) {
      ctx.watch(w->target);
      return;
    }
    if (auto* u = ctx.get_if<unwatch_target>()) {
      ctx.unwatch(u->target);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(queue_->mutex);
      queue_->items.push_back({std::move(ctx.message()), ctx.sender()});
    }
    queue_->ready.notify_all();
  }

 private:
  std::shared_ptr<detail::probe_queue> queue_;
};

// In deterministic mode, how long to sleep when no turn is ready: a timer may still enqueue a
// message, so the wait polls; short enough not to slow tests down.
constexpr auto k_manual_poll = std::chrono::microseconds(200);
// How long ~probe waits for its actor to stop.
constexpr auto k_stop_timeout = std::chrono::seconds(5);

std::string unique_name() {
  static std::atomic<std::uint64_t> next{1};
  return "akt.probe-" + std::to_string(next.fetch_add(1, std::memory_order_relaxed));
}

std::string millis(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

}  // namespace

probe::probe(actor_system& sys, std::string_view name)
    : system_(sys),
      queue_(std::make_shared<detail::probe_queue>()),
      manual_(akt::detail::core_of(sys)->dispatcher_.manual()) {
  auto spawned = name.empty() ? sys.spawn<probe_actor>(unique_name(), queue_)
                              : sys.spawn<probe_actor>(name, queue_);
  if (spawned)
    self_ = std::move(*spawned);
  else
    start_error_ = spawned.error();
}

probe::~probe() {
  if (!self_ || !self_.alive()) return;
  if (!manual_) {
    (void)system_.stop_actor(self_, k_stop_timeout);
    return;
  }
  // Nobody else runs turns in deterministic mode: run them here until the probe is gone.
  (void)self_.stop();
  const auto deadline = std::chrono::steady_clock::now() + k_stop_timeout;
  while (akt::detail::cell_of(self_)->life() != akt::detail::life_state::dead &&
         std::chrono::steady_clock::now() < deadline) {
    if (!system_.step()) std::this_thread::sleep_for(k_manual_poll);
  }
}

bool probe::wait_nonempty(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(queue_->mutex);
      if (!manual_) {
        return queue_->ready.wait_until(lock, deadline, [&] { return !queue_->items.empty(); });
      }
      if (!queue_->items.empty()) return true;
    }
    // Deterministic mode, outside the lock (the probe actor takes it on this very thread): one
    // turn at a time, so the test can look at the state right after the probe got its message.
    if (system_.step()) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return pending() != 0;
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(k_manual_poll, deadline - now));
  }
}

result<message> probe::next_message(std::chrono::nanoseconds within, std::string_view expected) {
  if (start_error_) return start_error_;
  if (!wait_nonempty(std::chrono::steady_clock::now() + within)) {
    return akt::error(errc::request_timeout, "probe " + std::string(self_.name()) +
                                                 ": no message within " + millis(within) +
                                                 " (expected " + std::string(expected) + ")");
  }
  std::lock_guard<std::mutex> lock(queue_->mutex);
  detail::probe_queue::item front = std::move(queue_->items.front());
  queue_->items.pop_front();
  last_sender_ = std::move(front.sender);
  return std::move(front.msg);
}

bool probe::expect_no_message(std::chrono::nanoseconds d) {
  if (start_error_) return true;
  return !wait_nonempty(std::chrono::steady_clock::now() + d);
}

result<void> probe::expect_terminated(const pid& target, std::chrono::nanoseconds within) {
  if (error err = watch(target)) return err;
  auto t = expect_where<terminated>([&](const terminated& n) { return n.actor == target; }, within);
  if (!t) return t.error();
  return {};
}

error probe::watch(const pid& target) {
  if (start_error_) return start_error_;
  if (!target) return errc::empty_pid;
  return self_.tell(watch_target{target});
}

error probe::unwatch(const pid& target) {
  if (start_error_) return start_error_;
  if (!target) return errc::empty_pid;
  return self_.tell(unwatch_target{target});
}

error probe::send(const pid& to, message msg) {
  if (start_error_) return start_error_;
  if (!to) return errc::empty_pid;
  return akt::detail::deliver(akt::detail::cell_of(self_), akt::detail::cell_of(to),
                              akt::detail::make_envelope(akt::detail::cell_of(to), std::move(msg)));
}

error probe::reply(message msg) {
  pid to = last_sender();
  if (!to) return error(errc::empty_pid, "the probe has no last sender to reply to");
  return send(to, std::move(msg));
}

pid probe::last_sender() const {
  std::lock_guard<std::mutex> lock(queue_->mutex);
  return last_sender_;
}

std::size_t probe::pending() const {
  std::lock_guard<std::mutex> lock(queue_->mutex);
  return queue_->items.size();
}

akt::error probe::wrong_type(std::string_view expected, std::string_view got) {
  return akt::error(errc::unexpected_reply,
                    "probe expected " + std::string(expected) + ", got " + std::string(got));
}

akt::error probe::mismatch(std::string_view got) {
  return akt::error(errc::unexpected_reply,
                    "probe got " + std::string(got) + " that does not satisfy the predicate");
}

}  // namespace akt::testkit
