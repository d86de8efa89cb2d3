#!/bin/bash
# Ten independent stages of a fixed length (a RUN that sleeps) on a base, built by kiln on one
# BuildKit worker and then on a pool of three, each daemon real and of its own (--root, socket).
# Prints each run's wall time and where the stages went. Needs buildkitd, buildctl and runc; CI
# has no daemon (bench/README.md has the figures).
#
#   bench/worker_pool.sh [--seconds N] [--kiln PATH] [--buildkit-bin DIR]
set -euo pipefail

seconds=6
kiln="$(cd "$(dirname "$0")/.." && pwd)/build/kiln"
bin=""
while [ $# -gt 0 ]; do
  case "$1" in
  --seconds) seconds="$2"; shift 2 ;;
  --kiln) kiln="$2"; shift 2 ;;
  --buildkit-bin) bin="$2"; shift 2 ;;
  *) echo "usage: $0 [--seconds N] [--kiln PATH] [--buildkit-bin DIR]" >&2; exit 2 ;;
  esac
done
[ -n "$bin" ] && export PATH="$bin:$PATH"
for tool in buildkitd buildctl runc; do
  command -v "$tool" >/dev/null || { echo "$tool is not on PATH" >&2; exit 2; }
done

work=$(mktemp -d /tmp/kiln-pool-bench.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

for n in 1 2 3; do
  buildkitd --root "$work/root$n" --addr "unix://$work/bk$n.sock" --oci-worker=true \
    --containerd-worker=false >"$work/bk$n.log" 2>&1 &
  pids+=($!)
done
for n in 1 2 3; do
  for _ in $(seq 100); do
    buildctl --addr "unix://$work/bk$n.sock" debug workers >/dev/null 2>&1 && break
    sleep 0.1
  done
done

cp "$(command -v busybox)" "$work/busybox"
cat >"$work/base.Dockerfile" <<'EOF'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
EOF
cat >"$work/lib.Dockerfile" <<EOF
FROM base
ARG LIB
RUN echo "\$LIB" > /lib.txt && sleep $seconds
EOF

# The chain with `workers` as its pool; every worker builds one stage at a time.
write_chain() {
  local pool="$1"
  {
    printf '[chain]\nname = "poolbench"\nengine = "buildkit"\n\n[engine.buildkit]\nworkers = [%s]\n\n' "$pool"
    for n in 1 2 3; do
      printf '[[worker]]\nname = "bk%s"\nhost = "unix://%s/bk%s.sock"\nmax_parallel = 1\n\n' "$n" "$work" "$n"
    done
    printf '[[stage]]\nname = "base"\ndockerfile = "base.Dockerfile"\n\n'
    for i in $(seq 10); do
      printf '[[stage]]\nname = "lib%s"\ndockerfile = "lib.Dockerfile"\nneeds = ["base"]\nbuild_args = { LIB = "lib%s" }\n\n' "$i" "$i"
    done
  } >"$work/chain.toml"
}

run() {
  local label="$1"
  local start end
  start=$(date +%s.%N)
  "$kiln" run --no-cache "$work/chain.toml" >"$work/$label.out" 2>&1 || {
    tail -30 "$work/$label.out"
    exit 1
  }
  end=$(date +%s.%N)
  python3 - "$label" "$start" "$end" "$work/records/latest/manifest.json" <<'EOF'
import json, sys
label, start, end, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
m = json.load(open(path))
per = {}
for s in m["stages"]:
    per.setdefault(s["worker"], []).append(s["name"])
print(f"{label:<10} wall {end - start:6.1f} s   " +
      "   ".join(f"{w}: {len(v)}" for w, v in sorted(per.items())))
EOF
}

write_chain '"bk1"'
run one-worker
write_chain '"bk1", "bk2", "bk3"'
run three
