#include "actor/scheduler.hpp"

#include "actor/system_core.hpp"
#include "akt/actor/detail/actor_cell.hpp"
#include "akt/core/thread.hpp"

namespace akt {

std::uint64_t schedule_ref::id() const noexcept { return state_ ? state_->id : 0; }
bool schedule_ref::cancel() { return state_ && state_->owner->cancel(*state_); }
bool schedule_ref::pause() { return state_ && state_->owner->pause(*state_); }
bool schedule_ref::resume() { return state_ && state_->owner->resume(*state_); }
bool schedule_ref::active() const noexcept {
  return state_ && !state_->ended.load(std::memory_order_acquire);
}

namespace detail {

namespace {
std::string describe(std::chrono::nanoseconds d) {
  using namespace std::chrono;
  if (d % seconds(1) == nanoseconds::zero())
    return std::to_string(duration_cast<seconds>(d).count()) + "s";
  if (d % milliseconds(1) == nanoseconds::zero()) {
    return std::to_string(duration_cast<milliseconds>(d).count()) + "ms";
  }
  return std::to_string(d.count()) + "ns";
}
}  // namespace

result<schedule_ref> scheduler::add(std::shared_ptr<schedule_state> s, schedule_target to) {
  s->target = std::move(to.to);
  s->sender = detail::share_pid(to.from);
  s->sink = std::move(to.sink);
  s->label = std::move(to.label);
  s->owner = this;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return error(errc::system_shutting_down, "the system's timers have stopped");
    s->id = next_id_++;
    table_[s->id] = s;
  }
  arm(s);
  return schedule_ref(std::move(s));
}

namespace {
bool no_target(const schedule_target& t) noexcept { return !t.to && !t.sink; }
}  // namespace

result<schedule_ref> scheduler::schedule_once(schedule_target to, message msg,
                                              std::chrono::nanoseconds delay) {
  if (no_target(to)) return errc::empty_pid;
  auto s = std::make_shared<schedule_state>();
  s->kind = schedule_kind::once;
  s->message_type = std::string(msg.type_name());
  s->msg = std::move(msg);
  s->interval = std::max(delay, std::chrono::nanoseconds::zero());  // <= 0: fires at once
  s->spec = describe(s->interval);
  s->trace = capture_trace();
  return add(std::move(s), std::move(to));
}

result<schedule_ref> scheduler::schedule_every(schedule_target to, message msg,
                                               std::chrono::nanoseconds interval) {
  if (no_target(to)) return errc::empty_pid;
  if (interval <= std::chrono::nanoseconds::zero()) {
    return error(errc::invalid_argument, "the interval must be positive");
  }
  if (!msg.copyable()) {
    return error(errc::invalid_argument, "a repeating schedule needs a copyable message, not " +
                                             std::string(msg.type_name()));
  }
  auto s = std::make_shared<schedule_state>();
  s->kind = schedule_kind::interval;
  s->message_type = std::string(msg.type_name());
  s->msg = std::move(msg);
  s->interval = interval;
  s->spec = "every " + describe(interval);
  return add(std::move(s), std::move(to));
}

result<schedule_ref> scheduler::schedule_cron(schedule_target to, message msg,
                                              std::string_view expression, std::string_view zone) {
  if (no_target(to)) return errc::empty_pid;
  auto cron = cron_schedule::parse(expression);
  if (!cron) return cron.error();
  auto tz =
      zone.empty() || zone == "UTC" ? result<time_zone>(time_zone::utc()) : time_zone::locate(zone);
  if (!tz) return tz.error();
  if (!msg.copyable()) {
    return error(errc::invalid_argument,
                 "a cron schedule needs a copyable message, not " + std::string(msg.type_name()));
  }
  auto s = std::make_shared<schedule_state>();
  s->kind = schedule_kind::cron;
  s->message_type = std::string(msg.type_name());
  s->msg = std::move(msg);
  s->cron = std::move(*cron);
  s->zone = std::move(*tz);
  s->spec = std::string(expression) + " (" + std::string(s->zone->name()) + ")";
  return add(std::move(s), std::move(to));
}

void scheduler::arm(const std::shared_ptr<schedule_state>& s) {
  using clock = timer_service::clock;
  clock::time_point when;
  if (s->kind == schedule_kind::cron) {
    const auto wall_now = timers_->wall_now();  // virtual under manual time
    const auto next = s->cron->next(wall_now, *s->zone);
    if (!next) {  // the expression never matches again
      cancel(*s);
      return;
    }
    when = timers_->now() + std::chrono::duration_cast<clock::duration>(*next - wall_now);
  } else {
    when = timers_->now() + std::chrono::duration_cast<clock::duration>(s->interval);
  }
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->ended.load(std::memory_order_acquire)) return;
  s->timer = timers_->schedule_at(when, [this, s] { fire(s); });
}

void scheduler::fire(const std::shared_ptr<schedule_state>& s) {
  // The timer thread (or, under manual time, the advancing thread, whose flag the timer
  // service restores after each callback): a full bounded mailbox refuses, never blocks it.
  never_block = true;
  if (s->ended.load(std::memory_order_acquire)) return;
  if (s->paused.load(std::memory_order_acquire)) {
    if (s->kind == schedule_kind::once)
      s->due.store(true, std::memory_order_release);
    else
      arm(s);  // skip this tick
    return;
  }
  message m;
  if (s->kind == schedule_kind::once) {
    if (s->ended.exchange(true, std::memory_order_acq_rel)) return;
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      m = std::move(s->msg);
    }
    forget(s->id);
  } else {
    auto copy = s->msg.try_clone();
    m = std::move(*copy);
  }
  s->fired.fetch_add(1, std::memory_order_relaxed);
  deliver(*s, std::move(m));
  if (s->kind != schedule_kind::once) arm(s);
}

void scheduler::deliver(schedule_state& s, message msg) {
  const resumed_trace in_trace(core_->tracer(), s.trace);  // a one-shot's, when traced
  error e;
  if (s.sink) {
    e = s.sink(std::move(msg));  // the sink publishes what it cannot deliver
  } else {
    e = detail::deliver(detail::cell_of(s.sender), detail::cell_of(s.target),
                        make_envelope(detail::cell_of(s.target), std::move(msg)));
  }
  // A stopped target will never take another fire: end a repeating schedule to it.
  if (e == errc::dead && s.kind != schedule_kind::once) cancel(s);
}

void scheduler::forget(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.erase(id);
}

bool scheduler::cancel(schedule_state& s) {
  if (s.ended.exchange(true, std::memory_order_acq_rel)) return false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.timer) timers_->cancel(s.timer);
    s.timer = {};
  }
  forget(s.id);
  return true;
}

bool scheduler::pause(schedule_state& s) {
  if (s.ended.load(std::memory_order_acquire)) return false;
  s.paused.store(true, std::memory_order_release);
  return true;
}

bool scheduler::resume(schedule_state& s) {
  if (s.ended.load(std::memory_order_acquire)) return false;
  s.paused.store(false, std::memory_order_release);
  if (s.kind == schedule_kind::once && s.due.exchange(false, std::memory_order_acq_rel)) {
    std::shared_ptr<schedule_state> self;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = table_.find(s.id);
      if (it != table_.end()) self = it->second;
    }
    if (self) {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.timer =
          timers_->schedule_after(std::chrono::nanoseconds::zero(), [this, self] { fire(self); });
    }
  }
  return true;
}

std::vector<schedule_info> scheduler::list() const {
  std::vector<schedule_info> out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, s] : table_) {
    if (s->ended.load(std::memory_order_acquire)) continue;
    out.push_back(schedule_info{id, s->kind, s->target, s->label, s->message_type, s->spec,
                                s->paused.load(std::memory_order_acquire),
                                s->fired.load(std::memory_order_relaxed)});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

void scheduler::stop() {
  std::unordered_map<std::uint64_t, std::shared_ptr<schedule_state>> ended;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    ended.swap(table_);
  }
  // The states die here unless a schedule_ref still holds one (then its pids go with the ref).
  for (auto& [id, s] : ended) {
    s->ended.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(s->mutex);
    s->timer = {};  // the timer service dropped it already
  }
}

void scheduler::cancel_owned_by(actor_cell* owner) {
  std::vector<std::shared_ptr<schedule_state>> owned;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, s] : table_) {
      if (detail::cell_of(s->sender) == owner && detail::cell_of(s->target) == owner)
        owned.push_back(s);
    }
  }
  for (auto& s : owned) cancel(*s);
}

}  // namespace detail
}  // namespace akt
