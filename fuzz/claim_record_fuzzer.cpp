// libFuzzer target for the grain claim record's decoder and the registry's key parser
// (src/cluster/grain_claim_record.hpp): both read what the store holds, which comes from the
// network, so they must never crash, never read outside what they are given, and decode_claim
// must return a reason for what it refuses. Built and run by scripts/fuzz.sh; seeds in
// fuzz/corpus/claim_record/.
//
// Input: one byte M, then the bytes B, copied into a heap block of exactly their size (a read one
// byte past them is an ASan report). M even: B is a record's value. Beyond "no crash, no
// sanitizer report", a record that decodes must re-encode (encode_claim, whose preconditions
// AKT_ASSERT checks) to one that decodes to the same record, the re-encoding must be a fixed
// point, and no proper prefix of it may decode (the encoder writes epoch last for that). M odd:
// B is a key of cluster "c"; one that names an identity must be that identity's claim_key.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "cluster/grain_claim_record.hpp"

namespace {

using namespace akt::cluster::detail;

// A fuzz finding that is not a crash: abort so libFuzzer keeps the input.
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "claim_record_fuzzer: invariant broken: %s\n", what);
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
  grain_claim_record out;
  out.role = "stale";  // decode_claim resets what it is given
  const std::string reason = decode_claim(value, out);
  if (!reason.empty()) return;  // refused, with a reason: fine

  check(out.epoch > 0, "a decoded record without an epoch");
  check(!out.owner.empty() && !out.address.empty(), "a decoded record without owner or address");
  const std::string again = encode_claim(out);
  grain_claim_record back;
  check(decode_claim(again, back).empty(),
        "a decoded record re-encodes to one that does not decode");
  check(back == out, "a decoded record re-encodes to a different record");
  check(encode_claim(back) == again, "encode_claim(decode(encode_claim(r))) moved");
  if (again.size() <= k_prefix_check_limit) {
    for (std::size_t n = 0; n < again.size(); ++n) {
      const exact_copy cut(reinterpret_cast<const std::uint8_t*>(again.data()), n);
      grain_claim_record ignored;
      check(!decode_claim(cut.view(), ignored).empty(), "a cut re-encoding decodes");
    }
  }
}

void fuzz_key(std::string_view key) {
  akt::grain_identity id{"stale", "stale"};
  if (!identity_of_claim_key("c", key, id)) {
    check(id.kind == "stale" && id.name == "stale", "a refused key changed the identity");
    return;
  }
  check(valid_grain_identity(id), "a key named an identity that is not valid");
  check(claim_key("c", id) == key, "a key is not the claim_key of the identity it names");
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
