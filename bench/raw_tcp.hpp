#pragma once
// The machine's ceiling for the remote benchmarks: plain TCP over the loopback interface, two
// threads of one process, no framework. Four shapes, all with frames of k_frame bytes (about the
// size of a small remote tell on akt's wire):
//   stream(n, per_write)    a writer sends n frames, per_write frames per write() call, and a
//                           reader counts them: per_write large is the batching ceiling (what a
//                           remote tell rate can reach), per_write 1 one system call per frame.
//   ping_pong(n, polling)   n sequential round trips of one frame, an echo thread answering:
//                           blocking reads (both threads sleep in the kernel between frames), or
//                           both sides polling non-blocking sockets (no wake-up latency).
// Each call opens its own connection (127.0.0.1, an ephemeral port, TCP_NODELAY) and threads, and
// returns wall time and the process's CPU time over the transfer (setup excluded).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"

namespace akt_bench::raw_tcp {

constexpr std::size_t k_frame = 64;  // bytes per frame (akt's small remote tell: 51, its ask: 55)

struct result {
  double seconds = 0;                 // wall time of the transfer
  double cpu_seconds = 0;             // the process's CPU time over it (both threads)
  std::uint64_t frames = 0;           // frames (stream) or round trips (ping_pong)
  std::vector<std::uint64_t> rtt_ns;  // ping_pong: each round trip
  double rate() const { return seconds > 0 ? static_cast<double>(frames) / seconds : 0; }
  double cpu_cores() const { return seconds > 0 ? cpu_seconds / seconds : 0; }
};

namespace detail {

[[noreturn]] inline void fail(const char* what) {
  throw std::runtime_error(std::string("raw_tcp: ") + what + ": " + std::strerror(errno));
}

// A connected pair of TCP sockets on 127.0.0.1, both with TCP_NODELAY.
struct loopback {
  int client = -1;
  int server = -1;
  loopback() {
    const int lst = ::socket(AF_INET, SOCK_STREAM, 0);
    if (lst < 0) fail("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(lst, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lst, 1) != 0 ||
        ::getsockname(lst, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(lst);
      fail("bind/listen");
    }
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    if (client < 0 || ::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(lst);
      fail("connect");
    }
    server = ::accept(lst, nullptr, nullptr);
    ::close(lst);
    if (server < 0) fail("accept");
    const int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~loopback() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
  }
  loopback(const loopback&) = delete;
  loopback& operator=(const loopback&) = delete;
};

inline void write_all(int fd, const unsigned char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("send");
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Reads exactly n bytes; polling: spins on a non-blocking receive instead of sleeping in it.
// False at end of stream.
inline bool read_all(int fd, unsigned char* p, std::size_t n, bool polling) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, polling ? MSG_DONTWAIT : 0);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        cpu_relax();
        continue;
      }
      fail("recv");
    }
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

inline double seconds_between(std::chrono::steady_clock::time_point a,
                              std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace detail

// n frames from one thread to another, per_write frames per send() call (the writer fills a
// buffer of per_write frames once and sends it n / per_write times); timed until the reader has
// read every byte.
inline result stream(std::uint64_t n, std::size_t per_write) {
  if (per_write == 0) per_write = 1;
  n = (n + per_write - 1) / per_write * per_write;
  detail::loopback link;
  const std::uint64_t total_bytes = n * k_frame;
  std::thread reader([&] {
    // Reads as the akt transport does: chunks of 64 KiB.
    std::vector<unsigned char> buf(64u << 10);
    std::uint64_t got = 0;
    while (got < total_bytes) {
      const ssize_t r = ::recv(link.server, buf.data(), buf.size(), 0);
      if (r <= 0) {
        if (r < 0 && errno == EINTR) continue;
        break;
      }
      got += static_cast<std::uint64_t>(r);
    }
  });
  std::vector<unsigned char> frames(per_write * k_frame, 0x5a);
  const std::uint64_t cpu0 = process_cpu_ns();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t sent = 0; sent < n; sent += per_write)
    detail::write_all(link.client, frames.data(), frames.size());
  reader.join();
  const auto t1 = std::chrono::steady_clock::now();
  result r;
  r.seconds = detail::seconds_between(t0, t1);
  r.cpu_seconds = static_cast<double>(process_cpu_ns() - cpu0) / 1e9;
  r.frames = n;
  return r;
}

// A connection whose far end echoes every frame (an echo thread, blocking or polling), for
// round trips one at a time: ping_pong below, and benchmarks that interleave raw round trips with
// their own to compare both at the same moment on a noisy machine. Single owner.
class echo_link {
 public:
  explicit echo_link(bool polling) : polling_(polling) {
    std::memset(frame_, 0x5a, sizeof frame_);
    echo_ = std::thread([this] {
      unsigned char f[k_frame];
      while (detail::read_all(link_.server, f, k_frame, polling_))
        detail::write_all(link_.server, f, k_frame);
    });
  }
  ~echo_link() {
    ::shutdown(link_.client, SHUT_WR);  // the echo thread sees the end of the stream
    echo_.join();
  }
  echo_link(const echo_link&) = delete;
  echo_link& operator=(const echo_link&) = delete;

  // One round trip; its duration in nanoseconds.
  std::uint64_t round_trip() {
    const auto a = std::chrono::steady_clock::now();
    detail::write_all(link_.client, frame_, k_frame);
    if (!detail::read_all(link_.client, frame_, k_frame, polling_)) detail::fail("echo closed");
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - a)
            .count());
  }

 private:
  const bool polling_;
  detail::loopback link_;
  unsigned char frame_[k_frame];
  std::thread echo_;
};

// n round trips of one frame; the echo thread reads a whole frame and writes it back.
inline result ping_pong(std::uint64_t n, bool polling) {
  echo_link link(polling);
  result r;
  r.rtt_ns.reserve(n);
  const std::uint64_t cpu0 = process_cpu_ns();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < n; ++i) r.rtt_ns.push_back(link.round_trip());
  const auto t1 = std::chrono::steady_clock::now();
  r.cpu_seconds = static_cast<double>(process_cpu_ns() - cpu0) / 1e9;
  r.seconds = detail::seconds_between(t0, t1);
  r.frames = r.rtt_ns.size();
  return r;
}

}  // namespace akt_bench::raw_tcp
