// akt_cluster_grain_bench: grains in a cluster (issue 19, "Targets"): activations across three
// nodes, the ask and one-way tell paths of grains with their non-cluster baselines measured in the
// same run, and failover after a crash or a clean stop. See docs/benchmarks.md, "Grains in a
// cluster".
//
// Every cluster shape runs on an akt::testkit::local_cluster of 3 nodes (2 workers each, remoting
// on loopback) in this process: on the in-process store (Arg 0) and, when the environment holds
// AKT_BENCH_ETCD=host:port and akt::etcd was built, on that etcd (Arg 1: every node its own
// connection through akt::etcd::provider). Each run gets a cluster name of its own, so runs never
// see each other's keys on a shared etcd.
//
// - ClusterGrainActivate/<store>/<threads per node>: each iteration, threads on every node send
//   one one-way tell_grain each to never-seen identities (the tell returns once the claim
//   committed and the grain is activated: the claim waits on the sending thread, so the claims in
//   flight are the threads); timed until every grain handled its message. items/s =
//   activations/s; commits_per_activation = store revisions per activation (each claim commit is
//   one revision; nothing else writes while it runs: the grains never deactivate within the run).
//   Run the binary with AKT_CLAIM_BATCH_MAX=1 (src/cluster/grain_registry.cpp) for the unbatched
//   figure.
// - ClusterGrainAskRemote (node-1 asks grains owned by node-0, whose owner it has cached) against
//   ClusterActorAskRemote (node-1 asks actors on node-0 through plain remoting, same cluster) and
//   RemoteAskPairwise (two plain remoting nodes, no cluster: akt_bench's shape).
// - ClusterGrainAskLocal (node-0 asks grains node-0 owns) against GrainAskPairwise (one system
//   without cluster or remoting: akt_bench's shape); ClusterGrainRefTellOneWay and
//   ClusterGrainTellOneWay against GrainRefTellOneWayPairwise and GrainTellOneWayPairwise.
//   All use bench_shapes.hpp's drivers, so cluster and baseline are measured alike.
//   Controls: GrainRefTellOneWayBesideCluster (the non-cluster ref shape beside an idle cluster)
//   and GrainRefTellOneWayWithRemoting (on a system with remoting on, no cluster).
// - ClusterGrainFailover/<store>: AKT_BENCH_KILLS (default 20) times, node v (in turn) owns
//   k_failover_grains fresh grains that node w = v+1 has cached; v is crashed (kill -9 as seen
//   from outside); one thread per grain on w asks it every millisecond until an ask succeeds.
//   Time from crash()'s return to that success, p50 / max over all grains of all kills. Then the
//   same with a clean stop(v): from stop()'s call (and return) to the first answer from a node
//   other than v. Lease TTL 2 s. Slow (about TTL + a restart per kill): run it by filter.

#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/cluster/inproc_store.hpp>
#include <akt/remote/remote.hpp>
#include <akt/testkit/local_cluster.hpp>
#ifdef AKT_BENCH_HAS_ETCD
#include <akt/etcd/etcd_store.hpp>
#endif
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_shapes.hpp"
#include "remote_messages.hpp"

namespace akt_bench {
namespace {

using namespace std::chrono_literals;
namespace cl = akt::cluster;

// ---- the store ----

// AKT_BENCH_ETCD, or empty.
std::string etcd_endpoint() {
  const char* e = std::getenv("AKT_BENCH_ETCD");
  return e != nullptr ? e : "";
}

bool etcd_available() {
#ifdef AKT_BENCH_HAS_ETCD
  return !etcd_endpoint().empty();
#else
  return false;
#endif
}

// Arg 0: the in-process store; 1: etcd (registered only when AKT_BENCH_ETCD is set).
void store_args(benchmark::internal::Benchmark* b) {
  b->ArgName("etcd")->Arg(0);
  if (etcd_available()) b->Arg(1);
}

std::shared_ptr<cl::store_provider> etcd_provider() {
#ifdef AKT_BENCH_HAS_ETCD
  akt::etcd::etcd_options o;
  o.endpoints = {etcd_endpoint()};
  return akt::etcd::provider(o);
#else
  return nullptr;
#endif
}

// A cluster name no other run of this process or of an earlier one uses.
std::string fresh_cluster_name() {
  static std::atomic<int> n{0};
  return "bench-" + std::to_string(::getpid()) + "-" + std::to_string(n.fetch_add(1));
}

// ---- grains ----

// Counts the pings it handles into g_handled (sent one-way: no answer).
std::atomic<completion*> g_handled{nullptr};

struct act_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "akt.bench.act";
  void on_receive(akt::grain_context& ctx) override {
    if (ctx.get_if<remote_ping>() != nullptr) {
      if (completion* c = g_handled.load(std::memory_order_relaxed)) c->note();
    } else {
      ctx.unhandled();
    }
  }
};

// Answers every remote_ping ask with remote_ping{n + 1} (the grain twin of remote_echo).
struct echo_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "akt.bench.echo";
  void on_receive(akt::grain_context& ctx) override {
    if (const auto* p = ctx.get_if<remote_ping>())
      ctx.reply(remote_ping{p->n + 1});
    else
      ctx.unhandled();
  }
};

// Answers with the index of the node it runs on ("node-<i>"): who answered a failover ask.
struct where_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "akt.bench.where";
  std::int64_t node = -1;
  akt::error on_activate(akt::grain_props& props) override {
    const std::string& n = props.system().name();
    node = std::stoll(n.substr(n.rfind('-') + 1));
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    if (ctx.get_if<remote_ping>() != nullptr)
      ctx.reply(remote_ping{node});
    else
      ctx.unhandled();
  }
};

// Pair completions for the one-way tell shapes: grain "sink-<i>" counts into done[i].
struct grain_sinks {
  std::unique_ptr<completion[]> done;
  unsigned n = 0;
};

struct sink_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "akt.bench.sink";
  completion* done = nullptr;
  akt::error on_activate(akt::grain_props& props) override {
    auto sinks = props.dependency<grain_sinks>("sinks");
    if (!sinks) return akt::error(akt::errc::invalid_argument, "no sinks dependency");
    const std::string& name = props.identity().name;
    const auto i = static_cast<unsigned>(std::stoul(name.substr(name.rfind('-') + 1)));
    done = &sinks->done[i % sinks->n];
    return {};
  }
  void on_receive(akt::grain_context& ctx) override {
    if (ctx.get_if<remote_ping>() != nullptr)
      done->note();
    else
      ctx.unhandled();
  }
};

// Echo actor on a remoting node (as remote_bench.cpp's remote_echo, without its thread marks).
struct echo_actor final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (const auto* p = ctx.get_if<remote_ping>(); p != nullptr && ctx.expects_reply())
      ctx.reply(remote_ping{p->n + 1});
  }
};

// Every kind on a system, the same way on cluster nodes and on the baseline's plain system.
akt::error register_kinds(akt::actor_system& sys, const std::shared_ptr<grain_sinks>& sinks) {
  akt::grain_options idle_never;
  idle_never.deactivate_after = std::chrono::hours(1);  // no passivation within a run
  if (auto e = akt::with_grain_default_options<act_grain>(sys, idle_never)) return e;
  if (auto e = akt::with_grain_default_options<echo_grain>(sys, idle_never)) return e;
  if (auto e = akt::with_grain_default_options<where_grain>(sys, idle_never)) return e;
  akt::grain_options s = idle_never;
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("sinks", sinks);
  s.dependencies = deps;
  return akt::with_grain_default_options<sink_grain>(sys, s);
}

std::shared_ptr<grain_sinks> make_sinks(unsigned n) {
  auto s = std::make_shared<grain_sinks>();
  s->done.reset(new completion[n]);
  s->n = n;
  return s;
}

// ---- the cluster ----

// Three nodes on the store of `which` (0: in-process, 1: etcd), started; ok false after a failure
// (reported to the benchmark).
struct bench_cluster {
  std::shared_ptr<grain_sinks> sinks;
  std::shared_ptr<cl::store_provider> provider;  // etcd's, or null
  std::unique_ptr<akt::testkit::local_cluster> c;
  std::unique_ptr<cl::store> reader;  // reads the store's revision (etcd)
  bool ok = false;

  bench_cluster(benchmark::State& state, int which, unsigned pairs, std::chrono::seconds ttl = 2s,
                unsigned blocking_threads = 32)
      : sinks(make_sinks(pairs)) {
    register_remote_messages();
    akt::testkit::local_cluster_options o;
    o.cluster = fresh_cluster_name();
    o.lease_ttl = ttl;
    o.blocking_threads = blocking_threads;
    o.configure = [blocking_threads](akt::cluster_config& cc, std::size_t) {
      cc.activation_threads = blocking_threads;
    };
    if (which == 1) {
      provider = etcd_provider();
      if (!provider) {
        state.SkipWithError("built without akt::etcd");
        return;
      }
      o.store = provider;
    }
    auto s = sinks;
    o.prepare = [s](akt::actor_system& sys, std::size_t) { (void)register_kinds(sys, s); };
    c = std::make_unique<akt::testkit::local_cluster>(3, o);
    if (auto r = c->start(); !r) {
      state.SkipWithError(("cluster start failed: " + r.error().message()).c_str());
      return;
    }
    if (provider) {
      auto r = provider->open_store("bench-reader");
      if (!r) {
        state.SkipWithError(("store reader: " + r.error().message()).c_str());
        return;
      }
      reader = std::move(*r);
    }
    ok = true;
  }

  akt::actor_system& node(std::size_t i) { return c->node(i); }

  // The store's revision now (0 if it could not be read).
  std::int64_t revision() {
    if (!reader) return c->store().current_revision();
    std::promise<akt::result<cl::range_result>> p;
    reader->get("/akt/none", [&p](akt::result<cl::range_result> r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    return r ? r->header_revision : 0;
  }
};

// Activates grain `name` of kind T on sys (its owner: placement is local by default).
template <class T>
bool activate_on(benchmark::State& state, akt::actor_system& sys, const std::string& name) {
  auto id = akt::activate_grain<T>(sys, name);
  if (!id) {
    state.SkipWithError(("activate_grain " + name + ": " + id.error().message()).c_str());
    return false;
  }
  return true;
}

akt::grain_identity id_of(std::string_view kind, std::string name) {
  return akt::grain_identity{std::string(kind), std::move(name)};
}

// =============================================================================================
// ClusterGrainActivate

constexpr std::uint64_t k_activations_per_thread = 50;  // per iteration

void BM_ClusterGrainActivate(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const auto per_node = static_cast<unsigned>(state.range(1));
  bench_cluster bc(state, which, 1);
  if (!bc.ok) return;
  completion handled;
  g_handled.store(&handled);
  const unsigned threads = per_node * 3;
  std::vector<std::uint64_t> next(threads, 0);
  std::atomic<std::uint64_t> failures{0};
  std::string first_error;
  std::mutex error_mutex;
  thread_team team(threads, [&](unsigned t) {
    akt::actor_system& sys = bc.node(t % 3);
    akt::grain_identity id = id_of(act_grain::akt_type_name, {});
    for (std::uint64_t k = 0; k < k_activations_per_thread; ++k) {
      id.name = "t" + std::to_string(t) + "-" + std::to_string(next[t]++);
      if (auto e = akt::tell_grain(sys, id, remote_ping{0}, {.one_way = true})) {
        if (failures.fetch_add(1) == 0) {
          std::lock_guard<std::mutex> lock(error_mutex);
          first_error = e.message();
        }
      }
    }
  });
  const std::uint64_t per_round = k_activations_per_thread * threads;
  std::uint64_t rounds = 0;
  team.run_round();  // warm-up: the claim paths, the store's connections
  handled.wait_for(per_round);
  if (failures.load() != 0) {
    g_handled.store(nullptr);
    return state.SkipWithError(("warm-up activation failed: " + first_error).c_str());
  }
  ++rounds;
  std::uint64_t activations0 = 0;
  for (std::size_t i = 0; i < 3; ++i) activations0 += akt::grain_activation_count(bc.node(i));
  const std::int64_t rev0 = bc.revision();
  const std::uint64_t cpu0 = process_cpu_ns();
  const auto t0 = clock_type::now();
  region r(nullptr);
  for (auto _ : state) {
    team.run_round();
    ++rounds;
    handled.wait_for(rounds * per_round);
    if (failures.load() != 0) {
      state.SkipWithError(("activation failed: " + first_error).c_str());
      break;
    }
  }
  const double wall = std::chrono::duration<double>(clock_type::now() - t0).count();
  const std::uint64_t n = (rounds - 1) * per_round;
  r.report(state, nullptr, n, n);
  const std::int64_t rev1 = bc.revision();
  std::uint64_t activations1 = 0;
  for (std::size_t i = 0; i < 3; ++i) activations1 += akt::grain_activation_count(bc.node(i));
  state.counters["activations"] = static_cast<double>(activations1 - activations0);
  state.counters["commits_per_activation"] =
      n == 0 ? 0.0 : static_cast<double>(rev1 - rev0) / static_cast<double>(n);
  state.counters["cpu_process"] =
      wall > 0 ? static_cast<double>(process_cpu_ns() - cpu0) / 1e9 / wall : 0.0;
  state.counters["in_flight_max"] = threads;
  team.stop();
  g_handled.store(nullptr);
}
BENCHMARK(BM_ClusterGrainActivate)
    ->ArgNames({"etcd", "threads_per_node"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int s = 0; s < (etcd_available() ? 2 : 1); ++s) {
        b->Args({s, 1});
        b->Args({s, 16});
        b->Args({s, 64});
      }
    })
    ->UseRealTime()
    ->MinTime(1.0)
    ->Unit(benchmark::kMillisecond);

// Activations sent from inside the system: on each node an actor, told to, sends one one-way
// tell_grain to each of k_fan_out never-seen identities from its handler (a dispatcher worker:
// each such first message waits in the grain layer's queue and is activated on the node's
// blocking pool, whose threads each wait for one claim). Timed until every grain handled its
// message. Arg 2: the nodes' blocking pool size (cluster_config::activation_threads, default 32),
// which bounds the claims in flight.
constexpr std::uint64_t k_fan_out = 1000;  // per node and iteration

struct fan_out_actor final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    const auto* round = ctx.get_if<std::uint64_t>();
    if (round == nullptr) return;
    akt::grain_identity id = id_of(act_grain::akt_type_name, {});
    const std::string prefix =
        std::string(ctx.system().name()) + "-" + std::to_string(*round) + "-";
    for (std::uint64_t k = 0; k < k_fan_out; ++k) {
      id.name = prefix + std::to_string(k);
      if (akt::tell_grain(ctx.system(), id, remote_ping{0}, {.one_way = true}))
        failures.fetch_add(1);
    }
  }
  static inline std::atomic<std::uint64_t> failures{0};
};

void BM_ClusterGrainFanOut(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const auto pool = static_cast<unsigned>(state.range(1));
  bench_cluster bc(state, which, 1, 2s, pool);
  if (!bc.ok) return;
  completion handled;
  g_handled.store(&handled);
  fan_out_actor::failures = 0;
  std::vector<akt::pid> actors;
  for (std::size_t i = 0; i < 3; ++i) {
    auto a = bc.node(i).spawn<fan_out_actor>("fan-out-" + std::to_string(i));
    if (!a) return state.SkipWithError(("spawn: " + a.error().message()).c_str());
    actors.push_back(*a);
  }
  const std::uint64_t per_round = k_fan_out * 3;
  std::uint64_t rounds = 0;
  auto run_round = [&] {
    for (auto& a : actors) (void)a.tell(std::uint64_t{rounds});
    ++rounds;
    handled.wait_for(rounds * per_round);
  };
  run_round();  // warm-up
  const std::uint64_t cpu0 = process_cpu_ns();
  const auto t0 = clock_type::now();
  for (auto _ : state) {
    run_round();
    if (fan_out_actor::failures.load() != 0) {
      state.SkipWithError("a tell_grain failed");
      break;
    }
  }
  const double wall = std::chrono::duration<double>(clock_type::now() - t0).count();
  const std::uint64_t n = (rounds - 1) * per_round;
  state.SetItemsProcessed(static_cast<std::int64_t>(n));
  state.counters["cpu_process"] =
      wall > 0 ? static_cast<double>(process_cpu_ns() - cpu0) / 1e9 / wall : 0.0;
  state.counters["blocking_threads"] = pool;
  g_handled.store(nullptr);
}
BENCHMARK(BM_ClusterGrainFanOut)
    ->ArgNames({"etcd", "blocking_threads"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int s = 0; s < (etcd_available() ? 2 : 1); ++s) {
        b->Args({s, 4});
        b->Args({s, 32});
      }
    })
    ->UseRealTime()
    ->MinTime(1.0)
    ->Unit(benchmark::kMillisecond);

// =============================================================================================
// Remote asks: grain owned by node-0, asked from node-1 (owner cached), against a plain remote
// actor on node-0 asked from node-1, in the same cluster; and two plain remoting nodes.

// Sequential asks of T from `from`; true = failed.
bool ask_ok(akt::actor_system& from, const akt::grain_identity& id, std::uint64_t k) {
  const auto x = static_cast<std::int64_t>(k);
  akt::result<remote_ping> r = akt::ask_grain<remote_ping>(from, id, remote_ping{x}, k_ask_timeout);
  return r && r->n == x + 1;
}

void BM_ClusterGrainAskRemote(benchmark::State& state) {
  const unsigned n = pair_count();
  bench_cluster bc(state, static_cast<int>(state.range(0)), n);
  if (!bc.ok) return;
  std::vector<akt::grain_identity> ids;
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = "echo-" + std::to_string(i);
    if (!activate_on<echo_grain>(state, bc.node(0), name)) return;
    ids.push_back(id_of(echo_grain::akt_type_name, name));
    // node-1 learns the owner (its first send claims, loses, reads the owner, forwards).
    if (!ask_ok(bc.node(1), ids.back(), 0)) return state.SkipWithError("warm-up ask failed");
  }
  run_pairwise_calls(state, bc.node(1), n,
                     [&](unsigned i, std::uint64_t k) { return !ask_ok(bc.node(1), ids[i], k); });
  // Every grain stayed where it was: node-1 activated none.
  state.counters["node1_activations"] =
      static_cast<double>(akt::grain_activation_count(bc.node(1)));
}
BENCHMARK(BM_ClusterGrainAskRemote)
    ->Apply(store_args)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

bool ask_actor_ok(const akt::pid& to, std::uint64_t k) {
  const auto x = static_cast<std::int64_t>(k);
  akt::result<remote_ping> r = to.ask<remote_ping>(remote_ping{x}, k_ask_timeout);
  while (!r && r.code() == akt::errc::window_full) {
    std::this_thread::yield();
    r = to.ask<remote_ping>(remote_ping{x}, k_ask_timeout);
  }
  return r && r->n == x + 1;
}

void BM_ClusterActorAskRemote(benchmark::State& state) {
  const unsigned n = pair_count();
  bench_cluster bc(state, static_cast<int>(state.range(0)), n);
  if (!bc.ok) return;
  std::vector<akt::pid> echoes;
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = "echo-actor-" + std::to_string(i);
    if (!spawn_or_fail<echo_actor>(state, bc.node(0), name)) return;
    auto p = bc.node(1).lookup(bc.node(0).address() + "/user/" + name);
    if (!p) return state.SkipWithError(("lookup failed: " + p.error().message()).c_str());
    echoes.push_back(std::move(*p));
  }
  run_pairwise_calls(state, bc.node(1), n,
                     [&](unsigned i, std::uint64_t k) { return !ask_actor_ok(echoes[i], k); });
}
BENCHMARK(BM_ClusterActorAskRemote)
    ->Apply(store_args)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_RemoteAskPairwise(benchmark::State& state) {
  const unsigned n = pair_count();
  register_remote_messages();
  akt::system_config cfg;
  cfg.remote = akt::remote_config{};
  bench_system a(state, "alpha", with_env_overrides(cfg));
  bench_system b(state, "beta", with_env_overrides(cfg));
  if (!a.ok || !b.ok) return;
  std::vector<akt::pid> echoes;
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = "echo-" + std::to_string(i);
    if (!spawn_or_fail<echo_actor>(state, b.sys, name)) return;
    auto p = a.sys.lookup(b.sys.address() + "/user/" + name);
    if (!p) return state.SkipWithError(("lookup failed: " + p.error().message()).c_str());
    echoes.push_back(std::move(*p));
  }
  run_pairwise_calls(state, a, n,
                     [&](unsigned i, std::uint64_t k) { return !ask_actor_ok(echoes[i], k); });
}
BENCHMARK(BM_RemoteAskPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// =============================================================================================
// Local grains: node-0 sends to grains node-0 owns, against one system without a cluster.

void local_asks(benchmark::State& state, akt::actor_system& sys, unsigned n) {
  std::vector<akt::grain_identity> ids;
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = "echo-" + std::to_string(i);
    if (!activate_on<echo_grain>(state, sys, name)) return;
    ids.push_back(id_of(echo_grain::akt_type_name, name));
  }
  run_pairwise_calls(state, sys, n,
                     [&](unsigned i, std::uint64_t k) { return !ask_ok(sys, ids[i], k); });
}

void BM_ClusterGrainAskLocal(benchmark::State& state) {
  const unsigned n = pair_count();
  bench_cluster bc(state, static_cast<int>(state.range(0)), n);
  if (!bc.ok) return;
  local_asks(state, bc.node(0), n);
}
BENCHMARK(BM_ClusterGrainAskLocal)->Apply(store_args)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_GrainAskPairwise(benchmark::State& state) {
  const unsigned n = pair_count();
  bench_system bs(state);
  if (!bs.ok) return;
  if (auto e = register_kinds(bs.sys, make_sinks(n)))
    return state.SkipWithError(("kinds: " + e.message()).c_str());
  local_asks(state, bs.sys, n);
}
BENCHMARK(BM_GrainAskPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// One-way tells to sink grains, through a grain_ref per producer (by_ref) or tell_grain.
void local_tells(benchmark::State& state, akt::actor_system& sys, grain_sinks& sinks, bool by_ref) {
  const unsigned n = sinks.n;
  std::vector<akt::grain_identity> ids;
  std::vector<akt::grain_ref<sink_grain>> refs;
  for (unsigned i = 0; i < n; ++i) {
    const std::string name = "sink-" + std::to_string(i);
    if (!activate_on<sink_grain>(state, sys, name)) return;
    ids.push_back(id_of(sink_grain::akt_type_name, name));
    refs.emplace_back(sys, ids.back());
  }
  run_pairwise_tells(state, sys, n, sinks.done.get(), [&](unsigned i, std::uint64_t k) {
    const remote_ping p{static_cast<std::int64_t>(k)};
    if (by_ref) return static_cast<bool>(refs[i].tell_one_way(p));
    return static_cast<bool>(akt::tell_grain(sys, ids[i], p, {.one_way = true}));
  });
}

void BM_ClusterGrainRefTellOneWay(benchmark::State& state) {
  bench_cluster bc(state, static_cast<int>(state.range(0)), pair_count());
  if (!bc.ok) return;
  local_tells(state, bc.node(0), *bc.sinks, true);
}
BENCHMARK(BM_ClusterGrainRefTellOneWay)
    ->Apply(store_args)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_GrainRefTellOneWayPairwise(benchmark::State& state) {
  bench_system bs(state);
  if (!bs.ok) return;
  auto sinks = make_sinks(pair_count());
  if (auto e = register_kinds(bs.sys, sinks))
    return state.SkipWithError(("kinds: " + e.message()).c_str());
  local_tells(state, bs.sys, *sinks, true);
}
BENCHMARK(BM_GrainRefTellOneWayPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// A control for the two above: the non-cluster shape while an idle 3-node cluster (in-process
// store) runs in the same process. What it loses against GrainRefTellOneWayPairwise is the cost
// of the cluster's threads being there; what ClusterGrainRefTellOneWay loses beyond it is the
// per-message cost of cluster mode (the fence check before every grain handler).
void BM_GrainRefTellOneWayBesideCluster(benchmark::State& state) {
  bench_cluster bc(state, 0, 1);
  if (!bc.ok) return;
  bench_system bs(state);
  if (!bs.ok) return;
  auto sinks = make_sinks(pair_count());
  if (auto e = register_kinds(bs.sys, sinks))
    return state.SkipWithError(("kinds: " + e.message()).c_str());
  local_tells(state, bs.sys, *sinks, true);
}
BENCHMARK(BM_GrainRefTellOneWayBesideCluster)->UseRealTime()->Unit(benchmark::kMillisecond);

// A second control: the non-cluster shape on a system with remoting on (as every cluster node
// has), no cluster section.
void BM_GrainRefTellOneWayWithRemoting(benchmark::State& state) {
  register_remote_messages();
  akt::system_config cfg;
  cfg.remote = akt::remote_config{};
  bench_system bs(state, "bench", cfg);
  if (!bs.ok) return;
  auto sinks = make_sinks(pair_count());
  if (auto e = register_kinds(bs.sys, sinks))
    return state.SkipWithError(("kinds: " + e.message()).c_str());
  local_tells(state, bs.sys, *sinks, true);
}
BENCHMARK(BM_GrainRefTellOneWayWithRemoting)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ClusterGrainTellOneWay(benchmark::State& state) {
  bench_cluster bc(state, static_cast<int>(state.range(0)), pair_count());
  if (!bc.ok) return;
  local_tells(state, bc.node(0), *bc.sinks, false);
}
BENCHMARK(BM_ClusterGrainTellOneWay)
    ->Apply(store_args)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_GrainTellOneWayPairwise(benchmark::State& state) {
  bench_system bs(state);
  if (!bs.ok) return;
  auto sinks = make_sinks(pair_count());
  if (auto e = register_kinds(bs.sys, sinks))
    return state.SkipWithError(("kinds: " + e.message()).c_str());
  local_tells(state, bs.sys, *sinks, false);
}
BENCHMARK(BM_GrainTellOneWayPairwise)->UseRealTime()->Unit(benchmark::kMillisecond);

// =============================================================================================
// ClusterGrainFailover

constexpr int k_failover_grains = 10;

int kills_wanted() {
  if (const char* e = std::getenv("AKT_BENCH_KILLS")) {
    const int v = std::atoi(e);
    if (v > 0) return v;
  }
  return 20;
}

double ms_of(std::chrono::nanoseconds d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Asks each grain from `from` every millisecond, from `t0` on, until a node other than `victim`
// answers; returns the times of those answers (or an empty vector past `limit`).
std::vector<clock_type::time_point> first_answers(akt::actor_system& from,
                                                  const std::vector<akt::grain_identity>& ids,
                                                  std::int64_t victim,
                                                  std::chrono::nanoseconds limit) {
  std::vector<clock_type::time_point> at(ids.size());
  std::vector<char> got(ids.size(), 0);
  std::vector<std::thread> askers;
  const auto deadline = clock_type::now() + limit;
  for (std::size_t g = 0; g < ids.size(); ++g) {
    askers.emplace_back([&, g] {
      while (clock_type::now() < deadline) {
        auto r = akt::ask_grain<remote_ping>(from, ids[g], remote_ping{0}, 200ms);
        if (r && r->n != victim) {
          at[g] = clock_type::now();
          got[g] = 1;
          return;
        }
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  for (auto& t : askers) t.join();
  if (std::count(got.begin(), got.end(), 1) != static_cast<long>(ids.size())) return {};
  return at;
}

void BM_ClusterGrainFailover(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const int kills = kills_wanted();
  bench_cluster bc(state, which, 1, 2s);
  if (!bc.ok) return;
  std::vector<double> crash_ms, crash_kill_max, stop_call_ms, stop_return_ms, stop_takes;
  int round = 0;
  // Fresh grains on v, cached by w; false after a failure (reported).
  auto own = [&](std::size_t v, std::size_t w, std::vector<akt::grain_identity>& ids) {
    ids.clear();
    for (int g = 0; g < k_failover_grains; ++g) {
      const std::string name = "fo-" + std::to_string(round) + "-" + std::to_string(g);
      if (!activate_on<where_grain>(state, bc.node(v), name)) return false;
      ids.push_back(id_of(where_grain::akt_type_name, name));
      auto r = akt::ask_grain<remote_ping>(bc.node(w), ids.back(), remote_ping{0}, 5s);
      if (!r || r->n != static_cast<std::int64_t>(v)) {
        state.SkipWithError("failover warm-up ask failed");
        return false;
      }
    }
    ++round;
    return true;
  };
  for (auto _ : state) {
    for (int k = 0; k < kills; ++k) {
      const std::size_t v = static_cast<std::size_t>(k) % 3;
      const std::size_t w = (v + 1) % 3;
      std::vector<akt::grain_identity> ids;
      // Crash.
      if (!own(v, w, ids)) return;
      if (auto r = bc.c->crash(v); !r) return state.SkipWithError("crash failed");
      const auto t0 = clock_type::now();
      auto at = first_answers(bc.node(w), ids, static_cast<std::int64_t>(v), 20s);
      if (at.empty()) return state.SkipWithError("a grain of the crashed node never answered");
      double worst = 0;
      for (auto t : at) {
        crash_ms.push_back(ms_of(t - t0));
        worst = std::max(worst, crash_ms.back());
      }
      crash_kill_max.push_back(worst);
      if (auto r = bc.c->restart(v); !r) return state.SkipWithError("restart failed");
      // Clean stop.
      if (!own(v, w, ids)) return;
      std::vector<clock_type::time_point> sat;
      const auto s0 = clock_type::now();
      std::atomic<std::int64_t> stop_end{0};
      std::thread stopper([&] {
        (void)bc.c->stop(v);
        stop_end.store(clock_type::now().time_since_epoch().count());
      });
      sat = first_answers(bc.node(w), ids, static_cast<std::int64_t>(v), 20s);
      stopper.join();
      if (sat.empty()) return state.SkipWithError("a grain of the stopped node never answered");
      const clock_type::time_point s1{clock_type::duration(stop_end.load())};
      stop_takes.push_back(ms_of(s1 - s0));
      for (auto t : sat) {
        stop_call_ms.push_back(ms_of(t - s0));
        stop_return_ms.push_back(ms_of(t - s1));  // negative: answered before stop() returned
      }
      if (auto r = bc.c->restart(v); !r) return state.SkipWithError("restart failed");
    }
  }
  auto pct = [](std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
  };
  state.counters["kills"] = kills;
  state.counters["grains_per_kill"] = k_failover_grains;
  state.counters["crash_p50_ms"] = pct(crash_ms, 0.5);
  state.counters["crash_max_ms"] = pct(crash_ms, 1.0);
  state.counters["crash_kill_max_p50_ms"] = pct(crash_kill_max, 0.5);
  state.counters["stop_call_p50_ms"] = pct(stop_call_ms, 0.5);
  state.counters["stop_call_max_ms"] = pct(stop_call_ms, 1.0);
  state.counters["stop_return_p50_ms"] = pct(stop_return_ms, 0.5);
  state.counters["stop_return_max_ms"] = pct(stop_return_ms, 1.0);
  state.counters["stop_takes_p50_ms"] = pct(stop_takes, 0.5);
  state.counters["stop_takes_max_ms"] = pct(stop_takes, 1.0);
}
BENCHMARK(BM_ClusterGrainFailover)
    ->Apply(store_args)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace akt_bench
