// The node's sample ring behind /api/history: oldest first, bounded, and its JSON form.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "http/history_rows.hpp"
#include "http/node_history.hpp"

namespace {

using akt::http::detail::history_sample;
using akt::http::detail::node_history;
using namespace std::chrono_literals;

history_sample at(std::uint64_t i) { return {1000 + i, 10 * i, i / 2, i % 3, 7}; }

TEST(Http_NodeHistory, KeepsTheLastSamplesOldestFirst) {
  node_history h(3, 1s);
  EXPECT_TRUE(h.samples().empty());
  h.add(at(1));
  h.add(at(2));
  ASSERT_EQ(h.samples().size(), 2u);
  EXPECT_EQ(h.samples()[0].time_ms, 1001u);
  for (std::uint64_t i = 3; i <= 7; ++i) h.add(at(i));
  const std::vector<history_sample> s = h.samples();
  ASSERT_EQ(s.size(), 3u) << "bounded by its capacity";
  EXPECT_EQ(s[0].time_ms, 1005u);
  EXPECT_EQ(s[1].time_ms, 1006u);
  EXPECT_EQ(s[2].time_ms, 1007u);
  EXPECT_EQ(s[2].processed, 70u);
}

TEST(Http_NodeHistory, ItsJsonNamesTheFieldsAndListsTheSamples) {
  node_history h(4, 250ms);
  EXPECT_EQ(h.json(),
            "{\"interval_ms\":250,\"capacity\":4,\"fields\":[\"t\",\"processed\",\"dead\","
            "\"grains\",\"actors\"],\"samples\":[]}");
  h.add(at(1));
  h.add(at(4));
  const std::string j = h.json();
  EXPECT_NE(j.find("\"samples\":[[1001,10,0,1,7],[1004,40,2,1,7]]"), std::string::npos) << j;
  const auto rows = akt::http_test::history_rows(j);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1][0], 1004u);
  EXPECT_EQ(rows[1][1], 40u);
}

TEST(Http_NodeHistory, ACapacityOfZeroKeepsNothing) {
  node_history h(0, 1s);
  h.add(at(1));
  EXPECT_TRUE(h.samples().empty());
  EXPECT_NE(h.json().find("\"samples\":[]"), std::string::npos);
}

// One writer and readers at once, as the sampler and the serving threads: every copy a reader
// takes is a run of consecutive samples, oldest first (TSan checks the locking).
TEST(Http_NodeHistory, ReadersSeeConsecutiveSamplesWhileTheSamplerAdds) {
  node_history h(16, 1ms);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::uint64_t i = 1; i <= 20000; ++i) h.add(at(i));
    done.store(true);
  });
  int reads = 0;
  while (!done.load() || reads < 10) {
    const auto s = h.samples();
    ASSERT_LE(s.size(), 16u);
    for (std::size_t i = 1; i < s.size(); ++i) ASSERT_EQ(s[i].time_ms, s[i - 1].time_ms + 1);
    ++reads;
  }
  writer.join();
  EXPECT_EQ(h.samples().back().time_ms, 1000u + 20000u);
}

}  // namespace
