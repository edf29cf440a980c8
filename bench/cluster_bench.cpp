// akt_cluster_bench: what cluster membership costs and how soon it reacts, on the in-process
// store (see bench/README.md, docs/benchmarks.md "Cluster membership").
//
//   [AKT_BENCH_ETCD=host:port] akt_cluster_bench [what = all] [runs = 20]
//     what: all | keepalive | crash | stop | cutoff
//   With AKT_BENCH_ETCD (and akt::etcd built), every part runs on that etcd too (cutoff through a
//   testkit tcp_proxy per node, blackholed).
//
// Every measurement uses akt::testkit::local_cluster (nodes of one process, remoting on
// loopback) on an in-process store wrapped by `recording_provider`, which forwards every call
// to an inproc_client and notes, per node, when the node's last acknowledged keep-alive was
// sent (and when its acknowledgement arrived) and when the node revoked its lease. Times are
// steady-clock.
//
// - keepalive: an idle node with a cluster section at TTL 5 s against an idle node without one
//   (both with remoting, nothing else running), alternating, each for a fixed wall time; CPU of
//   the node's own threads (/proc/self/task/<tid>/schedstat of the threads that appeared while it
//   started) and of the whole process (CLOCK_PROCESS_CPUTIME_ID), in CPU seconds per second.
// - crash: `runs` two-node clusters (node-0 watches, node-1 is crashed), 4 at a time, at TTL 2 s
//   and 5 s; each crash comes at a random point of a keep-alive period after the first. Time from
//   crash()'s return to node_left on node-0, and from the crashed node's last acknowledged
//   keep-alive's send time to that node_left.
// - stop: one two-node cluster at TTL 5 s; `runs` times: node-1 restarts, then stops cleanly.
//   Time from the lease revoke (the store call) to node_left on node-0, and from stop()'s call.
// - cutoff: `runs / 2` two-node clusters at TTL 2 s and at 5 s (fence margin 300 ms / 500 ms);
//   a thread on node-1 sends a one-way grain message every millisecond to a grain on node-1;
//   node-1 is cut off the store at a random point of the keep-alive period after the first one.
//   Time from the send of its last acknowledged keep-alive to the last grain message handled on
//   node-1 (must be below TTL - margin), and from the cut to that message.

#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/cluster/inproc_store.hpp>
#include <akt/remote/remote.hpp>
#include <akt/testkit/local_cluster.hpp>
#include <akt/testkit/tcp_proxy.hpp>
#ifdef AKT_BENCH_HAS_ETCD
#include <akt/etcd/etcd_store.hpp>
#endif
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace cl = akt::cluster;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
double ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

// ---- the recording store ----

// What one store connection (one node process) did, in steady-clock ns; 0: not yet.
// Writers: the connection's completion thread (acked_*) and the node's membership (revoked_at,
// first call only); reader: the benchmark thread, after the event it waits for. Each field is
// read alone, so seq_cst loads and stores with no further pairing.
struct node_log {
  // Send time of the last acknowledged keep-alive (or of the lease's grant, before the first).
  std::atomic<std::int64_t> acked_sent{0};
  std::atomic<std::int64_t> acked_at{0};    // when that acknowledgement arrived
  std::atomic<std::int64_t> revoked_at{0};  // when the node called revoke_lease (first time)
  std::atomic<long> caller_tid{0};          // the thread that sends keep-alives (the ticker)
  std::atomic<long> completion_tid{0};      // the thread their acknowledgements arrive on
};

// Forwards every call to an inproc_client and records keep-alive acknowledgements and the revoke
// in its node_log. Callable from any thread, as the store it wraps; the callbacks run on the
// wrapped client's completion thread. The keep-alive's send time is taken here, a few
// hundred nanoseconds after membership takes its own (the one the fence counts from).
class recording_store final : public cl::store {
 public:
  // inproc: the same object as inner when it is an in-process client (for cut_off), else null.
  recording_store(std::unique_ptr<cl::store> inner, cl::inproc_client* inproc,
                  std::shared_ptr<node_log> log)
      : inner_(std::move(inner)), inproc_(inproc), log_(std::move(log)) {}
  void grant_lease(std::chrono::seconds ttl, cl::store_callback<cl::lease_grant> done) override {
    // A lease is valid from its grant's send time until a keep-alive is acknowledged.
    const std::int64_t sent = now_ns();
    inner_->grant_lease(ttl,
                        [log = log_, sent, done = std::move(done)](akt::result<cl::lease_grant> r) {
                          if (r) {
                            log->acked_sent.store(sent);
                            log->acked_at.store(now_ns());
                          }
                          done(std::move(r));
                        });
  }
  void keep_alive(cl::lease_id id, cl::store_callback<cl::keep_alive_ack> done) override {
    const std::int64_t sent = now_ns();
    log_->caller_tid.store(static_cast<long>(gettid()));
    inner_->keep_alive(
        id, [log = log_, sent, done = std::move(done)](akt::result<cl::keep_alive_ack> r) {
          log->completion_tid.store(static_cast<long>(gettid()));
          if (r) {
            log->acked_sent.store(sent);
            log->acked_at.store(now_ns());
          }
          done(std::move(r));
        });
  }
  void revoke_lease(cl::lease_id id, cl::store_callback<void> done) override {
    std::int64_t zero = 0;
    (void)log_->revoked_at.compare_exchange_strong(zero, now_ns());
    inner_->revoke_lease(id, std::move(done));
  }
  void get(std::string key, cl::store_callback<cl::range_result> done) override {
    inner_->get(std::move(key), std::move(done));
  }
  void get_prefix(std::string prefix, cl::store_callback<cl::range_result> done) override {
    inner_->get_prefix(std::move(prefix), std::move(done));
  }
  void commit(std::vector<cl::store_op> ops,
              cl::store_callback<std::vector<cl::op_outcome>> done) override {
    inner_->commit(std::move(ops), std::move(done));
  }
  std::unique_ptr<cl::watch_handle> watch(std::string prefix, cl::revision from,
                                          cl::watch_handler& h) override {
    return inner_->watch(std::move(prefix), from, h);
  }
  cl::inproc_client* client() { return inproc_; }

 private:
  std::unique_ptr<cl::store> inner_;
  cl::inproc_client* inproc_;
  std::shared_ptr<node_log> log_;
};

// An in-process store whose connections record (above), by node name. open_store from any
// thread (each node's start); log and cut_off from the benchmark thread. One mutex guards the
// maps; a client pointer is valid while its node's membership runs.
class recording_provider final : public cl::store_provider {
 public:
  // etcd_endpoint: host:port of an etcd to use instead of the in-process store.
  explicit recording_provider(std::string etcd_endpoint = {})
      : etcd_endpoint_(std::move(etcd_endpoint)) {}

  akt::result<std::unique_ptr<cl::store>> open_store(std::string_view node) override {
    auto log = std::make_shared<node_log>();
    std::unique_ptr<recording_store> s;
    if (etcd_endpoint_.empty()) {
      cl::inproc_client_options o;
      o.call_timeout = 300ms;  // as local_cluster's: a cut-off node's calls fail within this
      std::unique_ptr<cl::inproc_client> c = data_.connect(std::string(node), o);
      cl::inproc_client* raw = c.get();
      s = std::make_unique<recording_store>(std::move(c), raw, log);
    } else {
#ifdef AKT_BENCH_HAS_ETCD
      // Each node reaches etcd through a fault proxy of its own: cut_off blackholes it (a
      // partition between that node and etcd; its TCP connections stay open and silent).
      const auto colon = etcd_endpoint_.rfind(':');
      auto proxy = std::make_unique<akt::testkit::tcp_proxy>(
          etcd_endpoint_.substr(0, colon),
          static_cast<std::uint16_t>(std::stoi(etcd_endpoint_.substr(colon + 1))));
      akt::etcd::etcd_options o;
      o.endpoints = {proxy->address()};
      o.call_timeout = 1000ms;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        proxies_[std::string(node)] = std::move(proxy);
      }
      auto c = akt::etcd::connect(o);
      if (!c) return c.error();
      s = std::make_unique<recording_store>(std::move(*c), nullptr, log);
#else
      return akt::error(akt::errc::invalid_cluster_config, "built without akt::etcd");
#endif
    }
    std::lock_guard<std::mutex> lock(mutex_);
    logs_[std::string(node)] = log;
    clients_[std::string(node)] = s->client();  // lives as long as the node's membership
    return std::unique_ptr<cl::store>(std::move(s));
  }
  // The log of the node's latest store connection (its current or last process).
  std::shared_ptr<node_log> log(const std::string& node) {
    std::lock_guard<std::mutex> lock(mutex_);
    return logs_.at(node);
  }
  // Valid while the node's system runs.
  void cut_off(const std::string& node, bool on) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = proxies_.find(node); it != proxies_.end()) {
      if (on)
        it->second->blackhole();
      else
        it->second->pass();
      return;
    }
    clients_.at(node)->cut_off(on);
  }

 private:
  const std::string etcd_endpoint_;
  cl::inproc_store data_;  // unused with etcd
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<node_log>> logs_;
  std::map<std::string, cl::inproc_client*> clients_;
  std::map<std::string, std::unique_ptr<akt::testkit::tcp_proxy>> proxies_;  // etcd only
};

// When node-0 saw each other node leave (the latest time per name). The subscription's callback
// runs on the publishing thread; wait and forget on the benchmark thread; the mutex guards.
struct left_watch {
  std::mutex mutex;
  std::map<std::string, std::int64_t> left_at;
  akt::subscription sub;
  explicit left_watch(akt::actor_system& sys) {
    sub = sys.events().subscribe<cl::node_left>([this](const cl::node_left& e) {
      const std::int64_t t = now_ns();
      std::lock_guard<std::mutex> lock(mutex);
      left_at[e.node.name] = t;
    });
  }
  void forget(const std::string& n) {
    std::lock_guard<std::mutex> lock(mutex);
    left_at.erase(n);
  }
  // Waits for n's node_left (at most timeout); 0 when it did not come.
  std::int64_t wait(const std::string& n, std::chrono::nanoseconds timeout) {
    const std::int64_t give_up = now_ns() + timeout.count();
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (auto it = left_at.find(n); it != left_at.end()) return it->second;
      }
      if (now_ns() > give_up) return 0;
      std::this_thread::sleep_for(200us);  // polling; the event's own time is recorded above
    }
  }
};

// ---- statistics ----

struct series {
  std::vector<double> v;
  void add(double x) { v.push_back(x); }
  double pct(double p) const {
    if (v.empty()) return 0;
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    const std::size_t i = static_cast<std::size_t>(p * static_cast<double>(s.size() - 1) + 0.5);
    return s[std::min(i, s.size() - 1)];
  }
  double min() const { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
  double max() const { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
};

void print_row(const char* what, const series& s, const char* unit = "ms") {
  std::printf("  %-58s n=%-3zu min %8.1f  p50 %8.1f  max %8.1f %s\n", what, s.v.size(), s.min(),
              s.pct(0.5), s.max(), unit);
}

std::int64_t random_ns(std::int64_t below) {
  static std::mutex m;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(m);
  return std::uniform_int_distribution<std::int64_t>(0, below)(rng);
}

akt::testkit::local_cluster_options options(std::shared_ptr<recording_provider> p,
                                            std::chrono::seconds ttl,
                                            std::chrono::milliseconds margin) {
  // A cluster name of its own for every local_cluster: on one etcd, clusters that run at the same
  // time (or a crashed node's record, until its lease expires) must not meet.
  static std::atomic<int> next{0};
  akt::testkit::local_cluster_options o;
  o.cluster = "bench-" + std::to_string(next.fetch_add(1));
  o.lease_ttl = ttl;
  o.fence_margin = margin;
  o.store = std::move(p);
  return o;
}

// ---- keepalive ----

std::set<long> thread_ids() {
  std::set<long> out;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') out.insert(std::strtol(e->d_name, nullptr, 10));
    }
    closedir(d);
  }
  return out;
}
// CPU time of one thread (ns), from schedstat's first field.
std::int64_t thread_cpu_ns(long tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/schedstat");
  long long run = 0;
  f >> run;
  return run;
}
std::int64_t process_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct idle_figures {
  double node_cores = 0;     // the node's own threads
  double process_cores = 0;  // the whole process
  std::size_t threads = 0;
  std::vector<double> per_thread;       // cores, by thread id (creation order)
  double ticker = -1, completion = -1;  // the membership ticker, the store client's thread
};

idle_figures measure_idle(bool with_cluster, std::chrono::seconds wall, const std::string& etcd) {
  // The in-process store's expiry thread exists already: not counted as the node's. An etcd
  // connection's threads (gRPC's) start with the node and are counted.
  auto provider = std::make_shared<recording_provider>(etcd);
  const std::set<long> before = thread_ids();
  akt::system_config cfg;
  cfg.workers = 2;
  cfg.remote = akt::remote_config{};
  if (with_cluster) {
    akt::cluster_config cc;
    cc.cluster_name = "bench";
    cc.node_name = "idle";
    cc.store = provider;
    cc.lease_ttl = 5s;
    cfg.cluster = cc;
  }
  auto sys = std::make_unique<akt::actor_system>("idle", cfg);
  if (auto r = sys->start(); !r) {
    std::fprintf(stderr, "start failed: %s\n", r.error().message().c_str());
    std::exit(1);
  }
  if (with_cluster) (void)cl::wait_ready(*sys, 10s);
  std::this_thread::sleep_for(1s);  // past the start's own work
  std::vector<long> mine;
  for (long t : thread_ids())
    if (before.count(t) == 0) mine.push_back(t);
  std::vector<std::int64_t> start(mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) start[i] = thread_cpu_ns(mine[i]);
  const std::int64_t proc0 = process_cpu_ns(), t0 = now_ns();
  std::this_thread::sleep_for(wall);
  idle_figures out;
  const std::int64_t proc1 = process_cpu_ns(), t1 = now_ns();
  const double w = static_cast<double>(t1 - t0);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const double c = static_cast<double>(thread_cpu_ns(mine[i]) - start[i]) / w;
    out.per_thread.push_back(c);
    out.node_cores += c;
  }
  if (with_cluster) {
    const std::shared_ptr<node_log> log = provider->log("idle");
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (mine[i] == log->caller_tid.load()) out.ticker = out.per_thread[i];
      if (mine[i] == log->completion_tid.load()) out.completion = out.per_thread[i];
    }
  }
  (void)sys->stop();
  out.process_cores = static_cast<double>(proc1 - proc0) / w;
  out.threads = mine.size();
  return out;
}

void bench_keepalive(int rounds, std::chrono::seconds wall, const std::string& etcd) {
  std::printf(
      "keepalive: idle node, %s, TTL 5 s, 2 workers, remoting on; %d alternating rounds of "
      "%lld s each\n",
      etcd.empty() ? "in-process store" : "etcd", rounds, static_cast<long long>(wall.count()));
  series plain_node, plain_proc, cluster_node, cluster_proc, ticker, completion;
  std::size_t plain_threads = 0, cluster_threads = 0;
  for (int r = 0; r < rounds; ++r) {
    idle_figures a = measure_idle(false, wall, etcd);
    idle_figures b = measure_idle(true, wall, etcd);
    plain_node.add(a.node_cores * 1e6);
    plain_proc.add(a.process_cores * 1e6);
    cluster_node.add(b.node_cores * 1e6);
    cluster_proc.add(b.process_cores * 1e6);
    plain_threads = a.threads;
    cluster_threads = b.threads;
    std::printf(
        "  round %d: no cluster: node %.1f us/s, process %.1f us/s; cluster: node %.1f "
        "us/s, process %.1f us/s\n",
        r + 1, a.node_cores * 1e6, a.process_cores * 1e6, b.node_cores * 1e6,
        b.process_cores * 1e6);
    for (const idle_figures* f : {&a, &b}) {
      std::printf("    %s, per thread in creation order (us/s):",
                  f == &a ? "no cluster" : "cluster");
      for (double c : f->per_thread) std::printf(" %.1f", c * 1e6);
      std::printf("\n");
    }
    std::printf(
        "    cluster: membership ticker %.1f us/s, store client completion thread %.1f us/s\n",
        b.ticker * 1e6, b.completion * 1e6);
    ticker.add(b.ticker * 1e6);
    completion.add(b.completion * 1e6);
  }
  std::printf("  threads started by the node: no cluster %zu, cluster %zu\n", plain_threads,
              cluster_threads);
  print_row("no cluster section: node threads CPU", plain_node, "us/s");
  print_row("cluster TTL 5 s: node threads CPU", cluster_node, "us/s");
  print_row("cluster TTL 5 s: membership ticker thread", ticker, "us/s");
  print_row("cluster TTL 5 s: store client completion thread", completion, "us/s");
  print_row("no cluster section: process CPU", plain_proc, "us/s");
  print_row("cluster TTL 5 s: process CPU (in-process: with the store)", cluster_proc, "us/s");
  std::printf("  difference of medians (node threads): %.1f us/s = %.6f CPU s per s\n",
              cluster_node.pct(0.5) - plain_node.pct(0.5),
              (cluster_node.pct(0.5) - plain_node.pct(0.5)) / 1e6);
}

// ---- crash ----

void bench_crash(int runs, std::chrono::seconds ttl, int parallel, const std::string& etcd) {
  std::mutex m;
  series from_crash, from_ack;
  int missed = 0;
  auto worker = [&](int count) {
    for (int i = 0; i < count; ++i) {
      auto p = std::make_shared<recording_provider>(etcd);
      akt::testkit::local_cluster c(2, options(p, ttl, 300ms));
      if (auto r = c.start(); !r) {
        std::fprintf(stderr, "crash: start failed: %s\n", r.error().message().c_str());
        std::lock_guard<std::mutex> lock(m);
        ++missed;
        continue;
      }
      left_watch w(c.node(0));
      // Past the first keep-alive (TTL / 3 after the join), then a random point of the period.
      std::this_thread::sleep_for(
          ttl / 3 + 200ms +
          std::chrono::nanoseconds(
              random_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(ttl).count() / 3)));
      (void)c.crash(1);
      const std::int64_t crashed = now_ns();
      const std::int64_t left = w.wait(akt::testkit::local_cluster::name(1), ttl * 3);
      const std::int64_t acked = p->log(akt::testkit::local_cluster::name(1))->acked_sent.load();
      std::lock_guard<std::mutex> lock(m);
      if (left == 0) {
        ++missed;
        continue;
      }
      from_crash.add(ms(left - crashed));
      if (acked != 0) from_ack.add(ms(left - acked));
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < parallel; ++t)
    threads.emplace_back(worker, runs / parallel + (t < runs % parallel ? 1 : 0));
  for (auto& t : threads) t.join();
  std::printf(
      "crash -> node_left, %s, TTL %lld s (%d crashes, %d clusters at a time, %d missed):\n",
      etcd.empty() ? "in-process store" : "etcd", static_cast<long long>(ttl.count()), runs,
      parallel, missed);
  print_row("crash() returned -> node_left on the other node", from_crash);
  print_row("last acked keep-alive sent -> node_left", from_ack);
}

// ---- stop ----

void bench_stop(int runs, const std::string& etcd) {
  auto p = std::make_shared<recording_provider>(etcd);
  akt::testkit::local_cluster c(2, options(p, 5s, 500ms));
  if (auto r = c.start(); !r) {
    std::fprintf(stderr, "stop: start failed: %s\n", r.error().message().c_str());
    return;
  }
  left_watch w(c.node(0));
  const std::string n1 = akt::testkit::local_cluster::name(1);
  series from_revoke, from_call, stop_call;
  int missed = 0;
  for (int i = 0; i < runs; ++i) {
    if (i > 0) {
      if (auto r = c.restart(1); !r || !c.wait_members(0, 2, 10s)) {
        ++missed;
        continue;
      }
    }
    std::this_thread::sleep_for(100ms);
    w.forget(n1);
    const std::int64_t called = now_ns();
    (void)c.stop(1);
    const std::int64_t returned = now_ns();
    const std::int64_t left = w.wait(n1, 10s);
    const std::int64_t revoked = p->log(n1)->revoked_at.load();
    if (left == 0 || revoked == 0) {
      ++missed;
      continue;
    }
    from_revoke.add(ms(left - revoked));
    from_call.add(ms(left - called));
    stop_call.add(ms(returned - called));
  }
  std::printf("clean stop -> node_left, %s, TTL 5 s (%d stops, %d missed):\n",
              etcd.empty() ? "in-process store" : "etcd", runs, missed);
  print_row("revoke_lease called -> node_left on the other node", from_revoke);
  print_row("stop() called -> node_left on the other node", from_call);
  print_row("stop() call duration", stop_call);
}

// ---- cutoff ----

// Written by the grain's handler (one activation, on a worker), read by the benchmark thread
// after the sender stopped and the node fenced.
struct cut_tally {
  std::atomic<std::int64_t> last_handled{0};
  std::atomic<std::uint64_t> handled{0};
};
cut_tally g_cut;

struct cut_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "bench.cut";
  void on_receive(akt::grain_context&) override {
    g_cut.last_handled.store(now_ns());
    g_cut.handled++;
  }
};

void bench_cutoff(int runs, std::chrono::seconds ttl, std::chrono::milliseconds margin,
                  const std::string& etcd) {
  series from_ack, from_cut, fence_after_ack;
  int missed = 0, late = 0;
  for (int i = 0; i < runs; ++i) {
    auto p = std::make_shared<recording_provider>(etcd);
    auto o = options(p, ttl, margin);
    o.prepare = [](akt::actor_system& s, std::size_t) {
      (void)akt::register_grain_kind<cut_grain>(s);
    };
    akt::testkit::local_cluster c(2, o);
    if (auto r = c.start(); !r) {
      std::fprintf(stderr, "cutoff: start failed: %s\n", r.error().message().c_str());
      ++missed;
      continue;
    }
    akt::actor_system& node = c.node(1);
    const akt::grain_identity id{"bench.cut", "g"};
    const std::uint64_t handled_before = g_cut.handled.load();
    (void)akt::tell_grain(node, id, 1, {.one_way = true});  // activates the grain
    const std::int64_t wait_until = now_ns() + 5'000'000'000;
    while (g_cut.handled.load() == handled_before && now_ns() < wait_until) {
      std::this_thread::sleep_for(1ms);
    }
    if (g_cut.handled.load() == handled_before) {
      std::fprintf(stderr, "cutoff: the grain did not handle its first message\n");
      ++missed;
      continue;
    }
    std::atomic<bool> done{false};
    std::thread sender([&] {
      while (!done.load()) {
        (void)akt::tell_grain(node, id, 1, {.one_way = true});
        std::this_thread::sleep_for(1ms);
      }
    });
    // Past the first keep-alive (TTL / 3 after the join), then a random point of the period.
    std::this_thread::sleep_for(
        ttl / 3 + 200ms +
        std::chrono::nanoseconds(
            random_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(ttl).count() / 3)));
    const std::string n1 = akt::testkit::local_cluster::name(1);
    p->cut_off(n1, true);
    const std::int64_t cut = now_ns();
    std::int64_t fenced_at = 0;
    while (now_ns() - cut < std::chrono::duration_cast<std::chrono::nanoseconds>(ttl * 3).count()) {
      if (cl::fenced(node)) {
        fenced_at = now_ns();
        break;
      }
      std::this_thread::sleep_for(200us);
    }
    std::this_thread::sleep_for(300ms);  // any handler that still ran after the fence shows
    done = true;
    sender.join();
    const std::int64_t last = g_cut.last_handled.load();
    const std::int64_t acked = p->log(n1)->acked_sent.load();
    p->cut_off(n1, false);
    if (fenced_at == 0 || acked == 0) {
      std::fprintf(stderr, "cutoff: %s\n", fenced_at == 0 ? "not fenced" : "no keep-alive acked");
      ++missed;
      continue;
    }
    from_ack.add(ms(last - acked));
    from_cut.add(ms(last - cut));
    fence_after_ack.add(ms(fenced_at - acked));
    if (last - acked >= std::chrono::duration_cast<std::chrono::nanoseconds>(ttl).count()) ++late;
  }
  std::printf(
      "cut off -> last grain message handled, %s, TTL %lld s, margin %lld ms (%d runs, %d "
      "missed, %d at or past the TTL):\n",
      etcd.empty() ? "in-process store" : "etcd through a blackholed proxy",
      static_cast<long long>(ttl.count()), static_cast<long long>(margin.count()), runs, missed,
      late);
  print_row("last acked keep-alive sent -> last grain message handled", from_ack);
  print_row("cut_off -> last grain message handled", from_cut);
  print_row("last acked keep-alive sent -> fenced() seen (200 us polls)", fence_after_ack);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it comes, also into a file
  const std::string what = argc > 1 ? argv[1] : "all";
  const int runs = argc > 2 ? std::atoi(argv[2]) : 20;
  const bool all = what == "all";
  // AKT_BENCH_ETCD=host:port: keepalive, crash and stop also on that etcd (cutoff needs the
  // in-process store's cut_off).
  const char* etcd_env = std::getenv("AKT_BENCH_ETCD");
  const std::string etcd = etcd_env != nullptr ? etcd_env : "";
  std::printf("akt_cluster_bench: local_cluster (2 nodes, 2 workers each); in-process store%s%s\n",
              etcd.empty() ? "" : " and etcd at ", etcd.c_str());
  if (all || what == "keepalive") {
    bench_keepalive(3, 10s, {});
    if (!etcd.empty()) bench_keepalive(3, 10s, etcd);
  }
  if (all || what == "crash") {
    bench_crash(runs, 2s, 4, {});
    bench_crash(runs, 5s, 4, {});
    if (!etcd.empty()) {
      bench_crash(runs, 2s, 4, etcd);
      bench_crash(runs, 5s, 4, etcd);
    }
  }
  if (all || what == "stop") {
    bench_stop(runs, {});
    if (!etcd.empty()) bench_stop(runs, etcd);
  }
  if (all || what == "cutoff") {
    bench_cutoff(std::max(runs / 2, 1), 2s, 300ms, "");
    bench_cutoff(std::max(runs / 2, 1), 5s, 500ms, "");
    if (!etcd.empty()) {
      bench_cutoff(std::max(runs / 2, 1), 2s, 300ms, etcd);
      bench_cutoff(std::max(runs / 2, 1), 5s, 500ms, etcd);
    }
  }
  return 0;
}
