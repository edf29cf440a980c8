// The member record's text form (member_record.hpp).

#include "cluster/member_record.hpp"

#include <charconv>
#include <cstdint>

namespace akt::cluster::detail {

namespace {

constexpr std::string_view k_header = "akt-member 1";

void append_list(std::string& out, std::string_view key, const std::vector<std::string>& v) {
  out.append(key).append("=");
  for (std::size_t i = 0; i < v.size(); ++i) out.append(i == 0 ? "" : ",").append(v[i]);
  out.append("\n");
}

bool parse_list(std::string_view s, std::vector<std::string>& out) {
  out.clear();
  while (!s.empty()) {
    const auto comma = s.find(',');
    const std::string_view item = s.substr(0, comma);
    if (!valid_name(item)) return false;
    out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
    if (s.empty()) return false;  // a trailing comma
  }
  return true;
}

}  // namespace

bool valid_name(std::string_view s) noexcept {
  if (s.empty() || s.size() > 255) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(s[0])) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.' && c != ':') return false;
  }
  return true;
}

bool parse_http_address(std::string_view s, std::string& host, std::uint16_t& port) {
  if (s.empty() || s.size() > 255) return false;
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view h = s.substr(0, colon);
  const std::string_view p = s.substr(colon + 1);
  std::uint64_t n = 0;
  if (p.empty() || p.size() > 5 || p[0] == '0' || !parse_u64(p, n) || n > 65535) return false;
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
    for (char c : h) {
      const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      if (!hex && c != ':' && c != '.') return false;
    }
  } else {
    for (char c : h) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.';
      if (!ok) return false;
    }
  }
  host = std::string(h);
  port = static_cast<std::uint16_t>(n);
  return true;
}

std::string_view record_fields(std::string_view value, std::string_view header,
                               std::string_view not_this, std::string_view& fields) noexcept {
  const auto first = value.find('\n');
  if (value.substr(0, first) != header) return not_this;
  if (first == std::string_view::npos) return "no fields";
  fields = value.substr(first + 1);
  return {};
}

std::string_view next_field(std::string_view& fields, std::string_view& key,
                            std::string_view& v) noexcept {
  const auto eol = fields.find('\n');
  if (eol == std::string_view::npos) return "a field without its end of line";
  const std::string_view line = fields.substr(0, eol);
  fields.remove_prefix(eol + 1);
  const auto eq = line.find('=');
  if (eq == std::string_view::npos || eq == 0) return "a line that is not key=value";
  key = line.substr(0, eq);
  v = line.substr(eq + 1);
  return {};
}

bool parse_u64(std::string_view s, std::uint64_t& out) noexcept {
  if (s.empty() || s.size() > 20) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool parse_in(std::string_view s, std::uint64_t min, std::uint64_t max,
              std::uint64_t& out) noexcept {
  return parse_u64(s, out) && out >= min && out <= max;
}

bool valid_address(std::string_view v) noexcept {
  return v.rfind("akt://", 0) == 0 && v.find('@') != std::string_view::npos &&
         v.find('\n') == std::string_view::npos;
}

std::string members_prefix(std::string_view cluster) {
  return "/akt/" + std::string(cluster) + "/v1/members/";
}

std::string member_key(std::string_view cluster, std::string_view node) {
  return members_prefix(cluster) + std::string(node);
}

std::string encode_member(const member& m) {
  std::string out(k_header);
  out.append("\naddress=").append(m.address);
  out.append("\nincarnation=").append(std::to_string(m.incarnation));
  out.append("\nepoch=").append(std::to_string(m.epoch));
  out.append("\n");
  append_list(out, "roles", m.roles);
  append_list(out, "kinds", m.grain_kinds);
  out.append("load=").append(std::to_string(m.load)).append("\n");
  if (!m.http.empty()) out.append("http=").append(m.http).append("\n");
  if (m.leaving) out.append("leaving=1\n");  // absent while it serves: older readers skip it
  return out;
}

std::string decode_member(std::string_view name, std::string_view value, member& out) {
  out = member{};
  if (!valid_name(name)) return "not a node name";
  out.name = std::string(name);
  std::string_view fields;
  if (std::string_view why =
          record_fields(value, k_header, "not an akt member record (version 1)", fields);
      !why.empty())
    return std::string(why);
  bool address = false, incarnation = false, epoch = false;
  while (!fields.empty()) {
    std::string_view key, v;
    if (std::string_view why = next_field(fields, key, v); !why.empty()) return std::string(why);
    std::uint64_t n = 0;
    if (key == "address") {
      if (!valid_address(v)) return "address is not akt://system@host:port";
      out.address = std::string(v);
      address = true;
    } else if (key == "incarnation") {
      if (!parse_u64(v, n)) return "incarnation is not a number";
      out.incarnation = n;
      incarnation = true;
    } else if (key == "epoch") {
      if (!parse_in(v, 1, k_int64_max, n)) return "epoch is not a lease id";
      out.epoch = static_cast<lease_id>(n);
      epoch = true;
    } else if (key == "roles") {
      if (!parse_list(v, out.roles)) return "roles is not a list of names";
    } else if (key == "kinds") {
      if (!parse_list(v, out.grain_kinds)) return "kinds is not a list of names";
    } else if (key == "load") {
      if (!parse_u64(v, n)) return "load is not a number";
      out.load = n;
    } else if (key == "http") {
      std::string host;
      std::uint16_t port = 0;
      if (!parse_http_address(v, host, port)) return "http is not host:port";
      out.http = std::string(v);
    } else if (key == "leaving") {
      if (v != "1") return "leaving is not 1";
      out.leaving = true;
    }  // else: a field of a later version
  }
  if (!address || !incarnation || !epoch) return "address, incarnation or epoch is missing";
  return {};
}

}  // namespace akt::cluster::detail
