// Tests for the remote transport (src/remote/transport.hpp): frames over real TCP and TLS
// sockets on loopback, batching, limits, malformed input, heartbeats, closing races and mutual
// TLS. Every wait is on a condition with a generous bound; nothing sleeps and then asserts.
// The io_pool is declared first in each test so that it outlives every connection and
// listener the test holds.

#include <gtest/gtest.h>

#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "remote/transport.hpp"

namespace {

using namespace std::chrono_literals;
using akt::errc;
using akt::error;
using akt::result;
using akt::remote::detail::async_connect;
using akt::remote::detail::connection;
using akt::remote::detail::encode_header;
using akt::remote::detail::frame_header;
using akt::remote::detail::frame_type;
using akt::remote::detail::io_limits;
using akt::remote::detail::io_pool;
using akt::remote::detail::k_header_bytes;
using akt::remote::detail::lane;
using akt::remote::detail::listener;
using akt::remote::detail::tls_settings;
using conn_ptr = std::shared_ptr<connection>;

constexpr auto k_bound = 60s;  // the most any condition is waited for (sanitizers, 2 cores)

// Polls `pred` until it holds or `bound` passes; true if it held.
template <class P>
bool eventually(P pred, std::chrono::milliseconds bound = k_bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Appends one frame whose body is `size` bytes of a pattern derived from `correlation`.
void put_frame(std::vector<unsigned char>& out, std::uint64_t correlation, std::size_t size,
               frame_type type = frame_type::tell) {
  frame_header h;
  h.type = type;
  h.on = lane::ordinary;
  h.length = static_cast<std::uint32_t>(size);
  h.correlation = correlation;
  const std::size_t at = out.size();
  out.resize(at + k_header_bytes + size);
  encode_header(h, &out[at]);
  for (std::size_t i = 0; i < size; ++i) {
    out[at + k_header_bytes + i] = static_cast<unsigned char>(correlation * 31 + i);
  }
}

bool body_matches(std::uint64_t correlation, std::span<const unsigned char> body) {
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != static_cast<unsigned char>(correlation * 31 + i)) return false;
  }
  return true;
}

error send_one(connection& c, std::uint64_t correlation, std::size_t size = 8) {
  return c.send([&](std::vector<unsigned char>& out) { put_frame(out, correlation, size); });
}

// Sends frames 0 .. n-1 in order, frame i of size_of(i) bytes, waiting out window_full; the
// first other refusal ends it and is returned.
error send_all(connection& c, std::uint64_t n,
               const std::function<std::size_t(std::uint64_t)>& size_of) {
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::size_t size = size_of(i);
    error e;
    while ((e = send_one(c, i, size)) == errc::window_full) std::this_thread::yield();
    if (e) return e;
  }
  return {};
}

// Records what a connection's handler hears. Checks order (correlations 0, 1, 2, ...) and
// body contents as frames arrive, so that 100k frames need no storage.
struct recorder : connection::handler {
  std::mutex m;
  std::condition_variable cv;
  std::uint64_t frames = 0;
  std::uint64_t bytes = 0;
  bool in_order = true;
  bool bodies_ok = true;
  int closed = 0;
  bool frame_after_close = false;
  error why;
  std::function<void(connection&, const frame_header&)> also;  // on the I/O thread; set under m

  void on_frame(connection& c, const frame_header& h,
                std::span<const unsigned char> body) override {
    std::function<void(connection&, const frame_header&)> extra;
    {
      std::lock_guard lock(m);
      extra = also;
      if (closed != 0) frame_after_close = true;
      if (h.correlation != frames) in_order = false;
      if (!body_matches(h.correlation, body)) bodies_ok = false;
      ++frames;
      bytes += body.size();
    }
    if (extra) extra(c, h);
    cv.notify_all();
  }
  void on_closed(connection&, const error& e) override {
    {
      std::lock_guard lock(m);
      if (++closed == 1) why = e;
    }
    cv.notify_all();
  }
  template <class P>
  bool wait(P pred, std::chrono::milliseconds bound = k_bound) {
    std::unique_lock lock(m);
    return cv.wait_for(lock, bound, pred);
  }
  bool wait_frames(std::uint64_t n) {
    return wait([&] { return frames >= n; });
  }
  bool wait_closed() {
    return wait([&] { return closed > 0; });
  }
  std::uint64_t frame_count() {
    std::lock_guard lock(m);
    return frames;
  }
  int closed_count() {
    std::lock_guard lock(m);
    return closed;
  }
  error reason() {
    std::lock_guard lock(m);
    return why;
  }
};

// A listener that starts every accepted connection with a recorder of its own.
struct server {
  std::mutex m;
  std::condition_variable cv;
  std::vector<conn_ptr> conns;
  std::vector<std::shared_ptr<recorder>> recorders;
  std::unique_ptr<listener> l;
  std::function<void(connection&)> on_accept;  // before start, on the I/O thread

  result<void> open(io_pool& io, const tls_settings& tls = {}, const io_limits& limits = {},
                    const std::string& host = "127.0.0.1") {
    auto made = listener::open(io, host, 0, tls, limits, [this](conn_ptr c) { accepted(c); });
    if (!made) return made.error();
    l = std::move(*made);
    return {};
  }
  void accepted(const conn_ptr& c) {
    auto r = std::make_shared<recorder>();
    if (on_accept) on_accept(*c);
    c->start(r);
    {
      std::lock_guard lock(m);
      conns.push_back(c);
      recorders.push_back(r);
    }
    cv.notify_all();
  }
  // The i-th accepted connection's recorder, once it was accepted (null if it never was).
  std::shared_ptr<recorder> nth(std::size_t i) {
    std::unique_lock lock(m);
    if (!cv.wait_for(lock, k_bound, [&] { return recorders.size() > i; })) return nullptr;
    return recorders[i];
  }
  conn_ptr nth_connection(std::size_t i) {
    std::unique_lock lock(m);
    if (!cv.wait_for(lock, k_bound, [&] { return conns.size() > i; })) return nullptr;
    return conns[i];
  }
  std::size_t accepted_count() {
    std::lock_guard lock(m);
    return conns.size();
  }
};

result<conn_ptr> connect_to(io_pool& io, std::uint16_t port, const tls_settings& tls = {},
                            const io_limits& limits = {}, const std::string& host = "127.0.0.1",
                            std::chrono::milliseconds timeout = 20s) {
  auto p = std::make_shared<std::promise<result<conn_ptr>>>();
  auto f = p->get_future();
  async_connect(io, host, port, tls, limits, timeout,
                [p](result<conn_ptr> r) { p->set_value(std::move(r)); });
  if (f.wait_for(timeout + k_bound) != std::future_status::ready) {
    return error(errc::request_timeout, "async_connect never called done");
  }
  return f.get();
}

// A plain connection from this side to a server of its own, both ends started: `c` sends,
// `got` records what the server's end receives.
struct wired {
  server srv;
  conn_ptr c;
  std::shared_ptr<recorder> got;
  // False (with the reason as a test failure) when a step fails.
  bool open(io_pool& io) {
    if (auto r = srv.open(io); !r) {
      ADD_FAILURE() << r.error().message();
      return false;
    }
    auto made = connect_to(io, srv.l->port());
    if (!made) {
      ADD_FAILURE() << made.error().message();
      return false;
    }
    c = *made;
    c->start(std::make_shared<recorder>());
    got = srv.nth(0);
    EXPECT_NE(got, nullptr) << "the server never accepted";
    return got != nullptr;
  }
};

// Collects what the pool logs.
struct log_capture {
  std::mutex m;
  std::vector<std::string> lines;
  void attach(io_pool& io) {
    io.set_log([this](std::string_view s) {
      std::lock_guard lock(m);
      lines.emplace_back(s);
    });
  }
  std::size_t count() {
    std::lock_guard lock(m);
    return lines.size();
  }
  std::string all() {
    std::lock_guard lock(m);
    std::string s;
    for (auto& l : lines) s += l + "\n";
    return s;
  }
};

// A listening socket that never accepts: the kernel completes connections into its backlog,
// and nothing ever reads or writes them (a peer that went silent).
struct silent_peer {
  asio::io_context ctx;
  asio::ip::tcp::acceptor acceptor{ctx, {asio::ip::make_address("127.0.0.1"), 0}};
  std::uint16_t port() { return acceptor.local_endpoint().port(); }
};

// The bound on a connection's own buffer in the tests that fill it (io_limits::max_pending_bytes).
constexpr std::size_t k_small_pending = 256u << 10;

// A started connection to `peer`, which never reads, filled until send() refuses a frame with
// window_full: the kernel's buffers fill first, then k_small_pending of the connection's own.
// Frame i (i = 0, 1, ...) has size_of(i) bytes; `accepted`: how many it took. Null (with a test
// failure) when it could not connect or no refusal came within the bound.
conn_ptr filled_connection(io_pool& io, silent_peer& peer, const std::shared_ptr<recorder>& r,
                           std::size_t (*size_of)(std::uint64_t), std::uint64_t& accepted) {
  io_limits limits;
  limits.max_pending_bytes = k_small_pending;
  auto c = connect_to(io, peer.port(), {}, limits);
  if (!c) {
    ADD_FAILURE() << c.error().message();
    return nullptr;
  }
  (*c)->start(r);
  accepted = 0;
  error e;
  const bool refused = eventually([&] {
    e = send_one(**c, accepted, size_of(accepted));
    if (!e) ++accepted;
    return e == errc::window_full;
  });
  EXPECT_TRUE(refused) << e.message();
  return refused ? *c : nullptr;
}

// A raw client socket for writing malformed bytes.
struct raw_client {
  asio::io_context ctx;
  asio::ip::tcp::socket socket{ctx};
  explicit raw_client(std::uint16_t port) {
    socket.connect({asio::ip::make_address("127.0.0.1"), port});
  }
  void write(const std::vector<unsigned char>& bytes) {
    std::error_code ec;
    asio::write(socket, asio::buffer(bytes), ec);
  }
};

std::string cert(const char* name) {
  return std::string(AKT_SOURCE_DIR) + "/tests/remote/certs/" + name;
}
tls_settings server_tls(bool mutual) {
  tls_settings t;
  t.enabled = true;
  t.certificate_file = cert("server.pem");
  t.private_key_file = cert("server.key");
  t.ca_file = cert("ca.pem");
  t.require_peer_certificate = mutual;
  return t;
}
tls_settings client_tls(const char* cert_name = nullptr) {
  tls_settings t;
  t.enabled = true;
  t.ca_file = cert("ca.pem");
  if (cert_name != nullptr) {
    t.certificate_file = cert((std::string(cert_name) + ".pem").c_str());
    t.private_key_file = cert((std::string(cert_name) + ".key").c_str());
  }
  return t;
}

// ---- frames and batching ----

TEST(Transport_Frames, HundredThousandFramesArriveInOrderInFarFewerWrites) {
  io_pool io(2);
  wired w;
  ASSERT_TRUE(w.open(io));

  constexpr std::uint64_t n = 100000;
  ASSERT_FALSE(send_all(*w.c, n, [](std::uint64_t) -> std::size_t { return 16; }));
  ASSERT_TRUE(w.got->wait_frames(n)) << w.got->frame_count();
  ASSERT_TRUE(eventually([&] { return w.c->stats().frames_out == n; }));
  {
    std::lock_guard lock(w.got->m);
    EXPECT_EQ(w.got->frames, n);
    EXPECT_TRUE(w.got->in_order);
    EXPECT_TRUE(w.got->bodies_ok);
  }
  const auto out = w.c->stats();
  const auto in = w.srv.nth_connection(0)->stats();
  EXPECT_EQ(out.bytes_out, n * (k_header_bytes + 16));
  EXPECT_EQ(in.frames_in, n);
  EXPECT_EQ(in.bytes_in, out.bytes_out);
  // Batching: while a write is in flight producers only append, so a burst goes out in far
  // fewer system calls than frames.
  EXPECT_LT(out.writes, n / 10) << "writes " << out.writes;
  std::cout << "[ figures  ] " << n << " frames in " << out.writes << " writes ("
            << static_cast<double>(n) / static_cast<double>(out.writes) << " frames per write), "
            << in.reads << " reads\n";
}

TEST(Transport_Frames, OneFrameAtATimeOnAnIdleConnectionGoesOutAtOnce) {
  io_pool io(1);
  wired w;
  ASSERT_TRUE(w.open(io));

  std::chrono::nanoseconds slowest{0};
  for (std::uint64_t i = 0; i < 50; ++i) {
    const auto before = w.c->stats().writes;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_FALSE(send_one(*w.c, i));
    ASSERT_TRUE(w.got->wait_frames(i + 1));
    slowest = std::max(slowest, std::chrono::steady_clock::now() - t0);
    // Each frame went out in a write of its own, started by send() itself (no timer).
    ASSERT_TRUE(eventually([&] { return w.c->stats().writes == before + 1; }));
  }
  EXPECT_EQ(w.c->stats().frames_out, 50u);
  EXPECT_EQ(w.c->stats().writes, 50u);
  std::cout << "[ figures  ] slowest idle round (send to delivery): "
            << std::chrono::duration_cast<std::chrono::microseconds>(slowest).count() << " us\n";
}

// A frame whose sender blocks until it is answered (a blocking ask, or the answer to one) is
// written by send() itself whenever no write is in flight, also right after another write: it
// never waits for the I/O thread. Here the only I/O thread is held busy, so a frame left to it
// could not go out before send() returns.
TEST(Transport_Frames, AnUrgentFrameIsWrittenBySendItselfEvenRightAfterAnotherWrite) {
  std::atomic<bool> held{false}, release{false};  // before io: they outlive its thread
  io_pool io(1);
  wired w;
  ASSERT_TRUE(w.open(io));
  asio::post(io.context(), [&] {
    held.store(true);
    release.wait(false);  // until the test releases it (store, then notify_all)
  });
  // Whatever happens below, the I/O thread is let go (an early ASSERT would otherwise leave it
  // waiting, and io_pool's destructor with it).
  struct release_at_exit {
    std::atomic<bool>& flag;
    ~release_at_exit() {
      flag.store(true);
      flag.notify_all();
    }
  } guard{release};
  ASSERT_TRUE(eventually([&] { return held.load(); }));

  constexpr std::uint64_t n = 20;
  bool all_at_once = true;
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto before = w.c->stats();
    ASSERT_FALSE(w.c->send([&](std::vector<unsigned char>& out) { put_frame(out, i, 8); },
                           /*urgent=*/true));
    const auto after = w.c->stats();
    if (after.writes != before.writes + 1 || after.frames_out != before.frames_out + 1) {
      all_at_once = false;
    }
  }
  release.store(true);
  release.notify_all();
  EXPECT_TRUE(all_at_once) << "an urgent frame waited for the held I/O thread";
  ASSERT_TRUE(w.got->wait_frames(n));
  std::lock_guard lock(w.got->m);
  EXPECT_EQ(w.got->frames, n);
  EXPECT_TRUE(w.got->in_order);
  EXPECT_TRUE(w.got->bodies_ok);
}

TEST(Transport_Frames, AnIoPoolThatPollsDeliversInOrderAndStops) {
  io_pool io(2, std::chrono::microseconds(200));
  wired w;
  ASSERT_TRUE(w.open(io));
  constexpr std::uint64_t n = 5000;
  ASSERT_FALSE(send_all(*w.c, n, [](std::uint64_t) -> std::size_t { return 32; }));
  ASSERT_TRUE(w.got->wait_frames(n)) << w.got->frame_count();
  {
    std::lock_guard lock(w.got->m);
    EXPECT_TRUE(w.got->in_order);
    EXPECT_TRUE(w.got->bodies_ok);
  }
  w.c->close(error(errc::connection_lost, "done"));
  io.stop();  // the polling threads see the stop and end (the test's time bound catches one that
              // does not)
}

TEST(Transport_Frames, LargeAndMixedSizeFramesArriveWhole) {
  io_pool io(2);
  wired w;
  ASSERT_TRUE(w.open(io));

  std::mt19937 rng(7);
  std::uint64_t total = 0;
  constexpr std::uint64_t n = 200;
  // Mostly sizes around the read chunk; the last frame is the largest allowed.
  const error e = send_all(*w.c, n, [&](std::uint64_t i) -> std::size_t {
    const std::size_t size = i + 1 == n ? io_limits{}.max_frame_bytes : rng() % (300u << 10);
    total += size;
    return size;
  });
  ASSERT_FALSE(e) << e.message();
  ASSERT_TRUE(w.got->wait_frames(n));
  std::lock_guard lock(w.got->m);
  EXPECT_TRUE(w.got->in_order);
  EXPECT_TRUE(w.got->bodies_ok);
  EXPECT_EQ(w.got->bytes, total);
}

// ---- connecting and listening ----

TEST(Transport_Connect, ConnectionToAClosedPortFailsWithUnreachable) {
  io_pool io(1);
  std::uint16_t port = 0;
  {
    silent_peer gone;  // bind a free port, then give it back
    port = gone.port();
  }
  auto c = connect_to(io, port);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), errc::unreachable) << c.error().message();
  EXPECT_NE(c.error().detail().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
}

TEST(Transport_Connect, UnresolvableHostFailsWithUnreachable) {
  io_pool io(1);
  auto c = connect_to(io, 1, {}, {}, "no-such-host.invalid", 5s);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), errc::unreachable) << c.error().message();
}

TEST(Transport_Connect, MissingCertificateFileFailsWithInvalidArgument) {
  io_pool io(1);
  auto tls = client_tls();
  tls.ca_file = cert("no-such-ca.pem");
  auto c = connect_to(io, 1, tls);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), errc::invalid_argument) << c.error().message();
}

TEST(Transport_Connect, AHandshakeThatNeverCompletesTimesOutWithUnreachable) {
  io_pool io(1);
  silent_peer peer;  // TCP connects into its backlog; no TLS answer ever comes
  const auto t0 = std::chrono::steady_clock::now();
  auto c = connect_to(io, peer.port(), client_tls(), {}, "127.0.0.1", 300ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), errc::unreachable) << c.error().message();
  EXPECT_NE(c.error().detail().find("within 300 ms"), std::string::npos) << c.error().message();
  EXPECT_GE(took, 300ms);
}

TEST(Transport_Listener, PortZeroReportsTheBoundPortAndAccepts) {
  io_pool io(1);
  server srv;
  ASSERT_TRUE(srv.open(io));
  ASSERT_NE(srv.l->port(), 0);
  auto c = connect_to(io, srv.l->port());
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_NE(srv.nth(0), nullptr);
  EXPECT_EQ((*c)->remote_endpoint(), "127.0.0.1:" + std::to_string(srv.l->port()));
  EXPECT_FALSE((*c)->tls());
}

TEST(Transport_Listener, BadHostIsInvalidArgumentAndUnbindableAddressIsUnreachable) {
  io_pool io(1);
  auto none = [](conn_ptr) {};
  auto bad = listener::open(io, "not a host name!", 0, {}, {}, none);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), errc::invalid_argument) << bad.error().message();
  // 192.0.2.1 (TEST-NET-1) is no address of this machine: bind fails.
  auto foreign = listener::open(io, "192.0.2.1", 0, {}, {}, none);
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error(), errc::unreachable) << foreign.error().message();
  // A port in use cannot be bound twice.
  server srv;
  ASSERT_TRUE(srv.open(io));
  auto twice = listener::open(io, "127.0.0.1", srv.l->port(), {}, {}, none);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error(), errc::unreachable) << twice.error().message();
}

TEST(Transport_Listener, CloseStopsAcceptingAndKeepsExistingConnections) {
  io_pool io(1);
  server srv;
  ASSERT_TRUE(srv.open(io));
  const auto port = srv.l->port();
  auto c = connect_to(io, port);
  ASSERT_TRUE(c);
  (*c)->start(std::make_shared<recorder>());
  auto got = srv.nth(0);
  ASSERT_NE(got, nullptr);
  srv.l->close();
  // The port is given back once the acceptor closed on its I/O thread.
  ASSERT_TRUE(eventually([&] { return !connect_to(io, port, {}, {}, "127.0.0.1", 2s); }));
  EXPECT_EQ(srv.accepted_count(), 1u);
  ASSERT_FALSE(send_one(**c, 0));
  EXPECT_TRUE(got->wait_frames(1));
}

TEST(Transport_Listener, AClientThatNeverHandshakesIsDroppedAfterTheHandshakeTimeout) {
  io_pool io(1);
  log_capture logs;
  logs.attach(io);
  io_limits limits;
  limits.handshake_timeout = 200ms;
  server srv;
  ASSERT_TRUE(srv.open(io, server_tls(false), limits));
  raw_client raw(srv.l->port());  // connects, says nothing
  std::vector<unsigned char> sink(64);
  std::error_code ec;
  raw.socket.read_some(asio::buffer(sink), ec);  // returns when the listener drops it
  EXPECT_TRUE(ec);
  ASSERT_TRUE(eventually([&] { return logs.count() >= 1; }));
  EXPECT_NE(logs.all().find("not done within 200 ms"), std::string::npos) << logs.all();
  EXPECT_EQ(srv.accepted_count(), 0u);
}

// ---- malformed input ----

// Opens a listener, a well-behaved connection, then a raw socket writing `bytes`; expects the
// raw socket's connection closed with protocol_error (detail `why`) and the other unharmed.
void expect_only_bad_connection_closed(const std::vector<unsigned char>& bytes,
                                       std::string_view why) {
  io_pool io(2);
  io_limits limits;
  limits.max_frame_bytes = 1024;
  server srv;
  ASSERT_TRUE(srv.open(io, {}, limits));
  auto good = connect_to(io, srv.l->port(), {}, limits);
  ASSERT_TRUE(good);
  (*good)->start(std::make_shared<recorder>());
  auto good_in = srv.nth(0);
  ASSERT_NE(good_in, nullptr);
  ASSERT_FALSE(send_one(**good, 0));
  ASSERT_TRUE(good_in->wait_frames(1));

  raw_client raw(srv.l->port());
  auto bad_in = srv.nth(1);
  ASSERT_NE(bad_in, nullptr);
  raw.write(bytes);
  ASSERT_TRUE(bad_in->wait_closed());
  EXPECT_EQ(bad_in->reason(), errc::protocol_error) << bad_in->reason().message();
  EXPECT_EQ(bad_in->reason().detail(), why);
  EXPECT_FALSE(srv.nth_connection(1)->open());
  // The raw socket sees the close (end of stream or reset), not a hang.
  std::vector<unsigned char> sink(64);
  std::error_code ec;
  raw.socket.read_some(asio::buffer(sink), ec);
  EXPECT_TRUE(ec);

  ASSERT_FALSE(send_one(**good, 1));
  EXPECT_TRUE(good_in->wait_frames(2));
  EXPECT_EQ(good_in->closed_count(), 0);
  EXPECT_TRUE(srv.nth_connection(0)->open());
}

TEST(Transport_Protocol, OversizeFrameHeaderClosesOnlyThatConnection) {
  std::vector<unsigned char> bytes;
  put_frame(bytes, 0, 0);
  akt::remote::detail::store_u32(bytes.data(), 1025);  // one above max_frame_bytes
  expect_only_bad_connection_closed(bytes, "frame above the size limit");
}

TEST(Transport_Protocol, WrongVersionClosesOnlyThatConnection) {
  std::vector<unsigned char> bytes;
  put_frame(bytes, 0, 4);
  bytes[4] = 2;
  expect_only_bad_connection_closed(bytes, "unsupported wire version");
}

TEST(Transport_Protocol, GarbageBytesCloseOnlyThatConnection) {
  const std::string http = "GET / HTTP/1.1\r\nHost: akt\r\n\r\n";
  expect_only_bad_connection_closed({http.begin(), http.end()}, "unsupported wire version");
}

TEST(Transport_Protocol, UnknownFrameTypeAndLaneCloseOnlyThatConnection) {
  std::vector<unsigned char> bytes;
  put_frame(bytes, 0, 0);
  bytes[5] = 200;
  expect_only_bad_connection_closed(bytes, "unknown frame type");
  bytes[5] = static_cast<unsigned char>(frame_type::tell);
  bytes[7] = 9;
  expect_only_bad_connection_closed(bytes, "unknown lane");
}

TEST(Transport_Protocol, ALoweredFrameLimitAppliesToTheNextFrame) {
  io_pool io(1);
  server srv;
  ASSERT_TRUE(srv.open(io));
  auto c = connect_to(io, srv.l->port());
  ASSERT_TRUE(c);
  auto theirs = srv.nth(0);
  ASSERT_NE(theirs, nullptr);
  ASSERT_FALSE(send_one(**c, 0, 2000));
  ASSERT_TRUE(theirs->wait_frames(1));
  srv.nth_connection(0)->set_max_frame_bytes(1000);
  ASSERT_FALSE(send_one(**c, 1, 1000));  // at the limit: accepted
  ASSERT_FALSE(send_one(**c, 2, 1001));  // above: the connection closes
  ASSERT_TRUE(theirs->wait_closed());
  EXPECT_EQ(theirs->reason(), errc::protocol_error);
  EXPECT_EQ(theirs->reason().detail(), "frame above the size limit");
  EXPECT_EQ(theirs->frame_count(), 2u);
}

TEST(Transport_Protocol, RandomBytesNeverCrashAndLeaveOtherConnectionsWorking) {
  io_pool io(2);
  io_limits limits;
  limits.max_frame_bytes = 4096;
  limits.read_chunk = 512;  // many reads per input: partial headers and bodies
  server srv;
  ASSERT_TRUE(srv.open(io, {}, limits));
  auto good = connect_to(io, srv.l->port(), {}, limits);
  ASSERT_TRUE(good);
  (*good)->start(std::make_shared<recorder>());
  auto good_in = srv.nth(0);
  ASSERT_NE(good_in, nullptr);

  std::mt19937 rng(12345);
  constexpr int inputs = 40;
  for (int i = 0; i < inputs; ++i) {
    std::vector<unsigned char> bytes(rng() % 20000);
    for (auto& b : bytes) b = static_cast<unsigned char>(rng());
    if (i % 2 == 0 && bytes.size() >= k_header_bytes) {
      bytes[4] = 1;  // a valid version, so that type, lane and length checks are reached
      bytes[5] = static_cast<unsigned char>(1 + rng() % 13);
      bytes[7] = static_cast<unsigned char>(rng() % 2);
    }
    raw_client raw(srv.l->port());
    auto in = srv.nth(static_cast<std::size_t>(i) + 1);
    ASSERT_NE(in, nullptr);
    raw.write(bytes);
    raw.socket.close();
    // Rejected (protocol_error), or, if the bytes happened to be a valid prefix, lost with the
    // socket (connection_lost); either way closed, exactly once.
    ASSERT_TRUE(in->wait_closed()) << "input " << i;
    EXPECT_TRUE(in->reason() == errc::protocol_error || in->reason() == errc::connection_lost)
        << in->reason().message();
    ASSERT_FALSE(send_one(**good, static_cast<std::uint64_t>(i)));
    ASSERT_TRUE(good_in->wait_frames(static_cast<std::uint64_t>(i) + 1));
  }
  io.stop();  // every callback has run
  for (std::size_t i = 1; i <= inputs; ++i) EXPECT_EQ(srv.recorders[i]->closed, 1);
  EXPECT_EQ(good_in->closed, 0);
  EXPECT_TRUE(good_in->in_order);
}

// ---- closing ----

TEST(Transport_Close, CloseFromOtherThreadsWhileSendingReportsOnClosedOnce) {
  for (int round = 0; round < 10; ++round) {
    io_pool io(2);
    server srv;
    ASSERT_TRUE(srv.open(io));
    auto c = connect_to(io, srv.l->port());
    ASSERT_TRUE(c);
    auto mine = std::make_shared<recorder>();
    (*c)->start(mine);
    auto theirs = srv.nth(0);
    ASSERT_NE(theirs, nullptr);

    std::atomic<bool> lost{false};
    std::uint64_t sent = 0;
    std::thread sender([&] {
      const auto deadline = std::chrono::steady_clock::now() + k_bound;
      while (std::chrono::steady_clock::now() < deadline) {
        const error e = send_one(**c, sent);
        if (e == errc::connection_lost) break;
        if (!e) ++sent;
      }
      lost = true;
    });
    ASSERT_TRUE(theirs->wait([&] { return theirs->frames >= 1000; }));
    std::thread closer_a([&] { (*c)->close(error(errc::connection_lost, "closed by a")); });
    std::thread closer_b([&] { (*c)->close(error(errc::connection_lost, "closed by b")); });
    closer_a.join();
    closer_b.join();
    sender.join();
    EXPECT_TRUE(lost.load());
    EXPECT_FALSE((*c)->open());
    ASSERT_TRUE(mine->wait_closed());
    ASSERT_TRUE(theirs->wait_closed());
    io.stop();  // every callback has run: a second on_closed would be counted by now
    EXPECT_EQ(mine->closed, 1);
    EXPECT_FALSE(mine->frame_after_close);
    EXPECT_TRUE(mine->why.detail() == "closed by a" || mine->why.detail() == "closed by b");
    EXPECT_EQ(theirs->closed, 1);
    EXPECT_EQ(theirs->why, errc::connection_lost);
    EXPECT_TRUE(theirs->in_order);
    EXPECT_LE(theirs->frames, sent);
    EXPECT_EQ(send_one(**c, 0), errc::connection_lost);
  }
}

TEST(Transport_Close, CloseBeforeStartIsReportedAtStart) {
  io_pool io(1);
  server srv;
  ASSERT_TRUE(srv.open(io));
  auto c = connect_to(io, srv.l->port());
  ASSERT_TRUE(c);
  (*c)->close(error(errc::node_lost, "gone"));
  (*c)->close(error(errc::connection_lost, "second"));
  auto r = std::make_shared<recorder>();
  (*c)->start(r);
  ASSERT_TRUE(r->wait_closed());
  io.stop();
  EXPECT_EQ(r->closed, 1);
  EXPECT_EQ(r->why, errc::node_lost);
  EXPECT_EQ(r->why.detail(), "gone");
}

TEST(Transport_Close, CloseAfterFlushDeliversBufferedFramesThenCloses) {
  io_pool io(1);
  server srv;
  ASSERT_TRUE(srv.open(io));
  auto c = connect_to(io, srv.l->port());
  ASSERT_TRUE(c);
  auto mine = std::make_shared<recorder>();
  (*c)->start(mine);
  auto theirs = srv.nth(0);
  ASSERT_NE(theirs, nullptr);
  constexpr std::uint64_t n = 2000;
  for (std::uint64_t i = 0; i < n; ++i) ASSERT_FALSE(send_one(**c, i, 100));
  (*c)->close_after_flush(error(errc::protocol_error, "rejected"));
  EXPECT_EQ(send_one(**c, n), errc::connection_lost);
  ASSERT_TRUE(mine->wait_closed());
  EXPECT_EQ(mine->reason().detail(), "rejected");
  ASSERT_TRUE(theirs->wait_closed());
  std::lock_guard lock(theirs->m);
  EXPECT_EQ(theirs->frames, n);
  EXPECT_TRUE(theirs->in_order);
  EXPECT_EQ(theirs->why, errc::connection_lost);
}

// Parses `bytes` as whole frames (fails the test on a cut or a bad body) and returns their
// correlations in order.
std::vector<std::uint64_t> whole_frames(const std::vector<unsigned char>& bytes) {
  std::vector<std::uint64_t> out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    frame_header h;
    EXPECT_GE(bytes.size() - at, k_header_bytes) << "a header cut at " << at;
    if (bytes.size() - at < k_header_bytes) break;
    EXPECT_TRUE(akt::remote::detail::decode_header(&bytes[at], ~std::uint32_t{0}, h).empty());
    EXPECT_LE(at + k_header_bytes + h.length, bytes.size()) << "a body cut at " << at;
    if (at + k_header_bytes + h.length > bytes.size()) break;
    EXPECT_TRUE(body_matches(h.correlation, {&bytes[at + k_header_bytes], h.length}));
    out.push_back(h.correlation);
    at += k_header_bytes + h.length;
  }
  return out;
}

TEST(Transport_Close, TheLeftoversOfAClosedConnectionAreWholeFramesInOrderEndingWithTheLast) {
  // The peer never reads, so the kernel's buffers fill, then ours; frames of odd sizes so that
  // the writes cut them anywhere. What the connection held at close comes back as two runs of
  // whole frames: those of the write in flight (uncertain), then those never written (unsent).
  io_pool io(1);
  silent_peer peer;
  auto mine = std::make_shared<recorder>();
  std::uint64_t accepted = 0;
  const conn_ptr c = filled_connection(
      io, peer, mine, [](std::uint64_t i) -> std::size_t { return 1 + (i * 977) % 5003; },
      accepted);
  ASSERT_NE(c, nullptr);
  c->close(error(errc::connection_lost, "peer too slow"));
  ASSERT_TRUE(mine->wait_closed());
  std::vector<unsigned char> unsent, uncertain;
  c->take_leftovers(unsent, uncertain);
  const std::vector<std::uint64_t> u = whole_frames(uncertain);
  const std::vector<std::uint64_t> n = whole_frames(unsent);
  ASSERT_FALSE(u.empty() && n.empty()) << "a full window leaves frames behind";
  std::vector<std::uint64_t> all = u;
  all.insert(all.end(), n.begin(), n.end());
  for (std::size_t i = 1; i < all.size(); ++i) ASSERT_EQ(all[i], all[i - 1] + 1) << i;
  EXPECT_EQ(all.back(), accepted - 1);
  // Taken once: a second call finds nothing.
  c->take_leftovers(unsent, uncertain);
  EXPECT_TRUE(unsent.empty());
  EXPECT_TRUE(uncertain.empty());
  io.stop();
}

TEST(Transport_Close, AThrowingHandlerClosesOnlyItsConnection) {
  io_pool io(1);
  server srv;
  ASSERT_TRUE(srv.open(io));
  auto first = connect_to(io, srv.l->port());
  ASSERT_TRUE(first);
  auto first_in = srv.nth(0);
  ASSERT_NE(first_in, nullptr);
  {
    std::lock_guard lock(first_in->m);
    first_in->also = [](connection&, const frame_header& h) {
      if (h.correlation == 1) throw std::runtime_error("bad message");
    };
  }
  auto second = connect_to(io, srv.l->port());
  ASSERT_TRUE(second);
  auto second_in = srv.nth(1);
  ASSERT_NE(second_in, nullptr);
  auto mine = std::make_shared<recorder>();
  (*first)->start(mine);
  ASSERT_FALSE(send_one(**first, 0));
  ASSERT_FALSE(send_one(**first, 1));
  ASSERT_FALSE(send_one(**first, 2));
  ASSERT_TRUE(first_in->wait_closed());
  EXPECT_EQ(first_in->reason(), errc::handler_failed);
  EXPECT_EQ(first_in->reason().detail(), "on_frame threw: bad message");
  EXPECT_EQ(first_in->frame_count(), 2u);  // nothing after the frame that threw
  EXPECT_TRUE(mine->wait_closed());        // the peer sees the close
  ASSERT_FALSE(send_one(**second, 0));
  EXPECT_TRUE(second_in->wait_frames(1));
}

// ---- heartbeat ----

TEST(Transport_Heartbeat, SilentPeerIsClosedWithNodeLostInBoundedTime) {
  io_pool io(1);
  silent_peer peer;
  auto c = connect_to(io, peer.port());
  ASSERT_TRUE(c);
  auto mine = std::make_shared<recorder>();
  (*c)->start(mine);
  const auto t0 = std::chrono::steady_clock::now();
  (*c)->set_heartbeat(50ms, 3);
  ASSERT_TRUE(mine->wait_closed());
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(mine->reason(), errc::node_lost);
  EXPECT_EQ(mine->reason().detail(), "no heartbeat for 150 ms");
  EXPECT_GE(took, 150ms);
  EXPECT_LT(took, 10s);
  EXPECT_GE((*c)->stats().frames_out, 1u);  // it did ping
  std::cout << "[ figures  ] silent peer declared lost after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
}

TEST(Transport_Heartbeat, TwoLiveConnectionsWithHeartbeatsStayUp) {
  io_pool io(2);
  server srv;
  // Generous misses: a loaded 2-core machine under a sanitizer may be late by a few intervals.
  srv.on_accept = [](connection& c) { c.set_heartbeat(20ms, 25); };
  ASSERT_TRUE(srv.open(io));
  std::vector<conn_ptr> clients;
  std::vector<std::shared_ptr<recorder>> mine;
  for (int i = 0; i < 2; ++i) {
    auto c = connect_to(io, srv.l->port());
    ASSERT_TRUE(c);
    mine.push_back(std::make_shared<recorder>());
    (*c)->start(mine.back());
    (*c)->set_heartbeat(20ms, 25);
    clients.push_back(*c);
  }
  auto a = srv.nth_connection(0);
  auto b = srv.nth_connection(1);
  ASSERT_NE(b, nullptr);
  // Idle both ways: only pings and pongs flow. Wait for many intervals' worth of them.
  ASSERT_TRUE(eventually([&] {
    for (auto& c : {clients[0], clients[1], a, b}) {
      if (c->stats().frames_in < 20) return false;
    }
    return true;
  }));
  for (auto& c : {clients[0], clients[1], a, b}) EXPECT_TRUE(c->open());
  for (auto& r : mine) EXPECT_EQ(r->closed_count(), 0);
  EXPECT_EQ(srv.nth(0)->closed_count(), 0);
  EXPECT_EQ(srv.nth(1)->closed_count(), 0);
  EXPECT_EQ(srv.nth(0)->frame_count(), 0u);  // pings and pongs never reach the handler
}

TEST(Transport_Heartbeat, BusySenderToAReceiverThatOnlyAnswersPingsStaysUp) {
  io_pool io(2);
  server srv;
  ASSERT_TRUE(srv.open(io));
  auto c = connect_to(io, srv.l->port());
  ASSERT_TRUE(c);
  auto mine = std::make_shared<recorder>();
  (*c)->start(mine);
  (*c)->set_heartbeat(20ms, 25);
  auto theirs = srv.nth(0);
  ASSERT_NE(theirs, nullptr);
  // The sender writes all the time (so it never idles), the receiver sends nothing but pongs:
  // its pongs keep the sender from declaring it lost.
  std::uint64_t i = 0;
  ASSERT_TRUE(eventually([&] {
    for (int k = 0; k < 100; ++k) {
      if (!send_one(**c, i)) ++i;
    }
    return (*c)->stats().frames_in >= 20;  // pongs
  }));
  EXPECT_TRUE((*c)->open());
  EXPECT_EQ(mine->closed_count(), 0);
}

// ---- back-pressure ----

TEST(Transport_Window, SendAboveMaxPendingBytesReturnsWindowFullWithoutAppending) {
  io_pool io(1);
  silent_peer peer;
  // Fill the kernel's buffers (the peer never reads), then ours.
  std::uint64_t accepted = 0;
  const conn_ptr c = filled_connection(
      io, peer, std::make_shared<recorder>(), [](std::uint64_t) -> std::size_t { return 4096; },
      accepted);
  ASSERT_NE(c, nullptr);
  const std::size_t held = c->pending_bytes();
  EXPECT_GE(held, k_small_pending);
  EXPECT_LT(held, k_small_pending + 4096 + k_header_bytes);  // the bound plus one send
  bool called = false;
  EXPECT_EQ(c->send([&](std::vector<unsigned char>& out) {
    called = true;
    put_frame(out, accepted, 8);
  }),
            errc::window_full);
  EXPECT_FALSE(called);
  EXPECT_EQ(c->pending_bytes(), held);
  EXPECT_TRUE(c->open());

  // Once the peer reads, the window opens again.
  asio::ip::tcp::socket reader(peer.ctx);
  peer.acceptor.accept(reader);
  std::thread drain([&] {
    std::vector<unsigned char> sink(1 << 16);
    std::error_code ec;
    while (!ec) reader.read_some(asio::buffer(sink), ec);
  });
  EXPECT_TRUE(eventually([&] { return !send_one(*c, accepted, 8); }));
  c->close(error(errc::connection_lost, "done"));
  drain.join();
}

// ---- TLS ----

TEST(Transport_Tls, FramesArriveOverTls) {
  io_pool io(2);
  server srv;
  ASSERT_TRUE(srv.open(io, server_tls(false)));
  auto c = connect_to(io, srv.l->port(), client_tls());
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_TRUE((*c)->tls());
  auto mine = std::make_shared<recorder>();
  (*c)->start(mine);
  auto theirs = srv.nth(0);
  ASSERT_NE(theirs, nullptr);
  constexpr std::uint64_t n = 20000;
  ASSERT_FALSE(send_all(**c, n, [](std::uint64_t i) -> std::size_t { return 100 + i % 3000; }));
  // And the other way.
  auto back = srv.nth_connection(0);
  for (std::uint64_t i = 0; i < 100; ++i) ASSERT_FALSE(send_one(*back, i, 10));
  ASSERT_TRUE(theirs->wait_frames(n));
  ASSERT_TRUE(mine->wait_frames(100));
  std::lock_guard lock(theirs->m);
  EXPECT_TRUE(theirs->in_order);
  EXPECT_TRUE(theirs->bodies_ok);
  EXPECT_TRUE(mine->in_order);
}

// Expects a client with `tls` refused by a mutual-TLS listener at the handshake.
void expect_refused(const tls_settings& tls) {
  io_pool io(2);
  log_capture logs;
  logs.attach(io);
  server srv;
  ASSERT_TRUE(srv.open(io, server_tls(true)));
  auto c = connect_to(io, srv.l->port(), tls);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), errc::protocol_error) << c.error().message();
  EXPECT_FALSE(c.error().detail().empty());
  ASSERT_TRUE(eventually([&] { return logs.count() >= 1; }));
  EXPECT_NE(logs.all().find("TLS handshake"), std::string::npos) << logs.all();
  EXPECT_EQ(srv.accepted_count(), 0u);
  std::cout << "[ figures  ] client saw: " << c.error().message() << "\n"
            << "[ figures  ] server logged: " << logs.all();
}

TEST(Transport_Tls, MutualTlsRefusesAClientWithoutACertificate) { expect_refused(client_tls()); }

TEST(Transport_Tls, MutualTlsRefusesAClientWithACertificateFromAnotherCa) {
  expect_refused(client_tls("other_ca_client"));
}

TEST(Transport_Tls, MutualTlsAcceptsAClientWithAValidCertificate) {
  io_pool io(2);
  server srv;
  ASSERT_TRUE(srv.open(io, server_tls(true)));
  auto c = connect_to(io, srv.l->port(), client_tls("client"));
  ASSERT_TRUE(c) << c.error().message();
  auto mine = std::make_shared<recorder>();
  (*c)->start(mine);
  auto theirs = srv.nth(0);
  ASSERT_NE(theirs, nullptr);
  // The server may write first, the moment it accepts: those frames must not be lost behind
  // the accept confirmation.
  auto back = srv.nth_connection(0);
  ASSERT_FALSE(send_one(*back, 0));
  ASSERT_FALSE(send_one(**c, 0));
  EXPECT_TRUE(theirs->wait_frames(1));
  EXPECT_TRUE(mine->wait_frames(1));
  EXPECT_TRUE(mine->in_order);
}

TEST(Transport_Tls, FramesTheServerSendsOnAcceptReachTheClient) {
  io_pool io(1);
  server srv;
  srv.on_accept = [](connection& c) {
    for (std::uint64_t i = 0; i < 10; ++i) (void)send_one(c, i, 50);
  };
  ASSERT_TRUE(srv.open(io, server_tls(true)));
  auto c = connect_to(io, srv.l->port(), client_tls("client"));
  ASSERT_TRUE(c) << c.error().message();
  auto mine = std::make_shared<recorder>();
  (*c)->start(mine);
  ASSERT_TRUE(mine->wait_frames(10));
  std::lock_guard lock(mine->m);
  EXPECT_TRUE(mine->in_order);
  EXPECT_TRUE(mine->bodies_ok);
}

TEST(Transport_Tls, PeerNameIsCheckedOnlyWhenAsked) {
  io_pool io(1);
  server srv;
  // 127.0.0.2 is loopback too, but the server's certificate names only 127.0.0.1 and localhost.
  ASSERT_TRUE(srv.open(io, server_tls(false), {}, "127.0.0.2"));
  auto plain = connect_to(io, srv.l->port(), client_tls(), {}, "127.0.0.2");
  ASSERT_TRUE(plain) << plain.error().message();
  auto strict_tls = client_tls();
  strict_tls.verify_peer_name = true;
  auto strict = connect_to(io, srv.l->port(), strict_tls, {}, "127.0.0.2");
  ASSERT_FALSE(strict);
  EXPECT_EQ(strict.error(), errc::protocol_error) << strict.error().message();

  server named;
  ASSERT_TRUE(named.open(io, server_tls(false)));
  EXPECT_TRUE(connect_to(io, named.l->port(), strict_tls, {}, "localhost"));
  EXPECT_TRUE(connect_to(io, named.l->port(), strict_tls, {}, "127.0.0.1"));
}

TEST(Transport_Tls, ATlsListenerWithoutItsFilesIsInvalidArgument) {
  io_pool io(1);
  auto tls = server_tls(false);
  tls.private_key_file = cert("client.key");  // not the certificate's key
  auto mismatched = listener::open(io, "127.0.0.1", 0, tls, {}, [](conn_ptr) {});
  ASSERT_FALSE(mismatched);
  EXPECT_EQ(mismatched.error(), errc::invalid_argument) << mismatched.error().message();
  tls.private_key_file = cert("missing.key");
  auto missing = listener::open(io, "127.0.0.1", 0, tls, {}, [](conn_ptr) {});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), errc::invalid_argument) << missing.error().message();
}

TEST(Transport_Tls, APlainClientIsNeverAcceptedByATlsListener) {
  io_pool io(1);
  log_capture logs;
  logs.attach(io);
  server srv;
  ASSERT_TRUE(srv.open(io, server_tls(false)));
  auto c = connect_to(io, srv.l->port());  // TCP connects; TLS is the server's business
  ASSERT_TRUE(c);
  auto mine = std::make_shared<recorder>();
  (*c)->start(mine);
  ASSERT_FALSE(send_one(**c, 0));
  ASSERT_TRUE(mine->wait_closed());  // the server dropped it
  EXPECT_TRUE(eventually([&] { return logs.count() >= 1; }));
  EXPECT_EQ(srv.accepted_count(), 0u);
}

}  // namespace
