#!/bin/bash
# What building at once buys: examples/wide (a base, six libraries of LIB_SECONDS each that need
# only the base, an image that merges them) on real buildah, every step afresh (--no-cache),
# once one stage at a time (--parallel 1) and once as kiln schedules it, in one script. Prints
# each run's wall time, the critical path its record names (base -> slowest library -> image)
# and their ratio. Target: parallel wall / critical path <= 1.05.
#
# Usage: bench/wide_chain.sh [--kiln PATH] [LIB_SECONDS]
#        (build kiln first: scripts/build; PATH defaults to build/kiln; LIB_SECONDS defaults to
#        8). The chain and its records go in a folder under TMPDIR (default /tmp).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=$root/build/kiln
if [[ ${1:-} == --kiln ]]; then
  kiln=$(realpath "$2")
  shift 2
fi
seconds=${1:-8}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-wide.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$root/examples/wide/." "$work/"
rm -rf "$work/records"
cp /bin/busybox "$work/busybox"
# A chain name of its own: its image tags touch no other run's.
sed -i "s/^name = \"wide\"/name = \"wide-bench-$$\"/" "$work/chain.toml"

# `"key": number` of the newest manifest, the first one found after the line holding `after`.
field() {
  awk -v after="$2" -v key="\"$1\":" '
    index($0, after) { seen = 1 }
    seen && index($0, key) { sub(/.*: */, ""); sub(/,$/, ""); print; exit }
  ' "$work/records/latest/manifest.json"
}

run() {
  local label=$1
  shift
  "$kiln" run "$work/chain.toml" --no-cache --build-arg "LIB_SECONDS=$seconds" "$@" >"$work/$label.out" 2>&1 || {
    echo "wide_chain.sh: kiln run $* failed:" >&2
    tail -20 "$work/$label.out" >&2
    exit 1
  }
  local wall critical parallel
  wall=$(field wall_seconds '"max_parallel"')
  critical=$(field seconds '"critical_path"')
  parallel=$(field max_parallel '"schema"')
  local path
  path=$(grep -o 'critical path (\*) [^:]*' "$work/$label.out" | sed 's/critical path (\*) //')
  printf '%-9s max_parallel %-2s wall %6.1f s  critical path %6.1f s (%s)  ratio %.2f\n' \
    "$label" "$parallel" "$wall" "$critical" "$path" "$(awk "BEGIN { print $wall / $critical }")"
  eval "${label}_wall=$wall ${label}_critical=$critical"
}

echo "examples/wide on $(buildah --version), $(nproc) cores, LIB_SECONDS=$seconds, every step afresh"
run serial --parallel 1
run parallel
echo "target: parallel ratio <= 1.05"
# Stages that build at once share the cores, so each takes longer than alone: the serial run's
# critical path is what the same stages cost without that contention.
awk "BEGIN { printf \"parallel wall / serial run's critical path: %.2f; serial wall / parallel wall: %.2f\\n\", \
  $parallel_wall / $serial_critical, $serial_wall / $parallel_wall }"
