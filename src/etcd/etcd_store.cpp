// The etcd store (akt/etcd/etcd_store.hpp): akt::cluster::store over etcd's v3 gRPC API, with
// gRPC C++'s asynchronous API, one CompletionQueue and the store's own completion thread.

#include "akt/etcd/etcd_store.hpp"

#include <arpa/inet.h>
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>

#include "akt/core/assert.hpp"
#include "etcd/etcd_decode.hpp"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace akt::etcd {

namespace {

namespace pb = etcdserverpb;
using cluster::keep_alive_ack;
using cluster::key_value;
using cluster::lease_grant;
using cluster::lease_id;
using cluster::op_outcome;
using cluster::range_result;
using cluster::revision;
using cluster::store_callback;
using cluster::store_op;
using std::chrono::milliseconds;

// What the gRPC channel is tuned to (each bounds what its comment says).
struct channel_tuning {
  // Reconnect backoff to a member that is down: first retry after 100 ms, then at most every
  // second, so a member that comes back is used again within about a second (gRPC's default
  // grows to two minutes).
  static constexpr int initial_reconnect_backoff_ms = 100;
  static constexpr int max_reconnect_backoff_ms = 1000;
  // HTTP/2 keep-alive pings while calls (watches) are open, so a member that stopped answering
  // without closing the connection (paused, partitioned) ends them. etcd refuses pings more
  // often than every 5 s (--grpc-keepalive-min-time) with GOAWAY.
  static constexpr int keepalive_time_ms = 10000;
  // A watch that etcd never answered (the store is down) ends this long after it failed, not at
  // once: whoever watches again from on_end (membership, grain registry, actor names) then
  // retries about ten times a second while the store is down, instead of spinning on the
  // completion thread (issue 20's store restart found nodes growing by hundreds of MiB so).
  static constexpr std::chrono::milliseconds unanswered_watch_end{100};
  // The largest answer accepted (a full read of a large prefix); gRPC's default is 4 MiB.
  static constexpr int max_receive_bytes = 256 << 20;
  // The most request bytes one commit round carries (estimated: each nested txn holds its key
  // three times, its value and some framing) before the rest goes in another round: etcd's
  // default --max-request-bytes is 1.5 MiB, so a batch of large values is split instead of
  // refused. One op larger than that still goes alone (and etcd refuses it: invalid_argument).
  static constexpr std::size_t max_round_bytes = 1 << 20;
  static std::size_t op_bytes(const store_op& op) {
    return 3 * op.key.size() + op.value.size() + 64;
  }
};

class etcd_store;

// Everything that waits on the store's completion queue: one gRPC call (unary or a stream's
// steps, one step outstanding at a time) or one posted completion. Owned by the store from
// enlist() until proceed() returns true; then the completion thread deletes it.
class op {
 public:
  explicit op(etcd_store& s) : store_(s) {}
  op(const op&) = delete;
  op& operator=(const op&) = delete;
  virtual ~op() = default;

  // Completion thread: one queue event for this op (the tag). True when the op is finished.
  bool handle(bool ok) {
    if (failed_) {
      fail(std::move(*failed_));
      return true;
    }
    return proceed(ok);
  }
  // Any thread, once, instead of starting the call: completes the op with e on the completion
  // thread (an immediate alarm), never inside the caller.
  void fail_later(error e);
  // Under the store's mutex (destructor): end the call soon; its completion then reports
  // system_shutting_down.
  virtual void cancel() = 0;

 protected:
  virtual bool proceed(bool ok) = 0;
  virtual void fail(error e) = 0;
  etcd_store& store_;

 private:
  grpc::Alarm alarm_;
  std::optional<error> failed_;
};

// Contract (DESIGN.md, "Conventions"; the store interface's contract in akt/cluster/store.hpp):
// - Callers: every store call from any thread, including completions. A call builds its op,
//   enlists it and starts the gRPC call (or posts its failure); it never blocks and never runs
//   a completion inside the call.
// - Completion thread: one, running cq_.Next(); it runs every op step, so completions and
//   watch deliveries of this store run one at a time, in the order etcd answers.
// - Lifetime: the destructor (never on the completion thread) marks the store shutting down,
//   cancels every live op, waits until the last one has completed (ops enlisted meanwhile from
//   completions are failed with system_shutting_down), then shuts the queue down and joins
//   the thread.
// - Progress: a call takes mutex_ briefly (to enlist its op) and allocates its op; only the
//   destructor blocks, until the pending completions have run (bounded by call_timeout, since
//   it cancels them).
// - Memory: one op per pending call (its request and response), one per running watch.
// - mutex_ guards live_ and shutting_down_ (and the commit op's context swaps); never held
//   while user code runs.
class etcd_store final : public cluster::store {
 public:
  etcd_store(std::shared_ptr<grpc::Channel> channel, milliseconds call_timeout)
      : channel_(std::move(channel)),
        kv_(pb::KV::NewStub(channel_)),
        lease_(pb::Lease::NewStub(channel_)),
        watch_(pb::Watch::NewStub(channel_)),
        call_timeout_(call_timeout),
        thread_([this] { run(); }) {}

  ~etcd_store() override {
    AKT_ASSERT(std::this_thread::get_id() != thread_.get_id());  // never from a completion
    {
      std::unique_lock lock(mutex_);
      shutting_down_ = true;
      for (op* o : live_) o->cancel();
      idle_.wait(lock, [&] { return live_.empty(); });
    }
    cq_.Shutdown();
    thread_.join();
  }

  void grant_lease(std::chrono::seconds ttl, store_callback<lease_grant> done) override;
  void keep_alive(lease_id id, store_callback<keep_alive_ack> done) override;
  void revoke_lease(lease_id id, store_callback<void> done) override;
  void get(std::string key, store_callback<range_result> done) override;
  void get_prefix(std::string prefix, store_callback<range_result> done) override;
  void commit(std::vector<store_op> ops, store_callback<std::vector<op_outcome>> done) override;
  std::unique_ptr<cluster::watch_handle> watch(std::string prefix, revision from,
                                               cluster::watch_handler& h) override;

  // For the ops.
  grpc::CompletionQueue& queue() { return cq_; }
  pb::KV::Stub& kv() { return *kv_; }
  pb::Lease::Stub& lease() { return *lease_; }
  pb::Watch::Stub& watch_stub() { return *watch_; }
  std::mutex& mutex() { return mutex_; }
  bool shutting_down_locked() const { return shutting_down_; }
  bool shutting_down() {
    std::lock_guard lock(mutex_);
    return shutting_down_;
  }
  // A fresh context for one call: deadline call_timeout from now, and waiting for a connection
  // (a member that is reconnecting) rather than failing at once.
  void prepare(grpc::ClientContext& ctx) const {
    ctx.set_deadline(std::chrono::system_clock::now() + call_timeout_);
    ctx.set_wait_for_ready(true);
  }
  // The store's error for a failed call.
  error map_status(const grpc::Status& s, std::string_view what);
  // Takes o; false (and o is to be failed with fail_later) when the store is shutting down.
  bool enlist(op* o) {
    std::lock_guard lock(mutex_);
    live_.insert(o);
    return !shutting_down_;
  }
  // Enlists o and either starts it or, while shutting down, fails it later.
  template <class Op>
  void submit(std::unique_ptr<Op> o) {
    Op* raw = o.release();
    if (enlist(raw)) {
      raw->start();
    } else {
      raw->fail_later(error(errc::system_shutting_down, "the etcd store is being destroyed"));
    }
  }

 private:
  void run() {
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
      auto* o = static_cast<op*>(tag);
      if (!o->handle(ok)) continue;
      {
        // Out of live_ first: the destructor cancels what live_ holds.
        std::lock_guard lock(mutex_);
        live_.erase(o);
        if (live_.empty()) idle_.notify_all();
      }
      delete o;  // may run after the destructor saw live_ empty: it joins this thread
    }
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::KV::Stub> kv_;
  std::unique_ptr<pb::Lease::Stub> lease_;
  std::unique_ptr<pb::Watch::Stub> watch_;
  milliseconds call_timeout_;
  grpc::CompletionQueue cq_;
  std::mutex mutex_;
  std::condition_variable idle_;  // live_ became empty
  std::unordered_set<op*> live_;  // every op enlisted and not yet finished
  bool shutting_down_ = false;
  std::thread thread_;  // last: started once everything above exists
};

void op::fail_later(error e) {
  failed_ = std::move(e);
  alarm_.Set(&store_.queue(), gpr_now(GPR_CLOCK_MONOTONIC), this);
}

error etcd_store::map_status(const grpc::Status& s, std::string_view what) {
  const std::string msg = s.error_message();
  const std::string detail = "etcd " + std::string(what) + ": " + msg;
  switch (s.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return error(errc::cluster_registry_timeout,
                   "etcd did not answer " + std::string(what) + " within " +
                       std::to_string(call_timeout_.count()) + " ms");
    case grpc::StatusCode::UNAVAILABLE:
      return error(errc::cluster_registry_timeout, detail);
    case grpc::StatusCode::CANCELLED:
      if (shutting_down()) {
        return error(errc::system_shutting_down, "the etcd store is being destroyed");
      }
      return error(errc::cluster_registry_timeout, detail);
    case grpc::StatusCode::NOT_FOUND:
      if (msg.find("lease not found") != std::string::npos) {
        return error(errc::lease_not_found, detail);
      }
      return error(errc::protocol_error, detail);
    case grpc::StatusCode::OUT_OF_RANGE:
      if (msg.find("compacted") != std::string::npos) {
        return error(errc::cluster_compacted, detail);
      }
      return error(errc::protocol_error, detail);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return error(errc::invalid_argument, detail);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      // etcd's "too many requests" (overloaded: try again later); otherwise a message over a
      // size limit, which the same request meets again.
      if (msg.find("too many requests") != std::string::npos) {
        return error(errc::cluster_registry_timeout, detail);
      }
      return error(errc::invalid_argument, detail);
    default:
      return error(errc::protocol_error,
                   detail + " (gRPC status " + std::to_string(s.error_code()) + ")");
  }
}

// One unary call: the request, its decoder and the caller's completion.
template <class Resp, class T>
class unary_op final : public op {
 public:
  using starter = std::function<std::unique_ptr<grpc::ClientAsyncResponseReader<Resp>>(
      grpc::ClientContext*, grpc::CompletionQueue*)>;
  using decoder = std::function<result<T>(const Resp&)>;

  unary_op(etcd_store& s, const char* what, starter start, decoder decode, store_callback<T> done)
      : op(s),
        what_(what),
        start_(std::move(start)),
        decode_(std::move(decode)),
        done_(std::move(done)) {}

  void start() {
    store_.prepare(ctx_);
    reader_ = start_(&ctx_, &store_.queue());
    reader_->Finish(&resp_, &status_, this);
  }
  void cancel() override { ctx_.TryCancel(); }

 protected:
  bool proceed(bool /*ok: always true for Finish*/) override {
    if (!status_.ok()) {
      done_(store_.map_status(status_, what_));
    } else {
      done_(decode_(resp_));
    }
    return true;
  }
  void fail(error e) override { done_(std::move(e)); }

 private:
  const char* what_;
  starter start_;
  decoder decode_;
  store_callback<T> done_;
  grpc::ClientContext ctx_;
  Resp resp_;
  grpc::Status status_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Resp>> reader_;
};

template <class Resp, class T>
std::unique_ptr<unary_op<Resp, T>> make_unary(etcd_store& s, const char* what,
                                              typename unary_op<Resp, T>::starter start,
                                              typename unary_op<Resp, T>::decoder decode,
                                              store_callback<T> done) {
  return std::make_unique<unary_op<Resp, T>>(s, what, std::move(start), std::move(decode),
                                             std::move(done));
}

// One keep-alive round trip on a LeaseKeepAlive stream of its own: start, write the lease id,
// close the writing side, read the one answer, finish. One step outstanding at a time, each
// run on the completion thread; deadline call_timeout for the whole round trip.
class keep_alive_op final : public op {
 public:
  keep_alive_op(etcd_store& s, lease_id id, store_callback<keep_alive_ack> done)
      : op(s), id_(id), done_(std::move(done)) {
    req_.set_id(id);
  }
  void start() {
    store_.prepare(ctx_);
    stream_ = store_.lease().PrepareAsyncLeaseKeepAlive(&ctx_, &store_.queue());
    stream_->StartCall(this);
  }
  void cancel() override { ctx_.TryCancel(); }

 protected:
  bool proceed(bool ok) override {
    switch (at_) {
      case step::start:
        if (!ok) return finish();
        at_ = step::write;
        stream_->Write(req_, this);
        return false;
      case step::write:
        if (!ok) return finish();
        at_ = step::writes_done;
        stream_->WritesDone(this);
        return false;
      case step::writes_done:
        if (!ok) return finish();
        at_ = step::read;
        stream_->Read(&resp_, this);
        return false;
      case step::read:
        got_ = ok;
        return finish();
      case step::finish:
        if (got_) {
          done_(detail::decode_keep_alive(resp_, id_));
        } else if (!status_.ok()) {
          done_(store_.map_status(status_, "keep-alive"));
        } else {
          done_(error(errc::protocol_error, "etcd ended a keep-alive without an answer"));
        }
        return true;
    }
    return true;
  }
  void fail(error e) override { done_(std::move(e)); }

 private:
  bool finish() {
    at_ = step::finish;
    stream_->Finish(&status_, this);
    return false;
  }
  enum class step : std::uint8_t { start, write, writes_done, read, finish };
  lease_id id_;
  store_callback<keep_alive_ack> done_;
  step at_ = step::start;
  bool got_ = false;
  grpc::ClientContext ctx_;
  pb::LeaseKeepAliveRequest req_;
  pb::LeaseKeepAliveResponse resp_;
  grpc::Status status_;
  std::unique_ptr<
      grpc::ClientAsyncReaderWriter<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>>
      stream_;
};

// A commit: its rounds one after the other, each one Txn (store_limits::max_ops_per_round
// nested txns at most, and channel_tuning::max_round_bytes). A key put twice in a round is
// etcd's to refuse (invalid_argument, "duplicate key given in txn request"), as the contract
// says. Runs on the completion thread after start(); cancel() under the store's mutex, which
// also guards the swap of ctx_ between rounds.
class commit_op final : public op {
 public:
  commit_op(etcd_store& s, std::vector<store_op> ops, store_callback<std::vector<op_outcome>> done)
      : op(s), ops_(std::move(ops)), done_(std::move(done)) {
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const std::size_t begin = ends_.empty() ? 0 : ends_.back();
      const std::size_t size = channel_tuning::op_bytes(ops_[i]);
      if (i - begin == cluster::store_limits::max_ops_per_round ||
          (i > begin && bytes + size > channel_tuning::max_round_bytes)) {
        ends_.push_back(i);
        bytes = 0;
      }
      bytes += size;
    }
    ends_.push_back(ops_.size());
    outcomes_.reserve(ops_.size());
  }

  void start() {
    if (ops_.empty()) {
      fail_later(error());  // completes with no outcomes (handled in fail)
      return;
    }
    start_round();
  }
  void cancel() override {
    if (ctx_) ctx_->TryCancel();
  }

 protected:
  bool proceed(bool /*ok: always true for Finish*/) override {
    if (!status_.ok()) {
      done_(store_.map_status(status_, "commit"));
      return true;
    }
    auto round = detail::decode_commit_round(resp_, current());
    if (!round) {
      done_(round.error());
      return true;
    }
    for (auto& o : *round) outcomes_.push_back(std::move(o));
    if (++round_ == ends_.size()) {
      done_(std::move(outcomes_));
      return true;
    }
    if (!start_round()) {
      done_(error(errc::system_shutting_down,
                  "the etcd store is being destroyed (earlier rounds of the commit applied)"));
      return true;
    }
    return false;
  }
  void fail(error e) override {
    if (!e) {
      done_(std::vector<op_outcome>{});
    } else {
      done_(std::move(e));
    }
  }

 private:
  std::span<const store_op> current() const {
    const std::size_t begin = round_ == 0 ? 0 : ends_[round_ - 1];
    return {ops_.data() + begin, ends_[round_] - begin};
  }
  // False when the store is shutting down (no round started).
  bool start_round() {
    {
      std::lock_guard lock(store_.mutex());
      if (round_ > 0 && store_.shutting_down_locked()) return false;
      reader_.reset();  // lives in the previous call, which the old context owns
      ctx_ = std::make_unique<grpc::ClientContext>();
    }
    store_.prepare(*ctx_);
    resp_.Clear();
    reader_ =
        store_.kv().AsyncTxn(ctx_.get(), detail::commit_round_request(current()), &store_.queue());
    reader_->Finish(&resp_, &status_, this);
    return true;
  }

  std::vector<store_op> ops_;
  store_callback<std::vector<op_outcome>> done_;
  std::vector<std::size_t> ends_;  // round r is ops_[ends_[r - 1], ends_[r])
  std::size_t round_ = 0;
  std::vector<op_outcome> outcomes_;
  std::unique_ptr<grpc::ClientContext> ctx_;  // replaced under the store's mutex
  pb::TxnResponse resp_;
  grpc::Status status_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::TxnResponse>> reader_;
};

// What a watch's handle and its op share.
// - deliver: held by the completion thread around every handler call; cancel() from another
//   thread takes it, so a batch being delivered finishes before cancel returns.
// - canceled: written by cancel() (any thread; off the completion thread under deliver),
//   read by the completion thread under deliver before each handler call. The mutex orders
//   it; atomic because cancel() on the completion thread itself sets it without the mutex (it
//   may be inside this watch's own delivery).
// - ctx (under ctx_mutex): the running call's context, to cancel it; null once the op ended,
//   so a handle that outlives the store touches nothing of it.
struct watch_state {
  std::mutex deliver;
  std::atomic<bool> canceled{false};
  std::mutex ctx_mutex;
  grpc::ClientContext* ctx = nullptr;
  std::thread::id completion_thread;
};

class etcd_watch_handle final : public cluster::watch_handle {
 public:
  explicit etcd_watch_handle(std::shared_ptr<watch_state> st) : st_(std::move(st)) {}
  ~etcd_watch_handle() override { cancel(); }
  void cancel() override {
    if (std::this_thread::get_id() == st_->completion_thread) {
      st_->canceled.store(true, std::memory_order_relaxed);
    } else {
      std::lock_guard lock(st_->deliver);
      st_->canceled.store(true, std::memory_order_relaxed);
    }
    std::lock_guard lock(st_->ctx_mutex);
    if (st_->ctx) st_->ctx->TryCancel();
  }

 private:
  std::shared_ptr<watch_state> st_;
};

// One watch on a Watch stream of its own: start, write the create request, then read until the
// stream ends; every batch of events is checked, then delivered.
class watch_op final : public op {
 public:
  watch_op(etcd_store& s, std::shared_ptr<watch_state> st, std::string prefix, revision from,
           cluster::watch_handler& h)
      : op(s),
        st_(std::move(st)),
        key_(std::move(prefix)),
        range_end_(detail::prefix_end(key_)),
        next_(from),
        h_(h) {
    auto* create = req_.mutable_create_request();
    create->set_key(key_);
    create->set_range_end(range_end_);
    create->set_start_revision(from);
  }
  ~watch_op() override {
    std::lock_guard lock(st_->ctx_mutex);
    st_->ctx = nullptr;
  }

  void start() {
    {
      std::lock_guard lock(st_->ctx_mutex);
      st_->ctx = &ctx_;
    }
    // No deadline and no waiting for a connection: a watch on a store that is down ends soon
    // (on_end, after channel_tuning::unanswered_watch_end), the caller watches again.
    stream_ = store_.watch_stub().PrepareAsyncWatch(&ctx_, &store_.queue());
    stream_->StartCall(this);
  }
  void cancel() override {
    canceled_.store(true, std::memory_order_relaxed);
    ctx_.TryCancel();
    pause_.Cancel();  // a pending pause fires at once
  }

 protected:
  bool proceed(bool ok) override {
    switch (at_) {
      case step::start:
        if (!ok) return finish();
        at_ = step::write;
        stream_->Write(req_, this);
        return false;
      case step::write:
        if (!ok) return finish();
        return read();
      case step::read:
        if (!ok) return finish();
        on_response();
        if (ended_) {
          ctx_.TryCancel();
          return finish();
        }
        return read();
      case step::finish:
        if (ended_) return true;
        if (!answered_ && !canceled_.load(std::memory_order_relaxed)) {
          // No answer at all (the store is down or unreachable): the end is told after a pause,
          // so a caller that watches again at once retries about ten times a second instead of
          // spinning on the completion thread.
          at_ = step::pause;
          pause_.Set(&store_.queue(),
                     std::chrono::system_clock::now() + channel_tuning::unanswered_watch_end, this);
          return false;
        }
        [[fallthrough]];
      case step::pause:
        end(status_.ok() ? error(errc::cluster_registry_timeout, "etcd ended the watch stream")
                         : store_.map_status(status_, "watch"),
            0);
        return true;
    }
    return true;
  }
  void fail(error e) override { end(std::move(e), 0); }

 private:
  enum class step : std::uint8_t { start, write, read, finish, pause };
  bool read() {
    at_ = step::read;
    resp_.Clear();
    stream_->Read(&resp_, this);
    return false;
  }
  bool finish() {
    at_ = step::finish;
    stream_->Finish(&status_, this);
    return false;
  }
  void on_response() {
    answered_ = true;
    if (resp_.compact_revision() > 0) {
      end(error(errc::cluster_compacted, "etcd compacted revisions the watch from " +
                                             std::to_string(next_) +
                                             " still needed (compact revision " +
                                             std::to_string(resp_.compact_revision()) + ")"),
          resp_.compact_revision());
      return;
    }
    if (resp_.canceled()) {
      end(error(errc::cluster_registry_timeout,
                "etcd canceled the watch: " + std::string(resp_.cancel_reason())),
          0);
      return;
    }
    if (resp_.events_size() == 0) return;  // created, or progress: nothing to deliver
    auto events = detail::decode_watch_events(resp_, key_, range_end_, next_);
    if (!events) {
      end(events.error(), 0);
      return;
    }
    next_ = events->back().kv.mod_revision;
    std::lock_guard lock(st_->deliver);
    if (st_->canceled.load(std::memory_order_relaxed)) return;
    h_.on_events(*events, resp_.header().revision());
  }
  void end(error why, revision compact) {
    ended_ = true;
    std::lock_guard lock(st_->deliver);
    if (st_->canceled.load(std::memory_order_relaxed)) return;
    h_.on_end(std::move(why), compact);
  }

  std::shared_ptr<watch_state> st_;
  std::string key_;
  std::string range_end_;
  revision next_;  // no event before this revision is accepted (the last delivered, or from)
  cluster::watch_handler& h_;
  step at_ = step::start;
  bool ended_ = false;                 // on_end delivered (or suppressed by cancel)
  bool answered_ = false;              // etcd answered (created the watch, or ended it)
  std::atomic<bool> canceled_{false};  // cancel() ran (the store's destructor, under its mutex)
  grpc::Alarm pause_;                  // the pause before an unanswered watch's end
  grpc::ClientContext ctx_;
  pb::WatchRequest req_;
  pb::WatchResponse resp_;
  grpc::Status status_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream_;
};

void etcd_store::grant_lease(std::chrono::seconds ttl, store_callback<lease_grant> done) {
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl.count());
  submit(make_unary<pb::LeaseGrantResponse, lease_grant>(
      *this, "lease grant",
      [this, req](grpc::ClientContext* c, grpc::CompletionQueue* q) {
        return lease_->AsyncLeaseGrant(c, req, q);
      },
      [ttl](const pb::LeaseGrantResponse& r) -> result<lease_grant> {
        auto g = detail::decode_grant(r);
        if (g && g->ttl < ttl) {
          return error(errc::protocol_error, "etcd granted a lease a shorter TTL than asked");
        }
        return g;
      },
      std::move(done)));
}

void etcd_store::keep_alive(lease_id id, store_callback<keep_alive_ack> done) {
  submit(std::make_unique<keep_alive_op>(*this, id, std::move(done)));
}

void etcd_store::revoke_lease(lease_id id, store_callback<void> done) {
  pb::LeaseRevokeRequest req;
  req.set_id(id);
  submit(make_unary<pb::LeaseRevokeResponse, void>(
      *this, "lease revoke",
      [this, req](grpc::ClientContext* c, grpc::CompletionQueue* q) {
        return lease_->AsyncLeaseRevoke(c, req, q);
      },
      [](const pb::LeaseRevokeResponse& r) -> result<void> {
        if (!r.has_header()) return error(errc::protocol_error, "etcd answered a revoke oddly");
        return {};
      },
      std::move(done)));
}

void etcd_store::get(std::string key, store_callback<range_result> done) {
  auto req = detail::range_request(key, {});
  submit(make_unary<pb::RangeResponse, range_result>(
      *this, "get",
      [this, req](grpc::ClientContext* c, grpc::CompletionQueue* q) {
        return kv_->AsyncRange(c, req, q);
      },
      [key](const pb::RangeResponse& r) { return detail::decode_range(r, key, {}); },
      std::move(done)));
}

void etcd_store::get_prefix(std::string prefix, store_callback<range_result> done) {
  auto end = detail::prefix_end(prefix);
  auto req = detail::range_request(prefix, end);
  submit(make_unary<pb::RangeResponse, range_result>(
      *this, "get prefix",
      [this, req](grpc::ClientContext* c, grpc::CompletionQueue* q) {
        return kv_->AsyncRange(c, req, q);
      },
      [prefix, end](const pb::RangeResponse& r) { return detail::decode_range(r, prefix, end); },
      std::move(done)));
}

void etcd_store::commit(std::vector<store_op> ops, store_callback<std::vector<op_outcome>> done) {
  submit(std::make_unique<commit_op>(*this, std::move(ops), std::move(done)));
}

std::unique_ptr<cluster::watch_handle> etcd_store::watch(std::string prefix, revision from,
                                                         cluster::watch_handler& h) {
  auto st = std::make_shared<watch_state>();
  st->completion_thread = thread_.get_id();
  auto o = std::make_unique<watch_op>(*this, st, std::move(prefix), from, h);
  if (from <= 0) {
    op* raw = o.release();
    enlist(raw);
    raw->fail_later(error(errc::invalid_argument, "a watch starts at a revision > 0"));
  } else {
    submit(std::move(o));
  }
  return std::make_unique<etcd_watch_handle>(std::move(st));
}

// How long connect() waits before it asks again after an UNAVAILABLE answer.
constexpr milliseconds k_connect_retry{100};

// "host:port" with a numeric IPv4 host.
bool is_ipv4_endpoint(const std::string& e) {
  const auto colon = e.rfind(':');
  if (colon == std::string::npos || colon + 1 == e.size()) return false;
  in_addr addr{};
  if (inet_pton(AF_INET, e.substr(0, colon).c_str(), &addr) != 1) return false;
  return std::all_of(e.begin() + static_cast<std::ptrdiff_t>(colon) + 1, e.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

result<std::unique_ptr<cluster::store>> connect(etcd_options options) {
  auto bad = [](std::string what) { return error(errc::invalid_cluster_config, std::move(what)); };
  if (options.endpoints.empty()) return bad("etcd_options.endpoints: empty");
  if (options.call_timeout <= milliseconds(0)) return bad("etcd_options.call_timeout: <= 0");
  if (options.connect_wait <= milliseconds(0)) return bad("etcd_options.connect_wait: <= 0");
  std::string listed;
  for (auto& e : options.endpoints) {
    if (e.starts_with("http://")) e.erase(0, 7);
    if (e.empty() || e.find("://") != std::string::npos || e.find(',') != std::string::npos) {
      return bad("etcd_options.endpoints: '" + e + "' is not host:port (plain TCP)");
    }
    listed += (listed.empty() ? "" : ",") + e;
  }
  std::string target;
  if (options.endpoints.size() == 1) {
    target = options.endpoints.front();
  } else {
    for (const auto& e : options.endpoints) {
      if (!is_ipv4_endpoint(e)) {
        return bad(
            "etcd_options.endpoints: with several endpoints each must be a numeric IPv4 "
            "host:port, not '" +
            e + "'");
      }
    }
    target = "ipv4:" + listed;
  }

  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName("round_robin");
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, channel_tuning::initial_reconnect_backoff_ms);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, channel_tuning::max_reconnect_backoff_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, channel_tuning::keepalive_time_ms);
  // Keep pinging while a watch is idle (gRPC stops after 2 pings without data by default, so a
  // member paused after a quiet spell would go unnoticed).
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A ping unanswered for call_timeout (at least 1 s, at most an hour) ends the connection.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(std::clamp<milliseconds::rep>(
                                                 options.call_timeout.count(), 1000, 3'600'000)));
  args.SetMaxReceiveMessageSize(channel_tuning::max_receive_bytes);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);

  // The first answer: a linearizable read, so the cluster has a leader and serves. A member
  // that answers UNAVAILABLE ("leader changed", "no leader", "request timed out": an election
  // is going on, or it has just restarted) is asked again until connect_wait is up, as one
  // that does not answer yet is waited for.
  {
    auto stub = pb::KV::NewStub(channel);
    const auto deadline = std::chrono::system_clock::now() + options.connect_wait;
    pb::RangeRequest req;
    req.set_key("/akt");
    req.set_count_only(true);
    pb::RangeResponse resp;
    grpc::Status status;
    for (;;) {
      grpc::ClientContext ctx;
      ctx.set_deadline(deadline);
      ctx.set_wait_for_ready(true);
      resp.Clear();
      status = stub->Range(&ctx, req, &resp);
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
          std::chrono::system_clock::now() + k_connect_retry >= deadline) {
        break;
      }
      std::this_thread::sleep_for(k_connect_retry);
    }
    if (!status.ok()) {
      return error(errc::cluster_unavailable, "no etcd endpoint of " + listed +
                                                  " answered within " +
                                                  std::to_string(options.connect_wait.count()) +
                                                  " ms: " + status.error_message());
    }
    if (!resp.has_header() || resp.header().revision() <= 0) {
      return error(errc::cluster_unavailable, "the server at " + listed + " is not etcd v3");
    }
  }
  return std::unique_ptr<cluster::store>(
      std::make_unique<etcd_store>(std::move(channel), options.call_timeout));
}

namespace {
class etcd_provider final : public cluster::store_provider {
 public:
  explicit etcd_provider(etcd_options o) : options_(std::move(o)) {}
  result<std::unique_ptr<cluster::store>> open_store(std::string_view) override {
    return connect(options_);
  }

 private:
  const etcd_options options_;
};
}  // namespace

std::shared_ptr<cluster::store_provider> provider(etcd_options options) {
  return std::make_shared<etcd_provider>(std::move(options));
}

}  // namespace akt::etcd
