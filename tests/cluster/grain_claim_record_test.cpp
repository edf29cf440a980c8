// The grain claim record's text form and the registry's keys (src/cluster/grain_claim_record.hpp).

#include "cluster/grain_claim_record.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "actor/system_core.hpp"

namespace {

using akt::grain_identity;
using akt::cluster::detail::claim_key;
using akt::cluster::detail::decode_claim;
using akt::cluster::detail::encode_claim;
using akt::cluster::detail::grain_claim_record;
using akt::cluster::detail::grains_prefix;
using akt::cluster::detail::identity_of_claim_key;
using akt::cluster::detail::valid_grain_name;

// Every field away from its default.
// Only what is required.
grain_claim_record minimal() {
  grain_claim_record r;
  r.owner = "n";
  r.address = "akt://s@h:1";
  r.epoch = 1;
  return r;
}

grain_claim_record full() {
  grain_claim_record r;
  r.owner = "node-1";
  r.address = "akt://orders@127.0.0.1:7401";
  r.epoch = 7587890123456789LL;
  r.role = "payments";
  r.mailbox_capacity = 1000;
  r.deactivate_after_ns = 120'000'000'000LL;
  r.activation_timeout_ns = 5'000'000'000LL;
  r.activation_attempts = 3;
  r.reentrancy_mode = static_cast<std::uint8_t>(akt::reentrancy_mode::stash_non_reentrant);
  r.reentrancy_max_in_flight = 16;
  r.dependencies = {"db", "a,b", "100%", "two\nlines\r", "%2C"};
  return r;
}

// The encoded record of r with the line starting with `field=` replaced by `line` (removed when
// line is empty).
std::string with_line(const grain_claim_record& r, const std::string& field,
                      const std::string& line) {
  std::string s = encode_claim(r);
  const auto at = s.find("\n" + field + "=");
  EXPECT_NE(at, std::string::npos) << field;
  const auto end = s.find('\n', at + 1);
  s.replace(at + 1, end - at, line.empty() ? "" : line + "\n");
  return s;
}

std::string decoded_reason(const std::string& value) {
  grain_claim_record out;
  return decode_claim(value, out);
}

TEST(Cluster_ClaimRecord, EveryFieldRoundTrips) {
  const grain_claim_record r = full();
  grain_claim_record back;
  ASSERT_EQ(decode_claim(encode_claim(r), back), "");
  EXPECT_EQ(back, r);
  EXPECT_EQ(back.dependencies, r.dependencies);  // the escaped names come back as they were
  EXPECT_EQ(encode_claim(back), encode_claim(r));
}

TEST(Cluster_ClaimRecord, OnlyTheRequiredFieldsDecodeWithTheDefaults) {
  grain_claim_record out;
  out.role = "stale";  // decode_claim resets what it is given
  ASSERT_EQ(decode_claim("akt-grain 1\nowner=n1\naddress=akt://s@h:1\nepoch=5\n", out), "");
  grain_claim_record expected;
  expected.owner = "n1";
  expected.address = "akt://s@h:1";
  expected.epoch = 5;
  EXPECT_EQ(out, expected);
  EXPECT_EQ(out.activation_attempts, 1u);
}

TEST(Cluster_ClaimRecord, UnknownFieldsAreIgnored) {
  const grain_claim_record r = full();
  std::string s = encode_claim(r);
  s.insert(s.find('\n') + 1, "placement=least-load\nfuture_field=\n");
  s.append("another=1=2\n");
  grain_claim_record back;
  ASSERT_EQ(decode_claim(s, back), "");
  EXPECT_EQ(back, r);
}

TEST(Cluster_ClaimRecord, EachMissingRequiredFieldIsRefused) {
  for (const char* field : {"owner", "address", "epoch"}) {
    EXPECT_EQ(decoded_reason(with_line(full(), field, "")), "owner, address or epoch is missing")
        << field;
  }
}

TEST(Cluster_ClaimRecord, AnotherHeaderOrNoFieldsIsRefused) {
  EXPECT_NE(decoded_reason(""), "");
  EXPECT_NE(decoded_reason("akt-grain 1"), "");
  EXPECT_NE(decoded_reason("akt-grain 2\nowner=n1\naddress=akt://s@h:1\nepoch=5\n"), "");
  EXPECT_NE(decoded_reason("akt-member 1\nowner=n1\naddress=akt://s@h:1\nepoch=5\n"), "");
  EXPECT_NE(decoded_reason("akt-grain 1\nowner n1\naddress=akt://s@h:1\nepoch=5\n"), "");
  EXPECT_NE(decoded_reason("akt-grain 1\n=n1\nowner=n1\naddress=akt://s@h:1\nepoch=5\n"), "");
}

TEST(Cluster_ClaimRecord, BadNumbersAreRefused) {
  const grain_claim_record r = full();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"epoch", "epoch=0"},
      {"epoch", "epoch=-3"},
      {"epoch", "epoch=9223372036854775808"},  // INT64_MAX + 1
      {"epoch", "epoch="},
      {"epoch", "epoch=12x"},
      {"epoch", "epoch= 12"},
      {"epoch", "epoch=+12"},
      {"mailbox_capacity", "mailbox_capacity=18446744073709551616"},  // UINT64_MAX + 1
      {"mailbox_capacity", "mailbox_capacity=-1"},
      {"deactivate_after_ns", "deactivate_after_ns=-1"},
      {"deactivate_after_ns", "deactivate_after_ns=9223372036854775808"},
      {"activation_timeout_ns", "activation_timeout_ns=1e9"},
      {"activation_attempts", "activation_attempts=0"},
      {"activation_attempts", "activation_attempts=4294967296"},  // UINT32_MAX + 1
      {"reentrancy_mode", "reentrancy_mode=3"},
      {"reentrancy_mode", "reentrancy_mode=256"},
      {"reentrancy_max_in_flight", "reentrancy_max_in_flight=4294967296"},
  };
  for (const auto& [field, line] : bad) {
    EXPECT_NE(decoded_reason(with_line(r, field, line)), "") << line;
  }
  // The edges that are numbers.
  grain_claim_record out;
  ASSERT_EQ(decode_claim(with_line(r, "epoch", "epoch=9223372036854775807"), out), "");
  EXPECT_EQ(out.epoch, INT64_MAX);
  ASSERT_EQ(
      decode_claim(with_line(r, "mailbox_capacity", "mailbox_capacity=18446744073709551615"), out),
      "");
  EXPECT_EQ(out.mailbox_capacity, UINT64_MAX);
}

TEST(Cluster_ClaimRecord, BadNamesAndAddressesAreRefused) {
  const grain_claim_record r = full();
  for (const auto& [field, line] : std::vector<std::pair<std::string, std::string>>{
           {"owner", "owner="},
           {"owner", "owner=-node"},
           {"owner", "owner=a b"},
           {"address", "address=tcp://s@h:1"},
           {"address", "address=akt://h:1"},
           {"role", "role=a/b"},
           {"dependencies", "dependencies=db,"},
           {"dependencies", "dependencies=,db"},
           {"dependencies", "dependencies=db,,x"},
           {"dependencies", "dependencies=50%"},
           {"dependencies", "dependencies=%2c"},
           {"dependencies", "dependencies=%41"},
       }) {
    EXPECT_NE(decoded_reason(with_line(r, field, line)), "") << line;
  }
  grain_claim_record out;
  ASSERT_EQ(decode_claim(with_line(r, "role", "role="), out), "");
  EXPECT_EQ(out.role, "");
  ASSERT_EQ(decode_claim(with_line(r, "dependencies", "dependencies="), out), "");
  EXPECT_TRUE(out.dependencies.empty());
}

// The encoder writes epoch last so that no cut of a record reads as one with defaults.
TEST(Cluster_ClaimRecord, EveryTruncationOfARecordIsRefused) {
  for (const grain_claim_record& r : {full(), minimal()}) {
    const std::string s = encode_claim(r);
    for (std::size_t n = 0; n < s.size(); ++n) {
      // An exact-size copy: a read past the cut is an ASan report.
      const std::vector<char> cut(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
      grain_claim_record out;
      EXPECT_NE(decode_claim(std::string_view(cut.data(), cut.size()), out), "") << "cut at " << n;
    }
  }
}

TEST(Cluster_ClaimRecord, KeysReadBackToTheirIdentity) {
  EXPECT_EQ(grains_prefix("prod"), "/akt/prod/v1/grains/");
  const grain_identity id{"bank.account", "acct-42"};
  EXPECT_EQ(claim_key("prod", id), "/akt/prod/v1/grains/bank.account/acct-42");
  grain_identity back;
  ASSERT_TRUE(identity_of_claim_key("prod", claim_key("prod", id), back));
  EXPECT_EQ(back, id);
  const grain_identity ns{"shop::cart", "A_b.c-9"};
  ASSERT_TRUE(identity_of_claim_key("c1", claim_key("c1", ns), back));
  EXPECT_EQ(back, ns);
}

TEST(Cluster_ClaimRecord, KeysThatAreNotClaimsAreRefusedLeavingTheIdentity) {
  const grain_identity untouched{"k", "n"};
  for (const char* key : {
           "/akt/prod/v1/grains/",            // the prefix alone
           "/akt/prod/v1/grains/kind",        // no '/'
           "/akt/prod/v1/grains//name",       // no kind
           "/akt/prod/v1/grains/kind/",       // no name
           "/akt/prod/v1/grains/kind/a/b",    // a '/' in the name
           "/akt/prod/v1/grains/-kind/name",  // not a kind name
           "/akt/prod/v1/grains/kind/na:me",  // not a grain name
           "/akt/prod/v1/grains/kind/na me",  // not a grain name
           "/akt/prod/v1/members/node-1",     // another kind of key
           "/akt/other/v1/grains/kind/name",  // another cluster
           "/akt/prod/v2/grains/kind/name",   // another version
           "/akt/prod/v1/grains",             // shorter than the prefix
           "",
       }) {
    grain_identity out = untouched;
    EXPECT_FALSE(identity_of_claim_key("prod", key, out)) << key;
    EXPECT_EQ(out, untouched) << key;
  }
  grain_identity out;
  EXPECT_FALSE(identity_of_claim_key("pro", "/akt/prod/v1/grains/kind/name", out));
}

// valid_grain_name restates the grain layer's rule (the cluster module's decoders stand alone):
// the two must agree.
TEST(Cluster_ClaimRecord, GrainNamesAreCheckedAsTheGrainLayerChecksThem) {
  std::vector<std::string> names = {"",
                                    "a",
                                    "-a",
                                    "_a",
                                    ".a",
                                    "a-b_c.d",
                                    "a:b",
                                    "a/b",
                                    "a b",
                                    "Z9",
                                    std::string(255, 'x'),
                                    std::string(256, 'x'),
                                    "\xc3\xa9"};
  for (int c = 0; c < 256; ++c) names.push_back("a" + std::string(1, static_cast<char>(c)));
  for (const std::string& n : names) {
    EXPECT_EQ(valid_grain_name(n), !akt::detail::validate_actor_name(n)) << n;
  }
}

}  // namespace
