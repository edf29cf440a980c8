#!/usr/bin/env bash
# Checks that every hand-written C++ file (include/ src/ tests/ bench/ examples/) is formatted as
# the repository's .clang-format says. With --fix, formats them in place instead.
# Uses clang-format 14 (Debian 12's; scripts/deps.sh installs it): other versions format some
# constructs differently, so a file formatted by another version may fail here.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=(--dry-run --Werror)
[ "${1:-}" = "--fix" ] && mode=(-i)

format=""
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null 2>&1; then format=$c; break; fi
done
if [ -z "$format" ]; then
  echo "format: clang-format not found; run scripts/deps.sh (it installs clang-format-14)" >&2
  exit 1
fi

dirs=(include src tests bench examples)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked and new (not ignored) files: build folders and generated files are never listed.
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- "${dirs[@]}" |
    grep -E '\.(cpp|hpp|h|cc)$' | while IFS= read -r f; do [ -f "$f" ] && echo "$f"; done)
else
  mapfile -t files < <(find "${dirs[@]}" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \
    -o -name '*.cc' \) | sort)
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "format: no source files found" >&2
  exit 1
fi

if ! "$format" --style=file "${mode[@]}" "${files[@]}"; then
  echo "format: the files above are not clang-formatted; run scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "format: ${#files[@]} files checked with $("$format" --version | sed 's/.*version //')"
