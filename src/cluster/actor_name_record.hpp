#pragma once
// The cluster-wide actor name record's bytes in the store, and its keys.
//
// Keys: /akt/<cluster>/v1/actors/<name>, put-if-absent on the owner's lease (actor_names.hpp).
// The name is a top-level actor's name (akt::detail::validate_actor_name's rule:
// valid_grain_name), so it holds no '/'.
//
// The record is text, one field per line, like the member and grain claim records, so that
// `etcdctl get --prefix /akt/` shows it as it is:
//
//   akt-actor 1
//   claim=<decimal>                    (the owner's number for this claim, >= 1)
//   owner=<node name>
//   address=akt://system@host:port     (the owner's remoting address: the actor is at
//                                       <address>/user/<name>)
//   epoch=<decimal lease id>
//
// The claim number tells the owner's own write (one that timed out and did commit) from the
// claim of another spawn of the same name on the same node. The first line names the format
// and its version; a reader ignores fields it does not know, lets the last of a repeated field
// count and refuses a record without claim, owner, address or epoch. The encoder writes epoch
// the very last line, so a cut record is refused.
//
// Decoding never reads past the value and returns a reason instead of throwing: records come
// from the network (fuzz/actor_name_record_fuzzer.cpp). Pure functions: any thread.

#include <cstdint>
#include <string>
#include <string_view>

namespace akt::cluster::detail {

// "/akt/<cluster>/v1/actors/".
std::string actors_prefix(std::string_view cluster);
// actors_prefix(cluster) + name; name must be a valid_grain_name (not checked here).
std::string actor_name_key(std::string_view cluster, std::string_view name);
// The name a key under actors_prefix(cluster) stands for; false (out untouched) for a key that
// is not one (another prefix, or a rest that is not a valid_grain_name).
bool name_of_actor_key(std::string_view cluster, std::string_view key, std::string& out);

struct actor_name_record {
  std::uint64_t claim = 0;  // the owner's number for this claim (>= 1)
  std::string owner;        // the owning node's name (member name)
  std::string address;      // its remoting address, akt://system@host:port
  std::int64_t epoch = 0;   // the owner's membership epoch: the id of its lease

  friend bool operator==(const actor_name_record&, const actor_name_record&) = default;
};

// The record's text. Precondition (what decode_actor_name accepts back; AKT_ASSERT in debug
// builds): claim >= 1, owner a valid_name, address akt://...@... without a line break,
// epoch > 0.
std::string encode_actor_name(const actor_name_record& r);
// Decodes `value` into out (reset first); returns "" or why `value` is not a record. Never
// throws, never reads past the value.
std::string decode_actor_name(std::string_view value, actor_name_record& out);

}  // namespace akt::cluster::detail
