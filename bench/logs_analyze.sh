#!/bin/bash
# What one pass over a huge engine log costs: `kiln logs analyze --format json` over a ~1 GB
# BuildKit `--progress=plain` log against `grep -c ' DONE '` and `wc -l` of the same file, in
# one script, rounds interleaved (median of 3). Prints each tool's median wall time, kiln's
# ratios to the other two, and kiln's peak memory. Target: kiln at least as fast as grep -c,
# under 64 MiB peak.
#
# The log: 2,000 vertices (Dockerfile RUN steps, CACHED ones among them, and exporting
# vertices), several running at once so their lines interleave as BuildKit prints them (a
# header again on every switch), each printing ninja progress, compile commands, GCC warnings
# with classes, `-j` make lines and now and then an sccache stats block; DONE x.ys at the end.
#
# Usage: bench/logs_analyze.sh [--kiln PATH] [MEGABYTES]
#        (build kiln first; PATH defaults to build/kiln; 1024 MB). The log goes in a folder
#        under TMPDIR (default /tmp) and is removed at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=$root/build/kiln
if [[ ${1:-} == --kiln ]]; then
  kiln=$(realpath "$2")
  shift 2
fi
megabytes=${1:-1024}
rounds=3
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-logs.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$work/stages/build.attempt-1.log
mkdir -p "$work/stages"

python3 - "$log" "$megabytes" <<'PY'
import random, sys
path, megabytes = sys.argv[1], int(sys.argv[2])
budget = megabytes << 20
rng = random.Random(7)
vertices = 2000
per_vertex = budget // vertices
sccache = ["Compile requests                    {r}", "Compile requests executed           {r}",
           "Cache hits                          {h}", "Cache hits (C/C++)                  {h}",
           "Cache misses                        {m}", "Cache misses (C/C++)                {m}",
           "Cache timeouts                        0", "Cache read errors                     0",
           "Compilation failures                  0", "Non-cacheable compilations            0"]
def body(n, i, t):
    k = i % 7
    if k == 0:
        return f"[{i}/9000] Building CXX object src/lib{n}/CMakeFiles/lib{n}.dir/unit_{i}.cpp.o"
    if k == 1:
        return (f"/usr/bin/c++ -DNDEBUG -I/src/include -I/src/lib{n} -O2 -g -std=c++17 -fPIC "
                f"-o src/lib{n}/CMakeFiles/lib{n}.dir/unit_{i}.cpp.o -c /src/lib{n}/unit_{i}.cpp")
    if k == 2:
        cls = rng.choice(["-Wunused-parameter", "-Wsign-compare", "-Wdeprecated-copy",
                          "-Winconsistent-missing-override", "-Wmissing-field-initializers"])
        return f"/src/lib{n}/unit_{i}.cpp:{i % 900 + 1}:17: warning: something about this code [{cls}]"
    if k == 3:
        return f"  {i % 900 + 1} |     int unused_{i} = compute(a, b);"
    if k == 4:
        return f"make[2]: Entering directory '/build/lib{n}' (make -j16)"
    if k == 5:
        return f"-- Installing: /opt/lib{n}/include/header_{i}.h"
    return f"[{i}/9000] Linking CXX shared library lib{n}_{i}.so"
with open(path, "w", buffering=1 << 22) as out:
    out.write("#1 [internal] load build definition from Dockerfile\n#1 transferring dockerfile: 4.2kB done\n#1 DONE 0.0s\n\n")
    n = 2
    while n < vertices + 2:
        group = list(range(n, min(n + 4, vertices + 2)))
        n += len(group)
        written = {v: 0 for v in group}
        lines = {v: 0 for v in group}
        cached = {v: rng.random() < 0.1 for v in group}
        chunks = []
        for v in group:
            out.write(f"#{v} [lib{v} 1/1] RUN cmake --build build -j16 && sccache --show-stats\n")
            if cached[v]:
                out.write(f"#{v} CACHED\n\n")
        live = [v for v in group if not cached[v]]
        current = None
        t = {v: 0.0 for v in live}
        while live:
            v = rng.choice(live)
            if v != current:
                out.write(f"\n#{v} [lib{v} 1/1] RUN cmake --build build -j16 && sccache --show-stats\n")
                current = v
            burst = rng.randint(5, 40)
            buf = []
            for _ in range(burst):
                lines[v] += 1
                t[v] += 0.013
                text = body(v, lines[v], t[v])
                buf.append(f"#{v} {t[v]:.3f} {text}\n" if t[v] < 10 else
                           f"#{v} {t[v]:.2f} {text}\n" if t[v] < 100 else f"#{v} {t[v]:.1f} {text}\n")
            s = "".join(buf)
            written[v] += len(s)
            out.write(s)
            if written[v] >= per_vertex:
                if lines[v] % 3 == 0:
                    for row in sccache:
                        out.write(f"#{v} {t[v]:.1f} " + row.format(r=lines[v] // 7, h=lines[v] // 14, m=lines[v] // 14) + "\n")
                out.write(f"#{v} DONE {t[v] + 0.4:.1f}s\n")
                live.remove(v)
                current = None
        out.write("\n")
    out.write(f"#{n} exporting to image\n#{n} exporting layers 2.1s done\n#{n} DONE 2.1s\n")
PY

size=$(stat -c %s "$log")
echo "log: $(( size >> 20 )) MiB, $(wc -l <"$log") lines"
# Warm the page cache so every tool reads from memory.
cat "$log" >/dev/null

declare -A times
peak=0
for round in $(seq 1 "$rounds"); do
  for tool in kiln grep wc; do
    case $tool in
    kiln) cmd=("$kiln" logs analyze --format json "$log") ;;
    grep) cmd=(grep -c ' DONE ' "$log") ;;
    wc) cmd=(wc -l "$log") ;;
    esac
    /usr/bin/time -f '%e %M' -o "$work/time" "${cmd[@]}" >"$work/out.$tool"
    read -r seconds kib <"$work/time"
    times[$tool]+="$seconds "
    if [[ $tool == kiln ]] && ((kib > peak)); then
      peak=$kib
    fi
  done
done
median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | sed -n "$(((rounds + 1) / 2))p"; }
k=$(median "${times[kiln]}")
g=$(median "${times[grep]}")
w=$(median "${times[wc]}")
printf '%-34s %8s\n' "tool (median of $rounds)" seconds
printf '%-34s %8s\n' "kiln logs analyze --format json" "$k"
printf '%-34s %8s\n' "grep -c ' DONE '" "$g"
printf '%-34s %8s\n' "wc -l" "$w"
python3 - "$k" "$g" "$w" "$peak" <<'PY'
import sys
k, g, w, peak = map(float, sys.argv[1:])
print(f"kiln / grep -c: {k / g:.2f}x   kiln / wc -l: {k / w:.2f}x   kiln peak RSS: {peak / 1024:.1f} MiB")
PY
python3 - "$work/out.kiln" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
log = doc["logs"][0]
steps = log["steps"]
print(f"kiln saw {len(steps)} steps, {sum(s['cached'] for s in steps)} cached, "
      f"{doc['warnings']['total']} warnings, "
      f"{sum(1 for s in steps if s['compile'])} compile-cache blocks, {log['lines']} lines")
PY
echo "grep -c ' DONE ': $(cat "$work/out.grep")"
