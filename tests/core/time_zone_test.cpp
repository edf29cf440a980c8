// time_zone tests: UTC, real zones from the system's tzdata around the 2026 transitions, the
// POSIX footer rule beyond the transition table (checked against glibc's localtime_r), gap and
// overlap mapping in to_utc, hand-made TZif files (version 1, footer-only rules, malformed), name
// validation and the AKT_ZONEINFO_DIR override.

#include <gtest/gtest.h>
#include <akt/core/time_zone.hpp>

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono;
using namespace std::chrono_literals;
using akt::errc;
using akt::time_zone;

system_clock::time_point utc(year_month_day d, seconds tod = 0s) {
  return system_clock::time_point(sys_days(d) + tod);
}
local_seconds local(year_month_day d, seconds tod = 0s) { return local_days(d) + tod; }

time_zone zone(std::string_view name) {
  auto z = time_zone::locate(name);
  EXPECT_TRUE(z.has_value()) << name << ": " << z.error_or_ok().message();
  return z.has_value() ? *z : time_zone::utc();
}

// Sets AKT_ZONEINFO_DIR for the life of the object, restoring the previous value after.
class zoneinfo_dir_override {
 public:
  explicit zoneinfo_dir_override(const std::string& dir) {
    if (const char* old = std::getenv("AKT_ZONEINFO_DIR")) old_ = old;
    setenv("AKT_ZONEINFO_DIR", dir.c_str(), 1);
  }
  ~zoneinfo_dir_override() {
    if (old_.empty()) {
      unsetenv("AKT_ZONEINFO_DIR");
    } else {
      setenv("AKT_ZONEINFO_DIR", old_.c_str(), 1);
    }
  }

 private:
  std::string old_;
};

// A fresh directory under the system temp dir, removed at the end of the test.
class temp_dir {
 public:
  temp_dir() {
    path_ = std::filesystem::temp_directory_path() /
            ("akt_tz_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::filesystem::create_directories((path_ / name).parent_path());
    std::ofstream(path_ / name, std::ios::binary) << bytes;
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

// ---- a minimal TZif writer for hand-made zones ----

struct tz_type {
  std::int32_t utoff;
  bool is_dst;
};

void put32(std::string& s, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put64(std::string& s, std::uint64_t v) {
  for (int i = 7; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string tzif(char version, const std::vector<std::int64_t>& times,
                 const std::vector<std::uint8_t>& idx, const std::vector<tz_type>& types,
                 const std::string& footer = "") {
  auto header = [&](std::string& s) {
    s += "TZif";
    s.push_back(version);
    s.append(15, '\0');
    put32(s, 0);  // isutcnt
    put32(s, 0);  // isstdcnt
    put32(s, 0);  // leapcnt
    put32(s, static_cast<std::uint32_t>(times.size()));
    put32(s, static_cast<std::uint32_t>(types.size()));
    put32(s, 4);  // charcnt: "ZZZ\0"
  };
  auto block = [&](std::string& s, bool wide) {
    for (auto t : times) {
      if (wide) {
        put64(s, static_cast<std::uint64_t>(t));
      } else {
        put32(s, static_cast<std::uint32_t>(static_cast<std::int32_t>(t)));
      }
    }
    for (auto i : idx) s.push_back(static_cast<char>(i));
    for (auto t : types) {
      put32(s, static_cast<std::uint32_t>(t.utoff));
      s.push_back(t.is_dst ? 1 : 0);
      s.push_back(0);
    }
    s += std::string("ZZZ\0", 4);
  };
  std::string s;
  header(s);
  block(s, false);
  if (version != 0) {
    header(s);
    block(s, true);
    s += "\n" + footer + "\n";
  }
  return s;
}

// ---- UTC ----

TEST(TimeZone_Utc, OffsetsAreZeroAndConversionsIdentity) {
  const time_zone z = time_zone::utc();
  EXPECT_EQ(z.name(), "UTC");
  const auto t = utc(2026y / July / 1, 12h + 34min + 56s);
  EXPECT_EQ(z.offset_at(t), 0s);
  EXPECT_EQ(z.to_local(t), local(2026y / July / 1, 12h + 34min + 56s));
  EXPECT_EQ(z.to_utc(local(2026y / July / 1, 12h + 34min + 56s)), t);
  EXPECT_EQ(time_zone(), z);  // default-constructed is UTC

  auto located = time_zone::locate("UTC");
  ASSERT_TRUE(located.has_value());
  EXPECT_EQ(located->offset_at(t), 0s);
  EXPECT_EQ(located->name(), "UTC");
}

TEST(TimeZone_Utc, LocatedWithoutZoneinfo) {
  // UTC exists even where tzdata is missing.
  zoneinfo_dir_override dir("/nonexistent/akt/zoneinfo");
  auto z = time_zone::locate("UTC");
  ASSERT_TRUE(z.has_value());
  EXPECT_EQ(z->offset_at(utc(2026y / January / 1)), 0s);
}

// ---- Europe/Paris ----

TEST(TimeZone_Paris, WinterAndSummerOffsets) {
  const time_zone z = zone("Europe/Paris");
  EXPECT_EQ(z.name(), "Europe/Paris");
  EXPECT_EQ(z.offset_at(utc(2026y / January / 15, 12h)), 1h);
  EXPECT_EQ(z.offset_at(utc(2026y / July / 15, 12h)), 2h);
  EXPECT_EQ(z.to_local(utc(2026y / January / 15, 12h)), local(2026y / January / 15, 13h));
  EXPECT_EQ(z.to_local(utc(2026y / July / 15, 12h)), local(2026y / July / 15, 14h));
}

TEST(TimeZone_Paris, ExactlyAroundThe2026Transitions) {
  const time_zone z = zone("Europe/Paris");
  // Spring forward: 2026-03-29 01:00 UTC, 02:00 CET -> 03:00 CEST.
  const auto spring = utc(2026y / March / 29, 1h);
  EXPECT_EQ(z.offset_at(spring - 1s), 1h);
  EXPECT_EQ(z.offset_at(spring - 1ns), 1h);
  EXPECT_EQ(z.offset_at(spring), 2h);
  EXPECT_EQ(z.to_local(spring - 1s), local(2026y / March / 29, 1h + 59min + 59s));
  EXPECT_EQ(z.to_local(spring), local(2026y / March / 29, 3h));
  // Fall back: 2026-10-25 01:00 UTC, 03:00 CEST -> 02:00 CET.
  const auto fall = utc(2026y / October / 25, 1h);
  EXPECT_EQ(z.offset_at(fall - 1s), 2h);
  EXPECT_EQ(z.offset_at(fall), 1h);
  EXPECT_EQ(z.to_local(fall - 1s), local(2026y / October / 25, 2h + 59min + 59s));
  EXPECT_EQ(z.to_local(fall), local(2026y / October / 25, 2h));
}

TEST(TimeZone_Paris, ToUtcMapsGapForwardAndOverlapToEarlier) {
  const time_zone z = zone("Europe/Paris");
  // Ordinary times.
  EXPECT_EQ(z.to_utc(local(2026y / January / 15, 13h)), utc(2026y / January / 15, 12h));
  EXPECT_EQ(z.to_utc(local(2026y / July / 15, 14h)), utc(2026y / July / 15, 12h));
  // Just before and after the gap.
  EXPECT_EQ(z.to_utc(local(2026y / March / 29, 1h + 59min + 59s)),
            utc(2026y / March / 29, 59min + 59s));
  EXPECT_EQ(z.to_utc(local(2026y / March / 29, 3h)), utc(2026y / March / 29, 1h));
  // In the gap [02:00, 03:00): the instant of the jump, which the wall clock shows as 03:00.
  EXPECT_EQ(z.to_utc(local(2026y / March / 29, 2h)), utc(2026y / March / 29, 1h));
  EXPECT_EQ(z.to_utc(local(2026y / March / 29, 2h + 30min)), utc(2026y / March / 29, 1h));
  EXPECT_EQ(z.to_utc(local(2026y / March / 29, 2h + 59min + 59s)), utc(2026y / March / 29, 1h));
  // The overlap [02:00, 03:00) happens twice; the earlier (CEST) reading wins.
  EXPECT_EQ(z.to_utc(local(2026y / October / 25, 2h)), utc(2026y / October / 25, 0h));
  EXPECT_EQ(z.to_utc(local(2026y / October / 25, 2h + 30min)), utc(2026y / October / 25, 30min));
  EXPECT_EQ(z.to_utc(local(2026y / October / 25, 2h + 59min + 59s)),
            utc(2026y / October / 25, 59min + 59s));
  EXPECT_EQ(z.to_utc(local(2026y / October / 25, 3h)), utc(2026y / October / 25, 2h));
  EXPECT_EQ(z.to_utc(local(2026y / October / 25, 1h + 59min + 59s)),
            utc(2026y / October / 24, 23h + 59min + 59s));
}

TEST(TimeZone_Paris, FarFutureUsesTheFooterRule) {
  // The file's table ends in 2037; 2100 comes from "CET-1CEST,M3.5.0,M10.5.0/3".
  const time_zone z = zone("Europe/Paris");
  EXPECT_EQ(z.offset_at(utc(2100y / January / 15)), 1h);
  EXPECT_EQ(z.offset_at(utc(2100y / July / 15)), 2h);
  // Last Sundays of 2100: March 28 and October 31, at 01:00 UTC.
  EXPECT_EQ(z.offset_at(utc(2100y / March / 28, 1h) - 1s), 1h);
  EXPECT_EQ(z.offset_at(utc(2100y / March / 28, 1h)), 2h);
  EXPECT_EQ(z.offset_at(utc(2100y / October / 31, 1h) - 1s), 2h);
  EXPECT_EQ(z.offset_at(utc(2100y / October / 31, 1h)), 1h);
  EXPECT_EQ(z.to_utc(local(2100y / March / 28, 2h + 30min)), utc(2100y / March / 28, 1h));
  EXPECT_EQ(z.to_utc(local(2100y / October / 31, 2h + 30min)), utc(2100y / October / 31, 30min));
}

// ---- America/New_York ----

TEST(TimeZone_NewYork, OffsetsTransitionsAndMapping) {
  const time_zone z = zone("America/New_York");
  EXPECT_EQ(z.offset_at(utc(2026y / January / 15)), -5h);
  EXPECT_EQ(z.offset_at(utc(2026y / July / 15)), -4h);
  // 2026-03-08 02:00 EST = 07:00 UTC; 2026-11-01 02:00 EDT = 06:00 UTC.
  EXPECT_EQ(z.offset_at(utc(2026y / March / 8, 7h) - 1s), -5h);
  EXPECT_EQ(z.offset_at(utc(2026y / March / 8, 7h)), -4h);
  EXPECT_EQ(z.offset_at(utc(2026y / November / 1, 6h) - 1s), -4h);
  EXPECT_EQ(z.offset_at(utc(2026y / November / 1, 6h)), -5h);
  EXPECT_EQ(z.to_utc(local(2026y / March / 8, 2h + 30min)), utc(2026y / March / 8, 7h));
  EXPECT_EQ(z.to_utc(local(2026y / November / 1, 1h + 30min)),
            utc(2026y / November / 1, 5h + 30min));
  EXPECT_EQ(z.to_local(utc(2026y / November / 1, 6h + 30min)),
            local(2026y / November / 1, 1h + 30min));
  // Footer: second Sunday of March 2100 is the 14th, first Sunday of November the 7th.
  EXPECT_EQ(z.offset_at(utc(2100y / March / 14, 7h) - 1s), -5h);
  EXPECT_EQ(z.offset_at(utc(2100y / March / 14, 7h)), -4h);
  EXPECT_EQ(z.offset_at(utc(2100y / November / 7, 6h) - 1s), -4h);
  EXPECT_EQ(z.offset_at(utc(2100y / November / 7, 6h)), -5h);
}

// ---- against glibc ----

// glibc reads the same files (table and footer); its tm_gmtoff is the oracle for every zone
// kind: northern and southern DST, negative DST (Dublin), half-hour DST (Lord Howe), 24:00 and
// negative rule times (Santiago, Nuuk), no DST (Tehran, Casablanca's long table).
TEST(TimeZone_Glibc, OffsetsAgreeFrom1900To2200) {
  const char* zones[] = {"Europe/Paris",     "America/New_York",    "Australia/Sydney",
                         "Europe/Dublin",    "Australia/Lord_Howe", "America/Santiago",
                         "America/Nuuk",     "Pacific/Auckland",    "Pacific/Chatham",
                         "Asia/Tehran",      "Africa/Casablanca",   "America/Havana",
                         "Antarctica/Troll", "Asia/Kolkata",        "America/Sao_Paulo"};
  const char* old_tz = std::getenv("TZ");
  const std::string saved = old_tz ? old_tz : "";
  for (const char* name : zones) {
    auto located = time_zone::locate(name);
    if (!located) {
      ADD_FAILURE() << "cannot load " << name << ": " << located.error().message();
      continue;
    }
    setenv("TZ", (std::string(":") + name).c_str(), 1);
    tzset();
    int mismatches = 0;
    auto check = [&](std::int64_t t) {
      const time_t tt = static_cast<time_t>(t);
      tm parts{};
      ASSERT_NE(localtime_r(&tt, &parts), nullptr);
      const auto mine = located->offset_at(system_clock::time_point(seconds(t))).count();
      if (mine != parts.tm_gmtoff && ++mismatches <= 5) {
        ADD_FAILURE() << name << " at " << t << ": " << mine << " vs glibc " << parts.tm_gmtoff;
      }
    };
    const std::int64_t y1900 = -2208988800LL;
    const std::int64_t y2200 = 7258118400LL;
    for (std::int64_t t = y1900; t < y2200; t += 3 * 86400 + 3607) check(t);
    // Dense around the end of the table and into the footer's years.
    const std::int64_t y2030 = 1893456000LL;
    const std::int64_t y2045 = 2366841600LL;
    for (std::int64_t t = y2030; t < y2045; t += 1800 + 7) check(t);
  }
  if (saved.empty()) {
    unsetenv("TZ");
  } else {
    setenv("TZ", saved.c_str(), 1);
  }
  tzset();
}

TEST(TimeZone_Glibc, ToLocalRoundTripsThroughToUtc) {
  // Away from gaps and overlaps, to_utc(to_local(t)) == t; inside an overlap's second reading it
  // is the earlier instant, exactly one offset difference before.
  const time_zone z = zone("Australia/Sydney");
  for (std::int64_t t = 1735689600LL; t < 1767225600LL; t += 3607) {  // 2025
    const auto tp = system_clock::time_point(seconds(t));
    const auto back = z.to_utc(z.to_local(tp));
    EXPECT_TRUE(back == tp || back == tp - 1h) << t;
  }
}

// ---- hand-made files ----

TEST(TimeZone_Files, Version1File) {
  temp_dir dir;
  // +1h until 1000000000, then +2h (DST) until 1100000000, then +1h.
  dir.write("Test/V1", tzif(0, {1000000000, 1100000000}, {1, 0}, {{3600, false}, {7200, true}}));
  zoneinfo_dir_override over(dir.path());
  auto z = time_zone::locate("Test/V1");
  ASSERT_TRUE(z.has_value()) << z.error_or_ok().message();
  EXPECT_EQ(z->name(), "Test/V1");
  auto at = [&](std::int64_t t) { return z->offset_at(system_clock::time_point(seconds(t))); };
  EXPECT_EQ(at(0), 1h);  // type 0 before the first transition
  EXPECT_EQ(at(999999999), 1h);
  EXPECT_EQ(at(1000000000), 2h);
  EXPECT_EQ(at(1099999999), 2h);
  EXPECT_EQ(at(1100000000), 1h);
  EXPECT_EQ(at(4000000000), 1h);  // no footer in version 1: the last type holds
}

TEST(TimeZone_Files, FooterJulianAndZeroBasedRules) {
  temp_dir dir;
  // UTC-3 standard, UTC-2 DST from March 1 (J60, never Feb 29) 02:00 to day 300 (0-based,
  // counting Feb 29) 02:00 DST.
  dir.write("Test/Julian", tzif('2', {}, {}, {{-3 * 3600, false}}, "AAA3BBB,J60/2,300/2"));
  zoneinfo_dir_override over(dir.path());
  auto z = time_zone::locate("Test/Julian");
  ASSERT_TRUE(z.has_value()) << z.error_or_ok().message();
  for (int y : {2027, 2028}) {  // a common and a leap year
    const year yr(y);
    const auto start = utc(yr / March / 1, 5h);  // 02:00 at UTC-3
    EXPECT_EQ(z->offset_at(start - 1s), -3h) << y;
    EXPECT_EQ(z->offset_at(start), -2h) << y;
    const auto end = system_clock::time_point(sys_days(yr / January / 1) + days(300) + 4h);
    EXPECT_EQ(z->offset_at(end - 1s), -2h) << y;
    EXPECT_EQ(z->offset_at(end), -3h) << y;
  }
}

TEST(TimeZone_Files, FooterWithExplicitOffsetsAndNegativeTimes) {
  temp_dir dir;
  // Like America/Nuuk: <-02>2<-01>,M3.5.0/-1,M10.5.0/0 (the last Sunday of March at -1:00,
  // i.e. 23:00 on the Saturday before).
  dir.write("Test/Nuuk", tzif('3', {}, {}, {{-7200, false}}, "<-02>2<-01>,M3.5.0/-1,M10.5.0/0"));
  zoneinfo_dir_override over(dir.path());
  auto z = time_zone::locate("Test/Nuuk");
  ASSERT_TRUE(z.has_value()) << z.error_or_ok().message();
  // 2026: last Sunday of March is the 29th; -1:00 local std (UTC-2) = 28th 23:00 -2 = 29th 01:00
  // UTC.
  EXPECT_EQ(z->offset_at(utc(2026y / March / 29, 1h) - 1s), -2h);
  EXPECT_EQ(z->offset_at(utc(2026y / March / 29, 1h)), -1h);
  // Last Sunday of October (25th) 00:00 local DST (UTC-1) = 01:00 UTC.
  EXPECT_EQ(z->offset_at(utc(2026y / October / 25, 1h) - 1s), -1h);
  EXPECT_EQ(z->offset_at(utc(2026y / October / 25, 1h)), -2h);
}

TEST(TimeZone_Files, MalformedFilesAreRefused) {
  temp_dir dir;
  const std::string good = tzif('2', {1000000000}, {1}, {{0, false}, {3600, true}}, "AAA0");
  dir.write("Bad/Empty", "");
  dir.write("Bad/Magic", "TZxf" + good.substr(4));
  dir.write("Bad/Truncated", good.substr(0, good.size() / 2));
  dir.write("Bad/NoFooterNewline", good.substr(0, good.size() - 1));
  dir.write("Bad/Footer", tzif('2', {}, {}, {{0, false}}, "A1"));
  dir.write("Bad/FooterRule", tzif('2', {}, {}, {{0, false}}, "AAA0BBB,M13.1.0,M1.1.0"));
  dir.write("Bad/Index", tzif(0, {1000000000}, {5}, {{0, false}}));
  dir.write("Bad/Unsorted", tzif(0, {2000000000, 1000000000}, {0, 0}, {{0, false}}));
  dir.write("Bad/NoTypes", tzif(0, {}, {}, {}));
  dir.write("Good", good);
  zoneinfo_dir_override over(dir.path());
  ASSERT_TRUE(time_zone::locate("Good").has_value());
  for (const char* name :
       {"Bad/Empty", "Bad/Magic", "Bad/Truncated", "Bad/NoFooterNewline", "Bad/Footer",
        "Bad/FooterRule", "Bad/Index", "Bad/Unsorted", "Bad/NoTypes", "Bad"}) {
    auto z = time_zone::locate(name);
    ASSERT_FALSE(z.has_value()) << name;
    EXPECT_EQ(z.code(), errc::invalid_time_zone) << name;
    EXPECT_NE(z.error().detail().find(name), std::string_view::npos) << z.error().detail();
  }
}

// ---- names ----

TEST(TimeZone_Names, UnknownNamesFailWithTheNameInTheDetail) {
  for (const char* name : {"Mars/Olympus_Mons", "Europe/Pariss", "europe/paris", "Europe"}) {
    auto z = time_zone::locate(name);
    ASSERT_FALSE(z.has_value()) << name;
    EXPECT_EQ(z.code(), errc::invalid_time_zone);
    EXPECT_NE(z.error().detail().find(name), std::string_view::npos) << z.error().detail();
  }
}

TEST(TimeZone_Names, PathTricksAreRefused) {
  for (const char* name : {"", "/etc/passwd", "../../etc/passwd", "Europe/../../../etc/passwd",
                           "Europe/..", "..", "Europe/Paris\n", "Europe/Par is", "Europe\\Paris"}) {
    auto z = time_zone::locate(name);
    ASSERT_FALSE(z.has_value()) << name;
    EXPECT_EQ(z.code(), errc::invalid_time_zone) << name;
  }
  // A non-TZif regular file reached through a valid-looking name is malformed, not readable.
  auto z = time_zone::locate("zone1970.tab");
  EXPECT_FALSE(z.has_value());
}

TEST(TimeZone_Names, LoadedZonesAreCachedAndEqual) {
  const time_zone a = zone("Europe/Paris");
  const time_zone b = zone("Europe/Paris");
  EXPECT_EQ(a, b);  // the same cached data
  EXPECT_FALSE(a == zone("America/New_York"));
}

TEST(TimeZone_Names, ConcurrentLocatesShareOneCachedCopy) {
  // The cache is process-wide; loaders on several threads must agree (and TSan must be quiet).
  const char* names[] = {"Asia/Tokyo", "America/Chicago", "Europe/Berlin", "Africa/Nairobi"};
  std::vector<std::vector<time_zone>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto z = time_zone::locate(names[(t + i) % 4]);
        if (z) got[t].push_back(*z);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    ASSERT_EQ(got[t].size(), 50u);
    for (int i = 0; i < 50; ++i) {
      EXPECT_EQ(got[t][i], zone(names[(t + i) % 4]));
    }
  }
}

TEST(TimeZone_Dir, OverrideWithAMissingDirectoryFails) {
  zoneinfo_dir_override over("/nonexistent/akt/zoneinfo");
  auto z = time_zone::locate("Europe/Paris");
  ASSERT_FALSE(z.has_value());
  EXPECT_EQ(z.code(), errc::invalid_time_zone);
  EXPECT_NE(z.error().detail().find("Europe/Paris"), std::string_view::npos);
}

TEST(TimeZone_Dir, OverrideReadsFromTheGivenDirectory) {
  temp_dir dir;
  dir.write("Europe/Paris", tzif('2', {}, {}, {{5 * 3600, false}}, "FAKE-5"));
  {
    zoneinfo_dir_override over(dir.path());
    auto z = time_zone::locate("Europe/Paris");
    ASSERT_TRUE(z.has_value());
    EXPECT_EQ(z->offset_at(utc(2026y / July / 1)), 5h);
  }
  // Back to the system's copy.
  EXPECT_EQ(zone("Europe/Paris").offset_at(utc(2026y / July / 1)), 2h);
}

}  // namespace
