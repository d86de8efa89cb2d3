#!/bin/sh
# make_seeds.sh SEEDS FIXTURES OUT: the seed corpus of one fuzz target, from tests/fixtures.
# Each line of SEEDS (a path relative to FIXTURES; `#` starts a comment) is either
#   GLOB     one seed per matching file, as it is;
#   @FOLDER  one seed holding every file under FOLDER, and
#   @GLOB    one seed holding the matching files,
# a seed of several files being `==> name <==` lines each followed by that file (names relative
# to FOLDER, or the file's own name): fuzz_bundle.h reads them back. A line that matches nothing
# is an error, so a renamed fixture cannot leave a target unseeded unnoticed.
set -eu
seeds=$1
fixtures=$2
out=$3

# One file of a bundle; a newline is added where the file has none, so the next header starts
# a line.
bundle_file() {
  printf '==> %s <==\n' "$1"
  cat "$2"
  if [ -s "$2" ] && [ "$(tail -c 1 "$2" | od -An -c | tr -d ' ')" != '\n' ]; then
    echo
  fi
}

missing() {
  echo "$seeds: no fixture matches '$1'" >&2
  exit 1
}

rm -rf "$out"
mkdir -p "$out"
cd "$fixtures"
while IFS= read -r line || [ -n "$line" ]; do
  case $line in
  '' | '#'*) continue ;;
  esac
  name=$(printf '%s' "$line" | tr -c 'A-Za-z0-9._-' '_')
  case $line in
  @*)
    target=${line#@}
    if [ -d "$target" ]; then
      (cd "$target" && find . -type f | LC_ALL=C sort | while IFS= read -r file; do
        bundle_file "${file#./}" "$file"
      done) >"$out/$name"
    else
      found=
      for file in $target; do
        [ -f "$file" ] || missing "$line"
        found=1
        bundle_file "${file##*/}" "$file"
      done >"$out/$name"
      [ -n "$found" ] || missing "$line"
    fi
    ;;
  *)
    for file in $line; do
      [ -f "$file" ] || missing "$line"
      cp "$file" "$out/$(printf '%s' "$file" | tr '/' '_')"
    done
    ;;
  esac
done <"$seeds"
