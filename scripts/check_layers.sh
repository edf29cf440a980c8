#!/usr/bin/env bash
# Checks that every module uses only the modules below it (DESIGN.md, "Modules"), two ways:
#  1. includes: no file of include/akt/<m>/ or src/<m>/ includes a header of a module above m;
#  2. links (given the build folder): no symbol that libakt_<m>.a needs is defined only in the
#     library of a module above m (so a call upwards fails here even though every program links
#     all the modules).
# Written exceptions go in the `allowed` list below, each with its reason. Exits 1 on a breach.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-}
modules=(core metrics pool mailbox dispatch actor grain remote cluster etcd http testkit)
# "file: included module" pairs allowed against the order, with the reason. None today.
allowed=()

rank() { local i; for i in "${!modules[@]}"; do [ "${modules[$i]}" = "$1" ] && echo "$i" && return; done; echo -1; }
failures=0

for m in "${modules[@]}"; do
  r=$(rank "$m")
  for dir in "include/akt/$m" "src/$m"; do
    [ -d "$dir" ] || continue
    while IFS= read -r hit; do
      file=${hit%%:*}
      dep=$(sed -E 's/.*#[[:space:]]*include[[:space:]]+["<](akt\/)?([a-z_]+)\/.*/\2/' <<<"$hit")
      d=$(rank "$dep")
      [ "$d" -gt "$r" ] || continue
      ok=0
      for a in "${allowed[@]}"; do [ "$a" = "$file: $dep" ] && ok=1; done
      [ $ok = 1 ] && continue
      echo "layering: $hit  ($m includes $dep, a module above it)"
      failures=$((failures + 1))
    done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+["<](akt/)?[a-z_]+/' "$dir" || true)
  done
done

if [ -n "$build" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for m in "${modules[@]}"; do
    lib="$build/libakt_$m.a"
    [ -f "$lib" ] || { : >"$tmp/$m.def"; : >"$tmp/$m.undef"; continue; }
    # Strong definitions (text, data, bss, read-only); weak ones (inline functions, templates)
    # are defined wherever they are used and prove nothing.
    nm -C --defined-only "$lib" 2>/dev/null | awk '$2 ~ /^[TDBR]$/ {$1=""; $2=""; sub(/^  /, ""); print}' | sort -u >"$tmp/$m.def"
    nm -C --undefined-only "$lib" 2>/dev/null | awk '$1 == "U" {$1=""; sub(/^ /, ""); print}' | sort -u >"$tmp/$m.undef"
  done
  for m in "${modules[@]}"; do
    r=$(rank "$m")
    for up in "${modules[@]}"; do
      [ "$(rank "$up")" -gt "$r" ] || continue
      while IFS= read -r sym; do
        [ -n "$sym" ] || continue
        echo "layering: akt_$m needs '$sym', defined in akt_$up (a module above it)"
        failures=$((failures + 1))
      done < <(comm -12 "$tmp/$m.undef" "$tmp/$up.def")
    done
  done
fi

if [ "$failures" -gt 0 ]; then
  echo "layering: $failures breach(es)"
  exit 1
fi
echo "layering: every module uses only the modules below it"
