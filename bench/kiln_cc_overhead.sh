#!/bin/bash
# kiln-cc's own cost per compile, in one run:
#   - the median latency kiln-cc adds to `sccache gcc -c x.c` on cache hits,
#   - the same over `ccache gcc -c x.c` (kiln-cc resolves to ccache when no sccache server
#     answers), and
#   - kiln-cc's peak memory (VmHWM of the kiln-cc process itself, read from /proc by the cache
#     tool it started, just after that tool finished), on a hit and on a cached warning flood.
# Targets: under 1 ms added per invocation, peak memory under 2 MB. It prints the figures and
# judges nothing. Each side runs ROUNDS times, interleaved and alternating which goes first.
# For scale it also times two static C programs built here: a trampoline (execvp of its
# arguments: what any launcher that is a process of its own adds on this host) and a capture
# floor (vfork, both streams through pipes, wait: what any launcher that must read sccache's
# output before deciding adds). kiln-cc's own work is what it adds beyond the capture floor.
#
# Usage: bench/kiln_cc_overhead.sh [ROUNDS]   (build first: scripts/build; KILN_CC=path to
#        measure another build of kiln-cc). Needs sccache, ccache and gcc on PATH.
set -euo pipefail
rounds=${1:-200}
root=$(cd "$(dirname "$0")/.." && pwd)
kiln_cc=${KILN_CC:-$root/build/kiln-cc}
sccache=$(command -v sccache)
ccache=$(command -v ccache)
work=$(mktemp -d /tmp/kiln-cc-bench.XXXXXX)

port=$((20000 + RANDOM % 30000))
while (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null; do
  port=$((port + 1))
done
export SCCACHE_SERVER_PORT=$port SCCACHE_DIR=$work/sccache CCACHE_DIR=$work/ccache
unset KILN_CC_SESSION KILN_CC_VERBOSE
cleanup() {
  "$sccache" --stop-server > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
printf 'int add(int a, int b) { return a + b; }\n' > x.c
printf '#define _GNU_SOURCE\n#include <unistd.h>\nint main(int c, char** v) { (void)c; execvp(v[1], v + 1); return 127; }\n' \
  > trampoline.c
gcc -O2 -static trampoline.c -o trampoline
cat > capture.c << 'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char** argv) {
  int o[2], e[2], status = 0, open = 2;
  (void)argc;
  if (pipe2(o, O_CLOEXEC) != 0 || pipe2(e, O_CLOEXEC) != 0) return 126;
  pid_t pid = vfork();
  if (pid == 0) {
    dup2(o[1], 1), dup2(e[1], 2), execvp(argv[1], argv + 1);
    _exit(127);
  }
  close(o[1]), close(e[1]);
  struct pollfd p[2] = {{o[0], POLLIN, 0}, {e[0], POLLIN, 0}};
  char buffer[65536];
  while (open > 0 && poll(p, 2, -1) >= 0) {
    for (int i = 0; i < 2; i++) {
      ssize_t n = p[i].fd >= 0 && p[i].revents ? read(p[i].fd, buffer, sizeof buffer) : -2;
      if (n > 0 && write(i + 1, buffer, n) != n) return 126;
      if (n == 0 || n == -1) p[i].fd = -1, open--;
    }
  }
  waitpid(pid, &status, 0);
  return WEXITSTATUS(status);
}
EOF
gcc -O2 -static capture.c -o capture
for ((i = 0; i < 1500; i++)); do
  echo "int f$i(void) { int unused_a, unused_b; return 0; }"
done > flood.c

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.4f", (b - a) * 1000}'; }

# compare NAME BASE OTHER: ROUNDS timings of `${BASE[@]} gcc -c x.c` against
# `${OTHER[@]} gcc -c x.c` (BASE and OTHER name arrays holding a command prefix).
compare() {
  local name=$1
  local -n base=$2 other=$3
  local base_times=() other_times=() diffs=() t0 t1 t2 b o
  for ((i = 0; i < rounds; i++)); do
    if ((i % 2 == 0)); then
      t0=$EPOCHREALTIME; "${base[@]}" gcc -c x.c -o x.o; t1=$EPOCHREALTIME
      "${other[@]}" gcc -c x.c -o x.o; t2=$EPOCHREALTIME
      b=$(ms "$t0" "$t1"); o=$(ms "$t1" "$t2")
    else
      t0=$EPOCHREALTIME; "${other[@]}" gcc -c x.c -o x.o; t1=$EPOCHREALTIME
      "${base[@]}" gcc -c x.c -o x.o; t2=$EPOCHREALTIME
      o=$(ms "$t0" "$t1"); b=$(ms "$t1" "$t2")
    fi
    base_times+=("$b")
    other_times+=("$o")
    diffs+=("$(awk -v o="$o" -v b="$b" 'BEGIN {print o - b}')")
  done
  LC_ALL=C printf '%-8s hit: %-22s median %7.3f ms, %-30s median %7.3f ms: added %.3f ms\n' \
    "$name" "${base[*]##*/} gcc -c" "$(median "${base_times[@]}")" \
    "$(basename "${other[0]}") ${other[*]:1} gcc -c" "$(median "${other_times[@]}")" \
    "$(median "${diffs[@]}")"
}

# peak NAME TOOL ARGS...: kiln-cc's VmHWM while it compiles through TOOL (a shim of that name
# first on PATH runs the real one, then reads its parent's, kiln-cc's, /proc status).
peak() {
  local name=$1 tool=$2
  shift 2
  mkdir -p "$work/shim"
  printf '#!/bin/sh\n"%s" "$@"; rc=$?\ngrep VmHWM /proc/$PPID/status > "%s/hwm"\nexit $rc\n' \
    "$(command -v "$tool")" "$work" > "$work/shim/$tool"
  chmod +x "$work/shim/$tool"
  PATH=$work/shim:$PATH "$kiln_cc" gcc "$@" 2> /dev/null
  rm -f "$work/shim/$tool"
  LC_ALL=C printf '%-8s kiln-cc peak memory: %s kB (target < 2048 kB)\n' "$name" \
    "$(awk '{print $2}' "$work/hwm")"
}

"$sccache" --start-server > /dev/null
"$sccache" gcc -c x.c -o x.o # warm: every timed run is a hit
"$sccache" gcc -Wall -c flood.c -o flood.o 2> /dev/null
plain=("$sccache")
through_kiln_cc=("$kiln_cc")
through_trampoline=("$work/trampoline" "$sccache")
through_capture=("$work/capture" "$sccache")
compare sccache plain through_kiln_cc
compare sccache plain through_trampoline
compare sccache plain through_capture
peak sccache sccache -c x.c -o x.o
peak "flood" sccache -Wall -c flood.c -o flood.o
LC_ALL=C printf '         (the flood: %s bytes of warnings replayed from the cache)\n' \
  "$("$kiln_cc" gcc -Wall -c flood.c -o flood.o 2>&1 | wc -c)"
hits=$("$sccache" --show-stats --stats-format json | sed 's/.*"cache_hits":{"counts":{"C\/C++":\([0-9]*\).*/\1/')
"$sccache" --stop-server > /dev/null

"$ccache" gcc -c x.c -o x.o # warm
plain=("$ccache")
through_trampoline=("$work/trampoline" "$ccache")
compare ccache plain through_kiln_cc
compare ccache plain through_trampoline
KILN_CC_SESSION=$work peak ccache ccache -c x.c -o x.o
LC_ALL=C printf 'added: median of the paired differences (target < 1 ms for kiln-cc); rounds: %d; sccache hits counted: %s; ccache: %s\n' "$rounds" "$hits" \
  "$("$ccache" --print-stats | awk '$1 == "direct_cache_hit" {print $2 " direct hits"}')"
