// The grain claim record's text form and the registry's keys (grain_claim_record.hpp).

#include "cluster/grain_claim_record.hpp"

#include <cstdint>
#include <limits>

#include "akt/core/assert.hpp"
#include "cluster/member_record.hpp"

namespace akt::cluster::detail {

namespace {

constexpr std::string_view k_header = "akt-grain 1";
// The highest akt::reentrancy_mode a version 1 record may carry: a mode this node does not know
// cannot be honoured, so its record is refused rather than read as another mode.
constexpr auto k_last_mode = static_cast<std::uint8_t>(akt::reentrancy_mode::stash_non_reentrant);

void append_escaped(std::string& out, std::string_view item) {
  for (char c : item) {
    switch (c) {
      case '%':
        out.append("%25");
        break;
      case ',':
        out.append("%2C");
        break;
      case '\n':
        out.append("%0A");
        break;
      case '\r':
        out.append("%0D");
        break;
      default:
        out.push_back(c);
    }
  }
}

// One escaped item back; false on an escape that append_escaped does not write.
bool unescape(std::string_view s, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (s.size() - i < 3) return false;
    const std::string_view code = s.substr(i + 1, 2);
    if (code == "25") {
      out.push_back('%');
    } else if (code == "2C") {
      out.push_back(',');
    } else if (code == "0A") {
      out.push_back('\n');
    } else if (code == "0D") {
      out.push_back('\r');
    } else {
      return false;
    }
    i += 2;
  }
  return true;
}

bool parse_dependencies(std::string_view s, std::vector<std::string>& out) {
  out.clear();
  while (!s.empty()) {
    const auto comma = s.find(',');
    std::string item;
    if (!unescape(s.substr(0, comma), item) || item.empty()) return false;
    out.push_back(std::move(item));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
    if (s.empty()) return false;  // a trailing comma
  }
  return true;
}

}  // namespace

std::string grains_prefix(std::string_view cluster) {
  return "/akt/" + std::string(cluster) + "/v1/grains/";
}

std::string claim_key(std::string_view cluster, const grain_identity& id) {
  return grains_prefix(cluster) + id.kind + "/" + id.name;
}

bool valid_grain_name(std::string_view s) noexcept {
  // validate_actor_name's rule is valid_name's without ':'.
  return valid_name(s) && s.find(':') == std::string_view::npos;
}

bool valid_grain_identity(const grain_identity& id) noexcept {
  return valid_name(id.kind) && valid_grain_name(id.name);
}

bool identity_of_claim_key(std::string_view cluster, std::string_view key, grain_identity& out) {
  const std::string prefix = grains_prefix(cluster);
  if (key.size() <= prefix.size() || key.substr(0, prefix.size()) != prefix) return false;
  key.remove_prefix(prefix.size());
  const auto slash = key.find('/');
  if (slash == std::string_view::npos) return false;
  const std::string_view kind = key.substr(0, slash);
  const std::string_view name = key.substr(slash + 1);
  if (!valid_name(kind) || !valid_grain_name(name)) return false;
  out.kind = std::string(kind);
  out.name = std::string(name);
  return true;
}

std::string encode_claim(const grain_claim_record& r) {
  AKT_ASSERT(valid_name(r.owner));
  AKT_ASSERT(valid_address(r.address));
  AKT_ASSERT(r.epoch > 0);
  AKT_ASSERT(r.role.empty() || valid_name(r.role));
  AKT_ASSERT(r.deactivate_after_ns >= 0 && r.activation_timeout_ns >= 0);
  AKT_ASSERT(r.activation_attempts >= 1);
  AKT_ASSERT(r.reentrancy_mode <= k_last_mode);
  std::string out(k_header);
  out.append("\nrole=").append(r.role);
  out.append("\nmailbox_capacity=").append(std::to_string(r.mailbox_capacity));
  out.append("\ndeactivate_after_ns=").append(std::to_string(r.deactivate_after_ns));
  out.append("\nactivation_timeout_ns=").append(std::to_string(r.activation_timeout_ns));
  out.append("\nactivation_attempts=").append(std::to_string(r.activation_attempts));
  out.append("\nreentrancy_mode=").append(std::to_string(unsigned{r.reentrancy_mode}));
  out.append("\nreentrancy_max_in_flight=").append(std::to_string(r.reentrancy_max_in_flight));
  out.append("\ndependencies=");
  for (std::size_t i = 0; i < r.dependencies.size(); ++i) {
    AKT_ASSERT(!r.dependencies[i].empty());
    if (i != 0) out.push_back(',');
    append_escaped(out, r.dependencies[i]);
  }
  // Last, epoch the very last line: a cut record is refused (grain_claim_record.hpp).
  out.append("\nowner=").append(r.owner);
  out.append("\naddress=").append(r.address);
  out.append("\nepoch=").append(std::to_string(r.epoch));
  out.append("\n");
  return out;
}

std::string decode_claim(std::string_view value, grain_claim_record& out) {
  out = grain_claim_record{};
  std::string_view fields;
  if (std::string_view why =
          record_fields(value, k_header, "not an akt grain claim record (version 1)", fields);
      !why.empty())
    return std::string(why);
  bool owner = false, address = false, epoch = false;
  while (!fields.empty()) {
    std::string_view key, v;
    if (std::string_view why = next_field(fields, key, v); !why.empty()) return std::string(why);
    std::uint64_t n = 0;
    if (key == "owner") {
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
    } else if (key == "role") {
      if (!v.empty() && !valid_name(v)) return "role is not a role name";
      out.role = std::string(v);
    } else if (key == "mailbox_capacity") {
      if (!parse_u64(v, n)) return "mailbox_capacity is not a number";
      out.mailbox_capacity = n;
    } else if (key == "deactivate_after_ns") {
      if (!parse_in(v, 0, k_int64_max, n)) return "deactivate_after_ns is not a duration";
      out.deactivate_after_ns = static_cast<std::int64_t>(n);
    } else if (key == "activation_timeout_ns") {
      if (!parse_in(v, 0, k_int64_max, n)) return "activation_timeout_ns is not a duration";
      out.activation_timeout_ns = static_cast<std::int64_t>(n);
    } else if (key == "activation_attempts") {
      if (!parse_in(v, 1, std::numeric_limits<std::uint32_t>::max(), n))
        return "activation_attempts is not a number of at least 1";
      out.activation_attempts = static_cast<std::uint32_t>(n);
    } else if (key == "reentrancy_mode") {
      if (!parse_in(v, 0, k_last_mode, n)) return "reentrancy_mode is not a known mode";
      out.reentrancy_mode = static_cast<std::uint8_t>(n);
    } else if (key == "reentrancy_max_in_flight") {
      if (!parse_in(v, 0, std::numeric_limits<std::uint32_t>::max(), n))
        return "reentrancy_max_in_flight is not a 32-bit number";
      out.reentrancy_max_in_flight = static_cast<std::uint32_t>(n);
    } else if (key == "dependencies") {
      if (!parse_dependencies(v, out.dependencies))
        return "dependencies is not a list of escaped, non-empty names";
    }  // else: a field of a later version
  }
  if (!owner || !address || !epoch) return "owner, address or epoch is missing";
  return {};
}

}  // namespace akt::cluster::detail
