#!/usr/bin/env bash
# The bank example (examples/cluster_bank.cpp) as separate processes on a real etcd: starts a
# throw-away etcd (scripts/etcd.sh), three node processes on loopback that each deposit into the
# same six accounts, stops node 2 cleanly (SIGTERM: it calls sys.stop()), kills node 1
# (kill -9) while node 0 keeps depositing, stops node 0, then runs the check: a fourth process
# joins, sends again the deposits the nodes left unanswered (same ids), and verifies that every
# acknowledged deposit is in the ledger exactly once. Everything stops by itself; the temp dir
# is removed. Exit status: the check's. Run by ctest (Example_cluster_bank_etcd).
#   scripts/cluster_bank.sh [build/dev/examples/example_cluster_bank]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin=${1:-$here/../build/dev/examples/example_cluster_bank}
[ -x "$bin" ] || { echo "cluster_bank.sh: $bin not built" >&2; exit 2; }

# gRPC keeps process-lifetime allocations that LeakSanitizer would report (ASan builds).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$here/../tests/etcd/lsan.supp}

dir=$(mktemp -d "${TMPDIR:-/tmp}/akt-bank-XXXXXX")
etcd_script=""
declare -a node_pid=()
cleanup() {
  for pid in "${node_pid[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  if [ -n "$etcd_script" ]; then
    kill -TERM "$etcd_script" 2>/dev/null || true
    wait "$etcd_script" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
started=$SECONDS
say() { echo "-- $((SECONDS - started)) s: $*"; }

"$here/etcd.sh" >"$dir/etcd.endpoint" &
etcd_script=$!
endpoint=""
for _ in $(seq 1 300); do
  endpoint=$(head -n1 "$dir/etcd.endpoint")
  [ -n "$endpoint" ] && break
  kill -0 "$etcd_script" 2>/dev/null || { echo "cluster_bank.sh: etcd did not start" >&2; exit 1; }
  sleep 0.1
done
[ -n "$endpoint" ] || { echo "cluster_bank.sh: no etcd within 30 s" >&2; exit 1; }
say "etcd at $endpoint"

for n in 0 1 2; do
  "$bin" --node "$n" --etcd "$endpoint" --dir "$dir" >"$dir/bank-$n.out" 2>&1 &
  node_pid[$n]=$!
done

acks() { if [ -f "$dir/bank-$1.log" ]; then grep -c '^ack ' "$dir/bank-$1.log" || true; else echo 0; fi; }
# Waits (at most 20 s) until node $1 has acknowledged $2 more deposits than it had.
wait_acks() {
  local target=$(($(acks "$1") + $2))
  for _ in $(seq 1 200); do
    [ "$(acks "$1")" -ge "$target" ] && return 0
    kill -0 "${node_pid[$1]}" 2>/dev/null || { echo "node $1 exited" >&2; return 1; }
    sleep 0.1
  done
  echo "cluster_bank.sh: node $1 stalled at $(acks "$1") acknowledged deposits" >&2
  return 1
}
show_nodes() { for n in 0 1 2; do sed "s/^/   /" "$dir/bank-$n.out" 2>/dev/null || true; done; }

ok=1
for n in 0 1 2; do wait_acks "$n" 20 || ok=0; done
say "every node deposits; node 2 stops cleanly (SIGTERM)"
kill -TERM "${node_pid[2]}"
wait "${node_pid[2]}" || { echo "cluster_bank.sh: node 2 did not stop cleanly" >&2; ok=0; }
unset 'node_pid[2]'
wait_acks 0 20 && wait_acks 1 20 || ok=0
say "node 1 is killed (kill -9)"
kill -KILL "${node_pid[1]}"
wait "${node_pid[1]}" 2>/dev/null || true
unset 'node_pid[1]'
# Node 0 goes round the six accounts: two rounds need node 1's accounts on a live node.
wait_acks 0 12 || ok=0
say "node 0 stops cleanly (SIGTERM)"
kill -TERM "${node_pid[0]}"
wait "${node_pid[0]}" || { echo "cluster_bank.sh: node 0 did not stop cleanly" >&2; ok=0; }
unset 'node_pid[0]'
show_nodes
say "the check"
timeout 60 "$bin" --check --etcd "$endpoint" --dir "$dir" | grep -v ' activated, ' || ok=0
say "done"
[ "$ok" = 1 ] && echo "cluster_bank.sh: passed" || { echo "cluster_bank.sh: FAILED"; exit 1; }
