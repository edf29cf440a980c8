// The envelope recycler hook (see envelope.hpp).

#include "akt/mailbox/envelope.hpp"

#include <cstdio>
#include <exception>

namespace akt::detail {

namespace {
// Until the actor layer installs its recycler there are no envelopes to give back: reaching this
// means a program built envelopes without the actor module, which cannot happen through the API.
void no_recycler(envelope*) noexcept {
  std::fputs("akt: an envelope was recycled before the actor layer installed its pools\n", stderr);
  std::terminate();
}
}  // namespace

envelope_recycler g_envelope_recycler = &no_recycler;

void install_envelope_recycler(envelope_recycler r) noexcept { g_envelope_recycler = r; }

}  // namespace akt::detail
