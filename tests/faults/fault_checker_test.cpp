// The fault harness's checker (fault_checker.hpp) on hand-made evidence: clean evidence passes,
// and each kind of bad evidence (a late handler of a replaced claim, one claim in two processes,
// a stale write accepted, overlapping activations, an acknowledged message lost or applied
// twice, a refused one applied, one applied that was never sent) is caught, so the kill -9 test's
// zero counts mean something. Also the fenced store itself, the failover measure and the
// store's fault lines (etcd.log).

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "faults/fault_checker.hpp"
#include "faults/fault_evidence.hpp"

namespace {

namespace fs = std::filesystem;
using akt::faults::check_evidence;
using akt::faults::check_report;

constexpr std::int64_t k_s = 1'000'000'000;  // one second in ns

// A fresh evidence directory, removed at the end of the test.
class evidence_dir {
 public:
  evidence_dir() {
    std::string templ = (fs::temp_directory_path() / "akt-checker-XXXXXX").string();
    path_ = ::mkdtemp(templ.data());
    fs::create_directories(path_ / "handlers");
    fs::create_directories(path_ / "store");
  }
  ~evidence_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  // Appends text to the file at `rel` (lines end with '\n' unless the text leaves it out).
  void write(const std::string& rel, const std::string& text) {
    std::ofstream out(path_ / rel, std::ios::app | std::ios::binary);
    out << text;
  }
  check_report check() const { return check_evidence(path_); }

 private:
  fs::path path_;
};

std::string h(const std::string& node, int pid, std::int64_t token, std::int64_t ns,
              const std::string& event, const std::string& grain, std::uint64_t id = 0) {
  return "H " + node + " " + std::to_string(pid) + " 7 " + std::to_string(token) + " " +
         std::to_string(ns) + " " + event + " " + grain + " " + std::to_string(id) + "\n";
}
// A handler start with its membership epoch.
std::string he(const std::string& node, int pid, long long epoch, std::int64_t token,
               std::int64_t ns, const std::string& event, const std::string& grain,
               std::uint64_t id = 0) {
  return "H " + node + " " + std::to_string(pid) + " " + std::to_string(epoch) + " " +
         std::to_string(token) + " " + std::to_string(ns) + " " + event + " " + grain + " " +
         std::to_string(id) + "\n";
}
std::string st(char tag, std::int64_t token, std::uint64_t id, const std::string& node, int pid,
               std::int64_t ns) {
  return std::string(1, tag) + " " + std::to_string(token) + " " + std::to_string(id) + " " + node +
         " " + std::to_string(pid) + " " + std::to_string(ns) + "\n";
}
std::string c(const std::string& grain, std::uint64_t id, std::int64_t start, std::int64_t end,
              const std::string& outcome, const std::string& code = "ok") {
  return "C " + grain + " " + std::to_string(id) + " " + std::to_string(start) + " " +
         std::to_string(end) + " " + outcome + " " + code + "\n";
}

// Grain g0: token 10 on n0 (pid 100) handles messages 1 and 2, n0 is killed at 3 s, token 20 on
// n1 (pid 101) takes over at 5 s and handles 4; message 3 was lost with n0 (possibly
// delivered, not applied).
void write_clean_run(evidence_dir& d) {
  d.write("handlers/n0-100.log", h("n0", 100, 10, 1 * k_s, "activate", "g0") +
                                     h("n0", 100, 10, 1 * k_s + 1, "receive", "g0", 1) +
                                     h("n0", 100, 10, 2 * k_s, "receive", "g0", 2));
  d.write("handlers/n1-101.log", h("n1", 101, 20, 5 * k_s, "activate", "g0") +
                                     h("n1", 101, 20, 5 * k_s + 1, "receive", "g0", 4) +
                                     h("n1", 101, 20, 6 * k_s, "deactivate", "g0"));
  d.write("store/g0", st('O', 10, 0, "n0", 100, 1 * k_s) + st('A', 10, 1, "n0", 100, 1 * k_s + 2) +
                          st('A', 10, 2, "n0", 100, 2 * k_s + 2) +
                          st('O', 20, 0, "n1", 101, 5 * k_s) +
                          st('A', 20, 4, "n1", 101, 5 * k_s + 2));
  d.write("calls.log", c("g0", 1, 1 * k_s, 1 * k_s + 5, "ok") +
                           c("g0", 2, 2 * k_s, 2 * k_s + 5, "ok") +
                           c("g0", 3, 3 * k_s - 1, 3 * k_s + 9, "possibly", "connection_lost") +
                           c("g0", 5, 4 * k_s, 4 * k_s + 1, "refused", "unreachable") +
                           c("g0", 4, 5 * k_s - 1, 5 * k_s + 500'000'000, "ok"));
  d.write("faults.log", "S n0 100 0\nS n1 101 0\nK n0 100 " + std::to_string(3 * k_s) + "\n");
}

TEST(FaultChecker, CleanEvidencePassesWithItsCountsAndTheFailover) {
  evidence_dir d;
  write_clean_run(d);
  const check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_TRUE(r.overlaps_c.empty()) << r.summary();
  EXPECT_EQ(r.handler_starts, 6u);
  EXPECT_EQ(r.activations, 2u);
  EXPECT_EQ(r.grains, 1u);
  EXPECT_EQ(r.calls, 5u);
  EXPECT_EQ(r.ok, 3u);
  EXPECT_EQ(r.possibly, 1u);
  EXPECT_EQ(r.refused, 1u);
  EXPECT_EQ(r.outcomes.at("refused unreachable"), 1u);
  EXPECT_EQ(r.outcomes.at("possibly connection_lost"), 1u);
  EXPECT_EQ(r.applied, 3u);
  EXPECT_EQ(r.kills, 1u);
  // The kill at 3 s hit g0's activation; the first ok call started after it ended at 5.5 s.
  ASSERT_EQ(r.failover_ms.size(), 1u);
  EXPECT_DOUBLE_EQ(r.failover_ms[0], 2500.0);
  ASSERT_EQ(r.failover_ms_by_kill.size(), 1u);
  EXPECT_EQ(r.failover_ms_by_kill.begin()->first, 3 * k_s);
  EXPECT_EQ(r.failover_ms_by_kill.begin()->second, std::vector<double>{2500.0});
}

TEST(FaultChecker, AHandlerOfAReplacedClaimIsAViolationOfAAndAnOverlap) {
  evidence_dir d;
  write_clean_run(d);
  // n0's activation (token 10) starts one more handler at 5.2 s, after token 20 started at 5 s.
  d.write("handlers/n0-100.log", h("n0", 100, 10, 5 * k_s + 200'000'000, "receive", "g0", 9));
  d.write("calls.log", c("g0", 9, 5 * k_s, 5 * k_s + 300'000'000, "possibly", "request_timeout"));
  const check_report r = d.check();
  ASSERT_EQ(r.violations_a.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_a[0].find("g0 token 10 on n0"), std::string::npos) << r.violations_a[0];
  EXPECT_EQ(r.overlaps_c.size(), 1u) << r.summary();
  EXPECT_FALSE(r.clean());
}

// A pause: n2 (pid 102, epoch 7) runs g1 under token 30 from 1 s, is stopped at 3 s and
// continued at 7 s; n1 took g1 over at 5 s (token 40). After SIGCONT n2 rejoined under epoch 9
// and activated g2 (token 50).
void write_paused_run(evidence_dir& d) {
  write_clean_run(d);
  d.write("handlers/n2-102.log", he("n2", 102, 7, 30, 1 * k_s, "activate", "g1") +
                                     he("n2", 102, 7, 30, 2 * k_s, "receive", "g1", 1) +
                                     he("n2", 102, 9, 50, 8 * k_s, "activate", "g2"));
  d.write("handlers/n1-101.log", he("n1", 101, 8, 40, 5 * k_s, "activate", "g1") +
                                     he("n1", 101, 8, 40, 5 * k_s + 1, "receive", "g1", 2));
  d.write("store/g1", st('O', 30, 0, "n2", 102, 1 * k_s) + st('A', 30, 1, "n2", 102, 2 * k_s) +
                          st('O', 40, 0, "n1", 101, 5 * k_s) +
                          st('A', 40, 2, "n1", 101, 5 * k_s + 2));
  d.write("store/g2", st('O', 50, 0, "n2", 102, 8 * k_s));
  d.write("calls.log",
          c("g1", 1, 2 * k_s - 1, 2 * k_s + 5, "ok") + c("g1", 2, 3 * k_s + 1, 5 * k_s + 5, "ok"));
  d.write("faults.log", "S n2 102 0\nP n2 102 " + std::to_string(3 * k_s) + "\nR n2 102 " +
                            std::to_string(7 * k_s) + "\n");
}

TEST(FaultChecker, APausedProcessThatRejoinedUnderANewEpochChecksClean) {
  evidence_dir d;
  write_paused_run(d);
  const check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.pauses, 1u);
  EXPECT_EQ(r.after_resume_starts, 1u);
  EXPECT_EQ(r.after_resume_reclaimed, 0u);  // g2 was never elsewhere
  // The pause at 3 s hit g1 on n2; the first ok call started after it ended at 5 s.
  ASSERT_EQ(r.pause_failover_ms.size(), 1u);
  EXPECT_NEAR(r.pause_failover_ms[0], 2000.0, 0.01);
}

TEST(FaultChecker, AHandlerOnAnOldClaimAfterSigcontIsAViolationOfA) {
  evidence_dir d;
  write_paused_run(d);
  // After SIGCONT, n2 starts a handler of its old claim of g1 (token 30), still under epoch 7.
  d.write("handlers/n2-102.log", he("n2", 102, 7, 30, 7 * k_s + 1, "receive", "g1", 3));
  d.write("calls.log", c("g1", 3, 6 * k_s, 7 * k_s + 9, "possibly", "request_timeout"));
  const check_report r = d.check();
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.after_resume_starts, 2u);
  EXPECT_EQ(r.after_resume_reclaimed, 1u);
  auto has = [&](const std::string& text) {
    for (const auto& v : r.violations_a)
      if (v.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("activated before the pause, after SIGCONT")) << r.summary();
  EXPECT_TRUE(has("not a new epoch after SIGCONT")) << r.summary();
  EXPECT_TRUE(has("after g1 token 40 on n1")) << r.summary();  // and the plain (a)
  EXPECT_EQ(r.overlaps_c.size(), 1u) << r.summary();
  EXPECT_EQ(r.overlaps_c_paused, 1u) << r.summary();
}

TEST(FaultChecker, ANewClaimUnderTheOldEpochAfterSigcontIsAViolationOfA) {
  evidence_dir d;
  write_paused_run(d);
  d.write("handlers/n2-102.log", he("n2", 102, 7, 60, 8 * k_s + 1, "activate", "g3"));
  d.write("store/g3", st('O', 60, 0, "n2", 102, 8 * k_s + 1));
  const check_report r = d.check();
  ASSERT_EQ(r.violations_a.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_a[0].find("g3 token 60 epoch 7"), std::string::npos) << r.violations_a[0];
  EXPECT_NE(r.violations_a[0].find("not a new epoch"), std::string::npos) << r.violations_a[0];
}

TEST(FaultChecker, OneClaimActivatedByTwoProcessesIsAViolationOfA) {
  evidence_dir d;
  write_clean_run(d);
  d.write("handlers/n2-102.log", h("n2", 102, 20, 9 * k_s, "activate", "g0"));
  const check_report r = d.check();
  ASSERT_FALSE(r.violations_a.empty()) << r.summary();
  EXPECT_NE(r.violations_a[0].find("two processes"), std::string::npos) << r.violations_a[0];
}

TEST(FaultChecker, AStaleWriteTheStoreAcceptedIsAViolationOfB) {
  evidence_dir d;
  write_clean_run(d);
  d.write("store/g0", st('A', 10, 6, "n0", 100, 7 * k_s));
  d.write("calls.log", c("g0", 6, 7 * k_s, 7 * k_s + 1, "possibly", "connection_lost"));
  const check_report r = d.check();
  ASSERT_EQ(r.violations_b.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_b[0].find("stale token 10"), std::string::npos) << r.violations_b[0];
  EXPECT_TRUE(r.violations_d.empty()) << r.summary();
}

TEST(FaultChecker, ARefusalOfACurrentTokenIsAViolationOfBAndAStaleOneIsCounted) {
  evidence_dir d;
  write_clean_run(d);
  d.write("store/g0", st('X', 15, 7, "n0", 100, 7 * k_s) + st('X', 20, 8, "n1", 101, 7 * k_s));
  d.write("calls.log", c("g0", 7, 7 * k_s, 7 * k_s + 1, "store_refused", "invalid_argument") +
                           c("g0", 8, 7 * k_s, 7 * k_s + 1, "store_refused", "invalid_argument"));
  const check_report r = d.check();
  EXPECT_EQ(r.stale_refused, 2u);
  ASSERT_EQ(r.violations_b.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_b[0].find("refused token 20"), std::string::npos) << r.violations_b[0];
}

TEST(FaultChecker, AnAcknowledgedMessageLostOrAppliedTwiceIsAViolationOfD) {
  evidence_dir lost;
  write_clean_run(lost);
  lost.write("calls.log", c("g0", 7, 7 * k_s, 7 * k_s + 1, "ok"));  // never in the store
  check_report r = lost.check();
  ASSERT_EQ(r.violations_d.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_d[0].find("applied 0 times"), std::string::npos) << r.violations_d[0];

  evidence_dir twice;
  write_clean_run(twice);
  twice.write("store/g0", st('A', 20, 4, "n1", 101, 6 * k_s));  // message 4 again
  r = twice.check();
  ASSERT_EQ(r.violations_d.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_d[0].find("applied 2 times"), std::string::npos) << r.violations_d[0];
}

TEST(FaultChecker, PossiblyDeliveredIsAtMostOnceAndRefusedIsNever) {
  evidence_dir once;
  write_clean_run(once);
  once.write("store/g0", st('A', 20, 3, "n1", 101, 6 * k_s));  // the lost message 3, once
  check_report r = once.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.possibly_applied, 1u);

  evidence_dir twice;
  write_clean_run(twice);
  twice.write("store/g0", st('A', 20, 3, "n1", 101, 6 * k_s) + st('A', 20, 3, "n1", 101, 7 * k_s));
  r = twice.check();
  EXPECT_EQ(r.violations_d.size(), 1u) << r.summary();

  evidence_dir refused;
  write_clean_run(refused);
  refused.write("store/g0", st('A', 20, 5, "n1", 101, 6 * k_s));  // message 5 was "unreachable"
  r = refused.check();
  ASSERT_EQ(r.violations_d.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_d[0].find("refused but applied"), std::string::npos) << r.violations_d[0];
}

TEST(FaultChecker, AMessageAppliedThatWasNeverSentIsAViolationOfD) {
  evidence_dir d;
  write_clean_run(d);
  d.write("store/g0", st('A', 20, 99, "n1", 101, 6 * k_s));
  const check_report r = d.check();
  ASSERT_EQ(r.violations_d.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_d[0].find("never sent"), std::string::npos) << r.violations_d[0];
}

TEST(FaultChecker, ATornLastLineIsSkippedAndCountedAndAMalformedOneFails) {
  evidence_dir d;
  write_clean_run(d);
  d.write("handlers/n1-101.log", "H n1 101 7 20 70000");  // killed mid-line: no newline
  check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.torn_lines, 1u);
  EXPECT_EQ(r.handler_starts, 6u);

  d.write("handlers/n1-101.log", "\nH n1 garbage\n");
  r = d.check();
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.malformed.size(), 2u) << r.summary();  // the torn line now ends, and the garbage
}

TEST(FaultChecker, TheFencedStoreRefusesASmallerTokenAndItsFileChecksClean) {
  evidence_dir d;
  akt::faults::fenced_store store(d.path() / "store", "n0");
  using outcome = akt::faults::fenced_store::outcome;
  EXPECT_EQ(store.open("g1", 5), outcome::accepted);
  EXPECT_EQ(store.apply("g1", 5, 1), outcome::accepted);
  EXPECT_EQ(store.open("g1", 8), outcome::accepted);     // a newer activation opens it
  EXPECT_EQ(store.apply("g1", 5, 2), outcome::refused);  // the old one may no longer write
  EXPECT_EQ(store.apply("g1", 8, 3), outcome::accepted);
  EXPECT_EQ(store.open("g1", 8), outcome::accepted);  // "at least as high": equal is fine
  d.write("calls.log",
          c("g1", 1, 0, 1, "ok") + c("g1", 2, 0, 1, "store_refused") + c("g1", 3, 0, 1, "ok"));
  const check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.applied, 2u);
  EXPECT_EQ(r.stale_refused, 1u);
}

TEST(FaultChecker, TheStoresFaultsAreCountedAndABadLineOfThemFails) {
  evidence_dir d;
  write_clean_run(d);
  d.write("etcd.log", "M etcd-m0 200 " + std::to_string(3 * k_s) + " leader\n" + "N etcd-m0 201 " +
                          std::to_string(4 * k_s) + "\n" + "M etcd-m1 202 " +
                          std::to_string(5 * k_s) + " follower\n" + "Z etcd 0 " +
                          std::to_string(6 * k_s) + " rev 42\n");
  check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.etcd_kills, 2u);
  EXPECT_EQ(r.etcd_leader_kills, 1u);
  EXPECT_EQ(r.etcd_restarts, 1u);
  EXPECT_EQ(r.compactions, 1u);
  EXPECT_EQ(r.kills, 1u);  // the nodes' faults are apart
  EXPECT_NE(r.summary().find("etcd members killed 2 (1 leading)"), std::string::npos);

  d.write("etcd.log", "M etcd-m2 203 " + std::to_string(7 * k_s) + " maybe\nQ etcd 1 2\n");
  r = d.check();
  EXPECT_EQ(r.malformed.size(), 2u) << r.summary();
  EXPECT_FALSE(r.clean());
}

TEST(FaultChecker, PercentileIsByNearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(akt::faults::percentile(v, 50), 50);
  EXPECT_DOUBLE_EQ(akt::faults::percentile(v, 99), 99);
  EXPECT_DOUBLE_EQ(akt::faults::percentile(v, 100), 100);
  EXPECT_DOUBLE_EQ(akt::faults::percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(akt::faults::percentile({7}, 99), 7);
}

}  // namespace
