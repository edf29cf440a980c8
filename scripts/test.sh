#!/usr/bin/env bash
# Second command of the README: runs the whole test suite twice, under ASan+UBSan (dev preset)
# and under ThreadSanitizer (tsan preset). Installs what is missing first. Safe to repeat.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh

jobs=$(nproc)
for preset in dev tsan; do
  echo "==> ${preset}: configure and build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "==> ${preset}: test"
  if [ "$preset" = tsan ]; then
    # ThreadSanitizer needs a predictable address-space layout on some kernels.
    setarch "$(uname -m)" -R ctest --preset "$preset" -j "$jobs"
  else
    ctest --preset "$preset" -j "$jobs"
  fi
done
./scripts/fuzz.sh
echo "==> all tests passed under ASan+UBSan and TSan, and the fuzzers found nothing"
