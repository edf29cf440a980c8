#!/usr/bin/env bash
# Builds the fuzzers (the `fuzz` preset: clang++-14, libFuzzer with ASan+UBSan) and runs each
# from its seed corpus: the frame fuzzer for N inputs (default 200000, fuzz/corpus/frame), then
# the member record, the grain claim record and the actor name record fuzzers for M each
# (default 100000, a few seconds; fuzz/corpus/member_record, fuzz/corpus/claim_record,
# fuzz/corpus/actor_name_record):
#
#   scripts/fuzz.sh                    # 200000 + 3 x 100000 runs
#   scripts/fuzz.sh 5000000 5000000    # a longer session
#
# New inputs a fuzzer finds go to build/fuzz/corpus/<name> (the committed seeds are only read);
# a crashing input is written to build/fuzz/artifacts/ and the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-200000}
member_runs=${2:-100000}
if ! [[ "$runs" =~ ^[1-9][0-9]*$ && "$member_runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [N [M]]   (N, M >= 1: inputs for the frame, record fuzzers)" >&2
  exit 2
fi
if ! command -v clang++-14 >/dev/null 2>&1; then
  echo "fuzz: clang++-14 not found; run scripts/deps.sh" >&2
  exit 1
fi

echo "==> fuzz: configure and build akt_fuzz_frame and the record fuzzers"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target akt_fuzz_frame akt_fuzz_member_record akt_fuzz_claim_record \
  akt_fuzz_actor_name_record
mkdir -p build/fuzz/corpus/frame build/fuzz/corpus/member_record build/fuzz/corpus/claim_record \
  build/fuzz/corpus/actor_name_record build/fuzz/artifacts
echo "==> fuzz: frame, ${runs} runs"
./build/fuzz/fuzz/akt_fuzz_frame -runs="$runs" -artifact_prefix=build/fuzz/artifacts/ \
  -print_final_stats=1 build/fuzz/corpus/frame fuzz/corpus/frame
echo "==> fuzz: member record, ${member_runs} runs"
./build/fuzz/fuzz/akt_fuzz_member_record -runs="$member_runs" \
  -artifact_prefix=build/fuzz/artifacts/member_record- -print_final_stats=1 \
  build/fuzz/corpus/member_record fuzz/corpus/member_record
echo "==> fuzz: grain claim record, ${member_runs} runs"
./build/fuzz/fuzz/akt_fuzz_claim_record -runs="$member_runs" \
  -artifact_prefix=build/fuzz/artifacts/claim_record- -print_final_stats=1 \
  build/fuzz/corpus/claim_record fuzz/corpus/claim_record
echo "==> fuzz: actor name record, ${member_runs} runs"
./build/fuzz/fuzz/akt_fuzz_actor_name_record -runs="$member_runs" \
  -artifact_prefix=build/fuzz/artifacts/actor_name_record- -print_final_stats=1 \
  build/fuzz/corpus/actor_name_record fuzz/corpus/actor_name_record
