// The in-process store's public face (akt/cluster/inproc_store.hpp): the store handle, its
// clients with their fault switches, and watch handles.

#include "akt/cluster/inproc_store.hpp"

#include <algorithm>
#include <utility>

#include "akt/core/assert.hpp"
#include "cluster/client_core.hpp"
#include "cluster/inproc_state.hpp"

namespace akt::cluster {

// ---- inproc_store ----

inproc_store::inproc_store(inproc_store_options options)
    : state_(std::make_shared<detail::inproc_state>(std::move(options))) {}

inproc_store::~inproc_store() = default;

std::unique_ptr<inproc_client> inproc_store::connect(std::string client_name,
                                                     inproc_client_options options) {
  return std::unique_ptr<inproc_client>(new inproc_client(state_, std::move(client_name), options));
}

result<void> inproc_store::compact(revision r) { return state_->compact(r); }
revision inproc_store::current_revision() const { return state_->current_revision(); }
revision inproc_store::compact_revision() const { return state_->compact_revision(); }
std::size_t inproc_store::lease_count() const { return state_->lease_count(); }
const std::shared_ptr<store_clock>& inproc_store::clock() const noexcept { return state_->clock(); }

// ---- watch handles ----

namespace {

// Contract: cancel() from any thread, a completion of the watch's own client included, any
// number of times, also after the client and the store are gone.
class inproc_watch_handle final : public watch_handle {
 public:
  inproc_watch_handle(std::shared_ptr<detail::watcher> w, std::weak_ptr<detail::inproc_state> state)
      : w_(std::move(w)), state_(std::move(state)) {}
  ~inproc_watch_handle() override { cancel(); }

  void cancel() override {
    if (auto state = state_.lock()) state->remove_watcher(*w_);
    w_->core->cancel(*w_);
  }

 private:
  std::shared_ptr<detail::watcher> w_;
  std::weak_ptr<detail::inproc_state> state_;
};

}  // namespace

// ---- inproc_client ----

inproc_client::inproc_client(std::shared_ptr<detail::inproc_state> state, std::string name,
                             inproc_client_options options)
    : state_(std::move(state)),
      core_(std::make_shared<detail::client_core>(name, options.call_timeout)),
      name_(std::move(name)) {}

inproc_client::~inproc_client() {
  AKT_ASSERT(!core_->on_thread());  // never from one of this client's own completions
  core_->shutdown(state_->remove_watchers_of(*core_));
}

bool inproc_client::unreachable() const noexcept {
  return core_->cut_off.load(std::memory_order_relaxed);
}

void inproc_client::grant_lease(std::chrono::seconds ttl, store_callback<lease_grant> done) {
  if (unreachable()) return core_->post_timeout(std::move(done));
  core_->post_result(state_->grant(ttl), std::move(done));
}

void inproc_client::keep_alive(lease_id id, store_callback<keep_alive_ack> done) {
  if (unreachable() || core_->drop_keep_alives.load(std::memory_order_relaxed)) {
    return core_->post_timeout(std::move(done));
  }
  core_->post_result(state_->keep_alive(id), std::move(done));
}

void inproc_client::revoke_lease(lease_id id, store_callback<void> done) {
  if (unreachable()) return core_->post_timeout(std::move(done));
  core_->post_result(state_->revoke(id), std::move(done));
}

void inproc_client::get(std::string key, store_callback<range_result> done) {
  if (unreachable()) return core_->post_timeout(std::move(done));
  core_->post_result(result<range_result>(state_->read(key, false)), std::move(done));
}

void inproc_client::get_prefix(std::string prefix, store_callback<range_result> done) {
  if (unreachable()) return core_->post_timeout(std::move(done));
  core_->post_result(result<range_result>(state_->read(prefix, true)), std::move(done));
}

void inproc_client::commit(std::vector<store_op> ops,
                           store_callback<std::vector<op_outcome>> done) {
  if (unreachable()) return core_->post_timeout(std::move(done));
  core_->post_result(state_->commit(ops), std::move(done));
}

std::unique_ptr<watch_handle> inproc_client::watch(std::string prefix, revision from,
                                                   watch_handler& h) {
  auto w = std::make_shared<detail::watcher>();
  w->prefix = std::move(prefix);
  w->from = from;
  w->handler = &h;
  w->core = core_;
  auto handle = std::make_unique<inproc_watch_handle>(w, state_);
  if (from <= 0) {
    core_->post_end(w, error(errc::invalid_argument, "a watch starts at a revision above 0"), 0);
  } else {
    state_->add_watcher(w);  // checks cut_off under the store's mutex
  }
  return handle;
}

void inproc_client::cut_off(bool on) {
  core_->cut_off.store(on, std::memory_order_relaxed);
  if (on) end_watches();
}

void inproc_client::drop_keep_alives(bool on) {
  core_->drop_keep_alives.store(on, std::memory_order_relaxed);
}

void inproc_client::sever_watches() { end_watches(); }

void inproc_client::delay_replies(std::chrono::milliseconds d) {
  core_->delay_ms.store(std::max<std::int64_t>(d.count(), 0), std::memory_order_relaxed);
}

void inproc_client::end_watches() {
  for (const auto& w : state_->remove_watchers_of(*core_)) {
    core_->post_end(
        w, error(errc::cluster_registry_timeout, "the watch stream of " + name_ + " was lost"), 0);
  }
}

}  // namespace akt::cluster
