#pragma once
// The fault harness's view of the nodes' leases (issue 20, check (a)): the test process watches
// the cluster's keys in etcd (/akt/<cluster>/v1/: the member records and the grain claims) over a
// store connection of its own and appends to DIR/leases.log, one line per change it observes, with
// CLOCK_MONOTONIC at the observation:
//
//   L <node> <epoch> put <ns>      the record of <node> under lease <epoch> appeared
//   L <node> <epoch> delete <ns>   that record was deleted: its lease expired or was revoked
//
// The epoch is the record's `epoch=` field: the lease id the record (and every grain claim of
// that join) lives on, which is also what a node writes as the epoch of its handler lines
// (akt::cluster::self(sys).epoch). Membership deletes its record only through the lease (a
// revoke at leave, at a fence, or by a successor with old_process_gone; an expiry otherwise), so
// a delete means the lease ended at etcd no later than the observation. The observation is late
// (etcd's delivery, this process's scheduling): a handler line of <node> with <epoch> that
// started after the delete's <ns> certainly started after its lease ended; the checker's (a)
// holds every handler line to that.
//
// It also writes each grain claim it sees created (fault_evidence.hpp's G line: the grain, the
// claim's token, its owner and the lease it lives on), once per claim, so that the checker can
// hold every activation to the claim it ran on: its own node's, under one of its own epochs.
//
// Only appearances are written: a later put of the same record (its load, leaving=1) keeps the
// epoch and is skipped. A lost watch is started again from the last revision seen + 1; when
// that has been compacted away, the members are read in full and the differences become lines
// (a record gone meanwhile: its delete, observed now, which is later still and so still sound).
//
// Contract: start() and stop() from the owner's thread (stop is idempotent, also run by the
// destructor). The store's completion thread delivers the watch (on_events, on_end) and writes
// the lines; the watcher's own thread restarts a lost watch. State shared by the two is guarded
// by mutex_. Memory: one entry per member name and one per grain claim key.

#include <akt/cluster/store.hpp>
#include <akt/etcd/etcd_store.hpp>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "faults/fault_evidence.hpp"

namespace akt::faults {

class lease_watcher final : public akt::cluster::watch_handler {
 public:
  lease_watcher() = default;
  ~lease_watcher() override { stop(); }
  lease_watcher(const lease_watcher&) = delete;
  lease_watcher& operator=(const lease_watcher&) = delete;

  // Connects to etcd at endpoint, reads the members of `cluster` (writing a put line for each),
  // and watches from there on. "" or why it could not.
  std::string start(const std::vector<std::string>& endpoints, const std::string& cluster,
                    const std::filesystem::path& log) {
    using namespace std::chrono_literals;
    fd_ = open_append(log);
    if (fd_ < 0) return "cannot open " + log.string();
    prefix_ = "/akt/" + cluster + "/v1/";
    members_ = members_prefix(cluster);
    grains_ = prefix_ + "grains/";
    akt::etcd::etcd_options eo;
    eo.endpoints = endpoints;  // every member: the watch outlives the loss of one
    eo.call_timeout = 1000ms;
    eo.connect_wait = 10000ms;
    auto st = akt::etcd::connect(eo);
    if (!st) return "etcd: " + st.error().message();
    store_ = std::move(*st);
    if (std::string why = read_and_watch(); !why.empty()) return why;
    thread_ = std::thread([this] { run(); });
    return {};
  }

  // Ends the watch, the thread and the connection (changes after this are not written).
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::unique_ptr<akt::cluster::watch_handle> w;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      w = std::move(watch_);
    }
    if (w) w->cancel();  // outside the lock: a batch being delivered takes it
    w.reset();
    store_.reset();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Whether a record of some member is held now (it waits for the last deletes at the end).
  bool any_record() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return !epochs_.empty();
  }
  // Lines written so far (puts, deletes) and watches started again; any thread.
  std::size_t puts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return puts_;
  }
  std::size_t deletes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return deletes_;
  }
  std::size_t claims() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return claims_seen_;
  }
  std::size_t restarts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return restarts_;
  }

  // watch_handler (the store's completion thread)
  void on_events(const std::vector<akt::cluster::watch_event>& events,
                 akt::cluster::revision) override {
    const std::int64_t now = monotonic_ns();
    std::lock_guard<std::mutex> lock(mutex_);
    for (const akt::cluster::watch_event& e : events) {
      if (e.kv.key.rfind(members_, 0) == 0) {
        const std::string name = e.kv.key.substr(members_.size());
        if (e.what == akt::cluster::watch_event::kind::put) {
          note_put_locked(name, record_epoch(e.kv.value), now);
        } else {
          note_delete_locked(name, now);
        }
      } else if (e.kv.key.rfind(grains_, 0) == 0 &&
                 e.what == akt::cluster::watch_event::kind::put) {
        note_claim_locked(e.kv, now);
      }
      if (e.kv.mod_revision > last_revision_) last_revision_ = e.kv.mod_revision;
    }
  }
  void on_end(akt::error why, akt::cluster::revision) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    lost_ = true;
    compacted_ = why.code() == akt::errc::cluster_compacted;
    changed_.notify_all();
  }

 private:
  // Under mutex_: a record of `name` under `epoch` seen at `now`; a new epoch is an appearance
  // (and ends the previous one, whose delete was then not seen: a full read after a compaction).
  void note_put_locked(const std::string& name, long long epoch, std::int64_t now) {
    auto it = epochs_.find(name);
    if (it != epochs_.end() && it->second == epoch) return;  // the same record written again
    if (it != epochs_.end()) note_delete_locked(name, now);
    epochs_[name] = epoch;
    ++puts_;
    line_locked(name, epoch, "put", now);
  }
  void note_delete_locked(const std::string& name, std::int64_t now) {
    auto it = epochs_.find(name);
    if (it == epochs_.end()) return;  // never seen: nothing to end
    ++deletes_;
    line_locked(name, it->second, "delete", now);
    epochs_.erase(it);
  }
  // Under mutex_: a grain claim as stored (its token: the key's create revision), written once
  // per claim. The key ends in <kind>/<name>; the line names the grain by its name.
  void note_claim_locked(const akt::cluster::key_value& kv, std::int64_t now) {
    const std::string grain = kv.key.substr(kv.key.rfind('/') + 1);
    std::int64_t& last = claims_[kv.key];
    if (last == kv.create_revision) return;  // the same claim written again
    last = kv.create_revision;
    ++claims_seen_;
    (void)append_line(fd_, "G " + grain + " " + std::to_string(kv.create_revision) + " " +
                               record_field(kv.value, "owner") + " " +
                               std::to_string(record_epoch(kv.value)) + " " + std::to_string(now));
  }
  void line_locked(const std::string& name, long long epoch, const char* what, std::int64_t now) {
    (void)append_line(
        fd_, "L " + name + " " + std::to_string(epoch) + " " + what + " " + std::to_string(now));
  }

  // Reads the members in full (the differences with what is known become lines) and watches
  // from the read's revision + 1. "" or why not.
  std::string read_and_watch() {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    akt::result<akt::cluster::range_result> got = akt::error(akt::errc::cluster_unavailable);
    store_->get_prefix(prefix_, [&](akt::result<akt::cluster::range_result> r) {
      std::lock_guard<std::mutex> lock(m);
      got = std::move(r);
      done = true;
      cv.notify_all();
    });
    {
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return done; });  // the store completes every call (call_timeout)
    }
    if (!got) return "reading the members: " + got.error().message();
    std::unique_ptr<akt::cluster::watch_handle> old;
    {
      const std::int64_t now = monotonic_ns();
      std::lock_guard<std::mutex> lock(mutex_);
      std::map<std::string, long long> found;
      for (const akt::cluster::key_value& kv : got->kvs) {
        if (kv.key.rfind(members_, 0) == 0)
          found[kv.key.substr(members_.size())] = record_epoch(kv.value);
        else if (kv.key.rfind(grains_, 0) == 0)
          note_claim_locked(kv, now);
      }
      std::vector<std::string> gone;
      for (const auto& [name, epoch] : epochs_)
        if (!found.contains(name)) gone.push_back(name);
      for (const std::string& name : gone) note_delete_locked(name, now);
      for (const auto& [name, epoch] : found) note_put_locked(name, epoch, now);
      last_revision_ = got->header_revision;
      lost_ = false;
      compacted_ = false;
      old = std::move(watch_);
      watch_ = store_->watch(prefix_, got->header_revision + 1, *this);
    }
    if (old) old->cancel();
    return {};
  }

  // The watcher's thread: starts a lost watch again (from the last revision + 1, or from a full
  // read after a compaction), at most every 200 ms (etcd may be down a while) until it holds.
  void run() {
    using namespace std::chrono_literals;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (changed_.wait_for(lock, 200ms, [&] { return stopping_; })) return;
      if (!lost_) continue;
      ++restarts_;
      if (compacted_) {
        lock.unlock();
        const std::string why = read_and_watch();  // on failure lost_ stays: tried again
        lock.lock();
        (void)why;
        continue;
      }
      std::unique_ptr<akt::cluster::watch_handle> old = std::move(watch_);
      lost_ = false;
      watch_ = store_->watch(prefix_, last_revision_ + 1, *this);
      lock.unlock();
      if (old) old->cancel();
      lock.lock();
    }
  }

  int fd_ = -1;
  std::string prefix_;
  std::unique_ptr<akt::cluster::store> store_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, long long> epochs_;     // guarded: node -> epoch of its record now
  std::map<std::string, std::int64_t> claims_;  // guarded: claim key -> last token written
  std::size_t claims_seen_ = 0;                 // guarded
  std::string members_, grains_;                // set by start()
  akt::cluster::revision last_revision_ = 0;    // guarded
  bool lost_ = false, compacted_ = false, stopping_ = false;  // guarded
  std::size_t puts_ = 0, deletes_ = 0, restarts_ = 0;         // guarded
  std::unique_ptr<akt::cluster::watch_handle> watch_;         // guarded when replaced
};

}  // namespace akt::faults
