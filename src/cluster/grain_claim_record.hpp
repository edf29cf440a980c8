#pragma once
// The grain claim record's bytes in the store, and the keys of the grain registry.
//
// Keys: /akt/<cluster>/v1/grains/<kind>/<name>, put-if-absent on the owner's lease (DESIGN.md,
// Claims). The kind is a cluster name (valid_name: the member record lists kinds the same way)
// and the name a grain name (1 to 255 characters of [A-Za-z0-9_.-], starting with a letter or
// digit: akt::detail::validate_actor_name's rule), so neither holds a '/' and a key splits at
// its first '/' after the prefix.
//
// The record is text, one field per line, like the member record (member_record.hpp), so that
// `etcdctl get --prefix /akt/` shows it as it is:
//
//   akt-grain 1
//   role=<name>                        (empty: any node hosting the kind)
//   mailbox_capacity=<decimal>         (0: unbounded)
//   deactivate_after_ns=<decimal>      (>= 0)
//   activation_timeout_ns=<decimal>    (>= 0)
//   activation_attempts=<decimal>      (>= 1)
//   reentrancy_mode=<decimal>          (akt::reentrancy_mode's value: 0, 1 or 2)
//   reentrancy_max_in_flight=<decimal>
//   dependencies=<item>,<item>         (each a dependency's name, escaped: see below)
//   owner=<node name>
//   address=akt://system@host:port
//   epoch=<decimal lease id>
//
// The first line names the format and its version; a reader ignores fields it does not know (a
// later version may add some), lets the last of a repeated field count (as decode_member does),
// gives the optional fields their defaults when absent, and refuses a record without owner,
// address or epoch. The encoder writes owner, address and epoch last, epoch the very last line:
// every proper prefix of an encoded record then lacks the epoch line or ends inside a line, so
// a cut record is refused rather than read with some options silently at their defaults.
//
// Dependency names are the keys of akt::grain_dependencies: any non-empty string. Each item is
// escaped so that any such name survives: '%' as %25, ',' as %2C, '\n' as %0A, '\r' as %0D;
// decoding refuses an empty item and a '%' not followed by one of those four escapes. An empty
// name cannot be listed (the list "" means no dependencies): the encoder's precondition.
//
// Decoding never reads past the value and returns a reason instead of throwing: records come
// from the network (fuzz/claim_record_fuzzer.cpp). Everything here is a pure function: any
// thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "akt/grain/grain.hpp"

namespace akt::cluster::detail {

// "/akt/<cluster>/v1/grains/".
std::string grains_prefix(std::string_view cluster);
// grains_prefix(cluster) + kind + "/" + name. For a key that identity_of_claim_key reads back,
// id must be valid (valid_grain_identity); this does not check.
std::string claim_key(std::string_view cluster, const grain_identity& id);
// The identity named by a key under grains_prefix(cluster); false (out untouched) when the key
// is not one: another prefix, no '/' after it, a kind that is not a valid_name or a name that is
// not a grain name (so empty ones and names with a '/' are refused).
bool identity_of_claim_key(std::string_view cluster, std::string_view key, grain_identity& out);

// A grain name as akt::detail::validate_actor_name accepts it (tests check the two agree).
bool valid_grain_name(std::string_view s) noexcept;
// The kind is a valid_name and the name a valid_grain_name: claim_key's precondition.
bool valid_grain_identity(const grain_identity& id) noexcept;

struct grain_claim_record {
  std::string owner;       // the owning node's name (member name)
  std::string address;     // its remoting address, akt://system@host:port
  std::int64_t epoch = 0;  // the owner's membership epoch: the id of its lease
  // The kind's configuration as the claiming node recorded it, so that a node recreating the
  // grain elsewhere uses the same (goakt-grains.md "Options per kind", "Activation guarantee"):
  std::string role;                    // empty: any node hosting the kind
  std::uint64_t mailbox_capacity = 0;  // 0: unbounded
  std::int64_t deactivate_after_ns = 0;
  std::int64_t activation_timeout_ns = 0;
  std::uint32_t activation_attempts = 1;
  std::uint8_t reentrancy_mode = 0;  // akt::reentrancy_mode as its integer
  std::uint32_t reentrancy_max_in_flight = 0;
  std::vector<std::string> dependencies;  // names of the kind's dependencies

  friend bool operator==(const grain_claim_record&, const grain_claim_record&) = default;
};

// The record's text. Precondition (what decode_claim accepts back; AKT_ASSERT in debug builds):
// owner a valid_name, address akt://...@..., epoch > 0, role empty or a valid_name, both
// durations >= 0, activation_attempts >= 1, reentrancy_mode a known mode, no empty dependency
// name.
std::string encode_claim(const grain_claim_record& r);
// Decodes `value` into out (reset first); returns "" or why `value` is not a record. Never
// throws, never reads past the value.
std::string decode_claim(std::string_view value, grain_claim_record& out);

}  // namespace akt::cluster::detail
