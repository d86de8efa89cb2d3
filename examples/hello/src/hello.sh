#!/bin/sh
set -eu
if [ "${1:-}" = "--selftest" ]; then
  # One check per library the image ships: its object is there, and the toolchain compiled it
  # from that library's source. The closing line is the plain summary kiln's smoke gate reads.
  passed=0
  failed=0
  for lib in greet farewell; do
    obj="/opt/lib/$lib.o"
    if [ ! -s "$obj" ]; then
      echo "not ok - $lib: $obj is missing or empty"
      failed=$((failed + 1))
    elif [ "$(head -n 1 "$obj")" != "object of /src/$lib.c" ]; then
      echo "not ok - $lib: $obj was not compiled from $lib.c"
      failed=$((failed + 1))
    else
      echo "ok - $lib: $obj"
      passed=$((passed + 1))
    fi
  done
  echo "selftest: $(cat /etc/hello-release), $(cat /opt/lib/VERSION)"
  echo "$passed passed, $failed failed, 0 skipped"
  [ "$failed" -eq 0 ] || exit 1
  exit 0
fi
echo "hello from $(cat /etc/hello-release)"
