// The frame limit both nodes agreed on (remote_config::max_frame_bytes, the smaller of the two):
// a message above it is refused by the sender at once (message_too_large) and dead-lettered,
// on every path that sends one (tell, ask, an actor's request, grain tell and ask), including a
// message queued before the handshake told the sender the peer's limit. The connection is
// kept: the small messages sent around it all arrive, in order.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "remote/frame.hpp"
#include "remote/raw_wire.hpp"
#include "remote/remote_support.hpp"
#include "remote/wire.hpp"
#include "remote/wire.pb.h"

namespace {

using namespace akt::remote_test;
using akt::errc;
using akt::test::eventually;
namespace rd = akt::remote::detail;
namespace raw = akt::remote_test::raw;
using raw::bytes;
using raw::clock_type;

constexpr auto k_bound = std::chrono::milliseconds(30000);  // sanitizers, 2 shared cores

// Counts the pings it gets (one per process: the tests below use one identity each).
std::atomic<int> g_grain_pings{0};
struct counting_grain final : akt::grain {
  static constexpr std::string_view akt_type_name = "test.counting";
  void on_receive(akt::grain_context& ctx) override {
    akt::match(
        ctx,
        [&](const ping&, auto& c) {
          g_grain_pings.fetch_add(1);
          c.ack();
        },
        [&](const std::string& s, auto& c) { c.reply(std::to_string(s.size())); });
  }
};

// A dead letter as the tests look at it: the reason and, for a string, its size.
struct dead_item {
  errc reason;
  std::size_t size;
};
dead_item project(const akt::dead_letter& d) {
  const auto* s = d.msg.get_if<std::string>();
  return {d.reason.code(), s != nullptr ? s->size() : 0};
}
std::size_t count_too_large(const std::vector<dead_item>& items, std::size_t size) {
  std::size_t n = 0;
  for (const dead_item& d : items) n += d.reason == errc::message_too_large && d.size == size;
  return n;
}

TEST(Remote_FrameLimit, OversizedTellAndAskAreRefusedDeadLetteredAndTheConnectionKept) {
  node a{"alpha"}, b{"beta"};
  ASSERT_TRUE(a.started && b.started);
  auto seen = std::make_shared<journal>();
  ASSERT_TRUE(b.sys.spawn<echo>("echo", seen));
  auto target = a.sys.lookup(b.where(), "echo", 20s);
  ASSERT_TRUE(target) << target.error().message();
  akt::test::collector<akt::dead_letter, dead_item> dead(a.sys, &project);
  const std::string big(5u << 20, 'x');  // 5 MiB against the 4 MiB default

  constexpr int n = 100;
  for (int i = 0; i < n / 2; ++i) ASSERT_FALSE(target->tell(ping{i}));
  const akt::error told = target->tell(big);
  EXPECT_EQ(told.code(), errc::message_too_large) << told.message();
  auto asked = target->ask<std::string>(big, 20s);
  ASSERT_FALSE(asked);
  EXPECT_EQ(asked.code(), errc::message_too_large) << asked.error().message();
  for (int i = n / 2; i < n; ++i) ASSERT_FALSE(target->tell(ping{i}));

  // An actor's request (async): the continuation gets the refusal.
  struct requester final : akt::actor {
    akt::pid to;
    std::string payload;
    std::shared_ptr<std::atomic<int>> code;
    requester(akt::pid t, std::string p, std::shared_ptr<std::atomic<int>> c)
        : to(std::move(t)), payload(std::move(p)), code(std::move(c)) {}
    void receive(akt::receive_context& ctx) override {
      if (ctx.is<int>()) {
        ctx.request<std::string>(to, payload, 20s,
                                 [c = code](akt::receive_context&, akt::result<std::string> r) {
                                   c->store(r ? -1 : static_cast<int>(r.code()));
                                 });
      }
    }
  };
  auto code = std::make_shared<std::atomic<int>>(0);
  auto req = a.sys.spawn<requester>("requester", *target, big, code);
  ASSERT_TRUE(req);
  ASSERT_FALSE(req->tell(1));
  ASSERT_TRUE(eventually([&] { return code->load() != 0; }, k_bound));
  EXPECT_EQ(code->load(), static_cast<int>(errc::message_too_large));

  // Every small tell arrived, in order, on the connection that was never closed.
  ASSERT_TRUE(eventually([&] { return seen->received.load() >= n; }, k_bound))
      << seen->received.load() << " of " << n << " small tells arrived";
  std::vector<std::int64_t> expected(n);
  for (int i = 0; i < n; ++i) expected[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(seen->ping_list(), expected);
  EXPECT_TRUE(seen->texts.empty()) << "a big message reached the receiver";
  const auto peers = a.sys.peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_TRUE(peers[0].connected);
  EXPECT_EQ(peers[0].reconnects, 0u);
  // The tell and the ask (and the request) became dead letters with the reason.
  ASSERT_TRUE(eventually([&] { return count_too_large(dead.items(), big.size()) >= 3; }, k_bound))
      << count_too_large(dead.items(), big.size()) << " dead letters for the big messages";
  // The connection still carries asks.
  auto r = target->ask<ping>(ping{7}, 20s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 8);
}

TEST(Remote_FrameLimit, OversizedGrainTellAndAskAreRefusedAndTheSmallOnesArrive) {
  node a{"alpha"}, b{"beta"};
  ASSERT_TRUE(a.started && b.started);
  ASSERT_FALSE(akt::register_grain_kind<counting_grain>(b.sys));
  akt::test::collector<akt::dead_letter, dead_item> dead(a.sys, &project);
  const akt::grain_identity id{"test.counting", "refused"};
  g_grain_pings.store(0);
  // Connected first: the limit is the agreed one.
  auto first = akt::remote::ask_grain_on<std::string>(a.sys, b.where(), id, std::string("x"), 20s);
  ASSERT_TRUE(first) << first.error().message();
  const std::string big(5u << 20, 'y');
  ASSERT_FALSE(akt::remote::tell_grain_on(a.sys, b.where(), id, ping{1}, {.one_way = true}));
  EXPECT_EQ(akt::remote::tell_grain_on(a.sys, b.where(), id, big, {.one_way = true}).code(),
            errc::message_too_large);
  EXPECT_EQ(akt::remote::tell_grain_on(a.sys, b.where(), id, big).code(), errc::message_too_large);
  auto asked = akt::remote::ask_grain_on<std::string>(a.sys, b.where(), id, big, 20s);
  ASSERT_FALSE(asked);
  EXPECT_EQ(asked.code(), errc::message_too_large) << asked.error().message();
  ASSERT_FALSE(akt::remote::tell_grain_on(a.sys, b.where(), id, ping{2}, {.one_way = true}));
  ASSERT_TRUE(eventually([&] { return g_grain_pings.load() >= 2; }, k_bound));
  ASSERT_TRUE(eventually([&] { return count_too_large(dead.items(), big.size()) >= 3; }, k_bound));
  const auto peers = a.sys.peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_TRUE(peers[0].connected);
  EXPECT_EQ(peers[0].reconnects, 0u);
}

// Answers ping{n} with a string of n bytes.
struct inflater final : akt::actor {
  void receive(akt::receive_context& ctx) override {
    if (auto* p = ctx.get_if<ping>()) ctx.reply(std::string(static_cast<std::size_t>(p->n), 'r'));
  }
};

TEST(Remote_FrameLimit, AReplyAboveTheLimitFailsItsAskAtOnceAndTheConnectionIsKept) {
  akt::remote_config small;
  small.max_frame_bytes = 1u << 20;  // alpha takes 1 MiB: beta learns it at its handshake
  node a{"alpha", small}, b{"beta"};
  ASSERT_TRUE(a.started && b.started);
  ASSERT_TRUE(b.sys.spawn<inflater>("inflater"));
  auto target = a.sys.lookup(b.where(), "inflater", 20s);
  ASSERT_TRUE(target) << target.error().message();
  akt::test::collector<akt::dead_letter, dead_item> dead_on_b(b.sys, &project);
  const auto t0 = clock_type::now();
  auto big = target->ask<std::string>(ping{2 << 20}, 20s);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.code(), errc::message_too_large) << big.error().message();
  EXPECT_LT(clock_type::now() - t0, 10s) << "the asker waited for its deadline";
  ASSERT_TRUE(
      eventually([&] { return count_too_large(dead_on_b.items(), 2u << 20) >= 1; }, k_bound));
  auto fits = target->ask<std::string>(ping{1000}, 20s);
  ASSERT_TRUE(fits) << fits.error().message();
  EXPECT_EQ(fits->size(), 1000u);
  for (const auto& p : b.sys.peers()) EXPECT_EQ(p.reconnects, 0u) << p.address;
  for (const auto& p : a.sys.peers()) EXPECT_EQ(p.reconnects, 0u) << p.address;
}

// A peer played by hand: it accepts alpha's two lanes, reads their hellos and answers only when
// the test says, with a frame limit of 1 MiB, so that alpha queues its messages first.
class fake_peer {
 public:
  fake_peer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof at;
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0 &&
          ::listen(fd_, 8) == 0 && ::getsockname(fd_, reinterpret_cast<sockaddr*>(&at), &len) == 0;
    port_ = ntohs(at.sin_port);
  }
  ~fake_peer() {
    for (int c : lanes_)
      if (c >= 0) ::close(c);
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const noexcept { return ok_; }
  std::string where() const { return "127.0.0.1:" + std::to_string(port_); }

  // Accepts both lanes and reads their hellos (bounded).
  bool accept_lanes(clock_type::time_point deadline) {
    for (int n = 0; n < 2; ++n) {
      if (!raw::wait_readable(fd_, deadline)) return false;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return false;
      rd::frame_header h;
      bytes body;
      if (!raw::read_frame(c, h, body, deadline) || h.type != rd::frame_type::hello) {
        ::close(c);
        return false;
      }
      lanes_[static_cast<int>(h.on)] = c;
    }
    return lanes_[0] >= 0 && lanes_[1] >= 0;
  }
  // Answers both hellos, saying that bodies above max_body are refused here.
  bool answer(std::uint32_t max_body) {
    for (int l = 0; l < 2; ++l) {
      akt::remote::hello_ack ack;
      ack.set_system("fake");
      ack.set_incarnation(0xfeedull);
      ack.set_max_frame_bytes(max_body);
      ack.set_window_bytes(8u << 20);
      akt::remote::byte_writer w;
      if (rd::encode_proto_frame(w, rd::frame_type::hello_ack, static_cast<rd::lane>(l), 0, ack))
        return false;
      if (!raw::write_all(lanes_[l], w.take())) return false;
    }
    return true;
  }
  // The next frame alpha sent on its ordinary lane other than a heartbeat, of any size.
  bool next_frame(rd::frame_header& h, bytes& body, clock_type::time_point deadline) {
    for (;;) {  // heartbeats aside
      if (!raw::read_frame(lanes_[1], h, body, deadline, nullptr, ~std::uint32_t{0})) return false;
      if (h.type != rd::frame_type::ping && h.type != rd::frame_type::pong) return true;
    }
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::uint16_t port_ = 0;
  int lanes_[2] = {-1, -1};
};

TEST(Remote_FrameLimit, AMessageQueuedBeforeTheHandshakeIsRefusedByThePeersLowerLimit) {
  // The fake peer never sends after its answer: with the default liveness (3 s of silence) a slow
  // run under a sanitizer on a loaded machine saw alpha close the lanes before the test read
  // them. Liveness is not what this test is about.
  struct quiet_node {
    akt::actor_system sys{"alpha", config()};
    akt::result<void> started;
    quiet_node() {
      register_test_messages();
      started = sys.start();
    }
    static akt::system_config config() {
      akt::system_config cfg = node_config();
      cfg.remote->heartbeat_interval = std::chrono::seconds(10);  // 50 s of silence allowed
      return cfg;
    }
  } a;
  ASSERT_TRUE(a.started);
  fake_peer peer;
  ASSERT_TRUE(peer.ok());
  akt::test::collector<akt::dead_letter, dead_item> dead(a.sys, &project);
  const akt::grain_identity id{"test.counting", "queued"};
  const std::string big(2u << 20, 'z');  // under alpha's own limit, above the peer's
  // Nothing was sent to the peer yet: these wait for the handshake in the lane's backlog, where
  // alpha can judge them by its own limit only.
  ASSERT_FALSE(akt::remote::tell_grain_on(a.sys, peer.where(), id, ping{1}, {.one_way = true}));
  const akt::error queued =
      akt::remote::tell_grain_on(a.sys, peer.where(), id, big, {.one_way = true});
  ASSERT_FALSE(queued) << queued.message();
  std::atomic<int> ask_code{0};
  std::jthread asker([&] {
    auto r = akt::remote::ask_grain_on<std::string>(a.sys, peer.where(), id, big, 20s);
    ask_code.store(r ? -1 : static_cast<int>(r.code()));
  });
  ASSERT_TRUE(eventually([&] { return a.sys.peers().at(0).messages_out >= 3; }, k_bound));
  ASSERT_FALSE(akt::remote::tell_grain_on(a.sys, peer.where(), id, ping{2}, {.one_way = true}));
  const auto deadline = clock_type::now() + k_bound;
  ASSERT_TRUE(peer.accept_lanes(deadline));
  ASSERT_TRUE(peer.answer(1u << 20));
  // What comes out: the two small tells, nothing above the peer's limit.
  for (int n = 0; n < 2; ++n) {
    rd::frame_header h;
    bytes body;
    ASSERT_TRUE(peer.next_frame(h, body, deadline)) << "frame " << n;
    EXPECT_EQ(h.type, rd::frame_type::tell);
    EXPECT_LE(h.length, 1u << 20);
  }
  // Refused when the handshake told the limit, never sent: the tell dead-lettered, the ask
  // failed (its caller holds the message).
  ASSERT_TRUE(eventually([&] { return count_too_large(dead.items(), big.size()) >= 1; }, k_bound))
      << count_too_large(dead.items(), big.size());
  ASSERT_TRUE(eventually([&] { return ask_code.load() != 0; }, k_bound));
  asker.join();
  EXPECT_EQ(ask_code.load(), static_cast<int>(errc::message_too_large));
  // Sent after the handshake: refused at once by the agreed limit.
  EXPECT_EQ(akt::remote::tell_grain_on(a.sys, peer.where(), id, big, {.one_way = true}).code(),
            errc::message_too_large);
}

}  // namespace
