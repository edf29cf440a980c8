#!/usr/bin/env bash
# Starts one etcd member for the examples, on free loopback ports, with its data dir on tmpfs
# (/dev/shm) when there is one, and prints its client endpoint (host:port, for
# akt::etcd::etcd_options::endpoints) on stdout once it serves. It runs in the foreground until
# interrupted (Ctrl-C) or killed, then removes its data dir.
#   scripts/etcd.sh            # prints e.g. 127.0.0.1:40123, then waits
#   scripts/etcd.sh --port N   # client port N (peer port: any free one)
set -euo pipefail

command -v etcd >/dev/null 2>&1 || { echo "etcd.sh: etcd not found; run scripts/deps.sh" >&2; exit 1; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
client_port=""
if [ "${1:-}" = "--port" ]; then client_port=${2:?--port needs a number}; fi
[ -n "$client_port" ] || client_port=$(free_port)
peer_port=$(free_port)
while [ "$peer_port" = "$client_port" ]; do peer_port=$(free_port); done

base=/dev/shm
[ -d "$base" ] || base=${TMPDIR:-/tmp}
dir=$(mktemp -d "$base/akt-etcd-XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

client=http://127.0.0.1:$client_port
peer=http://127.0.0.1:$peer_port
etcd --name akt --data-dir "$dir/data" \
  --listen-client-urls "$client" --advertise-client-urls "$client" \
  --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
  --initial-cluster "akt=$peer" --initial-cluster-state new --log-level warn \
  >"$dir/etcd.log" 2>&1 &
pid=$!

for _ in $(seq 1 300); do
  if curl -fsS "$client/health" 2>/dev/null | grep -q '"health":"true"'; then
    echo "127.0.0.1:$client_port"
    wait "$pid"
    echo "etcd.sh: etcd exited; its log:" >&2
    cat "$dir/etcd.log" >&2
    exit 1
  fi
  kill -0 "$pid" 2>/dev/null || { echo "etcd.sh: etcd did not start:" >&2; cat "$dir/etcd.log" >&2; exit 1; }
  sleep 0.1
done
echo "etcd.sh: etcd did not serve within 30 s" >&2
exit 1
