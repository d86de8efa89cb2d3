#!/bin/bash
# Lint throughput: `kiln lint` against the npm linters dockerfile-utils and dockerfilelint on
# one generated corpus (bench/dockerfile_corpus.cpp), in the same run. Each tool lints every
# file of the corpus in one process (kiln: one `kiln lint --format json` invocation; npm: one
# node process, bench/npm/lint_all.js), ROUNDS times interleaved; the table gives the median
# whole-process wall time and the ratio of kiln to the faster npm linter (target: >= 10).
# Findings counts are a sanity check only: the tools look for different things.
#
# Needs node and npm (the npm packages install into bench/npm/node_modules on first use);
# nothing in kiln's build or tests does.
#
# Usage: bench/lint_throughput.sh [KILN_BINARY [FILES [ROUNDS [SEED]]]]
#        (defaults: build/kiln, 10000, 3, 1; the corpus generator is looked for beside the
#        binary's build tree, or built into build/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=$(realpath "${1:-$root/build/kiln}")
count=${2:-10000}
rounds=${3:-3}
seed=${4:-1}
build=$(dirname "$kiln")
gen=$build/bench/kiln_bench_dockerfile_corpus
if [[ ! -x $kiln ]]; then
  # The published figures are for a Release build; the project's default is RelWithDebInfo.
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build "$build" -j "$(nproc)" --target kiln > /dev/null
fi
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt" 2> /dev/null || true)
if [[ ! -x $gen ]]; then
  cmake --build "$build" -j "$(nproc)" --target kiln_bench_dockerfile_corpus > /dev/null
fi
npm_dir=$root/bench/npm
if [[ ! -d $npm_dir/node_modules ]]; then
  (cd "$npm_dir" && npm ci --no-audit --no-fund > /dev/null)
fi

work=$(mktemp -d /tmp/kiln-lint-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
corpus=$work/corpus
"$gen" "$corpus" "$count" "$seed"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.6f", b - a}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# kiln takes every file on one command line; the names are relative to keep it short.
mapfile -t files < <(cd "$corpus" && ls)
argv_bytes=$(printf '%s\n' "${files[@]}" | wc -c)
argv_max=$(getconf ARG_MAX)
if ((argv_bytes > argv_max / 2)); then
  echo "the corpus names take $argv_bytes bytes of argv (ARG_MAX $argv_max): use fewer files" >&2
  exit 2
fi

run_kiln() {
  (cd "$corpus" && "$kiln" lint --format json "${files[@]}" > "$work/kiln.json") || (($? == 1))
}
run_npm() { node "$npm_dir/lint_all.js" "$1" "$corpus" > "$work/$1.json"; }

declare -A times
tools=(kiln dockerfile-utils dockerfilelint)
for ((r = 0; r < rounds; r++)); do
  for tool in "${tools[@]}"; do
    t0=$(now)
    if [[ $tool == kiln ]]; then run_kiln; else run_npm "$tool"; fi
    t1=$(now)
    times[$tool]+="$(elapsed "$t0" "$t1") "
  done
done

findings_kiln=$(grep -c '"rule":' "$work/kiln.json" || true)
declare -A findings lint_only median_s
findings[kiln]=$findings_kiln
lint_only[kiln]=-
for tool in dockerfile-utils dockerfilelint; do
  findings[$tool]=$(node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1])); console.log(r.findings)' "$work/$tool.json")
  lint_only[$tool]=$(node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1])); console.log(r.lint_seconds.toFixed(3))' "$work/$tool.json")
done
for tool in "${tools[@]}"; do
  # shellcheck disable=SC2086
  median_s[$tool]=$(median ${times[$tool]})
done

export LC_ALL=C
printf 'corpus: %d generated Dockerfiles (seed %s, %s lines), %d rounds, %d cores, medians of whole-process wall time\n' \
  "$count" "$seed" "$(cat "$corpus"/* | wc -l)" "$rounds" "$(nproc)"
printf 'kiln: %s (%s build)\n' "$kiln" "${build_type:-RelWithDebInfo}"
printf '%-18s %7s %10s %10s %10s %14s\n' tool files seconds files/s findings 'npm lint-only'
for tool in "${tools[@]}"; do
  printf '%-18s %7d %10.3f %10.0f %10d %14s\n' "$tool" "$count" "${median_s[$tool]}" \
    "$(awk -v n="$count" -v s="${median_s[$tool]}" 'BEGIN {print n / s}')" "${findings[$tool]}" \
    "${lint_only[$tool]}"
done
faster=dockerfile-utils
if awk -v a="${median_s[dockerfilelint]}" -v b="${median_s[dockerfile-utils]}" 'BEGIN {exit !(a < b)}'; then
  faster=dockerfilelint
fi
printf 'kiln vs %s (the faster npm linter): %.1fx (target >= 10x)\n' "$faster" \
  "$(awk -v k="${median_s[kiln]}" -v n="${median_s[$faster]}" 'BEGIN {print n / k}')"
