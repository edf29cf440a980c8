#!/usr/bin/env bash
# Builds the frame fuzzer (the `fuzz` preset: clang++-14, libFuzzer with ASan+UBSan) and runs it
# for N inputs (default 200000) from the seed corpus fuzz/corpus/frame:
#
#   scripts/fuzz.sh            # 200000 runs
#   scripts/fuzz.sh 5000000    # a longer session
#
# New inputs the fuzzer finds go to build/fuzz/corpus (the committed seeds are only read); a
# crashing input is written to build/fuzz/artifacts/ and the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-200000}
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [N]   (N >= 1: how many inputs to run)" >&2
  exit 2
fi
if ! command -v clang++-14 >/dev/null 2>&1; then
  echo "fuzz: clang++-14 not found; run scripts/deps.sh" >&2
  exit 1
fi

echo "==> fuzz: configure and build akt_fuzz_frame"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target akt_fuzz_frame
mkdir -p build/fuzz/corpus build/fuzz/artifacts
echo "==> fuzz: ${runs} runs"
./build/fuzz/fuzz/akt_fuzz_frame -runs="$runs" -artifact_prefix=build/fuzz/artifacts/ \
  -print_final_stats=1 build/fuzz/corpus fuzz/corpus/frame
