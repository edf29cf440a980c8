#!/usr/bin/env bash
# First command of the README: installs what is missing, builds akt (Release), runs the
# showcase. Safe to repeat (incremental build).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target example_showcase
./build/release/examples/example_showcase
