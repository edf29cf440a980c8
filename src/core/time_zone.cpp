// time_zone: TZif (RFC 8536) reader, POSIX TZ footer rules, and the process-wide zone cache.

#include "akt/core/time_zone.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace akt {

namespace detail {

// One local time type of a TZif file.
struct zone_type {
  std::int32_t utoff = 0;  // seconds east of UTC
  bool is_dst = false;
};

// A date rule of a POSIX TZ string: Jn (1..365, Feb 29 never counted), n (0..365, Feb 29
// counted) or Mm.w.d (day d of week w of month m; w 5 is the last).
struct posix_date {
  enum class kind : std::uint8_t { julian_no_leap, zero_based, month_week_day };
  kind k = kind::month_week_day;
  int month = 0;
  int week = 0;
  int weekday = 0;
  int day = 0;
  std::int32_t time = 7200;  // seconds after local midnight; -167h..167h
};

// The footer: the rule for instants after the last transition.
struct posix_rule {
  std::int32_t std_utoff = 0;
  bool has_dst = false;
  std::int32_t dst_utoff = 0;
  posix_date start;  // when DST starts, in local standard time
  posix_date end;    // when DST ends, in local daylight time
};

struct zone_data {
  std::string name;
  std::vector<std::int64_t> times;   // transition instants, ascending, POSIX seconds
  std::vector<std::uint8_t> types;   // the type index in effect from times[i]
  std::vector<zone_type> kinds;      // at least one
  std::optional<posix_rule> footer;  // absent: the last type holds forever
};

}  // namespace detail

namespace {

using detail::posix_date;
using detail::posix_rule;
using detail::zone_data;
using detail::zone_type;

// The largest zone file we read; the biggest real ones are a few KiB.
constexpr std::size_t k_max_file_bytes = 1 << 20;
// Offsets beyond a day and two hours are not real time zones: such a file is malformed.
constexpr std::int32_t k_max_utoff = 26 * 3600;

std::int64_t floor_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}

// Day number (days since 1970-01-01) of the rule's date in year y.
std::int64_t rule_day(const posix_date& d, int y) {
  using namespace std::chrono;
  const year yr(y);
  switch (d.k) {
    case posix_date::kind::julian_no_leap: {
      const auto jan1 = sys_days(yr / January / 1).time_since_epoch().count();
      return jan1 + d.day - 1 + ((yr.is_leap() && d.day >= 60) ? 1 : 0);
    }
    case posix_date::kind::zero_based:
      return sys_days(yr / January / 1).time_since_epoch().count() + d.day;
    case posix_date::kind::month_week_day: {
      const month m(static_cast<unsigned>(d.month));
      const weekday wd(static_cast<unsigned>(d.weekday));
      if (d.week == 5) return sys_days(yr / m / wd[last]).time_since_epoch().count();
      return sys_days(yr / m / wd[static_cast<unsigned>(d.week)]).time_since_epoch().count();
    }
  }
  return 0;
}

std::int32_t footer_offset(const posix_rule& r, std::int64_t t) {
  using namespace std::chrono;
  if (!r.has_dst) return r.std_utoff;
  const auto local_day = floor<days>(sys_seconds(seconds(t + r.std_utoff)));
  const int y = static_cast<int>(year_month_day(local_day).year());
  const std::int64_t start = rule_day(r.start, y) * 86400 + r.start.time - r.std_utoff;
  const std::int64_t end = rule_day(r.end, y) * 86400 + r.end.time - r.dst_utoff;
  bool dst;
  if (start < end) {
    dst = start <= t && t < end;
  } else {  // southern hemisphere: DST spans the new year
    dst = !(end <= t && t < start);
  }
  return dst ? r.dst_utoff : r.std_utoff;
}

std::int32_t offset_seconds(const zone_data& z, std::int64_t t) {
  if (z.times.empty()) return z.footer ? footer_offset(*z.footer, t) : z.kinds[0].utoff;
  if (t < z.times.front()) return z.kinds[0].utoff;  // RFC 8536: type 0 before the first
  if (t >= z.times.back() && z.footer) return footer_offset(*z.footer, t);
  const auto it = std::upper_bound(z.times.begin(), z.times.end(), t);
  const auto i = static_cast<std::size_t>(it - z.times.begin()) - 1;
  return z.kinds[z.types[i]].utoff;
}

// ---- POSIX TZ string (the footer) ----

class posix_parser {
 public:
  explicit posix_parser(std::string_view s) : s_(s) {}

  std::optional<posix_rule> parse() {
    posix_rule r;
    if (!name()) return std::nullopt;
    auto off = hms(24);
    if (!off) return std::nullopt;
    r.std_utoff = -*off;  // POSIX offsets count west of UTC
    if (done()) return r;
    if (!name()) return std::nullopt;
    r.has_dst = true;
    r.dst_utoff = r.std_utoff + 3600;
    if (!done() && peek() != ',') {
      auto dst = hms(24);
      if (!dst) return std::nullopt;
      r.dst_utoff = -*dst;
    }
    if (done()) {
      // No rule: the POSIX default (US rules, as tzcode's posixrules file).
      r.start = {posix_date::kind::month_week_day, 3, 2, 0, 0, 7200};
      r.end = {posix_date::kind::month_week_day, 11, 1, 0, 0, 7200};
      return r;
    }
    if (!eat(',')) return std::nullopt;
    auto start = date();
    if (!start || !eat(',')) return std::nullopt;
    auto end = date();
    if (!end || !done()) return std::nullopt;
    r.start = *start;
    r.end = *end;
    return r;
  }

 private:
  bool done() const { return i_ >= s_.size(); }
  char peek() const { return done() ? '\0' : s_[i_]; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  static bool is_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  // A zone abbreviation: three or more letters, or <...> of letters, digits, '+' and '-'.
  bool name() {
    const std::size_t begin = i_;
    if (eat('<')) {
      while (!done() && peek() != '>') {
        const char c = peek();
        if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-') return false;
        ++i_;
      }
      if (!eat('>')) return false;
      return i_ - begin >= 5;  // '<', at least three characters, '>'
    }
    while (is_alpha(peek())) ++i_;
    return i_ - begin >= 3;
  }

  std::optional<int> number(int max) {
    if (!is_digit(peek())) return std::nullopt;
    int v = 0;
    while (is_digit(peek())) {
      v = v * 10 + (peek() - '0');
      if (v > max) return std::nullopt;
      ++i_;
    }
    return v;
  }

  // [+-]hh[:mm[:ss]] in seconds.
  std::optional<std::int32_t> hms(int max_hours) {
    int sign = 1;
    if (eat('-')) {
      sign = -1;
    } else {
      eat('+');
    }
    auto h = number(max_hours);
    if (!h) return std::nullopt;
    int m = 0;
    int s = 0;
    if (eat(':')) {
      auto mm = number(59);
      if (!mm) return std::nullopt;
      m = *mm;
      if (eat(':')) {
        auto ss = number(59);
        if (!ss) return std::nullopt;
        s = *ss;
      }
    }
    return sign * (*h * 3600 + m * 60 + s);
  }

  std::optional<posix_date> date() {
    posix_date d;
    if (eat('J')) {
      auto n = number(365);
      if (!n || *n < 1) return std::nullopt;
      d.k = posix_date::kind::julian_no_leap;
      d.day = *n;
    } else if (eat('M')) {
      auto m = number(12);
      if (!m || *m < 1 || !eat('.')) return std::nullopt;
      auto w = number(5);
      if (!w || *w < 1 || !eat('.')) return std::nullopt;
      auto wd = number(6);
      if (!wd) return std::nullopt;
      d.k = posix_date::kind::month_week_day;
      d.month = *m;
      d.week = *w;
      d.weekday = *wd;
    } else {
      auto n = number(365);
      if (!n) return std::nullopt;
      d.k = posix_date::kind::zero_based;
      d.day = *n;
    }
    if (eat('/')) {
      auto t = hms(167);  // RFC 8536 extension: -167..167 hours
      if (!t) return std::nullopt;
      d.time = *t;
    }
    return d;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

// ---- TZif ----

class reader {
 public:
  explicit reader(std::string_view b) : b_(b) {}
  bool has(std::size_t n) const { return n <= b_.size() - pos_; }
  std::size_t pos() const { return pos_; }
  void skip(std::size_t n) { pos_ += n; }
  std::uint8_t u8() { return static_cast<std::uint8_t>(b_[pos_++]); }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | u8();
    return v;
  }
  std::int64_t i64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | u8();
    return static_cast<std::int64_t>(v);
  }
  std::string_view rest() const { return b_.substr(pos_); }

 private:
  std::string_view b_;
  std::size_t pos_ = 0;
};

struct tzif_header {
  char version = 0;
  std::uint32_t isutcnt = 0, isstdcnt = 0, leapcnt = 0, timecnt = 0, typecnt = 0, charcnt = 0;

  // Bytes of the data block that follows, with `time_size`-byte transition times.
  std::size_t block_size(std::size_t time_size) const {
    return timecnt * time_size + timecnt + typecnt * 6u + charcnt + leapcnt * (time_size + 4) +
           isstdcnt + isutcnt;
  }
};

std::optional<tzif_header> read_header(reader& r) {
  if (!r.has(44)) return std::nullopt;
  tzif_header h;
  if (r.u8() != 'T' || r.u8() != 'Z' || r.u8() != 'i' || r.u8() != 'f') return std::nullopt;
  h.version = static_cast<char>(r.u8());
  r.skip(15);
  h.isutcnt = r.u32();
  h.isstdcnt = r.u32();
  h.leapcnt = r.u32();
  h.timecnt = r.u32();
  h.typecnt = r.u32();
  h.charcnt = r.u32();
  // Counts are bounded so that block_size cannot overflow; real files have a few hundred.
  constexpr std::uint32_t k_max_count = 1 << 20;
  if (h.typecnt == 0 || h.typecnt > 256 || h.charcnt == 0 || h.timecnt > k_max_count ||
      h.leapcnt > k_max_count || h.charcnt > k_max_count) {
    return std::nullopt;
  }
  if ((h.isutcnt != 0 && h.isutcnt != h.typecnt) || (h.isstdcnt != 0 && h.isstdcnt != h.typecnt)) {
    return std::nullopt;
  }
  return h;
}

// Reads one data block into z; `time_size` is 4 (version 1) or 8 (version 2+).
bool read_block(reader& r, const tzif_header& h, std::size_t time_size, zone_data& z) {
  if (!r.has(h.block_size(time_size))) return false;
  z.times.resize(h.timecnt);
  for (auto& t : z.times) {
    t = time_size == 8 ? r.i64() : static_cast<std::int64_t>(static_cast<std::int32_t>(r.u32()));
  }
  if (!std::is_sorted(z.times.begin(), z.times.end()) ||
      std::adjacent_find(z.times.begin(), z.times.end()) != z.times.end()) {
    return false;
  }
  z.types.resize(h.timecnt);
  for (auto& i : z.types) {
    i = r.u8();
    if (i >= h.typecnt) return false;
  }
  z.kinds.resize(h.typecnt);
  for (auto& k : z.kinds) {
    k.utoff = static_cast<std::int32_t>(r.u32());
    k.is_dst = r.u8() != 0;
    const std::uint8_t desig = r.u8();
    if (desig >= h.charcnt || k.utoff > k_max_utoff || k.utoff < -k_max_utoff) return false;
  }
  // Abbreviations, leap seconds (ignored: instants are POSIX time), std/wall and UT/local
  // indicators (only meaningful for the obsolete posixrules use).
  r.skip(h.charcnt + h.leapcnt * (time_size + 4) + h.isstdcnt + h.isutcnt);
  return true;
}

std::optional<zone_data> parse_tzif(std::string_view bytes) {
  reader r(bytes);
  auto h1 = read_header(r);
  if (!h1) return std::nullopt;
  zone_data z;
  if (h1->version == 0) {
    if (!read_block(r, *h1, 4, z)) return std::nullopt;
    return z;
  }
  if (h1->version < '2') return std::nullopt;
  // Version 2+: skip the 32-bit block, read the 64-bit one and the footer.
  if (!r.has(h1->block_size(4))) return std::nullopt;
  r.skip(h1->block_size(4));
  auto h2 = read_header(r);
  if (!h2 || !read_block(r, *h2, 8, z)) return std::nullopt;
  const std::string_view rest = r.rest();
  if (rest.size() < 2 || rest[0] != '\n') return std::nullopt;
  const auto nl = rest.find('\n', 1);
  if (nl == std::string_view::npos) return std::nullopt;
  const std::string_view tz = rest.substr(1, nl - 1);
  if (!tz.empty()) {
    auto rule = posix_parser(tz).parse();
    if (!rule) return std::nullopt;
    z.footer = *rule;
  }
  return z;
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name.front() == '/') return false;
  if (name.find("..") != std::string_view::npos) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '+' || c == '-' || c == '.' || c == '/';
  });
}

// The whole regular file at path, or nullopt (missing, not a regular file, too large).
std::optional<std::string> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<std::size_t>(st.st_size) <= k_max_file_bytes) {
    std::string buf(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t got = 0;
    while (got < buf.size()) {
      const ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got == buf.size()) out = std::move(buf);
  }
  ::close(fd);
  return out;
}

std::string zoneinfo_dir() {
  const char* env = std::getenv("AKT_ZONEINFO_DIR");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("/usr/share/zoneinfo");
}

const std::shared_ptr<const zone_data>& utc_data() {
  static const std::shared_ptr<const zone_data> utc = [] {
    auto z = std::make_shared<zone_data>();
    z->name = "UTC";
    z->kinds.push_back({0, false});
    return z;
  }();
  return utc;
}

}  // namespace

time_zone::time_zone() : data_(utc_data()) {}

time_zone time_zone::utc() { return time_zone(); }

result<time_zone> time_zone::locate(std::string_view name) {
  if (!valid_name(name)) {
    return error(errc::invalid_time_zone, "invalid time zone name '" + std::string(name) + "'");
  }
  // UTC needs no file: it exists even where tzdata is not installed.
  if (name == "UTC" || name == "Etc/UTC") return utc();

  const std::string path = zoneinfo_dir() + "/" + std::string(name);
  // Guards the cache only. Zones are loaded rarely (a schedule's creation), so one lock is fine.
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const zone_data>> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(path); it != cache.end()) return time_zone(it->second);
  }
  const auto bytes = read_file(path);
  if (!bytes) {
    return error(errc::invalid_time_zone, "unknown time zone '" + std::string(name) + "'");
  }
  auto parsed = parse_tzif(*bytes);
  if (!parsed) {
    return error(errc::invalid_time_zone,
                 "malformed time zone file for '" + std::string(name) + "'");
  }
  parsed->name = std::string(name);
  auto data = std::make_shared<const zone_data>(std::move(*parsed));
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.emplace(path, std::move(data));
  return time_zone(it->second);  // a racing loader's copy wins; both are equal
}

std::string_view time_zone::name() const { return data_->name; }

std::chrono::seconds time_zone::offset_at(std::chrono::system_clock::time_point utc) const {
  return std::chrono::seconds(offset_seconds(*data_, floor_seconds(utc)));
}

std::chrono::local_seconds time_zone::to_local(std::chrono::system_clock::time_point utc) const {
  const std::int64_t t = floor_seconds(utc);
  return std::chrono::local_seconds(std::chrono::seconds(t + offset_seconds(*data_, t)));
}

std::chrono::system_clock::time_point time_zone::to_utc(
    const std::chrono::local_seconds& local) const {
  const zone_data& z = *data_;
  const std::int64_t l = local.time_since_epoch().count();
  // The offsets a day before and a day after bracket the instant we look for (offsets are
  // within +-26 hours), so the candidates are l minus either of them.
  const std::int32_t before = offset_seconds(z, l - 86400);
  const std::int32_t after = offset_seconds(z, l + 86400);
  const std::int64_t u1 = l - before;
  const std::int64_t u2 = l - after;
  const bool ok1 = offset_seconds(z, u1) == before;
  const bool ok2 = offset_seconds(z, u2) == after;
  std::int64_t u;
  if (ok1 && ok2) {
    u = std::min(u1, u2);  // ambiguous (or no change): the earlier instant
  } else if (ok1) {
    u = u1;
  } else if (ok2) {
    u = u2;
  } else {
    // A gap: the offset rises between lo and hi; the answer is the instant it changes.
    std::int64_t lo = std::min(u1, u2);
    std::int64_t hi = std::max(u1, u2);
    const std::int32_t lo_off = offset_seconds(z, lo);
    if (offset_seconds(z, hi) == lo_off) {
      u = u1;  // not a single clean change: fall back to the earlier offset's reading
    } else {
      while (hi - lo > 1) {  // invariant: offset(lo) == lo_off != offset(hi)
        const std::int64_t mid = lo + (hi - lo) / 2;
        if (offset_seconds(z, mid) == lo_off) {
          lo = mid;
        } else {
          hi = mid;
        }
      }
      u = hi;
    }
  }
  return std::chrono::system_clock::time_point(std::chrono::seconds(u));
}

}  // namespace akt
