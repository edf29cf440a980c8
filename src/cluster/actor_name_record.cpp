// The cluster-wide actor name record's text form and keys (actor_name_record.hpp).

#include "cluster/actor_name_record.hpp"

#include <cstdint>

#include "akt/core/assert.hpp"
#include "cluster/grain_claim_record.hpp"
#include "cluster/member_record.hpp"

namespace akt::cluster::detail {

namespace {

constexpr std::string_view k_header = "akt-actor 1";

}  // namespace

std::string actors_prefix(std::string_view cluster) {
  return "/akt/" + std::string(cluster) + "/v1/actors/";
}

std::string actor_name_key(std::string_view cluster, std::string_view name) {
  return actors_prefix(cluster) + std::string(name);
}

bool name_of_actor_key(std::string_view cluster, std::string_view key, std::string& out) {
  const std::string prefix = actors_prefix(cluster);
  if (key.size() <= prefix.size() || key.substr(0, prefix.size()) != prefix) return false;
  key.remove_prefix(prefix.size());
  if (!valid_grain_name(key)) return false;
  out = std::string(key);
  return true;
}

std::string encode_actor_name(const actor_name_record& r) {
  AKT_ASSERT(r.claim >= 1);
  AKT_ASSERT(valid_name(r.owner));
  AKT_ASSERT(valid_address(r.address));
  AKT_ASSERT(r.epoch > 0);
  std::string out(k_header);
  out.append("\nclaim=").append(std::to_string(r.claim));
  out.append("\nowner=").append(r.owner);
  out.append("\naddress=").append(r.address);
  out.append("\nepoch=").append(std::to_string(r.epoch));  // the very last line
  out.append("\n");
  return out;
}

std::string decode_actor_name(std::string_view value, actor_name_record& out) {
  out = actor_name_record{};
  std::string_view fields;
  if (std::string_view why =
          record_fields(value, k_header, "not an akt actor name record (version 1)", fields);
      !why.empty())
    return std::string(why);
  bool claim = false, owner = false, address = false, epoch = false;
  while (!fields.empty()) {
    std::string_view key, v;
    if (std::string_view why = next_field(fields, key, v); !why.empty()) return std::string(why);
    std::uint64_t n = 0;
    if (key == "claim") {
      if (!parse_in(v, 1, UINT64_MAX, n)) return "claim is not a number of at least 1";
      out.claim = n;
      claim = true;
    } else if (key == "owner") {
      if (!valid_name(v)) return "owner is not a node name";
      out.owner = std::string(v);
      owner = true;
    } else if (key == "address") {
      if (!valid_address(v)) return "address is not akt://system@host:port";
      out.address = std::string(v);
      address = true;
    } else if (key == "epoch") {
      if (!parse_in(v, 1, k_int64_max, n)) return "epoch is not a lease id";
      out.epoch = static_cast<std::int64_t>(n);
      epoch = true;
    }  // else: a field of a later version
  }
  if (!claim || !owner || !address || !epoch) return "claim, owner, address or epoch is missing";
  return {};
}

}  // namespace akt::cluster::detail
