#!/usr/bin/env bash
# Runs a program against a throw-away etcd: starts one with scripts/etcd.sh, runs
# `program args... <endpoint>`, then stops etcd (by its script, which SIGKILLs it and removes
# its data dir) and exits with the program's status. Used by the etcd example's test.
#   scripts/with_etcd.sh ./build/dev/examples/example_cluster_on_etcd
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out=$(mktemp)
"$here/etcd.sh" >"$out" &
etcd_script=$!
stop() {
  kill -TERM "$etcd_script" 2>/dev/null || true
  wait "$etcd_script" 2>/dev/null || true
  rm -f "$out"
}
trap stop EXIT
for _ in $(seq 1 300); do
  endpoint=$(head -n1 "$out")
  [ -n "$endpoint" ] && break
  kill -0 "$etcd_script" 2>/dev/null || { echo "with_etcd.sh: etcd did not start" >&2; exit 1; }
  sleep 0.1
done
[ -n "${endpoint:-}" ] || { echo "with_etcd.sh: no endpoint within 30 s" >&2; exit 1; }
"$@" "$endpoint"
