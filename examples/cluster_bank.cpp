// Bank accounts as grains across a cluster (docs/guide/07-cluster.md, "Grains in a cluster").
// Every account is one grain in the whole cluster; deposits carry an id, so a caller that did not
// get an answer sends the same deposit again and it is counted once. The balances live in a
// ledger that outlives activations and nodes, and the ledger refuses a write carrying an older
// fencing token than the last one it recorded: an account never has two writers.
//
//   example_cluster_bank            one process, three nodes on the in-process store: deposits
//                                   from each, one node stops cleanly, one crashes, and every
//                                   acknowledged deposit must be in the balances exactly once
//   example_cluster_bank --node N --etcd HOST:PORT --dir DIR [--port P]
//                                   one node process on etcd: deposits until SIGTERM (then
//                                   sys.stop()), its ledger files and its log in DIR
//   example_cluster_bank --check --etcd HOST:PORT --dir DIR
//                                   joins, sends again what the nodes left unanswered, and checks
//                                   DIR's ledger against the logs (scripts/cluster_bank.sh runs
//                                   the three nodes, stops one, kills one, then this)
//
// Exit status 0 only when every acknowledged deposit is counted exactly once.
#include <akt/akt.hpp>
#include <akt/cluster/cluster.hpp>
#include <akt/cluster/inproc_store.hpp>
#include <akt/remote/serialization.hpp>
#include <akt/testkit/local_cluster.hpp>  // akt::testkit::crash
#if AKT_EXAMPLE_WITH_ETCD
#include <akt/etcd/etcd_store.hpp>
#endif

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

constexpr int k_nodes = 3;
constexpr int k_accounts = 6;  // acct-0 .. acct-5, shared by every node

std::string account_name(int i) { return "acct-" + std::to_string(i); }

// [messages]
// A deposit names itself: a caller that got no answer sends the same id again.
struct deposit {
  static constexpr std::string_view akt_type_name = "bank.deposit";
  std::string id;
  std::int64_t amount = 0;
};
struct get_balance {
  static constexpr std::string_view akt_type_name = "bank.get_balance";
};

// Grain messages cross nodes: each type gets an encoder and a decoder (the std::int64_t reply
// and the acknowledgement are built in).
void register_messages() {
  (void)akt::remote::register_message<deposit>(
      [](const deposit& d, akt::remote::byte_writer& w) -> akt::error {
        w.put_string(d.id);
        w.put_u64(static_cast<std::uint64_t>(d.amount));
        return {};
      },
      [](akt::remote::byte_reader& r) -> akt::result<deposit> {
        std::string_view id;
        std::uint64_t amount = 0;
        if (!r.get_string(id) || !r.get_u64(amount)) return akt::errc::decode_failed;
        return deposit{std::string(id), static_cast<std::int64_t>(amount)};
      });
  (void)akt::remote::register_message<get_balance>(
      [](const get_balance&, akt::remote::byte_writer&) -> akt::error { return {}; },
      [](akt::remote::byte_reader&) -> akt::result<get_balance> { return get_balance{}; });
}
// [/messages]

// ---- the ledger: where balances live between activations ----

struct ledger_entry {
  std::string id;
  std::int64_t amount = 0;
};
struct ledger_record {
  std::int64_t token = 0;             // the greatest fencing token that opened or wrote it
  std::vector<ledger_entry> entries;  // every deposit counted, in order
  std::int64_t balance() const {
    std::int64_t sum = 0;
    for (const ledger_entry& e : entries) sum += e.amount;
    return sum;
  }
};

// [fence]
// The ledger's one rule. A write carrying a smaller fencing token than the last one recorded
// comes from an activation that a newer claim has replaced (its process was paused, or cut off,
// while a handler ran): it is refused, so an account never has two writers.
akt::error check_token(ledger_record& r, std::int64_t token) {
  if (token < r.token)
    return akt::error(akt::errc::invalid_argument, "stale fencing token " + std::to_string(token) +
                                                       " < " + std::to_string(r.token));
  r.token = token;  // from now on, writes of older activations are refused
  return {};
}
// [/fence]

// A database in a real program. Thread-safe: every activation of every node in this process
// shares it (a grain dependency).
class ledger {
 public:
  virtual ~ledger() = default;
  // The account as an activation holding `token` starts from; raises the recorded token to it.
  akt::result<ledger_record> open(const std::string& account, std::int64_t token) {
    ledger_record out;
    akt::error e = update(account, true, [&](ledger_record& r) {
      akt::error refused = check_token(r, token);
      out = r;
      return refused;
    });
    if (e) return count_refusal(e);
    return out;
  }
  // Counts one deposit, if `token` is still the newest.
  akt::error append(const std::string& account, std::int64_t token, ledger_entry entry) {
    return count_refusal(update(account, true, [&](ledger_record& r) {
      if (akt::error refused = check_token(r, token)) return refused;
      r.entries.push_back(std::move(entry));
      return akt::error();
    }));
  }
  ledger_record read(const std::string& account) {
    ledger_record out;
    (void)update(account, false, [&](ledger_record& r) {
      out = r;
      return akt::error();
    });
    return out;
  }
  int refused() const { return refused_.load(); }

 protected:
  // Runs f on the account's record, alone; with `write`, saves the record when f returned ok.
  virtual akt::error update(const std::string& account, bool write,
                            const std::function<akt::error(ledger_record&)>& f) = 0;

 private:
  akt::error count_refusal(akt::error e) {
    if (e) ++refused_;
    return e;
  }
  std::atomic<int> refused_{0};
};

// One process: a map under a mutex.
class memory_ledger final : public ledger {
 protected:
  akt::error update(const std::string& account, bool write,
                    const std::function<akt::error(ledger_record&)>& f) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ledger_record copy = records_[account];
    akt::error e = f(copy);
    if (!e && write) records_[account] = std::move(copy);
    return e;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, ledger_record> records_;
};

// Several processes: one file per account in a shared directory, changed under an exclusive
// flock of <account>.lock and replaced by rename (a process killed mid-write leaves the old
// file; the kernel drops its lock).
class file_ledger final : public ledger {
 public:
  explicit file_ledger(fs::path dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }

 protected:
  akt::error update(const std::string& account, bool write,
                    const std::function<akt::error(ledger_record&)>& f) override {
    const fs::path path = dir_ / account;
    const int lock = ::open((path.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0) return akt::error(akt::errc::invalid_argument, "ledger: " + path.string());
    while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
    }
    ledger_record r = load(path);
    akt::error e = f(r);
    if (!e && write) save(path, r);
    ::close(lock);  // releases the flock
    return e;
  }

 private:
  static ledger_record load(const fs::path& path) {
    ledger_record r;
    std::ifstream in(path);
    std::string word;
    while (in >> word) {
      if (word == "token") {
        in >> r.token;
      } else if (word == "entry") {
        ledger_entry e;
        in >> e.id >> e.amount;
        r.entries.push_back(std::move(e));
      }
    }
    return r;
  }
  static void save(const fs::path& path, const ledger_record& r) {
    const fs::path tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << "token " << r.token << '\n';
      for (const ledger_entry& e : r.entries) out << "entry " << e.id << ' ' << e.amount << '\n';
    }
    fs::rename(tmp, path);
  }

  const fs::path dir_;
};

// [account]
class account : public akt::grain {
 public:
  static constexpr std::string_view akt_type_name = "bank.account";

  akt::error on_activate(akt::grain_props& props) override {
    ledger_ = props.dependency<ledger>("ledger");
    if (!ledger_) return akt::error(akt::errc::invalid_argument, "no ledger");
    name_ = props.identity().name;
    // The claim's revision: greater than that of every earlier activation of this account.
    akt::result<ledger_record> r = ledger_->open(name_, props.fencing_token());
    if (!r) return r.error();  // a newer activation has opened the account since
    balance_ = r->balance();
    for (const ledger_entry& e : r->entries) counted_.insert(e.id);
    std::printf("%s: %s activated, fencing token %lld, balance %lld\n",
                props.system().name().c_str(), name_.c_str(),
                static_cast<long long>(props.fencing_token()), static_cast<long long>(balance_));
    return {};
  }

  void on_receive(akt::grain_context& ctx) override {
    akt::match(
        ctx,
        [&](const deposit& d, auto& c) {
          if (counted_.contains(d.id)) return c.ack();  // sent again: counted already
          // Written with this activation's token: refused if a newer one has taken over.
          if (akt::error e = ledger_->append(name_, c.fencing_token(), {d.id, d.amount}))
            return c.reply_error(e);
          counted_.insert(d.id);
          balance_ += d.amount;
          c.ack();  // only now: an acknowledged deposit is in the ledger
        },
        [&](const get_balance&, auto& c) { c.reply(balance_); });
  }

 private:
  std::shared_ptr<ledger> ledger_;
  std::string name_;
  std::int64_t balance_ = 0;
  std::set<std::string> counted_;  // the ids in the ledger: a deposit sent twice counts once
};
// [/account]

// [config]
akt::system_config node_config(std::shared_ptr<akt::cluster::store_provider> store,
                               std::string node, std::uint16_t port = 0) {
  akt::system_config cfg;
  cfg.remote = akt::remote_config{};  // grain messages between nodes go over remoting
  cfg.remote->port = port;            // 0: any free port (it is in the member record)
  akt::cluster_config cluster;
  cluster.cluster_name = "bank";
  cluster.node_name = std::move(node);
  cluster.store = std::move(store);  // akt::cluster::inproc_store, or akt::etcd::provider
  cluster.lease_ttl = 2s;            // a crashed node's grains move after about this long
  cfg.cluster = cluster;
  return cfg;
}

// Before start(): every node that may host accounts registers the kind, with the same
// dependencies. A node that claims an account builds it there.
akt::error register_accounts(akt::actor_system& sys, std::shared_ptr<ledger> book) {
  auto deps = std::make_shared<akt::grain_dependencies>();
  deps->add("ledger", std::move(book));
  return akt::with_grain_default_options<account>(sys, {.dependencies = deps});
}
// [/config]

// ---- callers ----

// What callers saw, for the report: acknowledged deposits, and errors on the way.
struct journal {
  std::mutex mutex;
  std::map<std::string, deposit> acknowledged;  // id -> deposit
  std::map<std::string, std::string> account_of;
  std::map<std::string, deposit> unanswered;  // sent, never acknowledged (the caller gave up)
  std::map<std::string, int> retried;         // error code -> how many tries it failed
  steady::duration longest{0};                // the longest wait for an acknowledgement
  void note_error(const akt::error& e) {
    std::lock_guard<std::mutex> lock(mutex);
    ++retried[std::string(akt::to_string(e.code()))];
  }
  // "request_timeout x2, ... ; the longest wait for an answer: N ms"
  std::string retries() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string out;
    for (const auto& [code, n] : retried)
      out += (out.empty() ? "" : ", ") + code + " x" + std::to_string(n);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(longest).count();
    return "sent again after " + (out.empty() ? std::string("nothing") : out) +
           "; the longest wait for an answer: " + std::to_string(ms) + " ms";
  }
};

akt::grain_identity account_id(const std::string& name) {
  return {std::string(akt::type_name<account>()), name};
}

// [deposit]
// Sends a deposit until the account acknowledges it. Every try carries the same id, so the
// deposit is counted once even when an earlier try ran and only its answer was lost (its owner
// crashed: connection_lost, or request_timeout until membership drops the crashed node).
akt::error deposit_until_acknowledged(akt::actor_system& sys, const std::string& account,
                                      const deposit& d, const std::atomic<bool>& give_up,
                                      journal* log = nullptr) {
  const auto until = steady::now() + 20s;
  for (;;) {
    akt::error e = akt::tell_grain(sys, account_id(account), d, {.timeout = 1s});
    if (!e || give_up.load() || steady::now() >= until) return e;
    if (log) log->note_error(e);
    std::this_thread::sleep_for(50ms);  // e.g. until membership drops a crashed owner
  }
}
// [/deposit]

std::int64_t amount_of(int node, int seq) { return 1 + (seq * 37 + node * 11) % 100; }

// One caller: deposits from `node`, round-robin over the accounts, until told to stop (or
// `count` deposits, when positive). A deposit still unanswered when it stops is left for others.
void deposit_loop(akt::actor_system& sys, const std::string& prefix, int node, int& seq, int count,
                  const std::atomic<bool>& stop, journal& log) {
  for (int done = 0; !stop.load() && (count <= 0 || done < count); ++done, ++seq) {
    const std::string account = account_name((seq + node) % k_accounts);
    const deposit d{prefix + std::to_string(seq), amount_of(node, seq)};
    const auto sent = steady::now();
    akt::error e = deposit_until_acknowledged(sys, account, d, stop, &log);
    std::lock_guard<std::mutex> lock(log.mutex);
    log.longest = std::max(log.longest, steady::now() - sent);
    log.account_of[d.id] = account;
    (e ? log.unanswered : log.acknowledged)[d.id] = d;
  }
}

// The verdict: every acknowledged deposit is in the ledger exactly once, nothing else is, and
// the grains report the ledger's balances.
bool check(ledger& book, journal& log, const std::map<std::string, std::int64_t>& reported) {
  bool ok = true;
  std::int64_t acknowledged = 0;
  for (const auto& [id, d] : log.acknowledged) acknowledged += d.amount;
  std::int64_t total = 0;
  std::map<std::string, int> seen;
  for (int a = 0; a < k_accounts; ++a) {
    const std::string name = account_name(a);
    const ledger_record r = book.read(name);
    total += r.balance();
    for (const ledger_entry& e : r.entries) ++seen[e.id];
    auto it = reported.find(name);
    std::printf("%s: balance %lld (%zu deposits), the grain says %s\n", name.c_str(),
                static_cast<long long>(r.balance()), r.entries.size(),
                it == reported.end() ? "nothing" : std::to_string(it->second).c_str());
    if (it == reported.end() || it->second != r.balance()) {
      std::printf("  MISMATCH: the grain's balance is not the ledger's\n");
      ok = false;
    }
  }
  for (const auto& [id, n] : seen) {
    if (n > 1) {
      std::printf("  COUNTED TWICE: deposit %s is in the ledger %d times\n", id.c_str(), n);
      ok = false;
    }
    if (!log.acknowledged.contains(id)) {
      std::printf("  NOT ACKNOWLEDGED: deposit %s is in the ledger but its caller got an error\n",
                  id.c_str());
      ok = false;
    }
  }
  for (const auto& [id, d] : log.acknowledged) {
    if (!seen.contains(id)) {
      std::printf("  LOST: deposit %s (%lld) was acknowledged but is not in the ledger\n",
                  id.c_str(), static_cast<long long>(d.amount));
      ok = false;
    }
  }
  for (const auto& [id, d] : log.unanswered)
    std::printf("  UNANSWERED: deposit %s was never acknowledged\n", id.c_str());
  std::printf("deposits %s\n", log.retries().c_str());
  std::printf("stale writes refused by the ledger: %d\n", book.refused());
  std::printf("%zu deposits acknowledged, %lld in all; balances sum to %lld: %s\n",
              log.acknowledged.size(), static_cast<long long>(acknowledged),
              static_cast<long long>(total),
              ok && acknowledged == total && log.unanswered.empty()
                  ? "every acknowledged deposit counted exactly once"
                  : "CHECK FAILED");
  return ok && acknowledged == total && log.unanswered.empty();
}

// Sends again, from `sys`, what callers left unanswered (a client failing over to a live node).
void send_unanswered(akt::actor_system& sys, journal& log) {
  std::map<std::string, deposit> left;
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    left.swap(log.unanswered);
  }
  const std::atomic<bool> never{false};
  for (const auto& [id, d] : left) {
    const std::string account = log.account_of.at(id);
    akt::error e = deposit_until_acknowledged(sys, account, d, never, &log);
    std::printf("sent %s again from %s: %s\n", id.c_str(), sys.name().c_str(),
                e ? e.message().c_str() : "acknowledged");
    std::lock_guard<std::mutex> lock(log.mutex);
    (e ? log.unanswered : log.acknowledged)[id] = d;
  }
}

std::map<std::string, std::int64_t> balances(akt::actor_system& sys) {
  std::map<std::string, std::int64_t> out;
  for (int a = 0; a < k_accounts; ++a) {
    for (auto until = steady::now() + 10s; steady::now() < until;) {
      akt::result<std::int64_t> b =
          akt::ask_grain<std::int64_t>(sys, account_id(account_name(a)), get_balance{}, 2s);
      if (b) {
        out[account_name(a)] = *b;
        break;
      }
      std::this_thread::sleep_for(50ms);
    }
  }
  return out;
}

bool wait_members(akt::actor_system& sys, std::size_t n) {
  for (auto until = steady::now() + 20s; steady::now() < until;) {
    if (akt::cluster::members(sys).size() >= n) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// ---- one process, three nodes on the in-process store ----

int run_in_process() {
  const auto t0 = steady::now();
  auto at = [&] {
    return std::chrono::duration_cast<std::chrono::duration<double>>(steady::now() - t0).count();
  };
  auto store = std::make_shared<akt::cluster::inproc_store>();
  auto book = std::make_shared<memory_ledger>();
  std::vector<std::unique_ptr<akt::actor_system>> nodes;
  for (int n = 0; n < k_nodes; ++n) {
    const std::string name = "node-" + std::to_string(n);
    nodes.push_back(std::make_unique<akt::actor_system>(name, node_config(store, name)));
    if (akt::error e = register_accounts(*nodes.back(), book)) {
      std::printf("register: %s\n", e.message().c_str());
      return 1;
    }
  }
  for (auto& sys : nodes) {
    if (akt::result<void> r = sys->start(); !r) {
      std::printf("start: %s\n", r.error().message().c_str());
      return 1;
    }
  }
  for (auto& sys : nodes)
    if (!wait_members(*sys, k_nodes)) return 1;

  journal log;
  std::atomic<bool> stop[k_nodes] = {false, false, false};
  int seq[k_nodes] = {0, 0, 0};
  // Each node first touches "its" accounts, so that every node owns some (placement is local).
  for (int n = 0; n < k_nodes; ++n)
    deposit_loop(*nodes[n], "n" + std::to_string(n) + "-", n, seq[n], 2, stop[n], log);
  std::vector<std::thread> callers;
  for (int n = 0; n < k_nodes; ++n)
    callers.emplace_back([&, n] {
      deposit_loop(*nodes[n], "n" + std::to_string(n) + "-", n, seq[n], 0, stop[n], log);
    });
  auto acknowledged = [&] {
    std::lock_guard<std::mutex> lock(log.mutex);
    return log.acknowledged.size();
  };
  auto wait_acknowledged = [&](std::size_t more) {
    const std::size_t target = acknowledged() + more;
    for (auto until = steady::now() + 20s; acknowledged() < target && steady::now() < until;)
      std::this_thread::sleep_for(5ms);
    return acknowledged() >= target;
  };

  bool ok = wait_acknowledged(300);
  std::printf("-- %.2f s: node-2 stops cleanly (%zu deposits acknowledged so far)\n", at(),
              acknowledged());
  stop[2] = true;  // its own caller goes with it
  if (akt::result<void> r = nodes[2]->stop(); !r)
    std::printf("node-2 stop: %s\n", r.error().message().c_str());
  callers[2].join();
  ok = wait_acknowledged(150) && ok;
  std::printf("-- %.2f s: node-1 crashes (%zu deposits acknowledged so far)\n", at(),
              acknowledged());
  stop[1] = true;
  (void)akt::testkit::crash(*nodes[1]);  // as kill -9: no release, its lease just expires
  callers[1].join();
  // node-0 keeps depositing to every account, node-1's included (they move once its lease
  // expired): two rounds over the accounts, acknowledged.
  ok = wait_acknowledged(2 * k_accounts) && ok;
  stop[0] = true;
  callers[0].join();
  std::printf("-- %.2f s: node-0 sends what the others left unanswered, reads the balances\n",
              at());
  send_unanswered(*nodes[0], log);
  const std::map<std::string, std::int64_t> reported = balances(*nodes[0]);
  ok = check(*book, log, reported) && ok;
  if (akt::result<void> r = nodes[0]->stop(); !r) {
    std::printf("node-0 stop: %s\n", r.error().message().c_str());
    ok = false;
  }
  return ok ? 0 : 1;
}

// ---- several processes on etcd ----

#if AKT_EXAMPLE_WITH_ETCD

// A node's log in DIR, one line per event, appended with one write(2) each so that a killed
// process leaves whole lines: "sent <id> <account> <amount>", "ack <id>".
class node_log {
 public:
  explicit node_log(const fs::path& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {}
  ~node_log() {
    if (fd_ >= 0) ::close(fd_);
  }
  void line(const std::string& s) {
    const std::string l = s + '\n';
    if (fd_ >= 0 && ::write(fd_, l.data(), l.size()) != static_cast<ssize_t>(l.size()))
      std::perror("node log");
  }

 private:
  int fd_;
};

std::shared_ptr<akt::cluster::store_provider> etcd_store(const std::string& endpoint) {
  akt::etcd::etcd_options etcd;
  etcd.endpoints = {endpoint};
  return akt::etcd::provider(etcd);
}

// Waits for SIGTERM or SIGINT (blocked in every thread, so they arrive here), at most `limit`.
int wait_for_signal(std::chrono::seconds limit) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  timespec ts{static_cast<time_t>(limit.count()), 0};
  return sigtimedwait(&set, nullptr, &ts);
}

int run_node(int node, const std::string& endpoint, const fs::path& dir, std::uint16_t port) {
  const std::string name = "bank-" + std::to_string(node);
  akt::actor_system sys(name, node_config(etcd_store(endpoint), name, port));
  if (akt::error e = register_accounts(sys, std::make_shared<file_ledger>(dir / "ledger"))) {
    std::printf("%s: register: %s\n", name.c_str(), e.message().c_str());
    return 1;
  }
  if (akt::result<void> r = sys.start(); !r) {
    std::printf("%s: start: %s\n", name.c_str(), r.error().message().c_str());
    return 1;
  }
  if (!wait_members(sys, k_nodes)) {
    std::printf("%s: the other nodes did not join\n", name.c_str());
    (void)sys.stop();
    return 1;
  }
  std::printf("%s: joined at %s\n", name.c_str(), sys.address().c_str());
  std::fflush(stdout);
  node_log log(dir / (name + ".log"));
  std::atomic<bool> stop{false};
  int deposits = 0;
  journal seen;  // this node's retries, for its last line
  std::thread caller([&] {
    for (int seq = 0; !stop.load(); ++seq) {
      const std::string account = account_name((seq + node) % k_accounts);
      const deposit d{"n" + std::to_string(node) + "-" + std::to_string(seq), amount_of(node, seq)};
      log.line("sent " + d.id + " " + account + " " + std::to_string(d.amount));
      const auto sent = steady::now();
      if (!deposit_until_acknowledged(sys, account, d, stop, &seen)) {
        log.line("ack " + d.id);
        ++deposits;
      }
      seen.longest = std::max(seen.longest, steady::now() - sent);
      std::this_thread::sleep_for(10ms);  // a steady trickle, not a benchmark
    }
  });
  const int sig = wait_for_signal(60s);  // the script stops us; never linger past a minute
  stop = true;
  caller.join();
  akt::result<void> stopped = sys.stop();  // releases this node's accounts
  std::printf("%s: %s after %d acknowledged deposits (%s); stop: %s\n", name.c_str(),
              sig > 0 ? strsignal(sig) : "time limit", deposits, seen.retries().c_str(),
              stopped ? "ok" : stopped.error().message().c_str());
  return stopped && sig > 0 ? 0 : 1;
}

// The nodes' logs: what was sent and what was acknowledged.
void read_logs(const fs::path& dir, journal& log) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    std::ifstream in(entry.path());
    std::string word, id, account;
    while (in >> word >> id) {
      if (word == "sent") {
        deposit d{id, 0};
        in >> account >> d.amount;
        log.account_of[id] = account;
        log.unanswered[id] = d;
      } else if (word == "ack") {
        log.acknowledged[id] = log.unanswered.at(id);
        log.unanswered.erase(id);
      }
    }
  }
}

int run_check(const std::string& endpoint, const fs::path& dir) {
  akt::actor_system sys("bank-check", node_config(etcd_store(endpoint), "bank-check"));
  auto book = std::make_shared<file_ledger>(dir / "ledger");
  if (akt::error e = register_accounts(sys, book)) return 1;
  if (akt::result<void> r = sys.start(); !r) {
    std::printf("check: start: %s\n", r.error().message().c_str());
    return 1;
  }
  journal log;
  read_logs(dir, log);
  std::printf("check: %zu deposits acknowledged, %zu left unanswered by their node\n",
              log.acknowledged.size(), log.unanswered.size());
  send_unanswered(sys, log);
  const bool ok = check(*book, log, balances(sys));
  akt::result<void> stopped = sys.stop();
  return ok && stopped ? 0 : 1;
}

#endif  // AKT_EXAMPLE_WITH_ETCD

int usage(const char* self) {
  std::printf(
      "usage: %s                      (one process, three nodes)\n"
      "       %s --node N --etcd HOST:PORT --dir DIR [--port P]\n"
      "       %s --check --etcd HOST:PORT --dir DIR\n",
      self, self, self);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  register_messages();
  if (argc == 1) return run_in_process();
#if AKT_EXAMPLE_WITH_ETCD
  int node = -1;
  bool check_mode = false;
  std::string endpoint;
  std::string dir;
  std::uint16_t port = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--node" && has_value) {
      node = std::atoi(argv[++i]);
    } else if (arg == "--etcd" && has_value) {
      endpoint = argv[++i];
    } else if (arg == "--dir" && has_value) {
      dir = argv[++i];
    } else if (arg == "--port" && has_value) {
      port = static_cast<std::uint16_t>(std::atoi(argv[++i]));
    } else if (arg == "--check") {
      check_mode = true;
    } else {
      return usage(argv[0]);
    }
  }
  if (endpoint.empty() || dir.empty() || (node < 0) == !check_mode) return usage(argv[0]);
  // Signals are taken by wait_for_signal only: block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return check_mode ? run_check(endpoint, dir) : run_node(node, endpoint, dir, port);
#else
  std::printf("built without akt::etcd: only the one-process mode\n");
  return usage(argv[0]);
#endif
}
