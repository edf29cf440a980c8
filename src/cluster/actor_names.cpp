// Cluster-wide actor names of a cluster node (actor_names.hpp).

#include "cluster/actor_names.hpp"

#include <utility>
#include <vector>

#include "actor/system_core.hpp"
#include "cluster/membership.hpp"
#include "cluster/store_await.hpp"

namespace akt::cluster::detail {

namespace {

error registry_timeout(const std::string& what) {
  return error(errc::cluster_registry_timeout, what + ": the registry did not answer in time");
}

}  // namespace

actor_names::actor_names(actor_system& sys, membership& m, std::string cluster, std::string node,
                         std::string address)
    : sys_(sys),
      membership_(m),
      cluster_(std::move(cluster)),
      node_(std::move(node)),
      address_(std::move(address)),
      batcher_(std::make_unique<claim_batcher>(m.coordination_store())) {}

actor_names::~actor_names() { close(std::chrono::steady_clock::now()); }

void actor_names::close(std::chrono::steady_clock::time_point deadline) noexcept {
  std::unique_ptr<claim_batcher> b;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (closed_) return;
    // The releases of actors stopped before the node left: let them commit (the lease's revoke
    // would delete them too; an explicit release frees the name at once).
    changed_.wait_until(lock, deadline, [&] { return releases_in_flight_ == 0; });
    closed_ = true;
    b = std::move(batcher_);
  }
  b.reset();  // completes what is queued; waits for the commit in flight
}

std::size_t actor_names::held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_.size();
}

void actor_names::log_warning(const std::string& text) const {
  akt::detail::core_of(sys_)->log(log_level::warning, "akt.cluster", text);
}

result<op_outcome> actor_names::write(store_op op) {
  return await_batched(std::move(op), mutex_, closed_, batcher_, "the node left the cluster",
                       k_wait);
}

error actor_names::claim(std::string_view name_view, const void* owner) {
  const std::string name(name_view);
  std::uint64_t number = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A release of this name still in flight (its actor stopped a moment ago): wait for it, so
    // that a stop followed by a spawn of the name on this node does not fail.
    const bool settled = changed_.wait_for(lock, k_wait, [&] {
      auto h = held_.find(name);
      return closed_ || h == held_.end() || !h->second.releasing;
    });
    if (closed_) return error(errc::system_shutting_down, "the node left the cluster");
    if (!settled) return registry_timeout("releasing the name '" + name + "'");
    if (held_.contains(name)) {
      return error(errc::actor_already_exists,
                   "'" + name + "' is held in the cluster by this node (" + node_ + ")");
    }
    number = ++next_claim_;
    held_[name] = entry{owner, number, 0, false};  // claiming: a second spawn here fails fast
  }
  auto give_up = [&](error e) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto h = held_.find(name); h != held_.end() && h->second.claim == number) held_.erase(h);
    changed_.notify_all();
    return e;
  };
  error last = registry_timeout("the claim of the name '" + name + "'");
  for (int round = 0; round < k_rounds; ++round) {
    const lease_id lease = membership_.lease();
    if (lease == 0)
      return give_up(error(errc::not_owner, "this node is fenced: it holds no lease"));
    const actor_name_record record{number, node_, address_, lease};
    result<op_outcome> r = write(
        store_op::put_if_absent(actor_name_key(cluster_, name), encode_actor_name(record), lease));
    if (!r) {
      last = r.error();
      // Timed out ("possibly written": the next round finds it), or the lease ended under it.
      if (r.code() == errc::cluster_registry_timeout || r.code() == errc::lease_not_found) continue;
      return give_up(last);
    }
    revision token = 0;
    if (r->succeeded) {
      token = r->applied_revision;
    } else {
      actor_name_record found;
      const std::string why = decode_actor_name(r->current.value, found);
      if (!why.empty()) {
        // Another version's record, or one changed by hand: the name is held all the same.
        log_warning("actor name " + r->current.key + " does not decode (" + why +
                    "): the name is taken");
        return give_up(error(errc::actor_already_exists,
                             "'" + name + "' is held by a record this node cannot read"));
      }
      if (found.owner != node_ || found.claim != number || r->current.lease != lease) {
        return give_up(error(errc::actor_already_exists,
                             "'" + name + "' is held in the cluster by node " + found.owner));
      }
      token = r->current.create_revision;  // ours: an earlier round's write that did commit
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto h = held_.find(name);
    if (h != held_.end() && h->second.claim == number) h->second.token = token;
    return {};
  }
  return give_up(last);
}

void actor_names::release(std::string_view name_view, const void* owner) noexcept {
  try {
    const std::string name(name_view);
    revision token = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto h = held_.find(name);
      if (h == held_.end() || h->second.owner != owner || h->second.releasing) return;
      if (closed_ || h->second.token == 0) {  // the lease's revoke deletes it
        held_.erase(h);
        changed_.notify_all();
        return;
      }
      token = h->second.token;
      h->second.releasing = true;
      ++releases_in_flight_;
    }
    release_async(name, token, 0);
  } catch (...) {  // an allocation: the name stays taken until the lease ends
  }
}

// One release counted in releases_in_flight_ (by release()) until its last round completes.
void actor_names::release_async(std::string name, revision token, int round) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_ || !batcher_) {
    finish_release_locked(name);
    return;
  }
  batcher_->submit(store_op::delete_if_created_at(actor_name_key(cluster_, name), token),
                   [self = shared_from_this(), name, token, round](result<op_outcome> r) {
                     // A transient failure is tried again (a few rounds); a failed condition
                     // means the key is gone already, or is another claim's: nothing to do.
                     if (!r && round + 1 < k_rounds && r.code() != errc::system_shutting_down) {
                       self->release_async(name, token, round + 1);
                       return;
                     }
                     std::lock_guard<std::mutex> l(self->mutex_);
                     self->finish_release_locked(name);
                   });
}

void actor_names::finish_release_locked(const std::string& name) {
  if (auto h = held_.find(name); h != held_.end() && h->second.releasing) held_.erase(h);
  --releases_in_flight_;
  changed_.notify_all();
}

result<std::optional<actor_name_record>> actor_names::read(std::string_view name,
                                                           std::chrono::nanoseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return error(errc::system_shutting_down, "the node left the cluster");
  }
  result<range_result> r = await_store<range_result>(
      [&](store_callback<range_result> done) {
        membership_.coordination_store().get(actor_name_key(cluster_, name), std::move(done));
      },
      timeout);
  if (!r) return r.error();
  if (r->kvs.empty()) return std::optional<actor_name_record>();
  actor_name_record rec;
  if (std::string why = decode_actor_name(r->kvs.front().value, rec); !why.empty()) {
    return error(errc::decode_failed, "the cluster's record of the actor name '" +
                                          std::string(name) + "' does not decode: " + why);
  }
  return std::optional<actor_name_record>(std::move(rec));
}

void actor_names::reclaim() noexcept {
  try {
    const lease_id lease = membership_.lease();
    if (lease == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_ || !batcher_) return;
    for (auto& [name, e] : held_) {
      if (e.token == 0 || e.releasing) continue;  // in flight either way
      const actor_name_record record{e.claim, node_, address_, lease};
      batcher_->submit(
          store_op::put_if_absent(actor_name_key(cluster_, name), encode_actor_name(record), lease),
          [self = shared_from_this(), name, claim = e.claim](result<op_outcome> r) {
            std::lock_guard<std::mutex> l(self->mutex_);
            auto h = self->held_.find(name);
            if (h == self->held_.end() || h->second.claim != claim || h->second.releasing) return;
            if (r && r->succeeded) {
              h->second.token = r->applied_revision;
              return;
            }
            // Kept in held_ (its release then deletes nothing: the token is stale), so that a
            // second spawn of the name here still fails while this actor lives.
            self->log_warning("actor name '" + name +
                              "' could not be claimed again after the rejoin (" +
                              (r ? std::string("held by another node") : r.error().message()) +
                              "): the actor runs on, but other nodes no longer find it by name");
          });
    }
  } catch (...) {  // an allocation: those names stay unclaimed until their actors stop
  }
}

}  // namespace akt::cluster::detail
