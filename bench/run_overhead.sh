#!/bin/bash
# kiln's own overhead on a warm demo chain: `kiln run` against the very buildah commands it runs
# (taken from `kiln run --dry-run`), in one shell script, same order, same args. Every stage comes
# from the layer cache but the smoke stage, which reruns its tests on both sides (--no-cache).
# Runs each side ROUNDS times, interleaved so both see the same machine, and prints the medians
# and their ratio (target: kiln / direct <= 1.10).
#
# Usage: bench/run_overhead.sh [ROUNDS]   (build kiln first: scripts/build)
set -euo pipefail
rounds=${1:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=$root/build/kiln
work=$(mktemp -d /tmp/kiln-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

cp -r "$root/examples/hello/." "$work/"
rm -rf "$work/records"
cp /bin/busybox "$work/busybox"
cd "$work"

# Warm the layer cache, then take the exact commands kiln would run.
"$kiln" run chain.toml > /dev/null
{
  echo "set -e"
  "$kiln" run chain.toml --dry-run | grep -v '^#' | sed 's/$/ > \/dev\/null/'
} > direct.sh

now() { date +%s.%N; }
kiln_times=()
direct_times=()
for ((i = 0; i < rounds; i++)); do
  t0=$(now); "$kiln" run chain.toml > /dev/null; t1=$(now)
  bash direct.sh; t2=$(now)
  kiln_times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')")
  direct_times+=("$(awk -v a="$t1" -v b="$t2" 'BEGIN {print b - a}')")
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
k=$(median "${kiln_times[@]}")
d=$(median "${direct_times[@]}")
LC_ALL=C printf 'stages: %d, rounds: %d, warm cache (smoke reruns)\n' "$(grep -c '^buildah' direct.sh)" "$rounds"
LC_ALL=C printf 'kiln run   median %.3f s\n' "$k"
LC_ALL=C printf 'direct sh  median %.3f s\n' "$d"
LC_ALL=C printf 'ratio      %.3f (target <= 1.10)\n' "$(awk -v k="$k" -v d="$d" 'BEGIN {print k / d}')"
