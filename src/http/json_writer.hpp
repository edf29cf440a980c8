#pragma once
// A minimal JSON text builder for the /api routes: values are appended in order, commas placed
// by looking at the last character written. Strings are escaped (quotes, backslashes, control
// characters); other bytes pass through (the runtime's names are UTF-8 or ASCII). Numbers that
// may exceed 2^53 (lease ids, incarnations) are the caller's to write as strings, since
// JavaScript reads every number as a double.
//
// Contract: one thread at a time (a request's); allocates as its string grows.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace akt::http::detail {

class json_writer {
 public:
  json_writer& begin_object() { return open('{'); }
  json_writer& end_object() { return close('}'); }
  json_writer& begin_array() { return open('['); }
  json_writer& end_array() { return close(']'); }

  json_writer& key(std::string_view k) {
    separate();
    quoted(k);
    out_ += ':';
    return *this;
  }
  json_writer& value(std::string_view s) {
    separate();
    quoted(s);
    return *this;
  }
  json_writer& value(const char* s) { return value(std::string_view(s)); }
  json_writer& value(const std::string& s) { return value(std::string_view(s)); }
  json_writer& value(bool b) {
    separate();
    out_ += b ? "true" : "false";
    return *this;
  }
  json_writer& value(std::uint64_t n) {
    separate();
    out_ += std::to_string(n);
    return *this;
  }
  json_writer& value(std::int64_t n) {
    separate();
    out_ += std::to_string(n);
    return *this;
  }
  json_writer& value(unsigned n) { return value(static_cast<std::uint64_t>(n)); }
  json_writer& value(double d) {
    separate();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", d);
    out_ += buf;
    return *this;
  }
  // A JSON text already built (a nested answer).
  json_writer& raw(std::string_view json) {
    separate();
    out_ += json;
    return *this;
  }
  template <class V>
  json_writer& field(std::string_view k, V&& v) {
    key(k);
    return value(std::forward<V>(v));
  }

  std::string take() { return std::move(out_); }

 private:
  json_writer& open(char c) {
    separate();
    out_ += c;
    return *this;
  }
  json_writer& close(char c) {
    out_ += c;
    return *this;
  }
  // A comma before a value or key unless it opens its container or follows its key.
  void separate() {
    if (out_.empty()) return;
    const char last = out_.back();
    if (last != '{' && last != '[' && last != ':') out_ += ',';
  }
  void quoted(std::string_view s) {
    out_ += '"';
    for (const char c : s) {
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            out_ += buf;
          } else {
            out_ += c;
          }
      }
    }
    out_ += '"';
  }

  std::string out_;
};

}  // namespace akt::http::detail
