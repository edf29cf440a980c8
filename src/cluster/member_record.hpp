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
//
// The first line names the format and its version; a reader ignores fields it does not know
// (a later version may add some) and refuses a record without address, incarnation or epoch.
// Decoding never reads past the value and returns a reason instead of throwing: records come
// from the network (fuzz/member_record_fuzzer.cpp).

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

}  // namespace akt::cluster::detail
