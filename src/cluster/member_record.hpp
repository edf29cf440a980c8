#pragma once
// The member record's bytes in the store, and the cluster's key layout.
//
// Keys: /akt/<cluster>/v1/members/<node>. The record is text, one field per line, so that
// `etcdctl get --prefix /akt/` shows it as it is:
//
//   akt-member 1
//   address=akt://system@host:port
//   incarnation=<decimal>
//   epoch=<decimal lease id>
//   roles=<name>,<name>
//   kinds=<name>,<name>
//   load=<decimal>
//   http=<host>:<port>          (only when the node runs an HTTP endpoint)
//
// The first line names the format and its version; a reader ignores fields it does not know
// (a later version may add some) and refuses a record without address, incarnation or epoch.
// Decoding never reads past the value and returns a reason instead of throwing: records come
// from the network (fuzz/member_record_fuzzer.cpp).

#include <cstdint>
#include <string>
#include <string_view>

#include "akt/cluster/member.hpp"

namespace akt::cluster::detail {

std::string members_prefix(std::string_view cluster);
std::string member_key(std::string_view cluster, std::string_view node);

std::string encode_member(const member& m);
// Decodes `value` (the record of node `name`) into out; returns "" or why it is not a record.
std::string decode_member(std::string_view name, std::string_view value, member& out);

// Names the cluster accepts for clusters, nodes, roles and kinds: 1 to 255 characters of
// [A-Za-z0-9_.:-], starting with a letter or digit (a node's default name is host:port).
bool valid_name(std::string_view s) noexcept;

// An HTTP endpoint's host:port as member records carry it: a host of [A-Za-z0-9.-] (a name or
// an IPv4 address) or a bracketed IPv6 address, then ':' and a port from 1 to 65535; at most 255
// characters. Splits it into host (brackets removed) and port when it is one.
bool parse_http_address(std::string_view s, std::string& host, std::uint16_t& port);

// What the cluster's text records (this one, the grain claim, the actor name) share: a header
// line naming the format and its version, then key=value lines, each ended by '\n'. The
// readers below never read past the value and return a reason (a literal) instead of throwing.
//
// Checks value's first line against header and leaves the lines after it in fields; "" or why
// not (not_this: the reason for another header).
std::string_view record_fields(std::string_view value, std::string_view header,
                               std::string_view not_this, std::string_view& fields) noexcept;
// Takes the next key=value line off a non-empty fields; "" or why it is not one.
std::string_view next_field(std::string_view& fields, std::string_view& key,
                            std::string_view& v) noexcept;
// A decimal of at most 20 digits without sign or spaces, fitting 64 bits; and one in [min, max].
bool parse_u64(std::string_view s, std::uint64_t& out) noexcept;
bool parse_in(std::string_view s, std::uint64_t min, std::uint64_t max,
              std::uint64_t& out) noexcept;
inline constexpr std::uint64_t k_int64_max = 0x7fffffffffffffffull;
// A remoting address as the records carry it: akt://system@host:port, on one line.
bool valid_address(std::string_view v) noexcept;

}  // namespace akt::cluster::detail
