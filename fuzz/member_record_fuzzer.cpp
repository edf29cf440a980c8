// libFuzzer target for the cluster's member record decoder (src/cluster/member_record.hpp): the
// store's values come from the network (etcd, a peer's writes), so decode_member must never
// crash, never read outside the name and the value it is given, and return a reason for what
// it refuses. Built and run by scripts/fuzz.sh; seeds in fuzz/corpus/member_record/.
//
// Input: one byte L, then the node name (the next L bytes, fewer when the input ends), then the
// record's value (the rest). Name and value are copied into heap blocks of exactly their size,
// so a read one byte past either is an ASan report. Beyond "no crash, no sanitizer report", it
// checks that a record which decodes re-encodes (encode_member) to one that decodes to the same
// member, and that the re-encoding is a fixed point.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "cluster/member_record.hpp"

namespace {

using akt::cluster::member;
using namespace akt::cluster::detail;

// A fuzz finding that is not a crash: abort so libFuzzer keeps the input.
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "member_record_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

bool same(const member& a, const member& b) {
  return a.name == b.name && a.address == b.address && a.incarnation == b.incarnation &&
         a.epoch == b.epoch && a.roles == b.roles && a.grain_kinds == b.grain_kinds &&
         a.load == b.load && a.http == b.http && a.leaving == b.leaving;
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t name_size = std::min<std::size_t>(data[0], size - 1);
  const exact_copy name(data + 1, name_size);
  const exact_copy value(data + 1 + name_size, size - 1 - name_size);

  member out;
  out.name = "stale";  // decode_member resets what it is given
  const std::string reason = decode_member(name.view(), value.view(), out);
  if (!reason.empty()) return 0;  // refused, with a reason: fine

  check(out.name == name.view(), "the decoded name is not the one given");
  check(out.epoch > 0, "a decoded record without an epoch");
  const std::string again = encode_member(out);
  member back;
  const std::string reason_back = decode_member(name.view(), again, back);
  check(reason_back.empty(), "a decoded member re-encodes to a record that does not decode");
  check(same(out, back), "a decoded member re-encodes to a different member");
  check(encode_member(back) == again, "encode_member(decode(encode_member(m))) moved");
  return 0;
}
