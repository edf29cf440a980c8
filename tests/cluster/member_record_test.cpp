// The member record's http field and its address check: what a member's dashboard relays to
// must be a host and a port, nothing a record could smuggle into a request.
#include <gtest/gtest.h>

#include <string>

#include "cluster/member_record.hpp"

namespace {

using akt::cluster::member;
using namespace akt::cluster::detail;

member sample() {
  member m;
  m.name = "node-1";
  m.address = "akt://orders@127.0.0.7:7401";
  m.incarnation = 17;
  m.epoch = 99;
  m.roles = {"web"};
  m.load = 3;
  return m;
}

TEST(Cluster_MemberRecord, TheHttpEndpointRoundTripsAndIsLeftOutWhenThereIsNone) {
  member m = sample();
  EXPECT_EQ(encode_member(m).find("http="), std::string::npos);
  m.http = "127.0.0.7:9464";
  const std::string record = encode_member(m);
  member back;
  ASSERT_EQ(decode_member("node-1", record, back), "");
  EXPECT_EQ(back.http, "127.0.0.7:9464");
  m.http = "[::1]:80";
  ASSERT_EQ(decode_member("node-1", encode_member(m), back), "");
  EXPECT_EQ(back.http, "[::1]:80");
}

TEST(Cluster_MemberRecord, AnHttpFieldThatIsNotHostAndPortIsRefused) {
  for (const std::string bad : {"", "127.0.0.1", "127.0.0.1:", ":80", "127.0.0.1:0",
                                "127.0.0.1:65536", "127.0.0.1:080", "127.0.0.1:8a", "host/path:80",
                                "user@host:80", "ho st:80", "[::1:80", "[zz]:80", "http://h:80"}) {
    const std::string record =
        "akt-member 1\naddress=akt://s@h:1\nincarnation=1\nepoch=5\nhttp=" + bad + "\n";
    member out;
    EXPECT_NE(decode_member("n", record, out), "") << bad;
  }
  std::string host;
  std::uint16_t port = 0;
  ASSERT_TRUE(parse_http_address("node-7.example:65535", host, port));
  EXPECT_EQ(host, "node-7.example");
  EXPECT_EQ(port, 65535);
  ASSERT_TRUE(parse_http_address("[fe80::1]:9464", host, port));
  EXPECT_EQ(host, "fe80::1");
  EXPECT_EQ(port, 9464);
}

}  // namespace
