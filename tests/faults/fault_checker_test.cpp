// The fault harness's checker (fault_checker.hpp) on hand-made evidence: clean evidence passes,
// and each kind of bad evidence (a late handler of a replaced claim, one claim in two processes,
// a stale write accepted, overlapping activations, an acknowledged message lost or applied
// twice, a refused one applied, one applied that was never sent) is caught, so the kill -9 test's
// zero counts mean something. Also the fenced store itself, the failover measure, the
// partition's rules (a handler past cut + TTL, an old claim or epoch after the heal) and the
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

// A stall: the same run as write_paused_run, but n2's workers were all stuck in handlers from
// 3 s (W) until the release at 7 s (U) instead of the process being stopped.
void write_stalled_run(evidence_dir& d) {
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
  d.write("faults.log", "S n2 102 0\nW n2 102 " + std::to_string(3 * k_s) + "\nU n2 102 " +
                            std::to_string(7 * k_s) + "\n");
}

TEST(FaultChecker, AStalledProcessThatRejoinedUnderANewEpochChecksClean) {
  evidence_dir d;
  write_stalled_run(d);
  const check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_TRUE(r.stall_leaks.empty()) << r.summary();
  EXPECT_EQ(r.stalls, 1u);
  EXPECT_EQ(r.pauses, 0u);
  EXPECT_EQ(r.after_release_starts, 1u);
  EXPECT_EQ(r.after_release_reclaimed, 0u);  // g2 was never elsewhere
  // The stall at 3 s hit g1 on n2; the first ok call started after it ended at 5 s.
  ASSERT_EQ(r.stall_failover_ms.size(), 1u);
  EXPECT_NEAR(r.stall_failover_ms[0], 2000.0, 0.01);
  EXPECT_TRUE(r.pause_failover_ms.empty());
  EXPECT_NE(r.summary().find("failover after a stall (1 grains"), std::string::npos) << r.summary();
}

TEST(FaultChecker, AHandlerOnAnOldClaimAfterAStallsReleaseIsAViolationOfA) {
  evidence_dir d;
  write_stalled_run(d);
  // After the release, n2 starts a handler of its old claim of g1 (token 30), still under
  // epoch 7: a message queued during the stall that the fence should have refused.
  d.write("handlers/n2-102.log", he("n2", 102, 7, 30, 7 * k_s + 1, "receive", "g1", 3));
  d.write("calls.log", c("g1", 3, 4 * k_s, 6 * k_s, "possibly", "request_timeout"));
  const check_report r = d.check();
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.after_release_starts, 2u);
  EXPECT_EQ(r.after_release_reclaimed, 1u);
  auto has = [&](const std::string& text) {
    for (const auto& v : r.violations_a)
      if (v.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("activated before the stall, after its release")) << r.summary();
  EXPECT_TRUE(has("not a new epoch after the stall's release")) << r.summary();
  EXPECT_TRUE(has("after g1 token 40 on n1")) << r.summary();  // and the plain (a)
}

TEST(FaultChecker, AHandlerStartedDuringAStallIsALeak) {
  evidence_dir d;
  write_stalled_run(d);
  // n2 starts a handler at 4 s, between W and U: a worker was not stuck after all.
  d.write("handlers/n2-102.log", he("n2", 102, 7, 30, 4 * k_s, "receive", "g1", 3));
  d.write("calls.log", c("g1", 3, 4 * k_s - 1, 6 * k_s, "possibly", "request_timeout"));
  const check_report r = d.check();
  ASSERT_EQ(r.stall_leaks.size(), 1u) << r.summary();
  EXPECT_NE(r.stall_leaks[0].find("g1 token 30 epoch 7 on n2 (pid 102) receive at 4.000 s"),
            std::string::npos)
      << r.stall_leaks[0];
  EXPECT_EQ(r.after_release_starts, 1u);
}

TEST(FaultChecker, AStallWithoutItsReleaseLeaksEveryLaterHandler) {
  evidence_dir d;
  write_stalled_run(d);
  // A second stall of n2 at 9 s that was never released: the handler at 10 s is a leak.
  d.write("faults.log", "W n2 102 " + std::to_string(9 * k_s) + "\n");
  d.write("handlers/n2-102.log", he("n2", 102, 9, 50, 10 * k_s, "deactivate", "g2"));
  const check_report r = d.check();
  EXPECT_EQ(r.stalls, 2u);
  ASSERT_EQ(r.stall_leaks.size(), 1u) << r.summary();
  EXPECT_NE(r.stall_leaks[0].find("stalled 9.000 s to the end"), std::string::npos)
      << r.stall_leaks[0];
}

// The leases as the test process saw them in etcd (leases.log) for the clean run: n0's record
// under epoch 7 (the epoch h() writes) is deleted, observed at 4.9 s, after its kill at 3 s; n1's
// lives on. n0 started again under epoch 9 at 6 s. g0's two claims as the activations used them.
std::string lease(const std::string& node, long long epoch, const std::string& what,
                  std::int64_t ns) {
  return "L " + node + " " + std::to_string(epoch) + " " + what + " " + std::to_string(ns) + "\n";
}
// A grain claim as the test process saw it created.
std::string claim(const std::string& grain, std::int64_t token, const std::string& owner,
                  long long epoch, std::int64_t ns) {
  return "G " + grain + " " + std::to_string(token) + " " + owner + " " + std::to_string(epoch) +
         " " + std::to_string(ns) + "\n";
}
void write_leases(evidence_dir& d) {
  d.write("leases.log",
          lease("n0", 7, "put", 0) + lease("n1", 7, "put", 0) + lease("driver", 3, "put", 0) +
              claim("g0", 10, "n0", 7, 1 * k_s) + claim("g0", 20, "n1", 7, 5 * k_s) +
              lease("n0", 7, "delete", 4 * k_s + 900'000'000) + lease("n0", 9, "put", 6 * k_s));
}

TEST(FaultChecker, HandlersBeforeTheirLeaseEndedCheckClean) {
  evidence_dir d;
  write_clean_run(d);
  write_leases(d);
  // n0's new process (pid 103) under its new epoch, after the old one's end: its own lease.
  d.write("handlers/n0-103.log", he("n0", 103, 9, 60, 7 * k_s, "activate", "g5"));
  d.write("store/g5", st('O', 60, 0, "n0", 103, 7 * k_s));
  d.write("leases.log", claim("g5", 60, "n0", 9, 7 * k_s));
  const check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.claims_seen, 3u);
  EXPECT_EQ(r.claims_checked, 3u) << r.summary();
  EXPECT_EQ(r.claims_unseen, 0u) << r.summary();
  EXPECT_TRUE(r.leases_observed);
  EXPECT_EQ(r.lease_puts, 4u);
  EXPECT_EQ(r.lease_ends, 1u);
  EXPECT_EQ(r.lease_checked, 3u) << r.summary();  // n0's three handlers under epoch 7
  EXPECT_EQ(r.lease_unseen, 0u) << r.summary();
  EXPECT_NE(r.summary().find("handler starts checked against their lease's end 3"),
            std::string::npos)
      << r.summary();
}

TEST(FaultChecker, AHandlerAfterItsLeaseEndedIsAViolationOfA) {
  evidence_dir d;
  write_clean_run(d);
  write_leases(d);
  // n0 (pid 100, still under epoch 7) activates g5 at 5 s: no other claim of g5 exists, so
  // only the lease's end, observed at 4.9 s, shows that this handler should not have started.
  d.write("handlers/n0-100.log", h("n0", 100, 60, 5 * k_s, "activate", "g5"));
  d.write("store/g5", st('O', 60, 0, "n0", 100, 5 * k_s));
  const check_report r = d.check();
  ASSERT_EQ(r.violations_a.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_a[0].find("g5 token 60 activate on n0 (pid 100) under epoch 7"),
            std::string::npos)
      << r.violations_a[0];
  EXPECT_NE(r.violations_a[0].find("record deleted at 4.900 s"), std::string::npos)
      << r.violations_a[0];
  EXPECT_TRUE(r.overlaps_c.empty()) << r.summary();
  EXPECT_FALSE(r.clean());
}

// n0 killed and started again at once under its name (pid 103): what the new process must
// never do with what the old one (pid 100, epoch 7) held.
TEST(FaultChecker, ARestartedProcessUnderItsPredecessorsEpochIsAViolationOfA) {
  evidence_dir d;
  write_clean_run(d);
  write_leases(d);
  // The new process writes a handler line under the old epoch 7 (on a new claim of its own).
  d.write("handlers/n0-103.log", he("n0", 103, 7, 60, 4 * k_s, "activate", "g5"));
  d.write("store/g5", st('O', 60, 0, "n0", 103, 4 * k_s));
  const check_report r = d.check();
  ASSERT_EQ(r.violations_a.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_a[0].find("n0's epoch 7 in the handler lines of several of its "
                                   "processes: pids 100, 103"),
            std::string::npos)
      << r.violations_a[0];
}

TEST(FaultChecker, AnActivationOnTheOldProcesssClaimIsAViolationOfA) {
  evidence_dir d;
  write_clean_run(d);
  write_leases(d);
  // The old process's claim of g5 (token 60, on lease 7) was never activated by it; the new
  // process (epoch 9) activates it instead of claiming g5 anew.
  d.write("leases.log", claim("g5", 60, "n0", 7, 2 * k_s));
  d.write("handlers/n0-103.log", he("n0", 103, 9, 60, 7 * k_s, "activate", "g5"));
  d.write("store/g5", st('O', 60, 0, "n0", 103, 7 * k_s));
  const check_report r = d.check();
  ASSERT_EQ(r.violations_a.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_a[0].find("g5 token 60 on n0 (pid 103) ran on a claim on lease 7, not "
                                   "one of that process's epochs"),
            std::string::npos)
      << r.violations_a[0];
}

TEST(FaultChecker, AnActivationOnAnotherNodesClaimIsAViolationOfA) {
  evidence_dir d;
  write_clean_run(d);
  write_leases(d);
  d.write("leases.log", claim("g5", 60, "n1", 7, 2 * k_s));
  d.write("handlers/n0-100.log", h("n0", 100, 60, 3 * k_s - 1, "activate", "g5"));
  d.write("store/g5", st('O', 60, 0, "n0", 100, 3 * k_s - 1));
  const check_report r = d.check();
  ASSERT_EQ(r.violations_a.size(), 1u) << r.summary();
  EXPECT_NE(r.violations_a[0].find("g5 token 60 on n0 (pid 100) ran on a claim made for n1"),
            std::string::npos)
      << r.violations_a[0];
}

TEST(FaultChecker, AHandlerUnderAnEpochEtcdNeverShowedIsCountedAndABadLeaseLineFails) {
  evidence_dir d;
  write_clean_run(d);
  write_leases(d);
  d.write("handlers/n2-102.log", he("n2", 102, 11, 70, 1 * k_s, "activate", "g6"));
  d.write("store/g6", st('O', 70, 0, "n2", 102, 1 * k_s));
  check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.lease_unseen, 1u) << r.summary();
  d.write("leases.log", "L n2 11 expired 5\n");
  r = d.check();
  EXPECT_EQ(r.malformed.size(), 1u) << r.summary();
  EXPECT_FALSE(r.clean());
}

TEST(FaultChecker, WithoutLeasesLogNothingIsCheckedAgainstLeases) {
  evidence_dir d;
  write_clean_run(d);
  const check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_FALSE(r.leases_observed);
  EXPECT_EQ(r.lease_checked, 0u);
}

TEST(FaultChecker, TheMemberRecordsEpochIsItsLeaseField) {
  EXPECT_EQ(akt::faults::record_epoch("akt-member 1\naddress=akt://n0@127.0.0.1:1\n"
                                      "incarnation=5\nepoch=7587881234\nroles=\n"),
            7587881234LL);
  // etcd's lease ids take 19 digits.
  EXPECT_EQ(akt::faults::record_epoch("akt-member 1\nepoch=5340603156516470538\n"),
            5340603156516470538LL);
  EXPECT_EQ(akt::faults::record_epoch("akt-member 1\nepoch=9999999999999999999\n"), -1);
  EXPECT_EQ(akt::faults::record_epoch("akt-member 1\nepoch=\n"), -1);
  EXPECT_EQ(akt::faults::record_epoch("akt-member 1\nepoch=12x\n"), -1);
  EXPECT_EQ(akt::faults::record_epoch("akt-member 1\naddress=a\n"), -1);
  EXPECT_EQ(
      akt::faults::record_field("akt-grain 1\nrole=\nowner=n3\naddress=x\nepoch=9\n", "owner"),
      "n3");
  EXPECT_EQ(akt::faults::record_field("akt-grain 1\nowner_x=n3\n", "owner"), "-");
}

// A partition: n2 (pid 102, epoch 7) runs g1 under token 30 from 1 s, is cut off at 3 s (TTL
// 2 s: its lease ends by 5 s) and healed at 7 s; n1 took g1 over at 5.1 s (token 40). After the
// heal n2 rejoined under epoch 9 and activated g2 (token 50) at 8 s.
void write_partitioned_run(evidence_dir& d) {
  write_clean_run(d);
  d.write("handlers/n2-102.log", he("n2", 102, 7, 30, 1 * k_s, "activate", "g1") +
                                     he("n2", 102, 7, 30, 2 * k_s, "receive", "g1", 1) +
                                     he("n2", 102, 9, 50, 8 * k_s, "activate", "g2"));
  d.write("handlers/n1-101.log",
          he("n1", 101, 8, 40, 5 * k_s + 100'000'000, "activate", "g1") +
              he("n1", 101, 8, 40, 5 * k_s + 100'000'001, "receive", "g1", 2));
  d.write("store/g1", st('O', 30, 0, "n2", 102, 1 * k_s) + st('A', 30, 1, "n2", 102, 2 * k_s) +
                          st('O', 40, 0, "n1", 101, 5 * k_s + 100'000'000) +
                          st('A', 40, 2, "n1", 101, 5 * k_s + 100'000'002));
  d.write("store/g2", st('O', 50, 0, "n2", 102, 8 * k_s));
  d.write("calls.log", c("g1", 1, 2 * k_s - 1, 2 * k_s + 5, "ok") +
                           c("g1", 2, 3 * k_s + 1, 5 * k_s + 200'000'000, "ok"));
  d.write("faults.log", "S n2 102 0\nX n2 102 " + std::to_string(3 * k_s) + " 2000\nH n2 102 " +
                            std::to_string(7 * k_s) + "\n");
}
bool has_violation(const check_report& r, const std::string& text) {
  for (const auto& v : r.violations_a)
    if (v.find(text) != std::string::npos) return true;
  return false;
}

TEST(FaultChecker, APartitionedProcessThatRejoinedUnderANewEpochChecksClean) {
  evidence_dir d;
  write_partitioned_run(d);
  // A handler within the TTL after the cut (its lease may still hold) is no violation.
  d.write("handlers/n2-102.log", he("n2", 102, 7, 70, 4 * k_s, "activate", "g4"));
  d.write("store/g4", st('O', 70, 0, "n2", 102, 4 * k_s));
  const check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.partitions, 1u);
  EXPECT_EQ(r.heals, 1u);
  EXPECT_EQ(r.after_heal_starts, 1u);
  // The cut at 3 s hit g1 on n2; the first ok call started after it ended at 5.2 s.
  ASSERT_EQ(r.partition_failover_ms.size(), 1u) << r.summary();
  EXPECT_NEAR(r.partition_failover_ms[0], 2200.0, 0.01);
  EXPECT_EQ(r.partition_unrecovered, 0u);
  // Healed at 7 s, its first handler on the new epoch at 8 s.
  ASSERT_EQ(r.heal_to_serving_ms.size(), 1u) << r.summary();
  EXPECT_NEAR(r.heal_to_serving_ms[0], 1000.0, 0.01);
  EXPECT_EQ(r.heals_not_serving, 0u);
  // It served until 4 s, 1 s after the cut.
  ASSERT_EQ(r.served_after_cut_ms.size(), 1u) << r.summary();
  EXPECT_NEAR(r.served_after_cut_ms[0], 1000.0, 0.01);
  EXPECT_NE(r.summary().find("partitions 1, heals 1"), std::string::npos) << r.summary();
}

TEST(FaultChecker, AHandlerWhilePartitionedPastTheTtlIsAViolationOfA) {
  evidence_dir d;
  write_partitioned_run(d);
  // At 5.5 s, past cut + TTL (5 s) and before the heal, n2 activates g3 under its old epoch.
  d.write("handlers/n2-102.log", he("n2", 102, 7, 60, 5 * k_s + 500'000'000, "activate", "g3"));
  d.write("store/g3", st('O', 60, 0, "n2", 102, 5 * k_s + 500'000'000));
  const check_report r = d.check();
  ASSERT_EQ(r.violations_a.size(), 1u) << r.summary();
  EXPECT_TRUE(has_violation(r, "g3 token 60 epoch 7 on n2")) << r.summary();
  EXPECT_TRUE(has_violation(r, "while partitioned, past the lease")) << r.summary();
  EXPECT_EQ(r.after_heal_starts, 1u);
}

TEST(FaultChecker, AnOldClaimOrTheOldEpochAfterTheHealIsAViolationOfA) {
  evidence_dir d;
  write_partitioned_run(d);
  // After the heal: a handler of its old claim of g1 (token 30) under the new epoch, and a new
  // claim of g3 under the old epoch.
  d.write("handlers/n2-102.log", he("n2", 102, 9, 30, 7 * k_s + 1, "receive", "g1", 3) +
                                     he("n2", 102, 7, 60, 9 * k_s, "activate", "g3"));
  d.write("store/g3", st('O', 60, 0, "n2", 102, 9 * k_s));
  d.write("calls.log", c("g1", 3, 6 * k_s, 7 * k_s + 9, "possibly", "request_timeout"));
  const check_report r = d.check();
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.after_heal_starts, 3u);
  EXPECT_TRUE(has_violation(r, "activated before the partition, after it")) << r.summary();
  EXPECT_TRUE(has_violation(r, "g3 token 60 epoch 7 on n2")) << r.summary();
  EXPECT_TRUE(has_violation(r, "not a new epoch after the partition")) << r.summary();
  EXPECT_TRUE(has_violation(r, "after g1 token 40 on n1")) << r.summary();  // and the plain (a)
}

TEST(FaultChecker, AHealWithoutAHandlerLaterOrAShortCutIsCountedNotAViolation) {
  evidence_dir d;
  write_clean_run(d);
  // n3 (pid 103, epoch 5): cut at 1 s, healed at 2 s (within the TTL: the lease may have held),
  // a handler under the same epoch at 2.5 s; cut again at 4 s, healed at 9 s, nothing after.
  d.write("handlers/n3-103.log",
          he("n3", 103, 5, 80, 1 * k_s - 10, "activate", "g5") +
              he("n3", 103, 5, 80, 2 * k_s + 500'000'000, "receive", "g5", 1));
  d.write("store/g5", st('O', 80, 0, "n3", 103, 1 * k_s - 10) +
                          st('A', 80, 1, "n3", 103, 2 * k_s + 500'000'001));
  d.write("calls.log", c("g5", 1, 2 * k_s, 2 * k_s + 600'000'000, "ok"));
  d.write("faults.log", "X n3 103 " + std::to_string(1 * k_s) + " 2000\nH n3 103 " +
                            std::to_string(2 * k_s) + "\nX n3 103 " + std::to_string(4 * k_s) +
                            " 2000\nH n3 103 " + std::to_string(9 * k_s) + "\n");
  const check_report r = d.check();
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.partitions, 2u);
  EXPECT_EQ(r.heals, 2u);
  // No failover: g5's next ok call (at 2 s) was served by n3 itself, and after the second cut
  // there was no call.
  EXPECT_TRUE(r.partition_failover_ms.empty()) << r.summary();
  EXPECT_EQ(r.partition_unrecovered, 2u);
  // Neither heal was followed by a handler on a new epoch (the first was too short to need one).
  EXPECT_EQ(r.heal_to_serving_ms.size(), 0u);
  EXPECT_EQ(r.heals_not_serving, 2u);
}

TEST(FaultChecker, APartitionLineWithoutItsTtlIsMalformed) {
  evidence_dir d;
  write_clean_run(d);
  d.write("faults.log", "X n0 100 5\n");
  const check_report r = d.check();
  EXPECT_EQ(r.malformed.size(), 1u) << r.summary();
  EXPECT_EQ(r.partitions, 0u);
  EXPECT_FALSE(r.clean());
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
