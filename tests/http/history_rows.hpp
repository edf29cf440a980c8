#pragma once
// Reads /api/history's samples ([[t,processed,dead,grains,actors],...]) for the tests.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace akt::http_test {

using history_row = std::array<std::uint64_t, 5>;  // t, processed, dead, grains, actors

// The rows of a history document; empty when it has none (or is not one).
inline std::vector<history_row> history_rows(const std::string& body) {
  std::vector<history_row> rows;
  std::size_t at = body.find("\"samples\":[");
  if (at == std::string::npos) return rows;
  at += 11;
  while (at < body.size() && body[at] == '[') {
    history_row r{};
    const char* p = body.c_str() + at + 1;
    for (std::size_t i = 0; i < r.size(); ++i) {
      char* end = nullptr;
      r[i] = std::strtoull(p, &end, 10);
      p = end + 1;  // past ',' or ']'
    }
    rows.push_back(r);
    at = static_cast<std::size_t>(p - body.c_str());
    if (at < body.size() && body[at] == ',') ++at;
  }
  return rows;
}

}  // namespace akt::http_test
