#pragma once
// Real etcd processes for tests (header-only; needs only POSIX and the etcd binary):
// etcd_process starts one member, etcd_cluster three, each on free loopback ports (client and
// peer) with its data dir on tmpfs (/dev/shm) where there is one, else in the temp dir. Both
// wait (bounded) until every member answers /health, and stop their members with SIGKILL by
// pid (a clean stop of a lone member takes seconds), then remove the data dirs. A member also
// gets SIGKILL when the thread that started it ends, so a crashed test leaves no etcd running.
// The etcd binary is $AKT_ETCD, else AKT_ETCD_PATH (a definition CMake may set), else `etcd` on
// $PATH; etcdctl likewise ($AKT_ETCDCTL, AKT_ETCDCTL_PATH, $PATH). etcd_binary() is empty when
// there is none (a test then skips). A member killed with SIGKILL can be started again with its
// ports and data dir (etcd_cluster::restart), as a crashed etcd is restarted in production.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.hpp"

extern char** environ;

#ifndef AKT_ETCD_PATH
#define AKT_ETCD_PATH ""
#endif
#ifndef AKT_ETCDCTL_PATH
#define AKT_ETCDCTL_PATH ""
#endif

namespace akt::test {

namespace etcd_detail {
// The first executable `name` on $PATH, or "".
inline std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::string candidate = dirs.substr(begin, end - begin) + "/" + name;
    if (end > begin && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return {};
}
}  // namespace etcd_detail

inline std::string etcd_binary() {
  if (const char* e = std::getenv("AKT_ETCD"); e && *e) return e;
  if (*AKT_ETCD_PATH) return AKT_ETCD_PATH;
  return etcd_detail::find_on_path("etcd");
}
inline std::string etcdctl_binary() {
  if (const char* e = std::getenv("AKT_ETCDCTL"); e && *e) return e;
  if (*AKT_ETCDCTL_PATH) return AKT_ETCDCTL_PATH;
  return etcd_detail::find_on_path("etcdctl");
}

namespace etcd_detail {

// n distinct free loopback ports: bound to port 0 together (so they differ), then released.
// Another process could take one before etcd binds it; etcd then fails to start and the wait
// for it reports so.
inline std::vector<int> free_ports(int n) {
  std::vector<int> fds;
  std::vector<int> ports;
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(fd);
      throw std::runtime_error("bind to a free port failed");
    }
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

// A fresh data dir under /dev/shm (tmpfs) when it exists, else under the temp dir.
inline std::filesystem::path make_dir() {
  std::filesystem::path base = "/dev/shm";
  if (!std::filesystem::is_directory(base)) base = std::filesystem::temp_directory_path();
  std::string templ = (base / "akt-etcd-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return templ;
}

// Spawns argv with stdout and stderr into log; the pid. The child gets SIGKILL when the thread
// that spawned it ends (PR_SET_PDEATHSIG), so a test program that crashes leaves no etcd
// behind. Between fork and exec the child calls only async-signal-safe functions.
inline pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent is already gone
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execve(args[0], args.data(), environ);
    ::_exit(127);
  }
  return pid;
}

// One HTTP/1.0 GET of path on the loopback port, bounded by 1 s: the whole answer, or "" when
// there was none.
inline std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return {};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  auto wait_for = [&](short events) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    return ::poll(&p, 1, static_cast<int>(left.count())) == 1;
  };
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 || errno == EINPROGRESS) {
    int err = 0;
    socklen_t len = sizeof err;
    if (wait_for(POLLOUT) && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
      const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
      if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
        char buf[4096];
        while (wait_for(POLLIN)) {
          const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
          if (n <= 0) break;
          got.append(buf, static_cast<std::size_t>(n));
        }
      }
    }
  }
  ::close(fd);
  return got;
}

// etcd's /health says it serves (it has a leader).
inline bool healthy(int port) {
  return http_get(port, "/health").find("\"health\":\"true\"") != std::string::npos;
}

// etcd's /metrics says this member is the raft leader.
inline bool is_leader(int port) {
  return http_get(port, "/metrics").find("\netcd_server_is_leader 1") != std::string::npos;
}

inline void kill_and_reap(pid_t& pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  pid = -1;
}

}  // namespace etcd_detail

// One member of an etcd cluster: its ports, data dir and process.
struct etcd_member {
  std::string name;
  int client_port = 0;
  int peer_port = 0;
  std::filesystem::path dir;
  pid_t pid = -1;

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port); }
  std::string peer_url() const { return "http://127.0.0.1:" + std::to_string(peer_port); }
  std::string client_url() const { return "http://" + endpoint(); }
  bool running() const { return pid > 0; }
  // SIGKILL, reaped; the data dir stays until the cluster ends.
  void kill() { etcd_detail::kill_and_reap(pid); }
};

// n etcd members (1 or 3) in one cluster, started together, stopped by SIGKILL.
class etcd_cluster {
 public:
  // Starts the members and waits up to `wait` for each to report healthy; throws
  // std::runtime_error (with the end of the members' logs) if they do not.
  explicit etcd_cluster(int members = 1, std::chrono::seconds wait = std::chrono::seconds(30)) {
    const auto bin = etcd_binary();
    if (bin.empty()) throw std::runtime_error("no etcd binary (AKT_ETCD)");
    const auto ports = etcd_detail::free_ports(2 * members);
    for (int i = 0; i < members; ++i) {
      etcd_member m;
      m.name = "m" + std::to_string(i);
      m.client_port = ports[static_cast<std::size_t>(2 * i)];
      m.peer_port = ports[static_cast<std::size_t>(2 * i + 1)];
      m.dir = etcd_detail::make_dir();
      members_.push_back(std::move(m));
    }
    std::string initial;
    for (const auto& m : members_) {
      initial += (initial.empty() ? "" : ",") + m.name + "=" + m.peer_url();
    }
    const std::string token = "akt-test-" + std::to_string(::getpid()) + "-" +
                              std::to_string(members_.front().client_port);
    try {
      initial_ = initial;
      token_ = token;
      for (auto& m : members_)
        m.pid = etcd_detail::spawn(argv_of(m), (m.dir / "etcd.log").string());
      const auto deadline = std::chrono::steady_clock::now() + wait;
      for (auto& m : members_) {
        bool exited = false;
        const bool healthy = akt::test::eventually(
            [&] {
              int status = 0;
              exited = ::waitpid(m.pid, &status, WNOHANG) == m.pid;
              return exited || etcd_detail::healthy(m.client_port);
            },
            std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now()));
        if (exited) {
          m.pid = -1;
          throw std::runtime_error("etcd " + m.name + " exited at start: " + log_tail(m));
        }
        if (!healthy) {
          throw std::runtime_error("etcd " + m.name + " not healthy in time: " + log_tail(m));
        }
      }
    } catch (...) {
      stop();
      throw;
    }
  }
  etcd_cluster(const etcd_cluster&) = delete;
  etcd_cluster& operator=(const etcd_cluster&) = delete;
  ~etcd_cluster() { stop(); }

  std::vector<etcd_member>& members() { return members_; }
  etcd_member& member(std::size_t i) { return members_.at(i); }
  std::vector<std::string> endpoints() const {
    std::vector<std::string> out;
    for (const auto& m : members_) out.push_back(m.endpoint());
    return out;
  }
  // The index of the running member that is the raft leader, waiting up to `wait` for one;
  // -1 if none is.
  int leader(std::chrono::milliseconds wait = std::chrono::seconds(10)) {
    int found = -1;
    (void)akt::test::eventually(
        [&] {
          for (std::size_t i = 0; i < members_.size(); ++i) {
            if (members_[i].running() && etcd_detail::is_leader(members_[i].client_port)) {
              found = static_cast<int>(i);
              return true;
            }
          }
          return false;
        },
        wait);
    return found;
  }
  // Starts member i again (after kill()) with its name, ports and data dir, so it rejoins the
  // cluster with what it had written; waits up to `wait` until it answers /health (it has a
  // leader: with a quorum it serves). False, with the end of its log in `why`, if it did not.
  bool restart(std::size_t i, std::string& why,
               std::chrono::milliseconds wait = std::chrono::seconds(30)) {
    etcd_member& m = members_.at(i);
    if (m.running()) return true;
    m.pid = etcd_detail::spawn(argv_of(m), (m.dir / "etcd.log").string());
    bool exited = false;
    const bool healthy = akt::test::eventually(
        [&] {
          int status = 0;
          exited = ::waitpid(m.pid, &status, WNOHANG) == m.pid;
          return exited || etcd_detail::healthy(m.client_port);
        },
        wait);
    if (exited) m.pid = -1;
    if (exited || !healthy) {
      why = "etcd " + m.name + (exited ? " exited at restart: " : " not healthy in time: ") +
            log_tail(m);
      return false;
    }
    return true;
  }
  // Runs etcdctl like etcdctl() and returns what it printed (stdout and stderr), or "" when it
  // did not exit 0.
  std::string etcdctl_output(const std::vector<std::string>& args) {
    const auto out = work_dir() / ("etcdctl-" + std::to_string(++etcdctl_runs_) + ".out");
    std::vector<std::string> argv = etcdctl_argv(args);
    if (argv.empty()) return {};
    const int status = run_etcdctl(argv, out);
    std::string text;
    if (FILE* f = std::fopen(out.c_str(), "r")) {
      char buf[4096];
      std::size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
      std::fclose(f);
    }
    std::error_code ec;
    std::filesystem::remove(out, ec);
    return status == 0 ? text : std::string();
  }
  // SIGKILLs every member and removes the data dirs. Safe to repeat.
  void stop() {
    for (auto& m : members_) m.kill();
    for (auto& m : members_) {
      std::error_code ec;
      if (!m.dir.empty()) std::filesystem::remove_all(m.dir, ec);
      m.dir.clear();
    }
  }
  // Runs etcdctl (its v3 API, the default from etcd 3.4 on) against the first running member; its
  // exit status (-1: not run).
  int etcdctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = etcdctl_argv(args);
    return argv.empty() ? -1 : run_etcdctl(argv, work_dir() / "etcdctl.log");
  }

 private:
  // Where etcdctl's output goes: the first member's data dir, or the temporary directory.
  std::filesystem::path work_dir() const {
    return members_.front().dir.empty() ? std::filesystem::temp_directory_path()
                                        : members_.front().dir;
  }
  // etcdctl's command line against the first running member; empty when etcdctl is missing.
  std::vector<std::string> etcdctl_argv(const std::vector<std::string>& args) const {
    const auto bin = etcdctl_binary();
    if (bin.empty()) return {};
    std::string endpoint;
    for (const auto& m : members_) {
      if (m.running()) {
        endpoint = m.endpoint();
        break;
      }
    }
    std::vector<std::string> argv{bin, "--endpoints=" + endpoint, "--command-timeout=10s"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  // Runs it with its output to `out`; its exit status (-1: it did not exit).
  static int run_etcdctl(const std::vector<std::string>& argv, const std::filesystem::path& out) {
    pid_t pid = etcd_detail::spawn(argv, out.string());
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  static std::string log_tail(const etcd_member& m) {
    std::string text;
    if (FILE* f = std::fopen((m.dir / "etcd.log").c_str(), "r")) {
      char buf[4096];
      std::size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
      std::fclose(f);
    }
    return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
  }

  // The command line of member m (the same at its first start and at a restart: with a data
  // dir that holds a WAL, etcd ignores the --initial-cluster flags and rejoins as it was).
  //
  // AKT_ETCD_ELECTION_MS (unset: etcd's own 1000 ms, heartbeat 100 ms): etcd's election timeout,
  // with a heartbeat of a tenth of it. After its leader is lost, a 3-member etcd elects another
  // within one to two election timeouts and extends every lease by one more: what the fault
  // tests' leader-loss failover measures (docs/reliability.md).
  std::vector<std::string> argv_of(const etcd_member& m) const {
    std::vector<std::string> argv = argv_defaults_of(m);
    if (const char* e = std::getenv("AKT_ETCD_ELECTION_MS"); e != nullptr && *e != 0) {
      const long ms = std::strtol(e, nullptr, 10);
      argv.insert(argv.end(), {"--election-timeout", std::to_string(ms), "--heartbeat-interval",
                               std::to_string(std::max(1L, ms / 10))});
    }
    return argv;
  }
  std::vector<std::string> argv_defaults_of(const etcd_member& m) const {
    return {etcd_binary(),
            "--name",
            m.name,
            "--data-dir",
            (m.dir / "data").string(),
            "--listen-client-urls",
            m.client_url(),
            "--advertise-client-urls",
            m.client_url(),
            "--listen-peer-urls",
            m.peer_url(),
            "--initial-advertise-peer-urls",
            m.peer_url(),
            "--initial-cluster",
            initial_,
            "--initial-cluster-state",
            "new",
            "--initial-cluster-token",
            token_,
            "--log-level",
            "warn"};
  }

  std::vector<etcd_member> members_;
  std::string initial_, token_;
  int etcdctl_runs_ = 0;
};

// One etcd member (the common case).
class etcd_process : public etcd_cluster {
 public:
  explicit etcd_process(std::chrono::seconds wait = std::chrono::seconds(30))
      : etcd_cluster(1, wait) {}
  std::string endpoint() const { return endpoints().front(); }
  pid_t pid() { return member(0).pid; }
  void kill() { member(0).kill(); }
};

}  // namespace akt::test
