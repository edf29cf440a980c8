// The /api routes' JSON builder: commas, nesting and string escapes.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "http/json_writer.hpp"

namespace {

using akt::http::detail::json_writer;

TEST(Http_JsonWriter, NestsAndSeparatesValues) {
  json_writer w;
  w.begin_object()
      .field("a", std::uint64_t{1})
      .key("list")
      .begin_array()
      .value("x")
      .begin_object()
      .field("b", true)
      .end_object()
      .value(std::int64_t{-2})
      .end_array()
      .key("empty")
      .begin_array()
      .end_array()
      .field("d", 0.5)
      .end_object();
  EXPECT_EQ(w.take(), R"({"a":1,"list":["x",{"b":true},-2],"empty":[],"d":0.500})");
}

TEST(Http_JsonWriter, EscapesQuotesBackslashesAndControlCharacters) {
  json_writer w;
  w.value(std::string("q\"b\\n\nt\t\x01") + "\xc3\xa9");
  EXPECT_EQ(w.take(), "\"q\\\"b\\\\n\\nt\\t\\u0001\xc3\xa9\"");
}

}  // namespace
