#!/bin/bash
# What fingerprinting a build context costs kiln (`kiln explain --plan`: every file of a
# `COPY . /ctx` hashed, then stat-only once the hashes are kept), against reading the same files
# with `find -type f | xargs cat > /dev/null`; then `kiln run --dry-run --explain` on a
# 1,000-stage chain whose every stage has a last good build to be judged against (built once on
# the fake buildctl, which answers at once). Caches are dropped before each cold figure when this
# runs as root; otherwise the figures are warm and the script says so.
#
#   bench/context_hash.sh [--kiln PATH] [--files N] [--megabytes M] [--stages S]
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
kiln="$root/build/kiln"
files=100000
megabytes=2048
stages=1000
while [ $# -gt 0 ]; do
  case "$1" in
  --kiln) kiln="$2"; shift 2 ;;
  --files) files="$2"; shift 2 ;;
  --megabytes) megabytes="$2"; shift 2 ;;
  --stages) stages="$2"; shift 2 ;;
  *) echo "usage: $0 [--kiln PATH] [--files N] [--megabytes M] [--stages S]" >&2; exit 2 ;;
  esac
done
fake_bin="$(dirname "$kiln")/tests/fake-bin"
[ -x "$fake_bin/buildctl" ] || { echo "no fake buildctl at $fake_bin (scripts/build)" >&2; exit 2; }

work=$(mktemp -d /tmp/kiln-context-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

drop() {
  if [ -w /proc/sys/vm/drop_caches ]; then
    sync
    echo 3 >/proc/sys/vm/drop_caches
    echo cold
  else
    echo warm
  fi
}
seconds() { # the wall time of "$@", its output discarded
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

# The context: N files in folders of 1,000, sizes spread around the mean so the total is M MB.
python3 - "$work/ctx" "$files" "$megabytes" <<'PY'
import os, random, sys
root, files, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(1)
mean = mb * 1024 * 1024 // files
block = os.urandom(4 * 1024 * 1024)
for i in range(files):
    d = os.path.join(root, f"d{i // 1000:03d}")
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    size = random.randint(0, 2 * mean)
    start = random.randint(0, len(block) - size - 1)
    with open(os.path.join(d, f"f{i:06d}.bin"), "wb") as f:
        f.write(block[start:start + size])
PY
printf 'FROM scratch\nCOPY . /ctx\n' >"$work/ctx.Dockerfile"
cat >"$work/chain.toml" <<TOML
[chain]
name = "ctxbench"
records = "records"

[[stage]]
name = "ctx"
dockerfile = "ctx.Dockerfile"
context = "ctx"
TOML
bytes=$(du -sb "$work/ctx" | cut -f1)
echo "context: $files files, $((bytes / 1024 / 1024)) MB"

state=$(drop)
cat_s=$(seconds sh -c "find '$work/ctx' -type f -print0 | xargs -0 cat > /dev/null")
drop >/dev/null
first_s=$(seconds "$kiln" explain --plan --chain "$work/chain.toml")
drop >/dev/null
second_s=$(seconds "$kiln" explain --plan --chain "$work/chain.toml")
warm_first_s=$( (rm -f "$work/records/file-hashes"; seconds "$kiln" explain --plan --chain "$work/chain.toml"))
warm_cat_s=$(seconds sh -c "find '$work/ctx' -type f -print0 | xargs -0 cat > /dev/null")
warm_second_s=$(seconds "$kiln" explain --plan --chain "$work/chain.toml")
printf '%-44s %8s %8s\n' "" "$state" "warm"
printf '%-44s %8.2f %8.2f\n' "find -type f | xargs cat > /dev/null (s)" "$cat_s" "$warm_cat_s"
printf '%-44s %8.2f %8.2f\n' "first fingerprint, every file read (s)" "$first_s" "$warm_first_s"
printf '%-44s %8.2f %8.2f\n' "second fingerprint, a stat per file (s)" "$second_s" "$warm_second_s"
printf '%-44s %7.1f%% %7.1f%%\n' "second / first" "$(echo "100 * $second_s / $first_s" | bc -l)" \
  "$(echo "100 * $warm_second_s / $warm_first_s" | bc -l)"

# The 1,000-stage chain: one to four needs among the earlier stages, the previous one most often
# (as bench/schedule_scale.cpp shapes it), each stage a Dockerfile of its own with an ARG and a
# file of its context.
chain="$work/wide"
mkdir -p "$chain/stages" "$chain/src"
python3 - "$chain" "$stages" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
random.seed(1)
out = ['[chain]\nname = "explainbench"\nengine = "buildkit"\nrecords = "records"\n',
       '[defaults]\ncooldown_s = 0\n', '[resources]\nmax_parallel = 8\n']
for i in range(n):
    needs = sorted({f"s{i - 1 - (random.randint(0, 3) if random.random() < 0.4 else 0):04d}"
                    for _ in range(random.randint(1, 4))} if i > 0 else set())
    needs = [x for x in needs if int(x[1:]) >= 0]
    base = needs[-1] if needs else "scratch"
    lines = [f"FROM {base}", "ARG VERSION", f"COPY src/s{i:04d}.txt /s/"]
    lines += [f"COPY --from={x} /s/ /from-{x}/" for x in needs[:-1]]
    lines += ['RUN echo "${VERSION}" > /s/version']
    with open(os.path.join(root, "stages", f"s{i:04d}.Dockerfile"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(root, "src", f"s{i:04d}.txt"), "w") as f:
        f.write(f"stage {i}\n")
    out.append(f'[[stage]]\nname = "s{i:04d}"\ndockerfile = "stages/s{i:04d}.Dockerfile"\n'
               f'context = "."\nneeds = [{", ".join(chr(34) + x + chr(34) for x in needs)}]\n'
               f'build_args = {{ VERSION = "1" }}\n')
with open(os.path.join(root, "chain.toml"), "w") as f:
    f.write("\n".join(out))
PY
export PATH="$fake_bin:$PATH"
build_s=$(seconds "$kiln" run "$chain/chain.toml")
"$kiln" run "$chain/chain.toml" --dry-run --explain >"$work/plan.txt" 2>&1 || { cat "$work/plan.txt"; exit 1; }
head -1 "$work/plan.txt"
best=""
for round in 1 2 3; do
  s=$(seconds "$kiln" run "$chain/chain.toml" --dry-run --explain)
  best=$(echo "if (\"$best\" == \"\" || $s < $best) $s else $best" | bc 2>/dev/null || echo "$s")
  echo "kiln run --dry-run --explain, $stages stages (round $round): ${s}s"
done
echo "(the chain's one build on the fake buildctl took ${build_s}s)"
