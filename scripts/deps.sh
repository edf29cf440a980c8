#!/usr/bin/env bash
# Installs what akt needs to build, test and benchmark, on Debian 12, if it is missing.
# Safe to repeat: it installs nothing when everything is there.
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache pkg-config   # build
  libgtest-dev libgmock-dev                 # tests
  clang-format-14                           # the format check (scripts/check_format.sh)
  libbenchmark-dev                          # benchmarks
  libcaf-dev                                # the CAF 0.17 comparison (bench/compare)
  tzdata                                    # time zones for cron schedules (/usr/share/zoneinfo)
  libasio-dev libssl-dev                    # remoting: TCP and TLS
  libprotobuf-dev protobuf-compiler         # remoting: handshake and control frames
  clang-14 libclang-rt-14-dev               # the fuzzer (scripts/fuzz.sh, libFuzzer)
  libgrpc++-dev protobuf-compiler-grpc      # akt::etcd: gRPC C++ (Debian's gRPCConfig needs the plugin)
  etcd-server etcd-client                   # the etcd store's tests and scripts/etcd.sh
  curl python3                              # scripts/etcd.sh: health check, free ports
  libcpp-httplib-dev                        # observability: the HTTP endpoint, the OTLP exporter
  libspdlog-dev                             # observability: the spdlog logger adapter
  prometheus                                # observability: promtool checks /metrics in a test
  chromium                                  # observability: the dashboard's browser test
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "akt: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "akt: missing packages (${missing[*]}) and not root; run as root" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
