#!/bin/sh
# Demo compiler: "compiles" by recording the flags and a checksum of the source.
set -eu
out=""
flags=""
while [ $# -gt 1 ]; do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    *) flags="$flags $1"; shift ;;
  esac
done
src="$1"
[ -n "$out" ] || { echo "cc: error: no output file" >&2; exit 1; }
echo "cc:${flags} $src -> $out"
{ echo "object of $src"; echo "flags:${flags}"; md5sum "$src"; } > "$out"
