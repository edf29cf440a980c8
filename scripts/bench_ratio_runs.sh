#!/usr/bin/env bash
# Runs a benchmark binary N times (each run: its repetitions interleaved at random) and prints,
# per process run, the median items/s of each benchmark named and the ratio of the first to each
# of the others, then the median of those ratios over the runs. A ratio taken inside one process
# run saw the same machine; the median over runs is what docs/benchmarks.md quotes for a shape
# whose single runs swing (this 2-core machine's speed moves 3x between phases).
#
#   scripts/bench_ratio_runs.sh RUNS BINARY NAME NAME... [-- EXTRA_BENCHMARK_FLAGS]
#   scripts/bench_ratio_runs.sh 10 build/release/bench/akt_cluster_grain_bench \
#     ClusterGrainRefTellOneWay/etcd:0 GrainRefTellOneWayPairwise GrainRefTellOneWayBesideCluster
#
# NAME is a benchmark's name without BM_ and without /real_time. Prints also the CPU the process
# used (user + sys over wall, in cores).
set -euo pipefail
runs=${1:?runs}; bin=${2:?binary}; shift 2
names=(); extra=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; extra=("$@"); break; fi
  names+=("$1"); shift
done
[ ${#names[@]} -ge 2 ] || { echo "bench_ratio_runs.sh: name at least two benchmarks" >&2; exit 2; }
filter="^BM_($(IFS='|'; echo "${names[*]}"))(/real_time)?\$"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$runs"); do
  /usr/bin/time -f "%U %S %e" -o "$out/time" "$bin" --benchmark_filter="$filter" \
    --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_enable_random_interleaving=true --benchmark_format=json "${extra[@]}" \
    >"$out/run.$r.json" 2>/dev/null
  python3 - "$out/run.$r.json" "$out/time" "${names[@]}" <<'PY' | tee -a "$out/ratios"
import json, sys
d = json.load(open(sys.argv[1]))
med = {b["run_name"].removeprefix("BM_").removesuffix("/real_time"): b["items_per_second"]
       for b in d["benchmarks"] if b.get("aggregate_name") == "median"}
names = sys.argv[3:]
u, s, w = (float(x) for x in open(sys.argv[2]).read().split())
first = med[names[0]]
cells = [f"{n} {med[n] / 1e6:.2f}M" for n in names]
ratios = [f"{first / med[n]:.3f}" for n in names[1:]]
print("  ".join(cells), " ratios", " ".join(ratios), f" cores {(u + s) / w:.2f}")
PY
done
python3 - "$out/ratios" "${names[@]}" <<'PY'
import statistics, sys
rows = [l.split(" ratios ")[1].split(" cores")[0].split() for l in open(sys.argv[1])]
for i, n in enumerate(sys.argv[3:]):
    vals = sorted(float(r[i]) for r in rows)
    print(f"median over {len(vals)} runs: {sys.argv[2]} / {n} = {statistics.median(vals):.3f}"
          f"  (runs: {' '.join(f'{v:.2f}' for v in vals)})")
PY
