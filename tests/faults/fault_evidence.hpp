#pragma once
// The fault harness's evidence (issue 20): what the node processes, the driver and the fault
// injector write, in files outside any node, and the fenced store the grains write their state
// to. Header-only and POSIX: the node program (fault_node_main.cpp), the kill -9 test and the
// checker (fault_checker.hpp) share the formats from here, so they cannot drift apart.
//
// Every record is one line written with one write(2) on a descriptor opened with O_APPEND: a
// process killed with SIGKILL leaves whole lines, except possibly a last one without its newline,
// which the readers skip (counted as torn). Times are CLOCK_MONOTONIC nanoseconds: every process
// of the harness runs on this machine and shares that clock, so the times of different processes
// compare.
//
// Files under the evidence directory DIR:
//   DIR/handlers/<node>-<pid>.log   one per node process: a line per grain handler start
//     H <node> <pid> <epoch> <token> <ns> <activate|receive|deactivate> <grain> <msg-id>
//   DIR/store/<grain>               the fenced store, one file per grain, changed under flock:
//     O <token> 0 <node> <pid> <ns>       an activation opened the grain (raises the fence)
//     A <token> <msg-id> <node> <pid> <ns> a message was applied
//     X <token> <msg-id> <node> <pid> <ns> refused: a greater token was seen before
//   DIR/calls.log                   the driver: a line per call, once it returned
//     C <grain> <msg-id> <start-ns> <end-ns> <ok|refused|store_refused|possibly> <errc>
//   DIR/faults.log                  the injector: faults and (re)starts of node processes
//     K <node> <pid> <ns>   (SIGKILL sent)        S <node> <pid> <ns>   (READY seen)
//     T <node> <pid> <ns>   (SIGTERM sent)        E <node> <pid> <ns>   (exit seen, status 0)
//     P <node> <pid> <ns>   (stopped by SIGSTOP)  R <node> <pid> <ns>   (SIGCONT about to go)
//   DIR/leases.log                  the test process's watch of the member records in etcd
//     L <node> <epoch> <put|delete> <ns>   a record under lease <epoch> appeared / was deleted
//                                          (observed at <ns>; fault_leases.hpp)
//     G <grain> <token> <owner> <epoch> <ns>  a claim of <grain> (token: its key's create
//                                          revision) for node <owner> on lease <epoch>
//     X <node> <pid> <ns> <lease-ttl-ms>  (partitioned: its proxies blackholed)
//     H <node> <pid> <ns>   (about to heal: its proxies pass again)
//
// Contract: fenced_store may be used from any thread of any process at once (flock serialises
// the processes; each call opens its own descriptor, so threads of one process serialise on
// the same lock). append_line may be called from any thread; it allocates the line, never
// blocks on a lock of its own, and is async-signal-unsafe only through the allocation.

#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace akt::faults {

// CLOCK_MONOTONIC now, in nanoseconds (steady_clock on Linux, spelled out: the processes compare
// these numbers, so they must come from the one clock all of them share).
inline std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Appends `line` + '\n' to fd with one write(2) (O_APPEND: whole lines even from several
// processes). False when the write failed or was short.
inline bool append_line(int fd, std::string line) {
  line.push_back('\n');
  ssize_t n = -1;
  do {
    n = ::write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(line.size());
}

// Opens (creating) a file for appending whole lines; -1 on failure.
inline int open_append(const std::filesystem::path& path) {
  return ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

// Reads a whole file from offset 0 (through pread: the descriptor may be O_APPEND).
inline std::string read_all(int fd) {
  std::string text;
  char buf[8192];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    at += n;
  }
  return text;
}

// The store's rule, on one grain's file: the greatest token among its O and A lines (0 when
// none). X lines (refusals) do not raise it.
inline std::int64_t highest_accepted_token(std::string_view text) {
  std::int64_t highest = 0;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) break;  // a torn last line: never accepted
    const std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.size() < 3 || (line[0] != 'O' && line[0] != 'A') || line[1] != ' ') continue;
    std::int64_t token = 0;
    for (std::size_t i = 2; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i)
      token = token * 10 + (line[i] - '0');
    if (token > highest) highest = token;
  }
  return highest;
}

// The fenced store the test owns: one file per grain under dir, each change made under an
// exclusive flock of that file (the kernel drops the lock of a killed process). It accepts a
// write only with a fencing token at least as high as the highest it accepted for that grain.
class fenced_store {
 public:
  enum class outcome { accepted, refused, failed };

  fenced_store(std::filesystem::path dir, std::string node)
      : dir_(std::move(dir)), node_(std::move(node)), pid_(::getpid()) {}

  // An activation with `token` opens the grain: from then on a smaller token is refused.
  outcome open(const std::string& grain, std::int64_t token) { return write(grain, 'O', token, 0); }
  // Applies message `id` with `token`.
  outcome apply(const std::string& grain, std::int64_t token, std::uint64_t id) {
    return write(grain, 'A', token, id);
  }

 private:
  outcome write(const std::string& grain, char what, std::int64_t token, std::uint64_t id) {
    const int fd = ::open((dir_ / grain).c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return outcome::failed;
    int locked = -1;
    while ((locked = ::flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (locked != 0) {
      ::close(fd);
      return outcome::failed;
    }
    const bool stale = token < highest_accepted_token(read_all(fd));
    const char tag = stale ? 'X' : what;
    const bool written = append_line(
        fd, std::string(1, tag) + ' ' + std::to_string(token) + ' ' + std::to_string(id) + ' ' +
                node_ + ' ' + std::to_string(pid_) + ' ' + std::to_string(monotonic_ns()));
    ::close(fd);  // releases the flock
    if (!written) return outcome::failed;
    return stale ? outcome::refused : outcome::accepted;
  }

  const std::filesystem::path dir_;
  const std::string node_;
  const pid_t pid_;
};

// The member records' prefix (src/cluster/member_record.cpp, members_prefix: the key layout is
// the cluster's documented one, /akt/<cluster>/v1/members/<node>).
inline std::string members_prefix(const std::string& cluster) {
  return "/akt/" + cluster + "/v1/members/";
}

// The value of a `<key>=` line of a member or claim record's text (member_record.hpp,
// grain_claim_record.hpp: the last one counts); "-" when it has none.
inline std::string record_field(std::string_view value, std::string_view key) {
  std::string found = "-";
  std::size_t at = 0;
  while (at < value.size()) {
    const std::size_t eol = value.find('\n', at);
    const std::string_view line =
        value.substr(at, eol == std::string_view::npos ? std::string_view::npos : eol - at);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == '=')
      found = std::string(line.substr(key.size() + 1));
    if (eol == std::string_view::npos) break;
    at = eol + 1;
  }
  return found;
}

// The `epoch=` field of a member or claim record's text: the lease id it lives on; -1 when it
// has none or it is not a number.
inline long long record_epoch(std::string_view value) {
  const std::string v = record_field(value, "epoch");
  if (v == "-" || v.empty() || v.size() > 19) return -1;  // a lease id: 19 digits at most
  unsigned long long n = 0;
  for (char ch : v) {
    if (ch < '0' || ch > '9') return -1;
    n = n * 10 + static_cast<unsigned>(ch - '0');
  }
  return n > 0x7fffffffffffffffull ? -1 : static_cast<long long>(n);
}

}  // namespace akt::faults
