#pragma once
// cron_schedule: a parsed cron expression and the search for its next firing instant.
//
// Contract
// - An immutable value: copyable, and next() may be called from any thread at once.
// - Grammar: 5 fields "min hour day-of-month month day-of-week" (second 0) or 6 fields
//   "sec min hour dom month dow", separated by spaces or tabs. Each field is a comma list of
//   `*`, `?` (same as `*`), `n`, `a-b`, each optionally followed by `/step`; `n/step` means
//   n-max/step. Months JAN-DEC and weekdays SUN-SAT by name, any case; weekdays 0 and 7 are
//   both Sunday. Ranges do not wrap (5-1 is an error). Macros: @yearly @annually @monthly
//   @weekly @daily @midnight @hourly.
// - Day rule (Vixie cron): a day-of-month or day-of-week field is unrestricted when it is a
//   bare `*` or `?`; when both are restricted a day matches if either matches, otherwise the
//   restricted one (if any) decides.
// - Errors: errc::invalid_cron, with a detail "position N: problem" where N is the 1-based
//   character position in the expression as given.
// - next() works on the zone's wall clock by field arithmetic, never second by second; it looks
//   at most k_search_years ahead (an expression that cannot match, "0 0 30 2 *", returns
//   nullopt after a few hundred steps).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "akt/core/result.hpp"
#include "akt/core/time_zone.hpp"

namespace akt {

class cron_schedule {
 public:
  // How far next() looks. Bounds its work for expressions that never match; the rarest
  // satisfiable day, February 29, recurs within 8 years (2096 -> 2104).
  static constexpr int k_search_years = 30;

  static result<cron_schedule> parse(std::string_view expression);

  // The first instant strictly after `after` whose local wall time in `zone` matches, or
  // nullopt when none is found within k_search_years (or before 2262, where
  // system_clock::time_point ends). DST: a matching wall time inside a gap
  // fires once, at the instant of the jump; a wall time that occurs twice fires once, at its
  // first occurrence.
  std::optional<std::chrono::system_clock::time_point> next(
      std::chrono::system_clock::time_point after, const time_zone& zone) const;

  std::string_view expression() const { return expression_; }

 private:
  cron_schedule() = default;

  // The first local time >= from that matches, or nullopt past `limit_year`.
  std::optional<std::chrono::local_seconds> next_local(std::chrono::local_seconds from,
                                                       int limit_year) const;
  bool day_matches(std::chrono::year_month_day ymd) const;

  std::string expression_;
  std::uint64_t seconds_ = 0;  // bit s: second s (0-59)
  std::uint64_t minutes_ = 0;  // bit m: minute m (0-59)
  std::uint32_t hours_ = 0;    // bit h: hour h (0-23)
  std::uint32_t days_ = 0;     // bit d: day of month d (1-31)
  std::uint16_t months_ = 0;   // bit m: month m (1-12)
  std::uint8_t weekdays_ = 0;  // bit d: weekday d (0 Sunday - 6 Saturday)
  bool dom_restricted_ = false;
  bool dow_restricted_ = false;
};

}  // namespace akt
