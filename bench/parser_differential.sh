#!/bin/bash
# Parser differential: kiln's Dockerfile parser against npm's dockerfile-ast (the parser behind
# VS Code's Dockerfile support) on a generated corpus (bench/dockerfile_corpus.cpp), on the
# golden parser corpus (tests/fixtures/dockerfile-corpus/) and on the one-difference cases
# (tests/fixtures/dockerfile-ast/cases/). Both sides print the same outline per file (keyword,
# start and end line, flags, form, arguments, heredoc names: src/dockerfile/outline.h) and the
# differences are counted by class (the field that differs and the keyword).
#
# Every class found is a place where BuildKit's rules and dockerfile-ast's differ; each has a
# case and a unit test (tests/unit/dockerfile_ast_differential_test.cpp, which reads the
# recorded dockerfile-ast outlines so that it runs without node). --record rewrites those
# recordings from dockerfile-ast; the patches printed with it are a start for a new entry of
# tests/fixtures/dockerfile-ast/differences.json.
#
# Needs node and npm (the npm packages install into bench/npm/node_modules on first use).
#
# Usage: bench/parser_differential.sh [--record] [BUILD_DIR [FILES [SEED]]]
#        (defaults: build, 10000, 1)
set -euo pipefail
record=0
if [[ ${1:-} == --record ]]; then
  record=1
  shift
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$root/build}")
count=${2:-10000}
seed=${3:-1}
dump=$build/bench/kiln_bench_dockerfile_dump
gen=$build/bench/kiln_bench_dockerfile_corpus
if [[ ! -x $dump || ! -x $gen ]]; then
  cmake -S "$root" -B "$build" > /dev/null
  cmake --build "$build" -j "$(nproc)" --target kiln_bench_dockerfile_dump \
    kiln_bench_dockerfile_corpus > /dev/null
fi
npm_dir=$root/bench/npm
if [[ ! -d $npm_dir/node_modules ]]; then
  (cd "$npm_dir" && npm ci --no-audit --no-fund > /dev/null)
fi
fixtures=$root/tests/fixtures
work=$(mktemp -d /tmp/kiln-parser-diff.XXXXXX)
trap 'rm -rf "$work"' EXIT

compare() { # NAME DIR
  "$dump" "$2" > "$work/$1.kiln.jsonl"
  node "$npm_dir/ast_dump.js" "$2" > "$work/$1.ast.jsonl"
  node "$npm_dir/compare_outlines.js" "$work/$1.kiln.jsonl" "$work/$1.ast.jsonl" 1
}

"$gen" "$work/generated" "$count" "$seed"
echo "== generated corpus ($count files, seed $seed)"
compare generated "$work/generated"
echo
echo "== golden parser corpus (tests/fixtures/dockerfile-corpus)"
compare golden "$fixtures/dockerfile-corpus"
echo
echo "== one-difference cases (tests/fixtures/dockerfile-ast/cases)"
compare cases "$fixtures/dockerfile-ast/cases"

if ((record)); then
  node "$npm_dir/ast_dump.js" --record "$fixtures/dockerfile-corpus" \
    > "$fixtures/dockerfile-ast/dockerfile-corpus.json"
  for file in "$fixtures"/dockerfile-ast/cases/*.Dockerfile; do
    node "$npm_dir/ast_dump.js" --record "$file" > "${file%.Dockerfile}.json"
  done
  echo
  echo "== recorded; patches from dockerfile-ast's outline to kiln's, golden corpus then cases"
  node "$npm_dir/compare_outlines.js" --patches "$work/golden.kiln.jsonl" "$work/golden.ast.jsonl"
  node "$npm_dir/compare_outlines.js" --patches "$work/cases.kiln.jsonl" "$work/cases.ast.jsonl"
fi
