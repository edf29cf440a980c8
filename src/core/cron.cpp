// cron_schedule: parser with positioned errors, and next() by field arithmetic on the wall clock.

#include "akt/core/cron.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <vector>

namespace akt {

namespace {

using namespace std::chrono;

struct field_spec {
  const char* label;  // for messages: "minute value 61 out of range 0-59"
  int min;
  int max;
  const std::array<const char*, 12>* names;  // names[i] is value min + i; nullptr: no names
};

constexpr std::array<const char*, 12> k_month_names = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                       "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
// Seven names; the rest of the array is unused.
constexpr std::array<const char*, 12> k_weekday_names = {"SUN", "MON", "TUE", "WED", "THU", "FRI",
                                                         "SAT", "",    "",    "",    "",    ""};

constexpr field_spec k_second{"second", 0, 59, nullptr};
constexpr field_spec k_minute{"minute", 0, 59, nullptr};
constexpr field_spec k_hour{"hour", 0, 23, nullptr};
constexpr field_spec k_dom{"day-of-month", 1, 31, nullptr};
constexpr field_spec k_month{"month", 1, 12, &k_month_names};
constexpr field_spec k_dow{"day-of-week", 0, 7, &k_weekday_names};

struct field_text {
  std::string_view text;
  std::size_t pos;  // 0-based offset of text in the expression
};

struct parsed_field {
  std::uint64_t bits = 0;
  bool restricted = false;
};

error cron_error(std::size_t pos0, const std::string& what) {
  return error(errc::invalid_cron, "position " + std::to_string(pos0 + 1) + ": " + what);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
char upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }

std::string range_text(const field_spec& f) {
  return std::to_string(f.min) + "-" + std::to_string(f.max);
}

// Parses one field; `pos` is the field's 0-based offset in the whole expression.
class field_parser {
 public:
  field_parser(const field_spec& f, field_text t) : f_(f), s_(t.text), base_(t.pos) {}

  result<parsed_field> parse() {
    parsed_field out;
    out.restricted = !(s_ == "*" || s_ == "?");
    std::size_t i = 0;
    for (;;) {
      const std::size_t end = std::min(s_.find(',', i), s_.size());
      if (end == i) return cron_error(base_ + i, "empty list element in " + label() + " field");
      auto bits = element(i, end);
      if (!bits) return bits.error();
      out.bits |= *bits;
      if (end == s_.size()) break;
      i = end + 1;
      if (i == s_.size())
        return cron_error(base_ + i, "empty list element in " + label() + " field");
    }
    return out;
  }

 private:
  std::string label() const { return f_.label; }

  // A number or a name at s_[i..end); advances i.
  result<int> value(std::size_t& i, std::size_t end) {
    const std::size_t start = i;
    if (i < end && is_digit(s_[i])) {
      long v = 0;
      while (i < end && is_digit(s_[i])) {
        if (v <= 1000000) v = v * 10 + (s_[i] - '0');  // saturate: any big value is out of range
        ++i;
      }
      if (v < f_.min || v > f_.max) {
        return cron_error(base_ + start, label() + " value " +
                                             std::string(s_.substr(start, i - start)) +
                                             " out of range " + range_text(f_));
      }
      return static_cast<int>(v);
    }
    if (i < end && is_alpha(s_[i])) {
      while (i < end && is_alpha(s_[i])) ++i;
      const std::string_view word = s_.substr(start, i - start);
      if (f_.names != nullptr && word.size() == 3) {
        for (std::size_t k = 0; k < f_.names->size(); ++k) {
          const std::string_view name = (*f_.names)[k];
          if (name.size() == 3 && upper(word[0]) == name[0] && upper(word[1]) == name[1] &&
              upper(word[2]) == name[2]) {
            return f_.min + static_cast<int>(k);
          }
        }
      }
      if (f_.names == nullptr) {
        return cron_error(base_ + start,
                          label() + " field takes numbers, not '" + std::string(word) + "'");
      }
      return cron_error(base_ + start, "unknown " + label() + " name '" + std::string(word) + "'");
    }
    if (i < end) return unexpected(i);
    return cron_error(base_ + i, "missing " + label() + " value");
  }

  error unexpected(std::size_t i) const {
    return cron_error(
        base_ + i, "unexpected character '" + std::string(1, s_[i]) + "' in " + label() + " field");
  }

  result<std::uint64_t> element(std::size_t i, std::size_t end) {
    int lo = f_.min;
    int hi = f_.max;
    bool single = false;
    if (s_[i] == '*' || s_[i] == '?') {
      ++i;
    } else {
      const std::size_t start = i;
      auto a = value(i, end);
      if (!a) return a.error();
      lo = hi = *a;
      single = true;
      if (i < end && s_[i] == '-') {
        ++i;
        auto b = value(i, end);
        if (!b) return b.error();
        hi = *b;
        single = false;
        if (hi < lo) {
          return cron_error(base_ + start, label() + " range " + std::to_string(lo) + "-" +
                                               std::to_string(hi) + " is reversed");
        }
      }
    }
    int step = 1;
    if (i < end && s_[i] == '/') {
      ++i;
      const std::size_t start = i;
      if (i >= end || !is_digit(s_[i])) {
        return i < end ? unexpected(i) : cron_error(base_ + i, "missing step after '/'");
      }
      long v = 0;
      while (i < end && is_digit(s_[i])) {
        if (v <= 1000000) v = v * 10 + (s_[i] - '0');
        ++i;
      }
      const int max_step = f_.max - f_.min;
      if (v < 1 || v > max_step) {
        return cron_error(base_ + start, label() + " step " +
                                             std::string(s_.substr(start, i - start)) +
                                             " out of range 1-" + std::to_string(max_step));
      }
      step = static_cast<int>(v);
      if (single) hi = f_.max;  // n/step: from n to the end of the field
    }
    if (i < end) return unexpected(i);
    std::uint64_t bits = 0;
    for (int v = lo; v <= hi; v += step) bits |= std::uint64_t{1} << v;
    return bits;
  }

  const field_spec& f_;
  std::string_view s_;
  std::size_t base_;
};

bool is_space(char c) { return c == ' ' || c == '\t'; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (x != b[i]) return false;
  }
  return true;
}

// The lowest set bit of mask at or above `from`, or -1.
int next_bit(std::uint64_t mask, int from) {
  if (from >= 64) return -1;
  const std::uint64_t m = mask >> from;
  return m == 0 ? -1 : from + std::countr_zero(m);
}

}  // namespace

result<cron_schedule> cron_schedule::parse(std::string_view expression) {
  const std::string_view body = expression;
  std::size_t first = 0;
  while (first < body.size() && is_space(body[first])) ++first;
  if (first == body.size()) return cron_error(0, "empty expression");

  if (body[first] == '@') {  // a macro expands to a 6-field expression that cannot fail
    std::size_t last = body.size();
    while (last > first && is_space(body[last - 1])) --last;
    const std::string_view macro = body.substr(first, last - first);
    static constexpr std::pair<const char*, const char*> k_macros[] = {
        {"@yearly", "0 0 0 1 1 *"}, {"@annually", "0 0 0 1 1 *"}, {"@monthly", "0 0 0 1 * *"},
        {"@weekly", "0 0 0 * * 0"}, {"@daily", "0 0 0 * * *"},    {"@midnight", "0 0 0 * * *"},
        {"@hourly", "0 0 * * * *"},
    };
    for (const auto& [name, expansion] : k_macros) {
      if (iequals(macro, name)) {
        auto r = parse(expansion);
        r->expression_ = std::string(expression);
        return r;
      }
    }
    return cron_error(first, "unknown macro '" + std::string(macro) + "'");
  }

  std::vector<field_text> fields;
  for (std::size_t i = first; i < body.size();) {
    if (is_space(body[i])) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    while (i < body.size() && !is_space(body[i])) ++i;
    fields.push_back({body.substr(start, i - start), start});
  }
  if (fields.size() < 5) {
    return cron_error(body.size(),
                      "expected 5 or 6 fields, found " + std::to_string(fields.size()));
  }
  if (fields.size() > 6) {
    return cron_error(fields[6].pos,
                      "expected 5 or 6 fields, found " + std::to_string(fields.size()));
  }

  cron_schedule s;
  s.expression_ = std::string(expression);
  std::size_t k = 0;
  if (fields.size() == 6) {
    auto sec = field_parser(k_second, fields[k++]).parse();
    if (!sec) return sec.error();
    s.seconds_ = sec->bits;
  } else {
    s.seconds_ = 1;  // second 0
  }
  const field_spec* specs[] = {&k_minute, &k_hour, &k_dom, &k_month, &k_dow};
  parsed_field out[5];
  for (int f = 0; f < 5; ++f) {
    auto r = field_parser(*specs[f], fields[k++]).parse();
    if (!r) return r.error();
    out[f] = *r;
  }
  s.minutes_ = out[0].bits;
  s.hours_ = static_cast<std::uint32_t>(out[1].bits);
  s.days_ = static_cast<std::uint32_t>(out[2].bits);
  s.months_ = static_cast<std::uint16_t>(out[3].bits);
  std::uint64_t dow = out[4].bits;
  if (dow & (std::uint64_t{1} << 7)) dow |= 1;  // 7 is Sunday too
  s.weekdays_ = static_cast<std::uint8_t>(dow & 0x7f);
  s.dom_restricted_ = out[2].restricted;
  s.dow_restricted_ = out[4].restricted;
  return s;
}

bool cron_schedule::day_matches(year_month_day ymd) const {
  const bool dom = (days_ >> static_cast<unsigned>(ymd.day())) & 1u;
  const bool dow = (weekdays_ >> weekday(local_days(ymd)).c_encoding()) & 1u;
  if (dom_restricted_ && dow_restricted_) return dom || dow;
  return dom && dow;  // an unrestricted field has every bit set
}

std::optional<local_seconds> cron_schedule::next_local(local_seconds from, int limit_year) const {
  local_seconds t = from;
  // Every pass moves t forward to the next candidate of the first field that fails, so the
  // loop runs a few times per month searched at most.
  for (;;) {
    const local_days day = floor<days>(t);
    const year_month_day ymd(day);
    const int y = static_cast<int>(ymd.year());
    if (y > limit_year) return std::nullopt;
    const int mon = static_cast<int>(static_cast<unsigned>(ymd.month()));
    if (!((months_ >> mon) & 1u)) {
      const int next = next_bit(months_, mon + 1);
      t = next > 0 ? local_seconds(local_days(ymd.year() / month(static_cast<unsigned>(next)) / 1))
                   : local_seconds(local_days((ymd.year() + years(1)) / January / 1));
      continue;
    }
    if (!day_matches(ymd)) {
      t = local_seconds(day + days(1));
      continue;
    }
    const hh_mm_ss<seconds> tod(t - local_seconds(day));
    const int h = static_cast<int>(tod.hours().count());
    const int m = static_cast<int>(tod.minutes().count());
    const int s = static_cast<int>(tod.seconds().count());
    if (!((hours_ >> h) & 1u)) {
      const int next = next_bit(hours_, h + 1);
      t = next >= 0 ? local_seconds(day) + hours(next) : local_seconds(day + days(1));
      continue;
    }
    if (!((minutes_ >> m) & 1u)) {
      const int next = next_bit(minutes_, m + 1);
      t = next >= 0 ? local_seconds(day) + hours(h) + minutes(next)
                    : local_seconds(day) + hours(h + 1);
      continue;
    }
    if (!((seconds_ >> s) & 1u)) {
      const int next = next_bit(seconds_, s + 1);
      t = next >= 0 ? local_seconds(day) + hours(h) + minutes(m) + seconds(next)
                    : local_seconds(day) + hours(h) + minutes(m + 1);
      continue;
    }
    return t;
  }
}

std::optional<system_clock::time_point> cron_schedule::next(system_clock::time_point after,
                                                            const time_zone& zone) const {
  local_seconds from = zone.to_local(after) + seconds(1);
  // system_clock::time_point counts nanoseconds in 64 bits: it ends in April 2262.
  const int limit_year =
      std::min(static_cast<int>(year_month_day(floor<days>(from)).year()) + k_search_years, 2261);
  for (;;) {
    const auto wall = next_local(from, limit_year);
    if (!wall) return std::nullopt;
    const system_clock::time_point u = zone.to_utc(*wall);
    if (u > after) return u;
    // The wall time maps to an instant already past: the second reading of an overlap, or a
    // gap time that collapsed onto a jump already fired. Wall-to-UTC is monotonic, so the next
    // matching wall time is the next candidate; this steps at most once per matching wall time
    // inside one DST shift (60 for a per-minute expression).
    from = *wall + seconds(1);
  }
}

}  // namespace akt
