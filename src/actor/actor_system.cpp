#include "akt/actor/actor_system.hpp"

#include <algorithm>

#include "actor/system_core.hpp"
#include "akt/core/thread.hpp"

namespace akt {

namespace detail {

error validate_actor_name(std::string_view name) {
  constexpr std::size_t k_max_name = 255;
  if (name.empty()) return error(errc::invalid_actor_name, "empty name");
  if (name.size() > k_max_name) {
    return error(errc::invalid_actor_name, "longer than 255 characters");
  }
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  auto refuse = [name](std::string_view why) {
    std::string detail;
    detail.reserve(name.size() + why.size() + 3);
    detail.append(1, '\'').append(name).append("' ").append(why);
    return error(errc::invalid_actor_name, std::move(detail));
  };
  if (!alnum(name[0])) return refuse("must start with a letter or digit");
  for (char c : name) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') {
      return refuse("has a character outside [A-Za-z0-9_.-]");
    }
  }
  return {};
}

error check_spawn(system_core* core, std::string_view name) {
  switch (core->state()) {
    case run_state::created:
      return errc::system_not_started;
    case run_state::stopping:
    case run_state::stopped:
      return errc::system_shutting_down;
    case run_state::running:
      break;
  }
  return validate_actor_name(name);
}

result<pid> start_actor(system_core*, actor_cell* cell) {
  pid p = pid::share(cell);  // the caller's reference; the registry takes its own
  if (error err = cell->start()) return err;
  return p;
}

}  // namespace detail

actor_system::actor_system(std::string name, system_config config)
    : core_(new detail::system_core(this, std::move(name), config)) {}

actor_system::~actor_system() {
  (void)stop();
  core_->owner_ = nullptr;
  core_->release();
}

const std::string& actor_system::name() const noexcept { return core_->name_; }
unsigned actor_system::worker_count() const noexcept { return core_->dispatcher_.worker_count(); }
event_stream& actor_system::events() noexcept { return *core_->events_; }

bool actor_system::running() const noexcept { return core_->state() == detail::run_state::running; }

result<void> actor_system::start() {
  auto expected = detail::run_state::created;
  if (!core_->state_.compare_exchange_strong(expected, detail::run_state::running)) {
    return expected == detail::run_state::running ? result<void>()
                                                  : result<void>(errc::system_shutting_down);
  }
  core_->dispatcher_.start();
  return {};
}

result<void> actor_system::stop() {
  auto state = core_->state();
  if (state == detail::run_state::stopped || state == detail::run_state::stopping) return {};
  if (core_->dispatcher_.on_own_worker()) return errc::blocking_on_worker;
  core_->state_.store(detail::run_state::stopping, std::memory_order_seq_cst);
  if (state == detail::run_state::created) {
    core_->dispatcher_.stop();
    core_->state_.store(detail::run_state::stopped, std::memory_order_release);
    return {};
  }
  // Every live actor gets a poison pill; each then publishes what it still had queued.
  for (const pid& p : core_->registry_.snapshot()) (void)p.stop();
  const auto deadline = std::chrono::steady_clock::now() + core_->config_.shutdown_timeout;
  const bool all_stopped = core_->wait_for_deaths(
      deadline, [this] { return core_->live_.load(std::memory_order_relaxed) == 0; });
  const std::uint64_t stragglers = core_->live_.load(std::memory_order_relaxed);
  // Joins the workers: a handler that never returns holds this up (reported below once it did).
  core_->dispatcher_.stop();
  core_->state_.store(detail::run_state::stopped, std::memory_order_release);
  if (!all_stopped) {
    return error(errc::request_timeout,
                 std::to_string(stragglers) + " actors did not stop within the shutdown timeout");
  }
  return {};
}

result<pid> actor_system::find(std::string_view name) const {
  detail::actor_cell* c = core_->registry_.find(name, detail::name_registry::hash(name));
  if (c == nullptr) return error(errc::actor_not_found, std::string(name));
  return pid::adopt(c);
}

result<void> actor_system::stop_actor(const pid& actor, std::chrono::nanoseconds timeout) {
  if (!actor) return errc::empty_pid;
  (void)actor.stop();
  if (detail::on_worker_thread()) return errc::blocking_on_worker;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const bool stopped = core_->wait_for_deaths(
      deadline, [&] { return actor.cell()->life() == detail::life_state::dead; });
  if (!stopped) return errc::request_timeout;
  return {};
}

system_stats actor_system::stats() const noexcept {
  system_stats s;
  s.actors = core_->live_.load(std::memory_order_relaxed);
  s.spawned = core_->spawned_.load(std::memory_order_relaxed);
  s.dead_letters = core_->dead_letters_.load(std::memory_order_relaxed);
  const detail::dispatcher_stats d = core_->dispatcher_.stats();
  s.turns = d.turns;
  s.parks = d.parks;
  s.steals = d.steals;
  s.handoffs = d.handoffs;
  return s;
}

}  // namespace akt
