// The one-op conveniences of akt::cluster::store, over commit.

#include "akt/cluster/store.hpp"

#include <utility>

namespace akt::cluster {

namespace {
// Completes `done` with the only outcome of a one-op commit.
store_callback<std::vector<op_outcome>> first_of(store_callback<op_outcome> done) {
  return [done = std::move(done)](result<std::vector<op_outcome>> r) {
    if (!r) {
      done(r.error());
    } else if (r->size() != 1) {
      done(error(errc::protocol_error, "the store answered a one-op commit with " +
                                           std::to_string(r->size()) + " outcomes"));
    } else {
      done(std::move(r->front()));
    }
  };
}
}  // namespace

void store::put_if_absent(std::string key, std::string value, lease_id lease,
                          store_callback<op_outcome> done) {
  std::vector<store_op> ops;
  ops.push_back(store_op::put_if_absent(std::move(key), std::move(value), lease));
  commit(std::move(ops), first_of(std::move(done)));
}

void store::delete_if_created_at(std::string key, revision create_revision,
                                 store_callback<op_outcome> done) {
  std::vector<store_op> ops;
  ops.push_back(store_op::delete_if_created_at(std::move(key), create_revision));
  commit(std::move(ops), first_of(std::move(done)));
}

}  // namespace akt::cluster
