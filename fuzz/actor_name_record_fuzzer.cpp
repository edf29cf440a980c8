// libFuzzer target for the cluster-wide actor name record's decoder and key parser
// (src/cluster/actor_name_record.hpp): both read what the store holds, which comes from the
// network, so they must never crash, never read outside what they are given, and
// decode_actor_name must return a reason for what it refuses. Built and run by scripts/fuzz.sh;
// seeds in fuzz/corpus/actor_name_record/.
//
// Input: one byte M, then the bytes B, copied into a heap block of exactly their size (a read one
// byte past them is an ASan report). M even: B is a record's value. Beyond "no crash, no
// sanitizer report", a record that decodes must re-encode (encode_actor_name, whose
// preconditions AKT_ASSERT checks) to one that decodes to the same record, the re-encoding must
// be a fixed point, and no proper prefix of it may decode (the encoder writes epoch last for
// that). M odd: B is a key of cluster "c"; one that names an actor must be its actor_name_key.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "cluster/actor_name_record.hpp"
#include "cluster/grain_claim_record.hpp"

namespace {

using namespace akt::cluster::detail;

// A fuzz finding that is not a crash: abort so libFuzzer keeps the input.
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "actor_name_record_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

// An exact-size heap copy (std::string could keep a short one inside itself, out of ASan's
// sight).
struct exact_copy {
  exact_copy(const std::uint8_t* p, std::size_t n) : bytes(new char[n == 0 ? 1 : n]), size(n) {
    if (n != 0) std::memcpy(bytes.get(), p, n);
  }
  std::string_view view() const { return {bytes.get(), size}; }
  std::unique_ptr<char[]> bytes;
  std::size_t size;
};

// Prefixes of re-encodings longer than this are not all tried: the check is quadratic.
constexpr std::size_t k_prefix_check_limit = 4096;

void fuzz_record(std::string_view value) {
  actor_name_record out;
  out.owner = "stale";  // decode_actor_name resets what it is given
  const std::string reason = decode_actor_name(value, out);
  if (!reason.empty()) return;  // refused, with a reason: fine

  check(out.epoch > 0 && out.claim > 0, "a decoded record without an epoch or a claim");
  check(!out.owner.empty() && !out.address.empty(), "a decoded record without owner or address");
  const std::string again = encode_actor_name(out);
  actor_name_record back;
  check(decode_actor_name(again, back).empty(),
        "a decoded record re-encodes to one that does not decode");
  check(back == out, "a decoded record re-encodes to a different record");
  check(encode_actor_name(back) == again, "encode_actor_name(decode(encode(r))) moved");
  if (again.size() <= k_prefix_check_limit) {
    for (std::size_t n = 0; n < again.size(); ++n) {
      const exact_copy cut(reinterpret_cast<const std::uint8_t*>(again.data()), n);
      actor_name_record ignored;
      check(!decode_actor_name(cut.view(), ignored).empty(), "a cut re-encoding decodes");
    }
  }
}

void fuzz_key(std::string_view key) {
  std::string name = "stale";
  if (!name_of_actor_key("c", key, name)) {
    check(name == "stale", "a refused key changed the name");
    return;
  }
  check(valid_grain_name(name), "a key named an actor name that is not valid");
  check(actor_name_key("c", name) == key, "a key is not the actor_name_key of the name it names");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const exact_copy bytes(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    fuzz_record(bytes.view());
  } else {
    fuzz_key(bytes.view());
  }
  return 0;
}
