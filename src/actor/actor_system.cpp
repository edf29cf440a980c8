#include "akt/actor/actor_system.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

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

error check_spawn(system_core* core, actor_cell* parent, std::string_view name) {
  if (parent != nullptr && parent->life() >= life_state::stopping) {
    return error(errc::dead, "the parent is stopping");
  }
  if (error e = core->refusal()) return e;
  return validate_actor_name(name);
}

result<pid> start_actor(system_core*, actor_cell* cell) {
  pid p = detail::share_pid(cell);  // the caller's reference; the registry takes its own
  if (error err = cell->start()) return err;
  return p;
}

}  // namespace detail

actor_system::actor_system(std::string name, system_config config)
    : core_(new detail::system_core(this, std::move(name), config)) {}

actor_system::~actor_system() {
  (void)stop();
  core_->owner_.store(nullptr, std::memory_order_release);
  core_->release();
}

const std::string& actor_system::name() const noexcept { return core_->name_; }
unsigned actor_system::worker_count() const noexcept { return core_->dispatcher_.worker_count(); }
event_stream& actor_system::events() noexcept { return *core_->events_; }
akt::topics& actor_system::topics() noexcept { return core_->topics_; }

bool actor_system::running() const noexcept { return core_->state() == detail::run_state::running; }

result<void> actor_system::start() {
  auto expected = detail::run_state::created;
  if (!core_->state_.compare_exchange_strong(expected, detail::run_state::running)) {
    return expected == detail::run_state::running ? result<void>()
                                                  : result<void>(errc::system_shutting_down);
  }
  core_->timers_.start();
  core_->runtime_metrics_.install();  // when config.metrics.enabled
  core_->dispatcher_.start(core_->keep_alive());
  if (core_->config_.http) {
    // First: /health answers and /ready says "not yet" while remoting starts and the node joins.
    detail::http_factory make = detail::installed_http_factory();
    result<std::unique_ptr<detail::http_extension>> h =
        make != nullptr ? make(core_, *this)
                        : result<std::unique_ptr<detail::http_extension>>(error(
                              errc::invalid_argument,
                              "the config has an http section but the http module is not linked "
                              "(link akt::akt and include <akt/http/http.hpp>)"));
    if (!h) {
      (void)stop();
      return h.error();
    }
    core_->http_.store(h->release(), std::memory_order_release);
  }
  if (core_->config_.remote) {
    detail::remote_factory make = detail::installed_remote_factory();
    result<std::unique_ptr<detail::remote_extension>> r =
        make != nullptr
            ? make(core_, *this)
            : result<std::unique_ptr<detail::remote_extension>>(
                  error(errc::remoting_disabled,
                        "the config asks for remoting but the remote module is not linked "
                        "(link akt::akt or akt::remote and include <akt/remote/remote.hpp>)"));
    if (!r) {
      (void)stop();
      return r.error();
    }
    core_->remote_.store(r->release(), std::memory_order_release);
  }
  if (core_->config_.cluster) {
    detail::cluster_factory make = detail::installed_cluster_factory();
    result<std::unique_ptr<detail::cluster_extension>> c =
        make == nullptr
            ? result<std::unique_ptr<detail::cluster_extension>>(
                  error(errc::invalid_cluster_config,
                        "the config has a cluster section but the cluster module is not linked "
                        "(link akt::akt and include <akt/cluster/cluster.hpp>)"))
        : !core_->config_.remote
            ? result<std::unique_ptr<detail::cluster_extension>>(
                  error(errc::invalid_cluster_config,
                        "cluster: a cluster node needs remoting (system_config::remote)"))
            : make(core_, *this);
    if (!c) {
      (void)stop();
      return c.error();
    }
    core_->cluster_.store(c->release(), std::memory_order_release);
  }
  return {};
}

namespace detail {
namespace {
std::atomic<remote_factory> g_remote_factory{nullptr};
}
void install_remote_factory(remote_factory f) noexcept {
  g_remote_factory.store(f, std::memory_order_release);
}
remote_factory installed_remote_factory() noexcept {
  return g_remote_factory.load(std::memory_order_acquire);
}
namespace {
std::atomic<cluster_factory> g_cluster_factory{nullptr};
}
void install_cluster_factory(cluster_factory f) noexcept {
  g_cluster_factory.store(f, std::memory_order_release);
}
cluster_factory installed_cluster_factory() noexcept {
  return g_cluster_factory.load(std::memory_order_acquire);
}
namespace {
std::atomic<http_factory> g_http_factory{nullptr};
}
void install_http_factory(http_factory f) noexcept {
  g_http_factory.store(f, std::memory_order_release);
}
http_factory installed_http_factory() noexcept {
  return g_http_factory.load(std::memory_order_acquire);
}
}  // namespace detail

namespace {
error no_remoting() {
  return error(errc::remoting_disabled, "the system was configured without remoting");
}
}  // namespace

std::string actor_system::address() const {
  detail::remote_extension* r = core_->remote();
  return r != nullptr ? r->address() : std::string();
}

std::string actor_system::address_of(const pid& actor) const {
  detail::remote_extension* r = core_->remote();
  if (r == nullptr || !actor) return std::string();
  return r->address_of(detail::cell_of(actor));
}

result<pid> actor_system::lookup(std::string_view address, std::chrono::nanoseconds timeout) {
  detail::remote_extension* r = core_->remote();
  if (r == nullptr) return no_remoting();
  return r->lookup(address, timeout);
}

result<pid> actor_system::lookup(std::string_view node, std::string_view name,
                                 std::chrono::nanoseconds timeout) {
  detail::remote_extension* r = core_->remote();
  if (r == nullptr) return no_remoting();
  return r->lookup(node, name, timeout);
}

error actor_system::register_actor_factory(
    std::string_view kind, std::function<result<pid>(actor_system&, std::string_view)> make) {
  if (kind.empty() || !make) return error(errc::invalid_argument, "an actor kind needs a name");
  if (!core_->add_actor_kind(kind, std::move(make)))
    return error(errc::duplicate_type_name, "actor kind " + std::string(kind));
  return {};
}

result<pid> actor_system::spawn_on(std::string_view node, std::string_view kind,
                                   std::string_view name, std::chrono::nanoseconds timeout) {
  detail::remote_extension* r = core_->remote();
  if (r == nullptr) return no_remoting();
  return r->spawn_on(node, kind, name, timeout);
}

std::vector<peer_stats> actor_system::peers() const {
  detail::remote_extension* r = core_->remote();
  return r != nullptr ? r->peers() : std::vector<peer_stats>();
}

std::uint16_t actor_system::http_port() const noexcept {
  detail::http_extension* h = core_->http();
  return h != nullptr ? h->port() : 0;
}

namespace {

// Runs one shutdown hook on its own thread so that a hook that never returns can be left
// behind at the deadline. Returns a description of the problem, or an empty string.
std::string run_hook(const detail::system_core::shutdown_hook& hook,
                     std::chrono::steady_clock::time_point deadline) {
  struct outcome {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    result<void> r;
  };
  auto out = std::make_shared<outcome>();
  std::thread([out, run = hook.run] {
    result<void> r;
    try {
      r = run();
    } catch (const std::exception& e) {
      r = error(errc::handler_failed, e.what());
    } catch (...) {
      r = error(errc::handler_failed, "unknown exception");
    }
    std::lock_guard<std::mutex> lock(out->mutex);
    out->r = std::move(r);
    out->done = true;
    out->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(out->mutex);
  if (!out->done_cv.wait_until(lock, deadline, [&] { return out->done; })) {
    return "shutdown hook '" + hook.name + "' did not finish in time";
  }
  if (!out->r) return "shutdown hook '" + hook.name + "' failed: " + out->r.error().message();
  return {};
}

}  // namespace

void actor_system::add_shutdown_hook(std::string name, std::function<result<void>()> hook,
                                     int order) {
  std::lock_guard<std::mutex> lock(core_->hooks_mutex_);
  core_->hooks_.push_back({std::move(name), std::move(hook), order});
}

result<void> actor_system::stop() {
  auto state = core_->state();
  if (state == detail::run_state::stopped || state == detail::run_state::stopping) return {};
  if (core_->dispatcher_.on_own_worker()) return errc::blocking_on_worker;
  const auto deadline = std::chrono::steady_clock::now() + core_->config_.shutdown_timeout;
  std::vector<std::string> problems;
  bool timed_out = false;
  // /ready answers 503 from here on (load balancers take the node out while it drains).
  if (detail::http_extension* h = core_->http()) h->begin_stop();
  if (state == detail::run_state::running && !core_->crashing()) {
    // 0. The cluster: no new grains here, and the others are told this node is leaving.
    if (auto* c = core_->cluster()) c->begin_leave();
    // 1. Shutdown hooks, in order, while actors still run (a hook may still talk to them).
    std::vector<detail::system_core::shutdown_hook> hooks;
    {
      // Taken out: a hook may hold pids, which hold the core; kept here they would form a cycle.
      std::lock_guard<std::mutex> lock(core_->hooks_mutex_);
      hooks.swap(core_->hooks_);
    }
    std::stable_sort(hooks.begin(), hooks.end(),
                     [](const auto& a, const auto& b) { return a.order < b.order; });
    for (const auto& h : hooks) {
      std::string problem = run_hook(h, deadline);
      if (problem.empty()) continue;
      timed_out = timed_out || problem.find("in time") != std::string::npos;
      core_->log(log_level::error, "shutdown", problem);
      problems.push_back(std::move(problem));
    }
  }
  if (state == detail::run_state::running) {
    // 1b. Grains handle what is in their mailboxes and deactivate (actors still running).
    if (auto* g = core_->grains_.load(std::memory_order_acquire))
      g->before_actors_stop(deadline, problems, timed_out);
    // 1c. The cluster: the node leaves (its lease revoked, its keys gone) while remoting still
    //     answers, so the others see it leave before its connections close.
    if (auto* c = core_->cluster()) c->leave(deadline, problems);
  }
  core_->state_.store(detail::run_state::stopping, std::memory_order_seq_cst);
  // 1d. The HTTP endpoint closes (its threads joined) before the parts it reads stop.
  if (detail::http_extension* h = core_->http()) h->close(problems);
  if (state == detail::run_state::running) {
    // 2. Top-level actors get poison pills; each stops its children first, then itself, and
    //    publishes what it still had queued as dead letters.
    for (const pid& p : core_->registry_.snapshot()) {
      if (detail::cell_of(p)->parent() == nullptr) (void)p.stop();
    }
    if (core_->dispatcher_.manual()) {  // deterministic mode: this thread runs the stops
      while (core_->live_.load(std::memory_order_relaxed) != 0 &&
             std::chrono::steady_clock::now() < deadline) {
        if (!core_->dispatcher_.run_one())
          std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    const bool all_stopped = core_->wait_for_deaths(
        deadline, [this] { return core_->live_.load(std::memory_order_relaxed) == 0; });
    if (!all_stopped) {
      timed_out = true;
      problems.push_back(std::to_string(core_->live_.load(std::memory_order_relaxed)) +
                         " actors did not stop within the shutdown timeout");
    }
  }
  // 2b. Remoting: what is queued for peers goes out (or becomes dead letters), then the
  //     connections close and the I/O threads end.
  if (detail::remote_extension* r = core_->remote()) r->shut_down(deadline, problems);
  if (detail::cluster_extension* c = core_->cluster()) c->shut_down(deadline, problems);
  // Subscriptions hold pids, whose cells hold this core: drop what the stops left behind.
  core_->topics_.clear();
  // 3. Timers, the blocking pool, the dispatcher. Threads stuck in user code are left behind
  //    (they hold the system's core alive until they return), not waited for.
  core_->timers_.stop();
  core_->scheduler_.stop();  // after the timers: no fire can re-arm what it drops
  if (const unsigned stuck = core_->blocking_.stop(deadline)) {
    timed_out = true;
    problems.push_back(std::to_string(stuck) + " pipe_to tasks still running");
  }
  if (const unsigned stuck = core_->dispatcher_.stop(deadline)) {
    timed_out = true;
    problems.push_back(std::to_string(stuck) + " dispatcher threads still inside a handler");
  }
  // 4. The spans the stop itself finished go out before stop returns.
  if (core_->tracer_) core_->tracer_->stop();
  core_->state_.store(detail::run_state::stopped, std::memory_order_release);
  if (problems.empty()) return {};
  std::string detail;
  for (const auto& p : problems) {
    if (!detail.empty()) detail += "; ";
    detail += p;
  }
  core_->log(log_level::error, "shutdown", detail);
  return error(timed_out ? errc::request_timeout : errc::handler_failed, std::move(detail));
}

result<pid> actor_system::find(std::string_view path) const {
  std::string_view key = path;
  const std::string prefix = "akt://" + core_->name_ + "/user/";
  if (key.substr(0, prefix.size()) == prefix) key.remove_prefix(prefix.size());
  detail::actor_cell* c = core_->registry_.find(key, detail::name_registry::hash(key));
  if (c == nullptr) return error(errc::actor_not_found, std::string(path));
  return detail::adopt_pid(c);
}

akt::tracing_stats actor_system::trace_stats() const noexcept {
  return core_->tracer_ ? core_->tracer_->stats() : akt::tracing_stats{};
}

actor_stats actor_system::stats(const pid& actor) const noexcept {
  actor_stats s;
  if (!actor) return s;
  const detail::actor_cell* c = detail::cell_of(actor);
  s.processed = c->processed();
  s.mailbox_length = c->mailbox_size();
  s.restarts = c->restarts();
  s.last_active =
      std::chrono::steady_clock::time_point(std::chrono::nanoseconds(c->last_active_ns()));
  s.alive = c->life() == detail::life_state::alive;
  return s;
}

akt::logger& actor_system::logger() const noexcept { return *core_->logger_; }

metrics::registry& actor_system::metrics() noexcept { return core_->metrics_; }

std::size_t actor_system::run_until_idle(std::size_t max_turns) {
  if (!core_->dispatcher_.manual()) return 0;
  return core_->dispatcher_.run_until_idle(max_turns);
}

bool actor_system::step() { return core_->dispatcher_.manual() && core_->dispatcher_.run_one(); }

result<schedule_ref> actor_system::schedule_once(const pid& to, message msg,
                                                 std::chrono::nanoseconds delay) {
  return core_->scheduler_.schedule_once(to, std::move(msg), delay, nullptr);
}

result<schedule_ref> actor_system::schedule(const pid& to, message msg,
                                            std::chrono::nanoseconds interval) {
  return core_->scheduler_.schedule_every(to, std::move(msg), interval, nullptr);
}

result<schedule_ref> actor_system::schedule_with_cron(const pid& to, message msg,
                                                      std::string_view expression,
                                                      std::string_view zone) {
  return core_->scheduler_.schedule_cron(to, std::move(msg), expression, zone, nullptr);
}

std::vector<schedule_info> actor_system::schedules() const { return core_->scheduler_.list(); }

result<void> actor_system::stop_actor(const pid& actor, std::chrono::nanoseconds timeout) {
  if (!actor) return errc::empty_pid;
  if (detail::cell_of(actor)->is_remote()) {
    if (detail::on_worker_thread()) return errc::blocking_on_worker;
    return core_->remote()->stop_remote(detail::cell_of(actor), timeout);
  }
  (void)actor.stop();
  if (detail::on_worker_thread()) return errc::blocking_on_worker;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const bool stopped = core_->wait_for_deaths(
      deadline, [&] { return detail::cell_of(actor)->life() == detail::life_state::dead; });
  if (!stopped) return errc::request_timeout;
  return {};
}

system_stats actor_system::stats() const noexcept {
  system_stats s;
  s.actors = core_->live_.load(std::memory_order_relaxed);
  s.spawned = core_->spawned_.load(std::memory_order_relaxed);
  s.dead_letters = core_->dead_letters_.load(std::memory_order_relaxed);
  s.processed = core_->processed_by_dead_.load(std::memory_order_relaxed);
  for (const pid& p : core_->registry_.snapshot()) s.processed += detail::cell_of(p)->processed();
  const detail::dispatcher_stats d = core_->dispatcher_.stats();
  s.turns = d.turns;
  s.parks = d.parks;
  s.steals = d.steals;
  s.handoffs = d.handoffs;
  return s;
}

}  // namespace akt
