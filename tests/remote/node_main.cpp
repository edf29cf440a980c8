// akt_remote_node: one node in a process of its own, for tests/remote/remote_process_test.cpp.
//
//   akt_remote_node <system-name> <port>      (port 0: any free port)
//
// It starts a node on 127.0.0.1 with the test nodes' settings (remote_support.hpp: short
// heartbeats), registers the test messages, registers the actor kind "echo" (for spawn_on) and
// spawns one echo named "echo", then prints one line on stdout:
//
//   ADDRESS akt://<system-name>@127.0.0.1:<port>
//
// The echo answers an asked ping{n} with ping{n + 1}, a string with its upper case, and the
// string "report" with the pings it received so far, comma-separated, in arrival order.
//
// It runs until its stdin closes or it gets SIGTERM (or SIGINT); then it stops its system,
// prints "STOPPED" and exits 0 (1 for bad arguments or a failed start, 2 for a failed stop).

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "remote/remote_support.hpp"

namespace {

using namespace akt::remote_test;

class recording_echo final : public akt::actor {
 public:
  void receive(akt::receive_context& ctx) override {
    akt::match(
        ctx,
        [&](const ping& p, auto& c) {
          seen_.push_back(p.n);
          if (c.expects_reply()) c.reply(ping{p.n + 1});
        },
        [&](const std::string& s, auto& c) {
          if (s == "report") {
            std::string out;
            for (const std::int64_t n : seen_) {
              if (!out.empty()) out += ',';
              out += std::to_string(n);
            }
            c.reply(std::move(out));
            return;
          }
          std::string up = s;
          for (char& ch : up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
          if (c.expects_reply()) c.reply(std::move(up));
        });
  }

 private:
  std::vector<std::int64_t> seen_;  // the actor's own state: one turn at a time
};

// Waits until stdin reaches its end or a blocked SIGTERM / SIGINT is pending.
void wait_for_the_end(int signals) {
  pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {signals, POLLIN, 0}};
  for (;;) {
    const int r = ::poll(fds, 2, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) return;  // a signal
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) != 0) {
      char buf[256];
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // end of input (or it broke): the parent is gone or done with us
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <system-name> <port>\n", argv[0]);
    return 1;
  }
  // Blocked before any thread starts, so that every thread inherits the mask and the signals
  // wait for the signalfd below instead of killing the process mid-flight.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  if (pthread_sigmask(SIG_BLOCK, &mask, nullptr) != 0) return 1;
  const int signals = ::signalfd(-1, &mask, SFD_CLOEXEC);
  if (signals < 0) return 1;

  akt::remote_config rc;
  const long port = std::strtol(argv[2], nullptr, 10);
  if (port < 0 || port > 65535) return 1;
  rc.port = static_cast<std::uint16_t>(port);
  register_test_messages();
  akt::actor_system sys(argv[1], node_config(rc));
  if (auto started = sys.start(); !started) {
    std::fprintf(stderr, "start: %s\n", started.error().message().c_str());
    return 1;
  }
  if (sys.register_actor_kind<recording_echo>("echo") || !sys.spawn<recording_echo>("echo")) {
    std::fprintf(stderr, "could not set up the echo\n");
    return 1;
  }
  std::printf("ADDRESS %s\n", sys.address().c_str());
  std::fflush(stdout);

  wait_for_the_end(signals);
  auto stopped = sys.stop();
  ::close(signals);
  if (!stopped) {
    std::fprintf(stderr, "stop: %s\n", stopped.error().message().c_str());
    return 2;
  }
  std::printf("STOPPED\n");
  std::fflush(stdout);
  return 0;
}
