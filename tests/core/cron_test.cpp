// cron_schedule tests: parse errors with positions for every field kind, 5 and 6 fields, names,
// steps, ranges, lists, Sunday as 0 and 7, the day-of-month / day-of-week OR rule, macros, and
// next() in UTC and in Europe/Paris across both DST transitions of 2026.

#include <gtest/gtest.h>
#include <akt/core/cron.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace {

using namespace std::chrono;
using namespace std::chrono_literals;
using akt::cron_schedule;
using akt::errc;
using akt::time_zone;

system_clock::time_point utc(year_month_day d, system_clock::duration tod = 0s) {
  return system_clock::time_point(sys_days(d)) + tod;
}

cron_schedule cron(std::string_view expr) {
  auto c = cron_schedule::parse(expr);
  EXPECT_TRUE(c.has_value()) << expr << ": " << c.error_or_ok().message();
  return c.has_value() ? *c : *cron_schedule::parse("* * * * *");
}

time_zone paris() {
  auto z = time_zone::locate("Europe/Paris");
  EXPECT_TRUE(z.has_value()) << z.error_or_ok().message();
  return z.has_value() ? *z : time_zone::utc();
}

// The next `n` firings after `from`.
std::vector<system_clock::time_point> firings(const cron_schedule& c, system_clock::time_point from,
                                              int n, const time_zone& z = time_zone::utc()) {
  std::vector<system_clock::time_point> out;
  for (int i = 0; i < n; ++i) {
    auto t = c.next(from, z);
    if (!t) break;
    out.push_back(*t);
    from = *t;
  }
  return out;
}

// ---- parse errors ----

struct bad_case {
  const char* expr;
  const char* detail;  // the exact detail
};

TEST(Cron_ParseErrors, NamePositionAndProblemForEveryFieldKind) {
  const bad_case cases[] = {
      {"15,30 61 * * * *", "position 7: minute value 61 out of range 0-59"},
      {"60 * * * * *", "position 1: second value 60 out of range 0-59"},
      {"61 * * * *", "position 1: minute value 61 out of range 0-59"},
      {"0 24 * * *", "position 3: hour value 24 out of range 0-23"},
      {"0 0 32 * *", "position 5: day-of-month value 32 out of range 1-31"},
      {"0 0 0 * *", "position 5: day-of-month value 0 out of range 1-31"},
      {"0 0 * 13 *", "position 7: month value 13 out of range 1-12"},
      {"0 0 * 0 *", "position 7: month value 0 out of range 1-12"},
      {"0 0 * FOO *", "position 7: unknown month name 'FOO'"},
      {"0 0 * * 8", "position 9: day-of-week value 8 out of range 0-7"},
      {"0 0 * * FUN", "position 9: unknown day-of-week name 'FUN'"},
      {"0 0 * * MONDAY", "position 9: unknown day-of-week name 'MONDAY'"},
      {"0 0 * JAN-FOO *", "position 11: unknown month name 'FOO'"},
      {"MON * * * *", "position 1: minute field takes numbers, not 'MON'"},
      {"0 0 L * *", "position 5: day-of-month field takes numbers, not 'L'"},
      {"0 0 * * 1#2", "position 10: unexpected character '#' in day-of-week field"},
      {"5x * * * *", "position 2: unexpected character 'x' in minute field"},
      {"0 0-5x * * *", "position 6: unexpected character 'x' in hour field"},
      {"5-1 * * * *", "position 1: minute range 5-1 is reversed"},
      {"0 0 * DEC-JAN *", "position 7: month range 12-1 is reversed"},
      {"*/0 * * * *", "position 3: minute step 0 out of range 1-59"},
      {"0 */24 * * *", "position 5: hour step 24 out of range 1-23"},
      {"*/ * * * *", "position 3: missing step after '/'"},
      {"*/x * * * *", "position 3: unexpected character 'x' in minute field"},
      {"1,,2 * * * *", "position 3: empty list element in minute field"},
      {"1, * * * *", "position 3: empty list element in minute field"},
      {",1 * * * *", "position 1: empty list element in minute field"},
      {"1- * * * *", "position 3: missing minute value"},
      {"-1 * * * *", "position 1: unexpected character '-' in minute field"},
      {"99999999999 * * * *", "position 1: minute value 99999999999 out of range 0-59"},
      {"   61 * * * *", "position 4: minute value 61 out of range 0-59"},
      {"* * * *", "position 8: expected 5 or 6 fields, found 4"},
      {"* * * * * * *", "position 13: expected 5 or 6 fields, found 7"},
      {"", "position 1: empty expression"},
      {"  \t ", "position 1: empty expression"},
      {"@often", "position 1: unknown macro '@often'"},
      {"0 0 * * * 8", "position 11: day-of-week value 8 out of range 0-7"},
  };
  for (const auto& c : cases) {
    auto r = cron_schedule::parse(c.expr);
    ASSERT_FALSE(r.has_value()) << "'" << c.expr << "' parsed";
    EXPECT_EQ(r.code(), errc::invalid_cron) << c.expr;
    EXPECT_EQ(r.error().detail(), c.detail) << "'" << c.expr << "'";
  }
}

// ---- parsing what is valid ----

TEST(Cron_Parse, FiveAndSixFieldsAndWhitespace) {
  EXPECT_TRUE(cron_schedule::parse("* * * * *").has_value());
  EXPECT_TRUE(cron_schedule::parse("* * * * * *").has_value());
  EXPECT_TRUE(cron_schedule::parse("  0\t0  *  * *  ").has_value());
  EXPECT_TRUE(cron_schedule::parse("? * * ? * ?").has_value());
  EXPECT_EQ(cron("0  9 * * mon").expression(), "0  9 * * mon");
}

// ---- next() in UTC ----

TEST(Cron_Next, FiveFieldsFireOnTheMinuteStrictlyAfter) {
  const auto c = cron("*/15 * * * *");
  const auto day = 2026y / June / 10;
  EXPECT_EQ(c.next(utc(day, 10h + 7min + 30s), time_zone::utc()), utc(day, 10h + 15min));
  EXPECT_EQ(c.next(utc(day, 10h + 15min), time_zone::utc()), utc(day, 10h + 30min));
  EXPECT_EQ(c.next(utc(day, 10h + 14min + 59s + 999ms), time_zone::utc()), utc(day, 10h + 15min));
  EXPECT_EQ(c.next(utc(day, 23h + 50min), time_zone::utc()), utc(2026y / June / 11));
}

TEST(Cron_Next, SixFieldsHaveSeconds) {
  const auto c = cron("*/10 * * * * *");
  const auto day = 2026y / June / 10;
  EXPECT_EQ(c.next(utc(day, 10h + 5s), time_zone::utc()), utc(day, 10h + 10s));
  EXPECT_EQ(c.next(utc(day, 10h + 59min + 55s), time_zone::utc()), utc(day, 11h));
  const auto d = cron("30 5 4 2 3 *");  // 04:05:30 on March 2
  EXPECT_EQ(d.next(utc(2026y / January / 1), time_zone::utc()),
            utc(2026y / March / 2, 4h + 5min + 30s));
  EXPECT_EQ(d.next(utc(2026y / March / 2, 4h + 5min + 30s), time_zone::utc()),
            utc(2027y / March / 2, 4h + 5min + 30s));
}

TEST(Cron_Next, RangesStepsListsAndNames) {
  // Weekdays at 09:00, 11:00, 13:00, 15:00, 17:00. 2026-06-12 is a Friday.
  const auto c = cron("0 9-17/2 * * MON-FRI");
  const auto got = firings(c, utc(2026y / June / 12, 16h), 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], utc(2026y / June / 12, 17h));
  EXPECT_EQ(got[1], utc(2026y / June / 15, 9h));  // Monday
  EXPECT_EQ(got[2], utc(2026y / June / 15, 11h));
  // Names in any case, lists mixing names, values and ranges.
  const auto m = cron("0 0 1 jan,Jul,10-11 *");
  const auto months = firings(m, utc(2026y / January / 1), 4);
  ASSERT_EQ(months.size(), 4u);
  EXPECT_EQ(months[0], utc(2026y / July / 1));
  EXPECT_EQ(months[1], utc(2026y / October / 1));
  EXPECT_EQ(months[2], utc(2026y / November / 1));
  EXPECT_EQ(months[3], utc(2027y / January / 1));
  // n/step: from n to the end of the field.
  const auto s = cron("5/20 * * * *");
  EXPECT_EQ(firings(s, utc(2026y / June / 1), 4),
            (std::vector{utc(2026y / June / 1, 5min), utc(2026y / June / 1, 25min),
                         utc(2026y / June / 1, 45min), utc(2026y / June / 1, 1h + 5min)}));
  // A list of a range with a step and single values.
  const auto l = cron("0 1,2-10/4,23 * * *");
  EXPECT_EQ(
      firings(l, utc(2026y / June / 1), 5),
      (std::vector{utc(2026y / June / 1, 1h), utc(2026y / June / 1, 2h), utc(2026y / June / 1, 6h),
                   utc(2026y / June / 1, 10h), utc(2026y / June / 1, 23h)}));
}

TEST(Cron_Next, SundayIsZeroAndSeven) {
  // 2026-06-14 is a Sunday.
  const auto from = utc(2026y / June / 10);
  EXPECT_EQ(cron("0 0 * * 0").next(from, time_zone::utc()), utc(2026y / June / 14));
  EXPECT_EQ(cron("0 0 * * 7").next(from, time_zone::utc()), utc(2026y / June / 14));
  EXPECT_EQ(cron("0 0 * * SUN").next(from, time_zone::utc()), utc(2026y / June / 14));
  // 5-7: Friday, Saturday, Sunday.
  EXPECT_EQ(firings(cron("0 0 * * 5-7"), from, 4),
            (std::vector{utc(2026y / June / 12), utc(2026y / June / 13), utc(2026y / June / 14),
                         utc(2026y / June / 19)}));
}

TEST(Cron_Next, DayOfMonthOrDayOfWeekWhenBothRestricted) {
  // The 13th or any Friday. 2026-01-02 is a Friday; the 13th is a Tuesday.
  const auto both = cron("0 0 13 * FRI");
  EXPECT_EQ(firings(both, utc(2026y / January / 1), 4),
            (std::vector{utc(2026y / January / 2), utc(2026y / January / 9),
                         utc(2026y / January / 13), utc(2026y / January / 16)}));
  // Only one restricted: that one decides.
  EXPECT_EQ(cron("0 0 13 * *").next(utc(2026y / January / 1), time_zone::utc()),
            utc(2026y / January / 13));
  EXPECT_EQ(cron("0 0 * * FRI").next(utc(2026y / January / 3), time_zone::utc()),
            utc(2026y / January / 9));
  // '?' is unrestricted like '*'.
  EXPECT_EQ(cron("0 0 13 * ?").next(utc(2026y / January / 1), time_zone::utc()),
            utc(2026y / January / 13));
  // A stepped star is a restriction: day 1,3,5,... or a Monday (Jan 5 2026 is a Monday).
  EXPECT_EQ(
      firings(cron("0 0 */2 * MON"), utc(2026y / January / 3), 3),
      (std::vector{utc(2026y / January / 5), utc(2026y / January / 7), utc(2026y / January / 9)}));
  EXPECT_EQ(firings(cron("0 0 */2 * MON"), utc(2026y / January / 9), 3),
            (std::vector{utc(2026y / January / 11), utc(2026y / January / 12),
                         utc(2026y / January / 13)}));
}

TEST(Cron_Next, LeapDayAndMonthEnds) {
  const auto leap = cron("0 0 29 2 *");
  EXPECT_EQ(leap.next(utc(2026y / January / 1), time_zone::utc()), utc(2028y / February / 29));
  EXPECT_EQ(leap.next(utc(2028y / February / 29), time_zone::utc()), utc(2032y / February / 29));
  // 2100 is not a leap year: eight years between leap days.
  EXPECT_EQ(leap.next(utc(2096y / March / 1), time_zone::utc()), utc(2104y / February / 29));
  // The 31st skips shorter months.
  EXPECT_EQ(firings(cron("0 12 31 * *"), utc(2026y / January / 31, 13h), 3),
            (std::vector{utc(2026y / March / 31, 12h), utc(2026y / May / 31, 12h),
                         utc(2026y / July / 31, 12h)}));
  // The 30th skips February only.
  EXPECT_EQ(cron("0 0 30 * *").next(utc(2026y / January / 30), time_zone::utc()),
            utc(2026y / March / 30));
  // Year rollover.
  EXPECT_EQ(cron("0 0 1 1 *").next(utc(2026y / June / 1), time_zone::utc()),
            utc(2027y / January / 1));
  EXPECT_EQ(cron("59 59 23 31 12 *").next(utc(2026y / January / 1), time_zone::utc()),
            utc(2026y / December / 31, 23h + 59min + 59s));
}

TEST(Cron_Next, ImpossibleDatesReturnNulloptQuickly) {
  const auto start = steady_clock::now();
  for (const char* expr : {"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *", "* * 30-31 2 *"}) {
    EXPECT_EQ(cron(expr).next(utc(2026y / January / 1), time_zone::utc()), std::nullopt) << expr;
    EXPECT_EQ(cron(expr).next(utc(2026y / January / 1), paris()), std::nullopt) << expr;
  }
  // A few hundred steps each, even in a sanitizer build.
  EXPECT_LT(steady_clock::now() - start, 2s);
}

TEST(Cron_Next, StopsAtTheEndOfSystemClockRange) {
  // system_clock::time_point ends in 2262; the search stops before it instead of overflowing.
  EXPECT_EQ(cron("0 0 1 1 *").next(utc(2261y / June / 1), time_zone::utc()), std::nullopt);
  EXPECT_EQ(cron("0 0 1 6 *").next(utc(2261y / January / 1), time_zone::utc()),
            utc(2261y / June / 1));
}

TEST(Cron_Next, ManyCallsAreCheap) {
  // Field arithmetic, not a second-by-second walk: a year-long jump costs a few steps.
  const auto c = cron("59 59 23 31 12 *");
  const auto start = steady_clock::now();
  auto t = utc(2026y / January / 1);
  for (int i = 0; i < 200; ++i) {
    auto n = c.next(t, time_zone::utc());
    ASSERT_TRUE(n.has_value());
    t = *n;
  }
  EXPECT_EQ(t, utc(2225y / December / 31, 23h + 59min + 59s));
  EXPECT_LT(steady_clock::now() - start, 2s);
}

TEST(Cron_Next, Macros) {
  const auto from = utc(2026y / June / 10, 10h + 30min);  // a Wednesday
  const auto u = time_zone::utc();
  EXPECT_EQ(cron("@hourly").next(from, u), utc(2026y / June / 10, 11h));
  EXPECT_EQ(cron("@daily").next(from, u), utc(2026y / June / 11));
  EXPECT_EQ(cron("@midnight").next(from, u), utc(2026y / June / 11));
  EXPECT_EQ(cron("@weekly").next(from, u), utc(2026y / June / 14));
  EXPECT_EQ(cron("@monthly").next(from, u), utc(2026y / July / 1));
  EXPECT_EQ(cron("@yearly").next(from, u), utc(2027y / January / 1));
  EXPECT_EQ(cron("@annually").next(from, u), utc(2027y / January / 1));
  EXPECT_EQ(cron(" @Daily ").next(from, u), utc(2026y / June / 11));
  EXPECT_EQ(cron("@hourly").expression(), "@hourly");
}

// ---- next() in Europe/Paris ----

TEST(Cron_Paris, LocalWallTimeOutsideTransitions) {
  const auto c = cron("0 9 * * *");
  EXPECT_EQ(c.next(utc(2026y / January / 15), paris()), utc(2026y / January / 15, 8h));
  EXPECT_EQ(c.next(utc(2026y / July / 15), paris()), utc(2026y / July / 15, 7h));
}

TEST(Cron_Paris, GapFiresOnceAtTheJump) {
  // 2026-03-29: 02:00 CET jumps to 03:00 CEST at 01:00 UTC; 02:30 does not exist.
  const auto c = cron("30 2 * * *");
  const auto got = firings(c, utc(2026y / March / 27, 12h), 4, paris());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], utc(2026y / March / 28, 1h + 30min));  // 02:30 CET
  EXPECT_EQ(got[1], utc(2026y / March / 29, 1h));          // the jump: 03:00 CEST, once
  EXPECT_EQ(got[2], utc(2026y / March / 30, 30min));       // 02:30 CEST
  EXPECT_EQ(got[3], utc(2026y / March / 31, 30min));
  // Several wall times in the gap collapse onto one firing.
  const auto many = firings(cron("0,15,30,45 2 * * *"), utc(2026y / March / 29), 2, paris());
  ASSERT_EQ(many.size(), 2u);
  EXPECT_EQ(many[0], utc(2026y / March / 29, 1h));
  EXPECT_EQ(many[1], utc(2026y / March / 30, 0h));  // 02:00 CEST the next day
  // Every 15 minutes across the jump: 01:45 CET, then 03:00 CEST (the gap's times collapse).
  const auto q = firings(cron("*/15 * * * *"), utc(2026y / March / 29, 40min), 3, paris());
  EXPECT_EQ(q, (std::vector{utc(2026y / March / 29, 45min), utc(2026y / March / 29, 1h),
                            utc(2026y / March / 29, 1h + 15min)}));
}

TEST(Cron_Paris, OverlapFiresOnceAtTheFirstOccurrence) {
  // 2026-10-25: 03:00 CEST falls back to 02:00 CET at 01:00 UTC; 02:30 happens twice.
  const auto c = cron("30 2 * * *");
  const auto got = firings(c, utc(2026y / October / 24, 12h), 3, paris());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], utc(2026y / October / 25, 30min));       // 02:30 CEST, the first
  EXPECT_EQ(got[1], utc(2026y / October / 26, 1h + 30min));  // next day, 02:30 CET
  EXPECT_EQ(got[2], utc(2026y / October / 27, 1h + 30min));
  // Every 15 minutes: the repeated hour's wall times do not fire again.
  const auto q = firings(cron("*/15 * * * *"), utc(2026y / October / 25, 40min), 3, paris());
  EXPECT_EQ(q, (std::vector{utc(2026y / October / 25, 45min), utc(2026y / October / 25, 2h),
                            utc(2026y / October / 25, 2h + 15min)}));
  // Asked during the second reading of 02:xx, the next 03:00 is an hour of wall time away.
  EXPECT_EQ(cron("0 3 * * *").next(utc(2026y / October / 25, 1h + 10min), paris()),
            utc(2026y / October / 25, 2h));
  EXPECT_EQ(cron("*/15 * * * *").next(utc(2026y / October / 25, 1h + 10min), paris()),
            utc(2026y / October / 25, 2h));
  // Asked exactly at the first 02:30, 02:30 is not due again that day.
  EXPECT_EQ(c.next(utc(2026y / October / 25, 30min), paris()),
            utc(2026y / October / 26, 1h + 30min));
  EXPECT_EQ(c.next(utc(2026y / October / 25, 1h + 30min), paris()),
            utc(2026y / October / 26, 1h + 30min));
}

TEST(Cron_Paris, SecondsAcrossTheOverlapStayBounded) {
  // Every second: the repeated hour is skipped by stepping once per wall second at most.
  const auto c = cron("* * * * * *");
  const auto start = steady_clock::now();
  EXPECT_EQ(c.next(utc(2026y / October / 25, 1h), paris()), utc(2026y / October / 25, 2h));
  // After the last second of the first reading, the repeated hour does not fire again.
  EXPECT_EQ(c.next(utc(2026y / October / 25, 59min + 59s), paris()), utc(2026y / October / 25, 2h));
  EXPECT_LT(steady_clock::now() - start, 2s);
}

}  // namespace
