#pragma once
// A raw HTTP/1.1 client over TCP on 127.0.0.1 for the endpoint's tests: it sends exactly the
// bytes a test gives (well-formed or not) and reads the answer until the server closes or the
// announced body arrived. Every call is bounded by its timeout.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace akt::http_test {

struct response {
  int status = 0;    // 0: no status line came back
  std::string head;  // status line and headers
  std::string body;
  bool closed = false;  // the server closed the connection
};

class raw_connection {
 public:
  explicit raw_connection(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~raw_connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  bool connected() const { return fd_ >= 0; }

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Reads until the server closes, or a whole response (head and Content-Length bytes) came, or
  // the timeout passed.
  response read(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    response r;
    std::string data;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (complete(data, r)) return r;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        r.closed = true;
        break;
      }
      data.append(buf, static_cast<std::size_t>(n));
    }
    (void)complete(data, r);
    return r;
  }

  // Waits until the server closes the connection (true) or the timeout passes (false), reading
  // and dropping whatever comes.
  bool wait_closed(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[4096];
      if (::recv(fd_, buf, sizeof buf, 0) <= 0) return true;
    }
  }

 private:
  // Parses what came so far; true once the head and the whole announced body are there.
  static bool complete(const std::string& data, response& r) {
    const auto end = data.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    r.head = data.substr(0, end);
    if (r.head.rfind("HTTP/1.1 ", 0) == 0) r.status = std::atoi(r.head.c_str() + 9);
    r.body = data.substr(end + 4);
    const auto cl = r.head.find("Content-Length: ");
    if (cl == std::string::npos) return false;
    const auto want = static_cast<std::size_t>(std::atoll(r.head.c_str() + cl + 16));
    return r.body.size() >= want;
  }

  int fd_ = -1;
};

// One request on its own connection.
inline response request(std::uint16_t port, std::string_view bytes,
                        std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  raw_connection c(port);
  if (!c.connected() || !c.send(bytes)) return {};
  return c.read(timeout);
}

inline response get(std::uint16_t port, std::string_view path) {
  return request(port, "GET " + std::string(path) +
                           " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
}

// The header's value (first match, case as the server writes it), or empty.
inline std::string header(const response& r, std::string_view name) {
  const std::string key = "\r\n" + std::string(name) + ": ";
  const auto at = r.head.find(key);
  if (at == std::string::npos) return {};
  const auto from = at + key.size();
  return r.head.substr(from, r.head.find("\r\n", from) - from);
}

}  // namespace akt::http_test
