// Nodes over TLS (remote_config::tls): asks and tells between two TLS nodes, mutual TLS between
// nodes whose certificates share a CA, and the refusals: a node whose certificate another CA
// signed, a plain node talking to a TLS one (either way round), a TLS node without its files.
// The certificates are tests/remote/certs/ (README there): server.pem names 127.0.0.1 and
// carries both serverAuth and clientAuth, so a node uses it for its listener and its dials.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "remote/remote_support.hpp"

namespace {

using namespace akt::remote_test;
using akt::errc;
using akt::test::eventually;

std::string cert(const char* name) {
  return std::string(AKT_SOURCE_DIR) + "/tests/remote/certs/" + name;
}

// A node's TLS settings: its certificate and key (`leaf`.pem / .key), trusting ca.pem.
akt::remote_config tls_node(bool mutual, const char* leaf = "server") {
  akt::remote_config rc;
  rc.tls.enabled = true;
  rc.tls.certificate_file = cert((std::string(leaf) + ".pem").c_str());
  rc.tls.private_key_file = cert((std::string(leaf) + ".key").c_str());
  rc.tls.ca_file = cert("ca.pem");
  rc.tls.mutual = mutual;
  rc.connect_timeout = 2s;
  return rc;
}

// A lookup that the transport refused: unreachable (no connection came up within the timeout)
// or protocol_error (the TLS handshake's own reason), and in bounded time.
void expect_refused_lookup(node& from, node& to) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = from.sys.lookup(to.where(), "echo", 2s);
  ASSERT_FALSE(r) << "a lookup crossed a connection that must be refused";
  EXPECT_TRUE(r.code() == errc::unreachable || r.code() == errc::protocol_error)
      << r.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
}

// Asks both ways between a and b (each hosts an echo) and checks the answers.
void expect_asks_both_ways(node& a, node& b) {
  auto ja = std::make_shared<journal>();
  auto jb = std::make_shared<journal>();
  ASSERT_TRUE(a.sys.spawn<echo>("echo", ja));
  ASSERT_TRUE(b.sys.spawn<echo>("echo", jb));
  auto on_b = a.sys.lookup(b.where(), "echo", 10s);
  ASSERT_TRUE(on_b) << on_b.error().message();
  auto on_a = b.sys.lookup(a.where(), "echo", 10s);
  ASSERT_TRUE(on_a) << on_a.error().message();
  for (int i = 0; i < 50; ++i) {
    auto r = on_b->ask<ping>(ping{i}, 10s);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->n, i + 1);
  }
  auto up = on_a->ask<std::string>(std::string("over tls"), 10s);
  ASSERT_TRUE(up) << up.error().message();
  EXPECT_EQ(*up, "OVER TLS");
  // Tells arrive too, in order.
  for (int i = 0; i < 200; ++i) ASSERT_FALSE(on_b->tell(ping{1000 + i}));
  ASSERT_TRUE(eventually([&] { return jb->received.load() == 250; }, 30s)) << jb->received.load();
  const auto got = jb->ping_list();
  for (int i = 0; i < 200; ++i) ASSERT_EQ(got[static_cast<std::size_t>(50 + i)], 1000 + i);
  auto peers = a.sys.peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_TRUE(peers[0].connected);
  EXPECT_EQ(peers[0].address, b.sys.address());
}

TEST(Remote_Tls, TwoTlsNodesExchangeAsksAndTells) {
  node a{"alpha", tls_node(false)};
  node b{"beta", tls_node(false)};
  ASSERT_TRUE(a.started) << a.started.error().message();
  ASSERT_TRUE(b.started) << b.started.error().message();
  expect_asks_both_ways(a, b);
}

TEST(Remote_Tls, MutualTlsNodesWhoseCertificatesShareTheCaExchangeAsks) {
  node a{"alpha", tls_node(true)};
  node b{"beta", tls_node(true)};
  ASSERT_TRUE(a.started) << a.started.error().message();
  ASSERT_TRUE(b.started) << b.started.error().message();
  expect_asks_both_ways(a, b);
}

TEST(Remote_Tls, MutualTlsRefusesANodeWhoseCertificateAnotherCaSigned) {
  node b{"beta", tls_node(true)};
  ASSERT_TRUE(b.started) << b.started.error().message();
  auto j = std::make_shared<journal>();
  ASSERT_TRUE(b.sys.spawn<echo>("echo", j));
  // The intruder trusts b's CA (so it accepts b's certificate) but presents one of its own CA.
  node intruder{"intruder", tls_node(false, "other_ca_client")};
  ASSERT_TRUE(intruder.started) << intruder.started.error().message();
  expect_refused_lookup(intruder, b);
  EXPECT_TRUE(b.sys.peers().empty()) << "no hello of the intruder's got through";
  EXPECT_EQ(j->received.load(), 0);
  // b still serves a node with a good certificate.
  node friendly{"friendly", tls_node(true)};
  ASSERT_TRUE(friendly.started) << friendly.started.error().message();
  auto p = friendly.sys.lookup(b.where(), "echo", 10s);
  ASSERT_TRUE(p) << p.error().message();
  auto r = p->ask<ping>(ping{7}, 10s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->n, 8);
}

TEST(Remote_Tls, APlainNodeAndATlsNodeCannotTalkEitherWayRound) {
  node secure{"secure", tls_node(false)};
  node plain{"plain"};
  ASSERT_TRUE(secure.started) << secure.started.error().message();
  ASSERT_TRUE(plain.started) << plain.started.error().message();
  auto js = std::make_shared<journal>();
  auto jp = std::make_shared<journal>();
  ASSERT_TRUE(secure.sys.spawn<echo>("echo", js));
  ASSERT_TRUE(plain.sys.spawn<echo>("echo", jp));
  expect_refused_lookup(plain, secure);  // a plain hello is not a TLS ClientHello
  expect_refused_lookup(secure, plain);  // a ClientHello is not a frame
  EXPECT_EQ(js->received.load(), 0);
  EXPECT_EQ(jp->received.load(), 0);
  // Both still serve their own kind.
  node other_plain{"other-plain"};
  ASSERT_TRUE(other_plain.started);
  auto p = other_plain.sys.lookup(plain.where(), "echo", 10s);
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_TRUE(p->ask<ping>(ping{1}, 10s));
  node other_secure{"other-secure", tls_node(false)};
  ASSERT_TRUE(other_secure.started);
  auto s = other_secure.sys.lookup(secure.where(), "echo", 10s);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_TRUE(s->ask<ping>(ping{1}, 10s));
}

TEST(Remote_Tls, ATlsNodeWithoutItsCertificateKeyOrCaDoesNotStart) {
  // A node always presents its certificate: TLS without one (or without the key or the CA
  // that peers are checked against) is refused at start, before any socket opens.
  for (int missing = 0; missing < 3; ++missing) {
    akt::remote_config rc = tls_node(true);
    (missing == 0   ? rc.tls.certificate_file
     : missing == 1 ? rc.tls.private_key_file
                    : rc.tls.ca_file) = "";
    node n{"incomplete", rc};
    ASSERT_FALSE(n.started) << "missing file " << missing;
    EXPECT_EQ(n.started.code(), errc::invalid_argument) << n.started.error().message();
  }
  // Files that do not load are refused the same way.
  akt::remote_config wrong_key = tls_node(false);
  wrong_key.tls.private_key_file = cert("client.key");  // not server.pem's key
  node n{"mismatched", wrong_key};
  ASSERT_FALSE(n.started);
  EXPECT_EQ(n.started.code(), errc::invalid_argument) << n.started.error().message();
}

}  // namespace
