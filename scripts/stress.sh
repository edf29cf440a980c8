#!/usr/bin/env bash
# Runs the whole test suite N times under ThreadSanitizer while the machine is loaded, stopping
# at the first failure and naming the test that failed. Proves that the suite is not flaky:
#
#   scripts/stress.sh 10          # 10 consecutive green runs, or the first failure
#
# Load: `stress-ng --cpu L` when stress-ng is installed, else L busy shell loops; L is the
# number of CPUs (override with AKT_STRESS_LOAD=L; 0 for no load). The tests run with ctest -j
# on every CPU too, so the machine is oversubscribed about twice, which is when a test that
# sleeps and then asserts fails. Each run writes build/tsan/stress/run-<i>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-}
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/stress.sh N   (N >= 1: how many full runs of the suite)" >&2
  exit 2
fi
cpus=$(nproc)
load=${AKT_STRESS_LOAD:-$cpus}
jobs=${AKT_STRESS_JOBS:-$cpus}

./scripts/deps.sh
echo "==> tsan: configure and build"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs"

load_pids=()
stop_load() {
  # Only the processes this script started, by their ids.
  for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${load_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  load_pids=()
}
trap stop_load EXIT INT TERM

if [ "$load" -gt 0 ]; then
  if command -v stress-ng >/dev/null 2>&1; then
    echo "==> load: stress-ng --cpu $load"
    stress-ng --cpu "$load" --quiet &
    load_pids+=($!)
  else
    echo "==> load: $load busy loops (install stress-ng for a richer load)"
    for ((i = 0; i < load; i++)); do
      (while :; do :; done) &
      load_pids+=($!)
    done
  fi
fi

log_dir=build/tsan/stress
mkdir -p "$log_dir"
for ((i = 1; i <= runs; i++)); do
  log="$log_dir/run-$i.log"
  start=$(date +%s)
  # ThreadSanitizer needs a predictable address-space layout on some kernels.
  if setarch "$(uname -m)" -R ctest --preset tsan -j "$jobs" --stop-on-failure >"$log" 2>&1; then
    echo "==> run $i/$runs: green ($(($(date +%s) - start)) s)"
    continue
  fi
  echo "==> run $i/$runs: FAILED after $((i - 1)) consecutive green runs; log: $log" >&2
  failed=build/tsan/Testing/Temporary/LastTestsFailed.log
  if [ -f "$failed" ]; then
    echo "failed tests:" >&2
    sed 's/^[0-9]*:/  /' "$failed" >&2
  fi
  grep -E "^(\[  FAILED  \]|.*Failure$|WARNING: ThreadSanitizer)" "$log" | head -20 >&2 || true
  exit 1
done
echo "==> $runs consecutive green runs under TSan with load $load"
