#pragma once
// Blocking socket I/O for the remote tests that speak the wire protocol by hand (a hostile
// client, a peer that stops reading): every read is bounded by a deadline, and by a stop flag
// for a peer's serving threads that a destructor must be able to end.

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <vector>

#include "remote/frame.hpp"

namespace akt::remote_test::raw {

using bytes = std::vector<unsigned char>;
using clock_type = std::chrono::steady_clock;

// Waits until fd is readable (or closed); false when the deadline passes or `stop` is set first
// (checked every 20 ms).
inline bool wait_readable(int fd, clock_type::time_point deadline,
                          const std::atomic<bool>* stop = nullptr) {
  for (;;) {
    if (stop != nullptr && stop->load()) return false;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 20)));
    if (r < 0 && errno != EINTR) return false;
    if (r > 0) return true;
  }
}

// Reads exactly n bytes; false on a close, an error, the deadline or `stop`.
inline bool read_exactly(int fd, unsigned char* out, std::size_t n, clock_type::time_point deadline,
                         const std::atomic<bool>* stop = nullptr) {
  std::size_t at = 0;
  while (at < n) {
    if (!wait_readable(fd, deadline, stop)) return false;
    const ssize_t got = ::recv(fd, out + at, n - at, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return false;
    at += static_cast<std::size_t>(got);
  }
  return true;
}

// Reads one whole frame whose body is at most max_body bytes.
inline bool read_frame(int fd, remote::detail::frame_header& h, bytes& body,
                       clock_type::time_point deadline, const std::atomic<bool>* stop = nullptr,
                       std::uint32_t max_body = 64u << 20) {
  unsigned char head[remote::detail::k_header_bytes];
  if (!read_exactly(fd, head, sizeof head, deadline, stop)) return false;
  if (!remote::detail::decode_header(head, max_body, h).empty()) return false;
  body.resize(h.length);
  return h.length == 0 || read_exactly(fd, body.data(), h.length, deadline, stop);
}

// Writes every byte; false when the other side closed first.
inline bool write_all(int fd, const bytes& b) {
  std::size_t at = 0;
  while (at < b.size()) {
    const ssize_t n = ::send(fd, b.data() + at, b.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace akt::remote_test::raw
