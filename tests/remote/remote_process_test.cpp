// Nodes in separate processes: the test starts akt_remote_node (tests/remote/node_main.cpp) with
// posix_spawn, reads the address it prints, and talks to it from a node in this process:
// lookups, asks, tells in order, spawn_on, a watch that hears node_lost when the process is
// killed, a restart on the same port (a new incarnation), and sends to a killed process. The
// child is stopped by its pid: SIGTERM, then a bounded waitpid, SIGKILL as the last resort.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "remote/node_lost.hpp"
#include "remote/remote_support.hpp"

extern char** environ;

namespace {

using namespace akt::remote_test;
using akt::errc;
using akt::test::eventually;
using clock_type = std::chrono::steady_clock;

constexpr auto k_bound = std::chrono::milliseconds(30000);  // sanitizers, 2 shared cores

// One akt_remote_node process, owned by the test: killed (SIGKILL) and reaped by the
// destructor if it is still running, so no test leaves a process behind.
class child_node {
 public:
  // Starts it and waits (bounded) for its ADDRESS line; null with `why` set on failure.
  static std::unique_ptr<child_node> start(const std::string& name, std::uint16_t port,
                                           std::string& why) {
    auto c = std::unique_ptr<child_node>(new child_node());
    if (!c->spawn(name, port, why)) return nullptr;
    std::string line;
    if (!c->read_line(line, k_bound)) {
      why = "no ADDRESS line within the bound";
      return nullptr;
    }
    if (line.rfind("ADDRESS ", 0) != 0) {
      why = "unexpected first line: " + line;
      return nullptr;
    }
    c->address_ = line.substr(8);
    c->where_ = c->address_.substr(c->address_.find('@') + 1);
    c->port_ = static_cast<std::uint16_t>(std::stoi(c->where_.substr(c->where_.rfind(':') + 1)));
    return c;
  }

  ~child_node() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (in_ >= 0) ::close(in_);
    if (out_ >= 0) ::close(out_);
  }
  child_node(const child_node&) = delete;
  child_node& operator=(const child_node&) = delete;

  pid_t pid() const noexcept { return pid_; }
  const std::string& address() const noexcept { return address_; }  // akt://name@host:port
  const std::string& where() const noexcept { return where_; }      // host:port
  std::uint16_t port() const noexcept { return port_; }

  // SIGTERM, then waits (bounded) for the exit; SIGKILL if it did not come. The exit status
  // (WEXITSTATUS), or -1 when it had to be killed or died of a signal.
  int terminate(std::chrono::milliseconds bound = k_bound) {
    ::kill(pid_, SIGTERM);
    return reap(bound);
  }
  // Closes the child's stdin (its other way to stop) and waits like terminate().
  int close_stdin(std::chrono::milliseconds bound = k_bound) {
    ::close(in_);
    in_ = -1;
    return reap(bound);
  }
  // SIGSTOP: the process stays, its sockets open, and answers nothing until it is killed.
  // Returns once it has stopped (kill() only sends the signal): false if it did not.
  bool pause() {
    if (::kill(pid_, SIGSTOP) != 0) return false;
    bool stopped = false;
    const bool settled = akt::test::eventually(
        [&] {
          int status = 0;
          const pid_t r = ::waitpid(pid_, &status, WUNTRACED | WNOHANG);
          if (r == pid_) stopped = WIFSTOPPED(status);
          return r == pid_ || (r < 0 && errno != EINTR);  // reported, or an error: done
        },
        k_bound);
    return settled && stopped;
  }
  // SIGKILL now: the process vanishes without closing anything itself.
  void kill_hard() {
    ::kill(pid_, SIGKILL);
    (void)reap(k_bound);
  }
  // What the child printed after its ADDRESS line, up to `bound` for the end of its output.
  std::string rest_of_output(std::chrono::milliseconds bound) {
    std::string all, line;
    while (read_line(line, bound)) all += line + "\n";
    return all;
  }

 private:
  child_node() = default;

  bool spawn(const std::string& name, std::uint16_t port, std::string& why) {
    int to_child[2], from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0) return fail(why, "pipe");
    if (::pipe2(from_child, O_CLOEXEC) != 0) {
      ::close(to_child[0]);
      ::close(to_child[1]);
      return fail(why, "pipe");
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    // dup2 clears close-on-exec on the copies: the child keeps exactly stdin, stdout, stderr
    // (this process's sockets and pipes stay here).
    posix_spawn_file_actions_adddup2(&fa, to_child[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    const std::string port_text = std::to_string(port);
    std::string path = AKT_REMOTE_NODE_PATH;
    std::vector<char*> args{path.data(), const_cast<char*>(name.c_str()),
                            const_cast<char*>(port_text.c_str()), nullptr};
    const int rc = ::posix_spawn(&pid_, path.c_str(), &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(to_child[0]);
    ::close(from_child[1]);
    in_ = to_child[1];
    out_ = from_child[0];
    if (rc != 0) {
      pid_ = -1;
      why = std::string("posix_spawn ") + path + ": " + std::strerror(rc);
      return false;
    }
    return true;
  }
  static bool fail(std::string& why, const char* what) {
    why = std::string(what) + ": " + std::strerror(errno);
    return false;
  }

  // One line from the child's stdout within the bound (without the newline).
  bool read_line(std::string& line, std::chrono::milliseconds bound) {
    const auto deadline = clock_type::now() + bound;
    for (;;) {
      if (const auto nl = buffered_.find('\n'); nl != std::string::npos) {
        line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        return true;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      if (left.count() <= 0) return false;
      pollfd p{out_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      char buf[512];
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;  // the child closed its stdout
      buffered_.append(buf, static_cast<std::size_t>(n));
    }
  }

  int reap(std::chrono::milliseconds bound) {
    if (reaped_) return status_;
    const auto deadline = clock_type::now() + bound;
    int status = 0;
    for (;;) {
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) break;
      if (r < 0 && errno != EINTR) return -1;
      if (clock_type::now() >= deadline) {
        ::kill(pid_, SIGKILL);  // the last resort
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        reaped_ = true;
        status_ = -1;
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    reaped_ = true;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return status_;
  }

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  bool reaped_ = false;
  int status_ = -1;
  std::string buffered_;
  std::string address_, where_;
  std::uint16_t port_ = 0;
};

#define START_CHILD(var, name, port)                   \
  std::string var##_why;                               \
  auto var = child_node::start(name, port, var##_why); \
  ASSERT_NE(var, nullptr) << var##_why

// The pings the child's echo `p` reports, in arrival order.
std::vector<std::int64_t> report(const akt::pid& p) {
  std::vector<std::int64_t> out;
  auto r = p.ask<std::string>(std::string("report"), 20s);
  if (!r) {
    ADD_FAILURE() << "report: " << r.error().message();
    return out;
  }
  std::stringstream in(*r);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

// Watches one pid; records the reasons of the terminated it gets.
struct watcher final : akt::actor {
  akt::pid target;
  std::shared_ptr<std::vector<errc>> seen;
  std::shared_ptr<std::mutex> mu;
  watcher(akt::pid t, std::shared_ptr<std::vector<errc>> s, std::shared_ptr<std::mutex> m)
      : target(std::move(t)), seen(std::move(s)), mu(std::move(m)) {}
  void receive(akt::receive_context& ctx) override {
    if (ctx.is<std::string>()) {
      ctx.watch(target);
      ctx.reply(std::string("watching"));
    } else if (auto* t = ctx.get_if<akt::terminated>()) {
      std::lock_guard<std::mutex> lock(*mu);
      seen->push_back(t->reason.code());
    }
  }
};

TEST(Remote_Process, AsksRoundTripToANodeInAnotherProcess) {
  START_CHILD(child, "far", 0);
  EXPECT_EQ(child->address().rfind("akt://far@127.0.0.1:", 0), 0u) << child->address();
  node here{"here"};
  ASSERT_TRUE(here.started);
  auto echo_pid = here.sys.lookup(child->address() + "/user/echo", 20s);
  ASSERT_TRUE(echo_pid) << echo_pid.error().message();
  for (int i = 0; i < 100; ++i) {
    auto r = echo_pid->ask<ping>(ping{i}, 20s);
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(r->n, i + 1);
  }
  auto up = echo_pid->ask<std::string>(std::string("across"), 20s);
  ASSERT_TRUE(up) << up.error().message();
  EXPECT_EQ(*up, "ACROSS");
  // A kind registered in the other process, spawned there by name.
  auto spawned = here.sys.spawn_on(child->where(), "echo", "second", 20s);
  ASSERT_TRUE(spawned) << spawned.error().message();
  auto r = spawned->ask<ping>(ping{41}, 20s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 42);
  auto peers = here.sys.peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].address, child->address());
  EXPECT_TRUE(peers[0].connected);
  EXPECT_EQ(child->terminate(), 0);
}

TEST(Remote_Process, TellsToANodeInAnotherProcessArriveInOrder) {
  START_CHILD(child, "far", 0);
  node here{"here"};
  ASSERT_TRUE(here.started);
  auto sink = here.sys.spawn_on(child->where(), "echo", "sink", 20s);
  ASSERT_TRUE(sink) << sink.error().message();
  constexpr int n = 5000;
  for (int i = 0; i < n; ++i) {
    akt::error e = sink->tell(ping{i});
    if (e == errc::window_full) {  // the receiver is behind: wait for credit, then resend
      ASSERT_TRUE(eventually([&] { return !(e = sink->tell(ping{i})); }, k_bound)) << e.message();
      continue;
    }
    ASSERT_FALSE(e) << e.message();
  }
  // The report is an ask on the same pair after the tells: it arrives after all of them.
  const auto got = report(*sink);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<std::size_t>(i)], i) << "at " << i;
  EXPECT_EQ(child->terminate(), 0);
}

TEST(Remote_Process, AWatchDeliversNodeLostWhenThePeerProcessIsKilled) {
  START_CHILD(child, "far", 0);
  node here{"here"};
  ASSERT_TRUE(here.started);
  auto target = here.sys.lookup(child->where(), "echo", 20s);
  ASSERT_TRUE(target) << target.error().message();
  auto seen = std::make_shared<std::vector<errc>>();
  auto mu = std::make_shared<std::mutex>();
  auto w = here.sys.spawn<watcher>("watcher", *target, seen, mu);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->ask<std::string>(std::string("watch"), 20s));
  ASSERT_TRUE(target->ask<ping>(ping{0}, 20s));  // the watch went before this, on its lane
  auto count = [&] {
    std::lock_guard<std::mutex> lock(*mu);
    return seen->size();
  };
  const auto killed_at = clock_type::now();
  child->kill_hard();
  // Heartbeats every 100 ms, lost after 1 s unreachable (node_config): seconds, not minutes.
  ASSERT_TRUE(eventually([&] { return count() >= 1; }, k_bound)) << "no terminated";
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - killed_at);
  std::cout << "[ figures  ] terminated " << took.count() << " ms after SIGKILL\n";
  std::lock_guard<std::mutex> lock(*mu);
  ASSERT_EQ(seen->size(), 1u);
  EXPECT_EQ(seen->front(), errc::node_lost) << akt::to_string(seen->front());
  EXPECT_FALSE(target->alive());
}

TEST(Remote_Process, ARestartedProcessOnTheSamePortIsANewIncarnationAndOldPidsAnswerDead) {
  node here{"here"};
  ASSERT_TRUE(here.started);
  START_CHILD(first, "far", 0);
  auto old = here.sys.lookup(first->where(), "echo", 20s);
  ASSERT_TRUE(old) << old.error().message();
  ASSERT_TRUE(old->ask<ping>(ping{1}, 20s));
  const std::uint64_t first_incarnation = here.sys.peers().at(0).incarnation;
  const std::uint16_t port = first->port();
  ASSERT_EQ(first->terminate(), 0);
  START_CHILD(second, "far", port);
  ASSERT_EQ(second->where(), first->where());
  // While the old process's connections wind down the peer may be marked lost for a moment
  // (lookups then answer unreachable at once): retry until the new process answers.
  akt::result<akt::pid> fresh = errc::unreachable;
  ASSERT_TRUE(eventually(
      [&] {
        fresh = here.sys.lookup(second->where(), "echo", 2s);
        return fresh.has_value();
      },
      k_bound))
      << fresh.error().message();
  EXPECT_NE(*fresh, *old);
  auto r = fresh->ask<ping>(ping{2}, 20s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 3);
  const auto peers = here.sys.peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_NE(peers[0].incarnation, first_incarnation);
  EXPECT_NE(peers[0].incarnation, 0u);
  auto stale = old->ask<ping>(ping{99}, 5s);
  EXPECT_EQ(stale.code(), errc::dead) << stale.error().message();
  EXPECT_EQ(old->tell(ping{98}).code(), errc::dead);
  EXPECT_FALSE(old->alive());
  EXPECT_EQ(report(*fresh), std::vector<std::int64_t>{2}) << "the old pid reached the new echo";
  EXPECT_EQ(second->terminate(), 0);
}

TEST(Remote_Process, SendsToAKilledProcessAreRefusedAndDeadLetteredWithoutHanging) {
  START_CHILD(child, "far", 0);
  node here{"here"};
  ASSERT_TRUE(here.started);
  auto target = here.sys.lookup(child->where(), "echo", 20s);
  ASSERT_TRUE(target) << target.error().message();
  ASSERT_TRUE(target->ask<ping>(ping{0}, 20s));
  akt::test::collector<akt::dead_letter, std::pair<errc, std::int64_t>> dead(
      here.sys, [](const akt::dead_letter& d) {
        const ping* p = d.msg.get_if<ping>();
        return std::make_pair(d.reason.code(), p != nullptr ? p->n : std::int64_t{-1});
      });
  child->kill_hard();
  // Once this node saw the connections close, nothing it sends can be in flight to the dead
  // process: each message is refused or waits in the backlog until the peer is declared lost.
  ASSERT_TRUE(eventually(
      [&] {
        const auto p = here.sys.peers();
        return !p.empty() && !p[0].connected;
      },
      k_bound));
  const akt::error first = target->tell(ping{1});
  // An ask neither hangs nor waits for its own timeout: it fails when the peer is lost.
  const auto t0 = clock_type::now();
  auto asked = target->ask<ping>(ping{2}, 20s);
  const auto ask_took = clock_type::now() - t0;
  ASSERT_FALSE(asked);
  EXPECT_TRUE(asked.code() == errc::unreachable || asked.code() == errc::connection_lost ||
              asked.code() == errc::dead)
      << asked.error().message();
  EXPECT_LT(ask_took, 15s) << asked.error().message();
  // Past the loss, a send is refused at once. The pid of an actor on a lost node answers dead
  // (as after a terminated with node_lost); a fresh lookup there answers unreachable.
  akt::error later;
  ASSERT_TRUE(
      eventually([&] { return static_cast<bool>(later = target->tell(ping{3})); }, k_bound));
  EXPECT_TRUE(later == errc::unreachable || later == errc::dead) << later.message();
  std::cout << "[ figures  ] after SIGKILL: first tell '" << first.message() << "', ask '"
            << asked.error().message() << "' after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(ask_took).count()
            << " ms, later tell '" << later.message() << "'\n";
  auto lookup = here.sys.lookup(child->where(), "echo", 2s);
  ASSERT_FALSE(lookup);
  EXPECT_EQ(lookup.code(), errc::unreachable) << lookup.error().message();
  // Both tells became dead letters: the first either refused at once or dropped from the
  // backlog when the peer was lost, never written to the dead process's socket.
  auto reason_of = [&](std::int64_t n) {
    for (const auto& [code, v] : dead.items())
      if (v == n) return code;
    return errc::ok;
  };
  ASSERT_TRUE(
      eventually([&] { return reason_of(1) != errc::ok && reason_of(3) != errc::ok; }, k_bound))
      << dead.size() << " dead letters; first tell: " << first.message();
  for (const std::int64_t n : {1, 3}) {
    const errc why = reason_of(n);
    EXPECT_TRUE(why == errc::unreachable || why == errc::connection_lost || why == errc::dead)
        << n << ": " << akt::to_string(why);
  }
}

TEST(Remote_Process, TheNodeProcessStopsCleanlyOnSigtermAndWhenItsStdinCloses) {
  {
    START_CHILD(child, "far", 0);
    EXPECT_EQ(child->terminate(), 0);
    EXPECT_EQ(child->rest_of_output(k_bound), "STOPPED\n");
  }
  {
    START_CHILD(child, "far", 0);
    node here{"here"};
    ASSERT_TRUE(here.started);
    auto target = here.sys.lookup(child->where(), "echo", 20s);
    ASSERT_TRUE(target) << target.error().message();
    ASSERT_TRUE(target->ask<ping>(ping{0}, 20s));
    EXPECT_EQ(child->close_stdin(), 0);
    EXPECT_EQ(child->rest_of_output(k_bound), "STOPPED\n");
  }
}

// Membership says a node left (akt::remote::detail::declare_node_lost, what the cluster calls):
// remoting fails what waits for it at once instead of after node_lost_after. The peer is killed
// (SIGKILL) with asks written to it and not answered (it was stopped first), then asks and tells
// wait in the lane's backlog; here heartbeats and node_lost_after are far longer than the test,
// so only the declaration can end them.
TEST(Remote_Process, ANodeDeclaredLostFailsItsCallsAndDeadLettersItsTellsAtOnce) {
  START_CHILD(child, "far", 0);
  akt::remote_config rc;
  akt::system_config cfg = node_config(rc);
  cfg.remote->heartbeat_interval = 60s;
  cfg.remote->node_lost_after = 120s;
  register_test_messages();
  akt::actor_system here("here", cfg);
  ASSERT_TRUE(here.start());
  auto target = here.lookup(child->address(), "echo", 20s);
  ASSERT_TRUE(target) << target.error().message();
  ASSERT_TRUE(target->ask<ping>(ping{0}, 20s));
  auto seen = std::make_shared<std::vector<errc>>();
  auto mu = std::make_shared<std::mutex>();
  auto w = here.spawn<watcher>("watcher", *target, seen, mu);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->ask<std::string>(std::string("watch"), 20s));
  ASSERT_TRUE(target->ask<ping>(ping{1}, 20s));  // the watch went before this, on its lane
  akt::test::collector<akt::dead_letter, std::pair<errc, std::int64_t>> dead(
      here, [](const akt::dead_letter& d) {
        const ping* p = d.msg.get_if<ping>();
        return std::make_pair(d.reason.code(), p != nullptr ? p->n : std::int64_t{-1});
      });
  auto messages_out = [&] { return here.peers().at(0).messages_out; };

  // Asks written to the peer, never answered: it is stopped, then killed.
  ASSERT_TRUE(child->pause());
  constexpr int written = 3, queued_asks = 2, queued_tells = 5;
  std::vector<std::atomic<int>> codes(written + queued_asks);
  for (auto& c : codes) c.store(0);
  std::vector<std::jthread> askers;
  askers.reserve(written + queued_asks);
  auto ask_into = [&](int i) {
    askers.emplace_back([&, i] {
      auto r = target->ask<ping>(ping{100 + i}, 30s);
      codes[static_cast<std::size_t>(i)].store(r ? -1 : static_cast<int>(r.code()));
    });
  };
  const std::uint64_t base = messages_out();
  for (int i = 0; i < written; ++i) ask_into(i);
  ASSERT_TRUE(eventually([&] { return messages_out() >= base + written; }, k_bound));
  child->kill_hard();
  ASSERT_TRUE(eventually([&] { return !here.peers().at(0).connected; }, k_bound));
  // Sent after the connection closed: they wait in the backlog for a reconnect.
  for (int i = 0; i < queued_tells; ++i) ASSERT_FALSE(target->tell(ping{200 + i}));
  for (int i = written; i < written + queued_asks; ++i) ask_into(i);
  ASSERT_TRUE(eventually(
      [&] { return messages_out() >= base + written + queued_tells + queued_asks; }, k_bound));
  for (auto& c : codes) EXPECT_EQ(c.load(), 0) << "a call ended before the declaration";

  const auto t0 = clock_type::now();
  ASSERT_FALSE(akt::remote::detail::declare_node_lost(here, child->address(), "membership: left"));
  auto all_done = [&] {
    for (auto& c : codes)
      if (c.load() == 0) return false;
    std::lock_guard<std::mutex> lock(*mu);
    return !seen->empty() && dead.size() >= static_cast<std::size_t>(queued_tells);
  };
  ASSERT_TRUE(eventually(all_done, k_bound));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
  std::cout << "[ figures  ] calls failed, tells dead-lettered, watcher told " << took.count()
            << " ms after declare_node_lost\n";
  EXPECT_LT(took, std::chrono::milliseconds(2000)) << "not at once (node_lost_after is 120 s)";
  for (int i = 0; i < written; ++i)
    EXPECT_EQ(codes[static_cast<std::size_t>(i)].load(), static_cast<int>(errc::connection_lost))
        << "written ask " << i;
  for (int i = written; i < written + queued_asks; ++i)
    EXPECT_EQ(codes[static_cast<std::size_t>(i)].load(), static_cast<int>(errc::unreachable))
        << "queued ask " << i;
  for (const auto& [code, n] : dead.items()) {
    if (n >= 200) {
      EXPECT_EQ(code, errc::unreachable) << "tell " << n;
    }
  }
  {
    std::lock_guard<std::mutex> lock(*mu);
    ASSERT_EQ(seen->size(), 1u);
    EXPECT_EQ(seen->front(), errc::node_lost);
  }
  // Later sends are refused at once: the old pids answer dead, the address unreachable.
  EXPECT_FALSE(target->alive());
  EXPECT_EQ(target->tell(ping{300}).code(), errc::dead);
  const auto t1 = clock_type::now();
  auto again = here.lookup(child->address(), "echo", 20s);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.code(), errc::unreachable) << again.error().message();
  EXPECT_EQ(akt::remote::tell_grain_on(here, child->where(), akt::grain_identity{"k", "n"},
                                       ping{301}, {.one_way = true})
                .code(),
            errc::unreachable);
  EXPECT_LT(clock_type::now() - t1, 2s);
  EXPECT_FALSE(here.peers().at(0).connected);
}

}  // namespace
