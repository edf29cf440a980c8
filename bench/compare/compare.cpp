// akt_compare: the same workload shapes on akt and on CAF 0.17 (the C++ Actor Framework), in one
// process, with the same number of worker threads, alternating akt / CAF runs, printing the
// median of each and the akt/CAF ratio. See bench/README.md.
//
//   akt_compare [scale] [runs] [filter]
//     scale  multiplies every message/actor count (default 1.0)
//     runs   runs per framework and shape (default 5)
//     filter runs only the shapes whose name contains this text (default: all)
//
// Each run builds a fresh actor system (and tears it down afterwards), so the idle workers of one
// framework never compete with the other. Every rate is timed until the receivers have
// processed every message (tells) or until the last reply arrived (asks).

#include <akt/akt.hpp>
#include <algorithm>
#include <atomic>
#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "compare/compare_support.hpp"

namespace {

using akt_bench::completion;
using akt_bench::thread_team;
using akt_compare::clock_type;
using akt_compare::human;
using akt_compare::median;
using akt_compare::seconds_since;

constexpr auto k_ask_timeout = std::chrono::seconds(5);

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "akt_compare: %s\n", what.c_str());
  std::exit(1);
}

struct config {
  unsigned workers = 1;
  std::uint64_t single_pair_msgs = 2'000'000;
  std::uint64_t pairwise_msgs = 4'000'000;   // in all, split over the pairs
  std::uint64_t ask_pairwise_asks = 40'000;  // in all, split over the askers
  std::uint64_t request_response_asks = 20'000;
  std::uint64_t idle_actors = 20'000;
};

// What one run of the spawn shape measures.
struct spawn_result {
  double spawns_per_s = 0;
  double bytes_per_actor = 0;
  double bytes_per_actor_after_msg = 0;
};

// =============================================================================================
// akt side

struct ping {
  long n;
};

struct akt_counter final : akt::actor {
  explicit akt_counter(completion* c) noexcept : done(c) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<ping>() != nullptr) done->note();
  }
  completion* done;
};

struct akt_echo final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (auto* p = ctx.get_if<ping>(); p != nullptr && ctx.expects_reply()) ctx.reply(p->n + 1);
  }
};

struct akt_idle final : akt::actor {
  explicit akt_idle(completion* c) noexcept : done(c) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.get_if<ping>() != nullptr) done->note();
  }
  completion* done;
};

struct akt_env {
  akt::actor_system sys;
  explicit akt_env(unsigned workers) : sys("compare", akt::system_config{.workers = workers}) {
    if (auto r = sys.start(); !r) fail("akt start: " + r.error().message());
  }
  ~akt_env() { (void)sys.stop(); }
  template <class T, class... Args>
  akt::pid spawn(const std::string& name, Args&&... args) {
    auto r = sys.spawn<T>(name, std::forward<Args>(args)...);
    if (!r) fail("akt spawn: " + r.error().message());
    return std::move(*r);
  }
};

// `pairs` producer threads, each telling `per_pair` pings to its own counting actor (pairs == 1:
// single pair). Returns messages per second.
double akt_tell_pairs(const config& cfg, unsigned pairs, std::uint64_t per_pair) {
  std::unique_ptr<completion[]> done(new completion[pairs]);
  akt_env env(cfg.workers);
  std::vector<akt::pid> sinks;
  for (unsigned i = 0; i < pairs; ++i) {
    sinks.push_back(env.spawn<akt_counter>("sink-" + std::to_string(i), &done[i]));
  }
  std::atomic<std::uint64_t> failures{0};
  std::uint64_t batch = per_pair / 10;  // warm-up round size
  thread_team team(pairs, [&](unsigned i) {
    for (std::uint64_t k = 0; k < batch; ++k) {
      if (sinks[i].tell(ping{static_cast<long>(k)})) failures.fetch_add(1);
    }
  });
  team.run_round();
  for (unsigned i = 0; i < pairs; ++i) done[i].wait_for(batch);
  const std::uint64_t warm = batch;
  batch = per_pair;

  const auto t0 = clock_type::now();
  team.start_round();
  for (unsigned i = 0; i < pairs; ++i) done[i].wait_for(warm + per_pair);
  const double s = seconds_since(t0);
  team.wait_round();
  if (failures.load() != 0) fail("akt tell failed");
  return static_cast<double>(per_pair * pairs) / s;
}

// `pairs` threads, each doing `per_pair` sequential asks to its own echo actor. Asks per second.
double akt_ask_pairs(const config& cfg, unsigned pairs, std::uint64_t per_pair) {
  akt_env env(cfg.workers);
  std::vector<akt::pid> echoes;
  for (unsigned i = 0; i < pairs; ++i)
    echoes.push_back(env.spawn<akt_echo>("echo-" + std::to_string(i)));
  std::atomic<std::uint64_t> failures{0};
  std::uint64_t batch = std::max<std::uint64_t>(per_pair / 10, 1);
  thread_team team(pairs, [&](unsigned i) {
    for (std::uint64_t k = 0; k < batch; ++k) {
      auto r = echoes[i].ask<long>(ping{static_cast<long>(k)}, k_ask_timeout);
      if (!r || *r != static_cast<long>(k) + 1) failures.fetch_add(1);
    }
  });
  team.run_round();  // warm-up
  batch = per_pair;
  const auto t0 = clock_type::now();
  team.run_round();
  const double s = seconds_since(t0);
  if (failures.load() != 0) fail("akt ask failed");
  return static_cast<double>(per_pair * pairs) / s;
}

// `pairs` requester actors, each making `per_pair` sequential non-blocking requests
// (receive_context::request) to its own echo actor, the next one from the previous one's
// continuation. Requests per second.
struct akt_start {
  akt::pid target;
  std::uint64_t count;
};
struct akt_requester final : akt::actor {
  explicit akt_requester(completion* c) : done(c) {}
  void receive(akt::receive_context& ctx) override {
    if (auto* s = ctx.get_if<akt_start>()) {
      target = s->target;
      left = s->count;
      next(ctx);
    }
  }
  void next(akt::receive_context& ctx) {
    if (left == 0) return;
    --left;
    ctx.request<long>(target, ping{1}, std::chrono::nanoseconds::zero(),
                      [this](akt::receive_context& c, akt::result<long> r) {
                        if (r) done->note();
                        next(c);
                      });
  }
  completion* done;
  akt::pid target;
  std::uint64_t left = 0;
};

double akt_request_pairs(const config& cfg, unsigned pairs, std::uint64_t per_pair) {
  std::unique_ptr<completion[]> done(new completion[pairs]);
  akt_env env(cfg.workers);
  std::vector<akt::pid> echoes;
  std::vector<akt::pid> requesters;
  for (unsigned i = 0; i < pairs; ++i) {
    echoes.push_back(env.spawn<akt_echo>("echo-" + std::to_string(i)));
    requesters.push_back(env.spawn<akt_requester>("req-" + std::to_string(i), &done[i]));
  }
  auto round = [&](std::uint64_t n, std::uint64_t base) {
    for (unsigned i = 0; i < pairs; ++i) (void)requesters[i].tell(akt_start{echoes[i], n});
    for (unsigned i = 0; i < pairs; ++i) done[i].wait_for(base + n);
  };
  const std::uint64_t warm = std::max<std::uint64_t>(per_pair / 10, 1);
  round(warm, 0);
  const auto t0 = clock_type::now();
  round(per_pair, warm);
  return static_cast<double>(per_pair * pairs) / seconds_since(t0);
}

spawn_result akt_spawn_idle(const config& cfg) {
  const std::size_t n = cfg.idle_actors;
  completion done;
  akt_env env(cfg.workers);
  {  // warm-up
    std::vector<akt::pid> w;
    for (int i = 0; i < 64; ++i)
      w.push_back(env.spawn<akt_idle>("warm-" + std::to_string(i), &done));
    for (auto& p : w) (void)env.sys.stop_actor(p);
  }
  std::vector<akt::pid> pids;
  pids.reserve(n);
  char name[32];
  const std::size_t heap0 = akt_bench::heap_in_use();
  const auto t0 = clock_type::now();
  for (std::size_t i = 0; i < n; ++i) {
    const int len = std::snprintf(name, sizeof name, "idle-%zu", i);
    auto p = env.sys.spawn<akt_idle>(std::string_view(name, static_cast<std::size_t>(len)), &done);
    if (!p) fail("akt spawn: " + p.error().message());
    pids.push_back(std::move(*p));
  }
  const double s = seconds_since(t0);
  const std::size_t heap1 = akt_bench::heap_in_use();
  for (std::size_t i = 0; i < n; ++i) {
    if (pids[i].tell(ping{1})) fail("akt tell failed");
  }
  done.wait_for(n);
  const std::size_t heap2 = akt_bench::heap_in_use();
  for (auto& p : pids) (void)p.stop();
  spawn_result r;
  r.spawns_per_s = static_cast<double>(n) / s;
  r.bytes_per_actor =
      (static_cast<double>(heap1) - static_cast<double>(heap0)) / static_cast<double>(n);
  r.bytes_per_actor_after_msg =
      (static_cast<double>(heap2) - static_cast<double>(heap0)) / static_cast<double>(n);
  return r;
}

// =============================================================================================
// CAF side

struct caf_env {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  explicit caf_env(unsigned workers) {
    cfg.set("scheduler.max-threads", static_cast<int>(workers));
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

struct count_state {
  completion* done = nullptr;
  std::uint64_t count = 0;
};

caf::behavior caf_counter(caf::stateful_actor<count_state>* self, completion* done) {
  self->state.done = done;
  return {[self](int) {
    ++self->state.count;
    self->state.done->note();
  }};
}

caf::behavior caf_echo(caf::event_based_actor*) {
  return {[](int x) { return x + 1; }};
}

// Notes once when initialised (CAF runs the spawn function on a worker, after spawn returned)
// and once per message.
caf::behavior caf_idle(caf::event_based_actor*, completion* done) {
  done->note();
  return {[done](int) { done->note(); }};
}

double caf_tell_pairs(const config& cfg, unsigned pairs, std::uint64_t per_pair) {
  std::unique_ptr<completion[]> done(new completion[pairs]);
  caf_env env(cfg.workers);
  std::vector<caf::actor> sinks;
  for (unsigned i = 0; i < pairs; ++i) sinks.push_back(env.sys->spawn(caf_counter, &done[i]));
  std::uint64_t batch = per_pair / 10;
  thread_team team(pairs, [&](unsigned i) {
    for (std::uint64_t k = 0; k < batch; ++k) caf::anon_send(sinks[i], static_cast<int>(k));
  });
  team.run_round();
  for (unsigned i = 0; i < pairs; ++i) done[i].wait_for(batch);
  const std::uint64_t warm = batch;
  batch = per_pair;

  const auto t0 = clock_type::now();
  team.start_round();
  for (unsigned i = 0; i < pairs; ++i) done[i].wait_for(warm + per_pair);
  const double s = seconds_since(t0);
  team.wait_round();
  team.stop();
  for (auto& a : sinks) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  return static_cast<double>(per_pair * pairs) / s;
}

// CAF's counterpart of akt_request_pairs: an event-based requester whose response handler
// (request(...).then) sends the next request.
struct caf_requester_state {
  caf::actor target;
  std::uint64_t left = 0;
  completion* done = nullptr;
};

void caf_next_request(caf::stateful_actor<caf_requester_state>* self) {
  if (self->state.left == 0) return;
  --self->state.left;
  self->request(self->state.target, caf::infinite, 1).then([self](int) {
    self->state.done->note();
    caf_next_request(self);
  });
}

caf::behavior caf_requester(caf::stateful_actor<caf_requester_state>* self, completion* done,
                            caf::actor target) {
  self->state.done = done;
  self->state.target = std::move(target);
  return {[self](std::uint64_t n) {
    self->state.left = n;
    caf_next_request(self);
  }};
}

double caf_request_pairs(const config& cfg, unsigned pairs, std::uint64_t per_pair) {
  std::unique_ptr<completion[]> done(new completion[pairs]);
  caf_env env(cfg.workers);
  std::vector<caf::actor> echoes;
  std::vector<caf::actor> requesters;
  for (unsigned i = 0; i < pairs; ++i) {
    echoes.push_back(env.sys->spawn(caf_echo));
    requesters.push_back(env.sys->spawn(caf_requester, &done[i], echoes.back()));
  }
  auto round = [&](std::uint64_t n, std::uint64_t base) {
    for (unsigned i = 0; i < pairs; ++i) caf::anon_send(requesters[i], n);
    for (unsigned i = 0; i < pairs; ++i) done[i].wait_for(base + n);
  };
  const std::uint64_t warm = std::max<std::uint64_t>(per_pair / 10, 1);
  round(warm, 0);
  const auto t0 = clock_type::now();
  round(per_pair, warm);
  const double s = seconds_since(t0);
  for (auto& a : requesters) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  for (auto& a : echoes) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  return static_cast<double>(per_pair * pairs) / s;
}

double caf_ask_pairs(const config& cfg, unsigned pairs, std::uint64_t per_pair) {
  caf_env env(cfg.workers);
  std::vector<caf::actor> echoes;
  for (unsigned i = 0; i < pairs; ++i) echoes.push_back(env.sys->spawn(caf_echo));
  std::vector<std::unique_ptr<caf::scoped_actor>> selves(pairs);
  std::atomic<std::uint64_t> failures{0};
  enum class phase { create, ask, destroy } ph = phase::create;
  std::uint64_t batch = std::max<std::uint64_t>(per_pair / 10, 1);
  // Each thread creates, uses and destroys its own scoped_actor.
  thread_team team(pairs, [&](unsigned i) {
    switch (ph) {
      case phase::create:
        selves[i] = std::make_unique<caf::scoped_actor>(*env.sys);
        break;
      case phase::ask: {
        caf::scoped_actor& self = *selves[i];
        for (std::uint64_t k = 0; k < batch; ++k) {
          const int x = static_cast<int>(k);
          self->request(echoes[i], k_ask_timeout, x)
              .receive(
                  [&](int r) {
                    if (r != x + 1) failures.fetch_add(1);
                  },
                  [&](caf::error&) { failures.fetch_add(1); });
        }
        break;
      }
      case phase::destroy:
        selves[i].reset();
        break;
    }
  });
  team.run_round();  // create
  ph = phase::ask;
  team.run_round();  // warm-up
  batch = per_pair;
  const auto t0 = clock_type::now();
  team.run_round();
  const double s = seconds_since(t0);
  ph = phase::destroy;
  team.run_round();
  team.stop();
  for (auto& a : echoes) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  if (failures.load() != 0) fail("CAF request failed");
  return static_cast<double>(per_pair * pairs) / s;
}

spawn_result caf_spawn_idle(const config& cfg) {
  const std::size_t n = cfg.idle_actors;
  completion done;
  caf_env env(cfg.workers);
  {  // warm-up
    std::vector<caf::actor> w;
    for (int i = 0; i < 64; ++i) w.push_back(env.sys->spawn(caf_idle, &done));
    done.wait_for(64);
    for (auto& a : w) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
  const std::uint64_t base = done.count();
  std::vector<caf::actor> actors;
  actors.reserve(n);
  const std::size_t heap0 = akt_bench::heap_in_use();
  const auto t0 = clock_type::now();
  for (std::size_t i = 0; i < n; ++i) actors.push_back(env.sys->spawn(caf_idle, &done));
  done.wait_for(base + n);  // every actor initialised (its behaviour built)
  const double s = seconds_since(t0);
  const std::size_t heap1 = akt_bench::heap_in_use();
  for (auto& a : actors) caf::anon_send(a, 1);
  done.wait_for(base + 2 * n);
  const std::size_t heap2 = akt_bench::heap_in_use();
  for (auto& a : actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  actors.clear();
  spawn_result r;
  r.spawns_per_s = static_cast<double>(n) / s;
  r.bytes_per_actor =
      (static_cast<double>(heap1) - static_cast<double>(heap0)) / static_cast<double>(n);
  r.bytes_per_actor_after_msg =
      (static_cast<double>(heap2) - static_cast<double>(heap0)) / static_cast<double>(n);
  return r;
}

// =============================================================================================
// Driver

struct row {
  std::string shape;
  std::string unit;
  std::vector<double> akt;
  std::vector<double> caf;
};

void print_table(const std::vector<row>& rows) {
  std::printf("\n%-26s %-12s %12s %12s %9s\n", "shape", "unit", "akt", "CAF", "akt/CAF");
  std::printf("%-26s %-12s %12s %12s %9s\n", "-----", "----", "---", "---", "-------");
  for (const row& r : rows) {
    const double a = median(r.akt);
    const double c = median(r.caf);
    std::printf("%-26s %-12s %12s %12s %8.2fx\n", r.shape.c_str(), r.unit.c_str(), human(a).c_str(),
                human(c).c_str(), c == 0 ? 0.0 : a / c);
  }
  std::printf(
      "\n(median of %zu runs each; akt and CAF runs alternate; rates: higher is better, "
      "bytes/actor: lower is better)\n",
      rows.empty() ? std::size_t{0} : rows.front().akt.size());
}

}  // namespace

int main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::string filter = argc > 3 ? argv[3] : "";
  auto selected = [&](const char* name) {
    return filter.empty() || std::string(name).find(filter) != std::string::npos;
  };
  if (!(scale > 0) || runs < 1) {
    std::fprintf(stderr, "usage: akt_compare [scale > 0] [runs >= 1] [shape filter]\n");
    return 2;
  }
  config cfg;
  cfg.workers = akt_bench::hardware_threads();
  auto scaled = [scale](std::uint64_t v) {
    return std::max<std::uint64_t>(static_cast<std::uint64_t>(static_cast<double>(v) * scale), 10);
  };
  cfg.single_pair_msgs = scaled(cfg.single_pair_msgs);
  cfg.pairwise_msgs = scaled(cfg.pairwise_msgs);
  cfg.ask_pairwise_asks = scaled(cfg.ask_pairwise_asks);
  cfg.request_response_asks = scaled(cfg.request_response_asks);
  cfg.idle_actors = scaled(cfg.idle_actors);
  const unsigned pairs = akt_bench::pair_count();

  std::printf("akt_compare: %u workers for both frameworks, %u pairs, %d runs each, CAF %d.%d.%d\n",
              cfg.workers, pairs, runs, CAF_MAJOR_VERSION, CAF_MINOR_VERSION, CAF_PATCH_VERSION);
  std::fflush(stdout);

  std::vector<row> rows;
  auto shape = [&](const char* name, const char* unit, const std::function<double()>& on_akt,
                   const std::function<double()>& on_caf) {
    if (!selected(name)) return;
    row r{name, unit, {}, {}};
    for (int i = 0; i < runs; ++i) {
      r.akt.push_back(on_akt());
      r.caf.push_back(on_caf());
      std::fprintf(stderr, "  %-24s run %d: akt %s, CAF %s\n", name, i + 1,
                   human(r.akt.back()).c_str(), human(r.caf.back()).c_str());
    }
    rows.push_back(std::move(r));
  };

  shape(
      "TellSinglePair", "msg/s", [&] { return akt_tell_pairs(cfg, 1, cfg.single_pair_msgs); },
      [&] { return caf_tell_pairs(cfg, 1, cfg.single_pair_msgs); });
  shape(
      "TellPairwise", "msg/s",
      [&] { return akt_tell_pairs(cfg, pairs, cfg.pairwise_msgs / pairs); },
      [&] { return caf_tell_pairs(cfg, pairs, cfg.pairwise_msgs / pairs); });
  shape(
      "AskPairwise", "asks/s",
      [&] { return akt_ask_pairs(cfg, pairs, cfg.ask_pairwise_asks / pairs); },
      [&] { return caf_ask_pairs(cfg, pairs, cfg.ask_pairwise_asks / pairs); });
  shape(
      "RequestPairwise (actors)", "requests/s",
      [&] { return akt_request_pairs(cfg, pairs, cfg.ask_pairwise_asks * 5 / pairs); },
      [&] { return caf_request_pairs(cfg, pairs, cfg.ask_pairwise_asks * 5 / pairs); });
  shape(
      "RequestResponse (1 pair)", "asks/s",
      [&] { return akt_ask_pairs(cfg, 1, cfg.request_response_asks); },
      [&] { return caf_ask_pairs(cfg, 1, cfg.request_response_asks); });

  // The spawn shape yields three figures per run.
  if (selected("SpawnIdleActor")) {
    row rate{"SpawnIdleActor", "spawns/s", {}, {}};
    row bytes{"IdleActor memory", "bytes/actor", {}, {}};
    row after{"IdleActor after 1 msg", "bytes/actor", {}, {}};
    for (int i = 0; i < runs; ++i) {
      const spawn_result a = akt_spawn_idle(cfg);
      const spawn_result c = caf_spawn_idle(cfg);
      rate.akt.push_back(a.spawns_per_s);
      rate.caf.push_back(c.spawns_per_s);
      bytes.akt.push_back(a.bytes_per_actor);
      bytes.caf.push_back(c.bytes_per_actor);
      after.akt.push_back(a.bytes_per_actor_after_msg);
      after.caf.push_back(c.bytes_per_actor_after_msg);
      std::fprintf(stderr,
                   "  %-24s run %d: akt %s spawns/s %.0f B/actor, CAF %s spawns/s %.0f B/actor\n",
                   "SpawnIdleActor", i + 1, human(a.spawns_per_s).c_str(), a.bytes_per_actor,
                   human(c.spawns_per_s).c_str(), c.bytes_per_actor);
    }
    rows.push_back(std::move(rate));
    rows.push_back(std::move(bytes));
    rows.push_back(std::move(after));
  }

  print_table(rows);
  std::printf(
      "(%llu msgs single pair, %llu msgs pairwise, %llu asks pairwise, %llu asks single "
      "pair, %llu idle actors per run)\n",
      static_cast<unsigned long long>(cfg.single_pair_msgs),
      static_cast<unsigned long long>(cfg.pairwise_msgs),
      static_cast<unsigned long long>(cfg.ask_pairwise_asks),
      static_cast<unsigned long long>(cfg.request_response_asks),
      static_cast<unsigned long long>(cfg.idle_actors));
  return 0;
}
