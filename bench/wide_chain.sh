#!/bin/bash
# What building at once buys: examples/wide (a base, six libraries of LIB_SECONDS each that need
# only the base, an image that merges them) on real buildah, every step afresh (--no-cache),
# once one stage at a time (--parallel 1) and once as kiln schedules it, in one script. Prints
# each run's wall time, the critical path its record names (base -> slowest library -> image)
# and their ratio. Target: parallel wall / critical path <= 1.05.
#
# --budget-bound: the shape that made the default schedule slower than --parallel 1 where one
# stage compiles with the job budget: a base, then `unit` (it mounts kiln-budget and splits
# 2 x LIB_SECONDS core-seconds of busy loops over its JOBS workers, so its time depends on its
# share) beside `final` (it copies a file and waits LIB_SECONDS / 2, reading no budget).
# Target: parallel wall <= serial wall.
#
# Usage: bench/wide_chain.sh [--kiln PATH] [--budget-bound] [LIB_SECONDS]
#        (build kiln first: scripts/build; PATH defaults to build/kiln; LIB_SECONDS defaults to
#        8). The chain and its records go in a folder under TMPDIR (default /tmp).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=$root/build/kiln
variant=wide
while [[ ${1:-} == --* ]]; do
  case $1 in
    --kiln) kiln=$(realpath "$2"); shift 2 ;;
    --budget-bound) variant=budget-bound; shift ;;
    *) echo "wide_chain.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
seconds=${1:-8}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-wide.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$root/examples/wide/." "$work/"
rm -rf "$work/records"
cp /bin/busybox "$work/busybox"
# A chain name of its own: its image tags touch no other run's.
sed -i "s/^name = \"wide\"/name = \"wide-bench-$$\"/" "$work/chain.toml"
if [[ $variant == budget-bound ]]; then
  # Busy loops a core runs in a second, measured here with the busybox the stages run.
  loops=$( (time -p "$work/busybox" sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done') 2>&1 |
    awk '/^real/ { printf "%d", 300000 / $2 }')
  cat >"$work/stages/unit.Dockerfile" <<'EOF'
FROM base
ARG LIB_SECONDS
ARG LOOPS
RUN --mount=type=secret,id=kiln-budget . /run/secrets/kiln-budget && echo "unit: ${JOBS} job(s)" && \
    n=$((LIB_SECONDS * 2 * LOOPS / JOBS)) && for j in $(seq "$JOBS"); do \
      (i=0; while [ $i -lt $n ]; do i=$((i+1)); done) & done && wait && \
    mkdir -p /opt/lib/unit && echo passed > /opt/lib/unit/VERSION
EOF
  cat >"$work/stages/final.Dockerfile" <<'EOF'
FROM base
ARG LIB_SECONDS
RUN cp /etc/wide-release /etc/final-release && sleep $((LIB_SECONDS / 2))
EOF
  cat >"$work/chain.toml" <<EOF
[chain]
name = "budget-bench-$$"
engine = "buildah"
versions = "versions.env"
records = "records"

[[stage]]
name = "base"
dockerfile = "stages/base.Dockerfile"

[[stage]]
name = "unit"
dockerfile = "stages/unit.Dockerfile"
needs = ["base"]
build_args = { LOOPS = "$loops" }

[[stage]]
name = "final"
dockerfile = "stages/final.Dockerfile"
needs = ["base"]
EOF
fi

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
  if [[ $variant == budget-bound ]]; then
    sed -n 's/.*stage unit: budget: /          unit: /p' "$work/records/latest/driver.log"
  fi
}

echo "$variant on $(buildah --version), $(nproc) cores, LIB_SECONDS=$seconds, every step afresh"
run serial --parallel 1
run parallel
if [[ $variant == budget-bound ]]; then
  awk "BEGIN { printf \"parallel wall / serial wall: %.2f (target <= 1.00)\\n\", $parallel_wall / $serial_wall }"
  exit 0
fi
echo "target: parallel ratio <= 1.05"
# Stages that build at once share the cores, so each takes longer than alone: the serial run's
# critical path is what the same stages cost without that contention.
awk "BEGIN { printf \"parallel wall / serial run's critical path: %.2f; serial wall / parallel wall: %.2f\\n\", \
  $parallel_wall / $serial_critical, $serial_wall / $parallel_wall }"
