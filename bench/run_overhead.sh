#!/bin/bash
# kiln's own overhead on a warm demo chain: `kiln run` against the very engine commands it runs
# (taken from `kiln run --dry-run`), in one shell script, same order, same args. Runs each side
# ROUNDS times, interleaved so both see the same machine, and prints the medians and their ratio.
#
# buildah: every stage comes from the layer cache but the smoke stage, which reruns its tests on
# both sides (--no-cache). Target: kiln / direct <= 1.05.
# buildkit: the buildctl first on PATH, against its buildkitd (BUILDKIT_HOST, else buildctl's
# default socket). The smoke stage is built as a plain stage, so every step of the chain is a
# cache hit and kiln's own share (version probes, records, lint, sampling) is at its largest.
# Target: kiln / direct <= 1.05. With tests/fake_buildctl first on PATH the script runs without a
# daemon (CI does so to keep it working); the fake answers at once unless its
# KILN_FAKE_BUILDCTL_PROBE_MS and KILN_FAKE_BUILDCTL_DELAY_MS give it a real one's pace.
#
# Usage: bench/run_overhead.sh [--engine buildah|buildkit] [--kiln PATH] [ROUNDS]
#        (build kiln first: scripts/build; PATH defaults to build/kiln). The chain and its
#        records go in a folder under TMPDIR (default /tmp).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
engine=buildah
kiln=$root/build/kiln
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --engine) engine=$2; shift 2 ;;
    --kiln) kiln=$(realpath "$2"); shift 2 ;;
    *) echo "run_overhead.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
rounds=${1:-10}
case $engine in
  buildah) command=buildah; target=1.05; setup="warm cache (smoke reruns)" ;;
  buildkit) command=buildctl; target=1.05; setup="fully cached ($(buildctl --version))" ;;
  *) echo "run_overhead.sh: --engine is buildah or buildkit, not $engine" >&2; exit 2 ;;
esac
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

cp -r "$root/examples/hello/." "$work/"
rm -rf "$work/records"
cp /bin/busybox "$work/busybox"
cd "$work"
if [[ $engine == buildkit ]]; then
  # The fake buildctl's images have no layers: nothing to hold the demo's artifacts.
  sed -i -e '/^kind = "smoke"$/d' -e '/^artifacts = /d' -e '/^max_layers = /d' chain.toml
fi

# Warm the layer cache, then take the exact commands kiln would run: one stage at a time, so
# each need is named by the image the warm-up built (a dry run of the whole chain names a need
# it builds as `<need as built in this run>`, known only once built).
"$kiln" run --engine "$engine" chain.toml > /dev/null
{
  echo "set -e"
  for stage in $("$kiln" run --engine "$engine" chain.toml --dry-run | sed -n 's/^# \[[0-9]*\/[0-9]*\] //p'); do
    "$kiln" run --engine "$engine" chain.toml --dry-run --only "$stage" | grep -v '^#' |
      sed 's/$/ > \/dev\/null 2>\&1/'
  done
} > direct.sh

now() { date +%s.%N; }
kiln_times=()
direct_times=()
for ((i = 0; i < rounds; i++)); do
  t0=$(now); "$kiln" run --engine "$engine" chain.toml > /dev/null; t1=$(now)
  bash direct.sh; t2=$(now)
  kiln_times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')")
  direct_times+=("$(awk -v a="$t1" -v b="$t2" 'BEGIN {print b - a}')")
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
k=$(median "${kiln_times[@]}")
d=$(median "${direct_times[@]}")
LC_ALL=C printf '%s: stages: %d, rounds: %d, %s\n' "$engine" "$(grep -c "^$command" direct.sh)" "$rounds" "$setup"
LC_ALL=C printf 'kiln run   median %.3f s\n' "$k"
LC_ALL=C printf 'direct sh  median %.3f s\n' "$d"
LC_ALL=C printf 'ratio      %.3f (target <= %s)\n' "$(awk -v k="$k" -v d="$d" 'BEGIN {print k / d}')" "$target"
# On a shared machine the load drifts between rounds; each pair saw the same moment.
pairs=()
for ((i = 0; i < rounds; i++)); do
  pairs+=("$(awk -v k="${kiln_times[$i]}" -v d="${direct_times[$i]}" 'BEGIN {print k / d}')")
done
LC_ALL=C printf 'pairs      median ratio %.3f\n' "$(median "${pairs[@]}")"
