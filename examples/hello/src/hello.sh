#!/bin/sh
set -eu
if [ "${1:-}" = "--selftest" ]; then
  for lib in greet farewell; do
    [ -s "/opt/lib/$lib.o" ] || { echo "selftest: missing /opt/lib/$lib.o" >&2; exit 1; }
  done
  echo "selftest: $(cat /etc/hello-release), $(cat /opt/lib/VERSION), 2 libraries"
  exit 0
fi
echo "hello from $(cat /etc/hello-release)"
