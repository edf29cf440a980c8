// The local grain directory (src/grain/local_grain_directory.cpp) on its own: an entry is behind
// its gate while its activation runs, and opened only once the activating sender visited it.
// The idle check relies on this: an activation whose first message is not in yet is not idle.

#include <gtest/gtest.h>

#include <akt/akt.hpp>

#include <memory>
#include <string>

#include "grain/grain_directory.hpp"

namespace {

using akt::detail::actor_cell;
using akt::detail::directory_link;
using akt::detail::grain_directory;

class dummy final : public akt::actor {
 public:
  void receive(akt::receive_context&) override {}
};

directory_link the_link;  // the one entry these tests make
directory_link& link_of(actor_cell*) { return the_link; }

TEST(Grain_Directory, AnEntryIsOpenedOnlyOnceItsActivatingSenderHasVisitedIt) {
  akt::actor_system sys("directory");
  ASSERT_TRUE(sys.start());
  auto p = sys.spawn<dummy>("dummy");
  ASSERT_TRUE(p);
  actor_cell* const cell = akt::detail::cell_of(*p);
  std::unique_ptr<grain_directory> dir = akt::detail::make_local_grain_directory(&link_of);

  struct activation final : grain_directory::activator {
    grain_directory* dir = nullptr;
    actor_cell* cell = nullptr;
    bool opened_while_starting = true;
    akt::result<directory_link*> create() override {
      cell->add_ref();  // the directory's reference, which release() drops
      the_link = directory_link{};
      the_link.cell = cell;
      return &the_link;
    }
    akt::error start(actor_cell* c) override {
      // The activation runs with the directory's lock released: an idle check could ask now.
      opened_while_starting = dir->opened(c);
      return {};
    }
  } how;
  how.dir = dir.get();
  how.cell = cell;
  struct counting_visitor final : grain_directory::visitor {
    int visits = 0;
    akt::error visit(actor_cell*) override {  // under the directory's lock: no calls back
      ++visits;
      return {};
    }
  } v;

  const std::string key(cell->path());
  ASSERT_FALSE(dir->with_activation(key, how, v));
  EXPECT_FALSE(how.opened_while_starting) << "behind its gate until the sender has visited it";
  EXPECT_EQ(v.visits, 1);
  EXPECT_TRUE(dir->opened(cell));
  EXPECT_TRUE(dir->release(cell, false));
  EXPECT_TRUE(dir->opened(cell)) << "an entry that left is not waiting for anyone";
  ASSERT_TRUE(sys.stop());
}

}  // namespace
