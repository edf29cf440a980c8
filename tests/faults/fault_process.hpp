#pragma once
// One akt_fault_node process (fault_node_main.cpp) owned by a fault test: started with fork and
// exec, its stdout and stderr into a log file, its stdin a pipe the test holds. It is ready when
// its log shows the READY line; the test stops it by its pid only: SIGKILL (the fault), or
// SIGTERM and a bounded wait (the clean end), SIGKILL as the last resort.
//
// Contract: owner only (the thread that started it; not thread-safe). The child gets SIGKILL
// when the thread that started it ends (PR_SET_PDEATHSIG), so a test that crashes leaves no node
// behind: start nodes from the test's main thread, which outlives the run. Between fork and exec
// the child calls only async-signal-safe functions. The destructor SIGKILLs and reaps a process
// still running.

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace akt::faults {

class node_process {
 public:
  // Starts `argv` (argv[0]: the program's path), its output into `log`. Null, with `why`, when
  // it could not be started.
  static std::unique_ptr<node_process> start(const std::vector<std::string>& argv,
                                             std::filesystem::path log, std::string& why) {
    auto p = std::unique_ptr<node_process>(new node_process(std::move(log)));
    if (!p->spawn(argv, why)) return nullptr;
    return p;
  }
  ~node_process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      (void)reap_blocking();
    }
    if (stdin_ >= 0) ::close(stdin_);
  }
  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  const std::filesystem::path& log() const noexcept { return log_; }

  // Whether the node printed READY (it joined the cluster); `address` then holds its address.
  bool ready() {
    if (!address_.empty()) return true;
    const std::string text = log_text();
    const auto at = text.find("READY ");
    if (at == std::string::npos) return false;
    const auto end = text.find('\n', at);
    if (end == std::string::npos) return false;  // the line is still being written
    address_ = text.substr(at + 6, end - at - 6);
    return true;
  }
  const std::string& address() const noexcept { return address_; }

  // Whether the process has exited (reaping it); its wait status in *status.
  bool exited(int* status = nullptr) {
    if (reaped_) {
      if (status) *status = status_;
      return true;
    }
    int s = 0;
    const pid_t r = ::waitpid(pid_, &s, WNOHANG);
    if (r != pid_) return false;
    reaped_ = true;
    status_ = s;
    if (status) *status = s;
    return true;
  }

  // SIGKILL now, reaped: the node vanishes without closing anything itself.
  void kill_nine() {
    if (reaped_) return;
    ::kill(pid_, SIGKILL);
    (void)reap_blocking();
  }
  // Asks for a clean stop (SIGTERM); see finish().
  void ask_to_stop() {
    if (!reaped_) ::kill(pid_, SIGTERM);
  }
  // Waits up to `bound` for the exit, SIGKILL after that. The exit status (WEXITSTATUS), or -1
  // when it had to be killed or died of a signal.
  int finish(std::chrono::milliseconds bound) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (!exited()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        kill_nine();
        return -1;
      }
      ::usleep(10'000);  // a child's exit has no descriptor to wait on here
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }

  // The log so far (its last `max` characters).
  std::string log_text(std::size_t max = std::string::npos) const {
    std::ifstream in(log_);
    std::ostringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    return s.size() > max ? s.substr(s.size() - max) : s;
  }

 private:
  explicit node_process(std::filesystem::path log) : log_(std::move(log)) {}

  bool spawn(const std::vector<std::string>& argv, std::string& why) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      why = std::string("pipe: ") + std::strerror(errno);
      return false;
    }
    const int out = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0) {
      why = "cannot open " + log_.string() + ": " + std::strerror(errno);
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
      return false;
    }
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the test is already gone
      // dup2 clears close-on-exec on the copies: the child keeps stdin, stdout and stderr only.
      if (::dup2(pipe_fds[0], STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 ||
          ::dup2(out, STDERR_FILENO) < 0) {
        ::_exit(127);
      }
      ::execve(args[0], args.data(), environ);
      ::_exit(127);
    }
    const int fork_errno = errno;
    ::close(pipe_fds[0]);
    ::close(out);
    if (pid_ < 0) {
      ::close(pipe_fds[1]);
      why = std::string("fork: ") + std::strerror(fork_errno);
      return false;
    }
    stdin_ = pipe_fds[1];  // closing it is the child's other way to stop
    return true;
  }

  int reap_blocking() {
    int s = 0;
    while (::waitpid(pid_, &s, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    status_ = s;
    return s;
  }

  const std::filesystem::path log_;
  pid_t pid_ = -1;
  int stdin_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string address_;
};

}  // namespace akt::faults
