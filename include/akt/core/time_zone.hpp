#pragma once
// time_zone: an IANA time zone read from the system's TZif files (RFC 8536), for cron schedules
// and other wall-clock times. GCC 12's libstdc++ has no std::chrono::tzdb, hence this type.
//
// Contract
// - A time_zone is an immutable value: cheap to copy (one shared pointer), and every member may
//   be called from any thread at once. Loaded zones live in a process-wide cache for the life of
//   the process (a mutex guards it: loading is rare, lookups after locate() take no lock).
// - Data: version 1 files and the 64-bit block of version 2+ files; after the last transition
//   the POSIX TZ footer rule applies (std offset, dst offset, Mm.w.d, Jn and n dates, times from
//   -167 to 167 hours). Leap-second records are ignored (instants are POSIX time).
// - Files come from /usr/share/zoneinfo (Debian package tzdata), or from the directory named by
//   the environment variable AKT_ZONEINFO_DIR when it is set (tests). The cache is keyed by the
//   full path, so changing the variable takes effect for zones not yet loaded from that path.
// - Precision: offsets and transitions are whole seconds; to_local floors to the second.

#include <chrono>
#include <memory>
#include <string_view>
#include <utility>

#include "akt/core/result.hpp"

namespace akt {

namespace detail {
struct zone_data;
}

class time_zone {
 public:
  // UTC. A default-constructed zone is UTC too, so a time_zone can sit in a struct.
  time_zone();
  static time_zone utc();

  // Loads a zone by IANA name ("Europe/Paris", "UTC", "America/New_York"). Fails with
  // errc::invalid_time_zone, the name in the detail, when the name is empty, contains "..",
  // starts with '/', has characters outside [A-Za-z0-9_+-./], or names no readable, well-formed
  // TZif file.
  static result<time_zone> locate(std::string_view name);

  std::string_view name() const;

  // UTC offset (local minus UTC) in effect at a UTC instant.
  std::chrono::seconds offset_at(std::chrono::system_clock::time_point utc) const;

  // Local wall-clock time -> UTC instant. A local time in a gap (spring forward) maps to the
  // instant of the jump, which the wall clock shows as the first time after the gap; an
  // ambiguous local time (fall back) maps to the earlier instant. Assumes at most one offset
  // change within a day of the local time (true of every zone since 1900 but a handful of
  // historical oddities).
  std::chrono::system_clock::time_point to_utc(const std::chrono::local_seconds& local) const;

  // UTC instant -> local wall-clock time, floored to the second.
  std::chrono::local_seconds to_local(std::chrono::system_clock::time_point utc) const;

  // Same zone data (the same name loaded from the same file).
  friend bool operator==(const time_zone& a, const time_zone& b) noexcept {
    return a.data_ == b.data_;
  }

 private:
  explicit time_zone(std::shared_ptr<const detail::zone_data> data) : data_(std::move(data)) {}
  std::shared_ptr<const detail::zone_data> data_;
};

}  // namespace akt
