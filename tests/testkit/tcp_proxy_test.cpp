// testkit::tcp_proxy: each mode on plain loopback sockets against an echo server, then between
// two akt nodes. Every wait is on a condition (a socket's bytes, the proxy's counters) with a
// generous bound; times are asserted from below only.

#include <gtest/gtest.h>

#include <akt/testkit/tcp_proxy.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "remote/remote_support.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using akt::testkit::tcp_proxy;
using akt::testkit::tcp_proxy_mode;

constexpr auto k_bound = 20s;  // how long any single wait may take before the test fails

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// An echo server on 127.0.0.1:<free>: one thread accepts, one thread per connection echoes.
// The destructor shuts the sockets down (which wakes the blocked calls) and joins.
class echo_server {
 public:
  echo_server() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(0);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd_, 16) != 0)
      throw std::runtime_error("echo_server: cannot listen");
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~echo_server() {
    ::shutdown(fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int c : conns_) ::shutdown(c, SHUT_RDWR);
    }
    for (auto& t : echoers_) t.join();
    for (int c : conns_) ::close(c);
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }
  // Sends s on every connection, unasked.
  void push(const std::string& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int c : conns_) (void)::send(c, s.data(), s.size(), MSG_NOSIGNAL);
  }
  int accepted() const { return accepted_.load(); }
  std::size_t received() const { return received_.load(); }

 private:
  void accept_loop() {
    for (;;) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;  // shut down
      accepted_++;
      std::lock_guard<std::mutex> lock(mutex_);
      conns_.push_back(c);
      echoers_.emplace_back([this, c] { echo(c); });
    }
  }
  void echo(int c) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n == 0) ::shutdown(c, SHUT_WR);  // an end of stream is echoed too
      if (n <= 0) return;
      received_ += static_cast<std::size_t>(n);
      if (::send(c, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) return;
    }
  }

  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread acceptor_;
  std::mutex mutex_;  // conns_, echoers_ (appended by the acceptor, joined by the destructor)
  std::vector<int> conns_;
  std::vector<std::thread> echoers_;
  std::atomic<int> accepted_{0};
  std::atomic<std::size_t> received_{0};
};

// A blocking client socket whose reads give up after k_bound.
class client {
 public:
  explicit client(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{static_cast<time_t>(k_bound.count()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const sockaddr_in a = loopback(port);
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  }
  ~client() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool send(const std::string& s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Reads exactly n bytes; fewer when the connection ends or k_bound passes.
  std::string read(std::size_t n) {
    std::string out;
    char buf[4096];
    while (out.size() < n) {
      const ssize_t got = ::recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
      if (got <= 0) break;
      out.append(buf, static_cast<std::size_t>(got));
    }
    return out;
  }
  // Waits (up to k_bound) for the connection to end; returns recv's errno (ECONNRESET), 0 for
  // an orderly EOF, or -1 when it did not end.
  int wait_end() {
    char b;
    for (;;) {
      const ssize_t got = ::recv(fd_, &b, 1, 0);
      if (got == 0) return 0;
      if (got < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? -1 : errno;
    }
  }
  // True when nothing is readable and the connection has not ended (no byte, no EOF, no error).
  bool open_and_quiet() {
    char b;
    const ssize_t got = ::recv(fd_, &b, 1, MSG_DONTWAIT | MSG_PEEK);
    return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

bool wait_for(const std::function<bool()>& pred) {
  return akt::test::eventually(pred,
                               std::chrono::duration_cast<std::chrono::milliseconds>(k_bound));
}

TEST(TcpProxy, ListensOnLoopbackAndReportsItsPort) {
  echo_server echo;
  tcp_proxy proxy("127.0.0.1", echo.port());
  EXPECT_NE(proxy.port(), 0);
  EXPECT_NE(proxy.port(), echo.port());
  EXPECT_EQ(proxy.address(), "127.0.0.1:" + std::to_string(proxy.port()));
  EXPECT_EQ(proxy.mode(), tcp_proxy_mode::pass);
  const auto s = proxy.stats();
  EXPECT_EQ(s.accepted, 0u);
  EXPECT_EQ(s.open, 0u);
}

TEST(TcpProxy, WithoutATargetResetsAndSetTargetServesNewConnections) {
  echo_server echo;
  tcp_proxy proxy("127.0.0.1", 0);  // the target is not known yet
  {
    client early(proxy.port());
    ASSERT_TRUE(early.connected());
    const int e = early.wait_end();
    EXPECT_TRUE(e == ECONNRESET || e == 0) << "recv ended with " << e;
  }
  proxy.set_target("127.0.0.1", echo.port());
  client c(proxy.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("now"));
  EXPECT_EQ(c.read(3), "now");
  EXPECT_EQ(proxy.stats().accepted, 2u);
}

TEST(TcpProxy, PassForwardsBothWaysAndCountsTheBytes) {
  echo_server echo;
  tcp_proxy proxy("127.0.0.1", echo.port());
  client c(proxy.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("hello"));
  EXPECT_EQ(c.read(5), "hello");
  const std::string big(200000, 'x');  // several chunks
  ASSERT_TRUE(c.send(big));
  EXPECT_EQ(c.read(big.size()), big);
  ASSERT_TRUE(wait_for([&] { return proxy.stats().bytes_to_clients == 5 + big.size(); }));
  const auto s = proxy.stats();
  EXPECT_EQ(s.accepted, 1u);
  EXPECT_EQ(s.open, 1u);
  EXPECT_EQ(s.bytes_from_clients, 5 + big.size());
  EXPECT_EQ(s.bytes_to_target, 5 + big.size());
  EXPECT_EQ(s.bytes_from_target, 5 + big.size());
  EXPECT_EQ(echo.accepted(), 1);
}

TEST(TcpProxy, PassCarriesAnEndOfStreamAcross) {
  echo_server echo;
  tcp_proxy proxy("127.0.0.1", echo.port());
  {
    client c(proxy.port());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.send("bye"));
    EXPECT_EQ(c.read(3), "bye");
  }  // closed: the echo server sees EOF, closes its side, the proxy frees the connection
  EXPECT_TRUE(wait_for([&] { return proxy.stats().open == 0; }));
}

TEST(TcpProxy, BlackholeForwardsNothingKeepsConnectionsOpenAndPassResumes) {
  echo_server echo;
  tcp_proxy proxy("127.0.0.1", echo.port());
  client c(proxy.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("one"));
  ASSERT_EQ(c.read(3), "one");

  proxy.blackhole();
  EXPECT_EQ(proxy.mode(), tcp_proxy_mode::blackhole);
  ASSERT_TRUE(c.send("two"));
  // A connection accepted during the partition is not connected to the target.
  client late(proxy.port());
  ASSERT_TRUE(late.connected());
  ASSERT_TRUE(late.send("late"));
  // The proxy has read both sends (so they could have been forwarded), and forwarded neither.
  ASSERT_TRUE(wait_for([&] {
    const auto s = proxy.stats();
    return s.accepted == 2 && s.bytes_from_clients == 3 + 3 + 4;
  }));
  auto s = proxy.stats();
  EXPECT_EQ(s.bytes_to_target, 3u);
  EXPECT_EQ(s.bytes_to_clients, 3u);
  EXPECT_EQ(s.open, 2u);
  EXPECT_EQ(echo.received(), 3u);
  EXPECT_EQ(echo.accepted(), 1);
  EXPECT_TRUE(c.open_and_quiet());
  EXPECT_TRUE(late.open_and_quiet());

  proxy.pass();  // healed: what was held goes through, the late connection is connected
  EXPECT_EQ(c.read(3), "two");
  EXPECT_EQ(late.read(4), "late");
  ASSERT_TRUE(c.send("three"));
  EXPECT_EQ(c.read(5), "three");
  EXPECT_EQ(echo.accepted(), 2);
}

TEST(TcpProxy, BlackholeHoldsWhatTheTargetSendsToo) {
  echo_server echo;
  tcp_proxy proxy("127.0.0.1", echo.port());
  client c(proxy.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("x"));
  ASSERT_EQ(c.read(1), "x");  // the connection to the target is up

  proxy.blackhole();
  echo.push("ab");  // the target speaks first, into the partition
  ASSERT_TRUE(wait_for([&] { return proxy.stats().bytes_from_target == 1 + 2; }));
  EXPECT_EQ(proxy.stats().bytes_to_clients, 1u);
  EXPECT_TRUE(c.open_and_quiet());
  proxy.pass();
  EXPECT_EQ(c.read(2), "ab");
}

TEST(TcpProxy, ResetClosesConnectionsWithRstAndResetsNewOnes) {
  echo_server echo;
  tcp_proxy proxy("127.0.0.1", echo.port());
  client c(proxy.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("x"));
  ASSERT_EQ(c.read(1), "x");

  proxy.reset();
  EXPECT_EQ(proxy.mode(), tcp_proxy_mode::reset);
  const int end = c.wait_end();
  EXPECT_TRUE(end == ECONNRESET || end == 0) << "recv ended with " << end;
  EXPECT_EQ(proxy.stats().open, 0u);

  // While reset is set, a new connection is reset as soon as it is accepted.
  client refused(proxy.port());
  if (refused.connected()) {
    const int e = refused.wait_end();
    EXPECT_TRUE(e == ECONNRESET || e == 0) << "recv ended with " << e;
  }
  EXPECT_TRUE(wait_for([&] { return proxy.stats().reset >= 2; }));

  proxy.pass();
  client again(proxy.port());
  ASSERT_TRUE(again.connected());
  ASSERT_TRUE(again.send("y"));
  EXPECT_EQ(again.read(1), "y");
}

TEST(TcpProxy, DelayHoldsEachChunkAtLeastTheDelayInOrder) {
  echo_server echo;
  tcp_proxy proxy("127.0.0.1", echo.port());
  client c(proxy.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("warm"));
  ASSERT_EQ(c.read(4), "warm");

  constexpr auto d = 150ms;
  proxy.delay(d);
  EXPECT_EQ(proxy.mode(), tcp_proxy_mode::delay);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send("a"));
  ASSERT_TRUE(c.send("bb"));
  ASSERT_TRUE(c.send("ccc"));
  EXPECT_EQ(c.read(6), "abbccc");
  // Each way is delayed: the echo comes back no sooner than twice the delay.
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2 * d);

  proxy.pass();
  ASSERT_TRUE(c.send("z"));
  EXPECT_EQ(c.read(1), "z");
}

TEST(TcpProxy, AConnectionToAMissingTargetIsReset) {
  std::uint16_t dead_port = 0;
  {
    echo_server gone;  // its port, closed again: nothing listens there
    dead_port = gone.port();
  }
  tcp_proxy proxy("127.0.0.1", dead_port);
  client c(proxy.port());
  ASSERT_TRUE(c.connected());
  const int e = c.wait_end();
  EXPECT_TRUE(e == ECONNRESET || e == 0) << "recv ended with " << e;
}

// ---- between two akt nodes ----

using namespace akt::remote_test;

// A free loopback port, for a node that must bind a port known before it starts (its proxy's
// target). Another socket may take it between this close and the node's bind; tests on loopback
// with an ephemeral range of thousands make that rare, and the node's start then fails loudly.
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = loopback(0);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A node every peer reaches through its own proxy: it binds a port of its own and advertises
// the proxy's, so both the requests to it and its replies (which travel on its own connection
// to the asker) cross proxies.
struct proxied_node {
  explicit proxied_node(const std::string& name)
      : own_port(free_port()), proxy("127.0.0.1", own_port) {
    akt::remote_config rc;
    rc.port = own_port;
    rc.advertised_port = proxy.port();
    n = std::make_unique<node>(name, rc);
  }
  std::uint16_t own_port;
  tcp_proxy proxy;
  std::unique_ptr<node> n;
};

TEST(TcpProxy, AktNodesTellAndAskThroughTheProxies) {
  proxied_node a("alpha"), b("beta");
  ASSERT_TRUE(a.n->started) << a.n->started.error().message();
  ASSERT_TRUE(b.n->started) << b.n->started.error().message();
  auto j = std::make_shared<journal>();
  ASSERT_TRUE(b.n->sys.spawn<echo>("echo", j));
  EXPECT_EQ(b.n->sys.address(), "akt://beta@" + b.proxy.address());

  auto found = a.n->sys.lookup(b.proxy.address(), "echo", k_bound);
  ASSERT_TRUE(found) << found.error().message();
  ASSERT_FALSE(found->tell(ping{7}));
  ASSERT_TRUE(wait_for([&] { return j->received.load() == 1; }));
  EXPECT_EQ(j->ping_list(), std::vector<std::int64_t>{7});
  auto r = found->ask<ping>(ping{41}, k_bound);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 42);
  // Both ways crossed a proxy.
  EXPECT_GE(b.proxy.stats().accepted, 1u);
  EXPECT_GT(b.proxy.stats().bytes_to_target, 0u);
  EXPECT_GE(a.proxy.stats().accepted, 1u);
  EXPECT_GT(a.proxy.stats().bytes_to_target, 0u);
}

TEST(TcpProxy, AktAskFailsWithAnErrorAfterReset) {
  proxied_node a("alpha"), b("beta");
  ASSERT_TRUE(a.n->started && b.n->started);
  auto j = std::make_shared<journal>();
  ASSERT_TRUE(b.n->sys.spawn<echo>("echo", j));
  auto found = a.n->sys.lookup(b.proxy.address(), "echo", k_bound);
  ASSERT_TRUE(found) << found.error().message();
  auto warm = found->ask<ping>(ping{1}, k_bound);
  ASSERT_TRUE(warm) << warm.error().message();

  b.proxy.reset();
  a.proxy.reset();
  const auto start = std::chrono::steady_clock::now();
  auto r = found->ask<ping>(ping{2}, k_bound);
  ASSERT_FALSE(r);
  // Failed by the broken link (connection lost, node lost), not by the ask's own timeout.
  EXPECT_NE(r.error().code(), akt::errc::request_timeout) << r.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, k_bound);
}

TEST(TcpProxy, AktAskInFlightFailsWithAnErrorWhenTheLinkIsReset) {
  proxied_node a("alpha"), b("beta");
  ASSERT_TRUE(a.n->started && b.n->started);
  auto j = std::make_shared<journal>();
  ASSERT_TRUE(b.n->sys.spawn<echo>("echo", j));
  auto found = a.n->sys.lookup(b.proxy.address(), "echo", k_bound);
  ASSERT_TRUE(found) << found.error().message();
  // An ask the echo actor receives and never answers: it is in flight when the link breaks.
  auto pending = std::async(
      std::launch::async, [&] { return found->ask<std::string>(std::string("ignore"), k_bound); });
  ASSERT_TRUE(wait_for([&] { return j->received.load() == 1; }));
  b.proxy.reset();
  a.proxy.reset();
  ASSERT_EQ(pending.wait_for(k_bound + 10s), std::future_status::ready);
  auto r = pending.get();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().code(), akt::errc::request_timeout) << r.error().message();
}

}  // namespace
