#!/bin/bash
# What reading every layer costs: `kiln gate residue` over an OCI layout of about 1 GB of real
# files (this machine's /usr, cut into 8 gzip layers, with a few residue files and a whiteout
# among them), against `zcat` of the same layer blobs, in one script, rounds interleaved.
# Prints each tool's median wall time and peak memory and their ratio. Targets: kiln within
# 1.3x of zcat while it parses every tar header and reads every candidate file; and the same
# pass with the arch gate (the first bytes of every file) and the SBOM (the dpkg database,
# this machine's, planted in layer 2) at most 1.2x the residue scan alone.
#
# Usage: bench/residue_scan.sh [--kiln PATH] [ROUNDS [MEGABYTES]]
#        (build kiln first; PATH defaults to build/kiln; 3 rounds; 1024 MB of files). The layout
#        goes in a folder under TMPDIR (default /tmp).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=$root/build/kiln
if [[ ${1:-} == --kiln ]]; then
  kiln=$(realpath "$2")
  shift 2
fi
rounds=${1:-3}
megabytes=${2:-1024}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-residue.XXXXXX")
trap 'rm -rf "$work"' EXIT

python3 - "$work/layout" "$megabytes" <<'PY'
import hashlib, io, json, os, sys, tarfile
out, megabytes = sys.argv[1], int(sys.argv[2])
budget = megabytes << 20
layers = 8
blobs = os.path.join(out, "blobs", "sha256")
os.makedirs(blobs)
files = []
for top in ("/usr/lib", "/usr/bin", "/usr/share", "/usr/libexec", "/usr/include"):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if os.path.isfile(path) and not os.path.islink(path):
                files.append(path)
total = 0
chosen = []
for path in files:
    size = os.path.getsize(path)
    if total + size > budget:
        continue
    chosen.append(path)
    total += size
    if total >= budget * 0.99:
        break
residue = {
    2: [("var/lib/dpkg/status", open("/var/lib/dpkg/status", "rb").read())],
    3: [("root/.npmrc", b"//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\n"),
        ("etc/pip.conf", b"[global]\nindex-url = http://10.1.2.3:3141/simple\n")],
    5: [("root/.ssh/id_ed25519", b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n")],
}
whiteouts = {7: ["root/.ssh/.wh.id_ed25519"]}
def add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
descriptors = []
per_layer = (len(chosen) + layers - 1) // layers
import subprocess
for i in range(layers):
    raw = os.path.join(out, "layer.tar")
    with tarfile.open(raw, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in chosen[i * per_layer:(i + 1) * per_layer]:
            tar.add(path, arcname=path.lstrip("/"), recursive=False)
        for name, data in residue.get(i + 1, []):
            add_bytes(tar, name, data)
        for name in whiteouts.get(i + 1, []):
            add_bytes(tar, name, b"")
    subprocess.run(["gzip", "-6", "-n", raw], check=True)
    data = open(raw + ".gz", "rb").read()
    digest = hashlib.sha256(data).hexdigest()
    os.rename(raw + ".gz", os.path.join(blobs, digest))
    descriptors.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": "sha256:" + digest, "size": len(data)})
def blob(obj):
    data = json.dumps(obj).encode()
    digest = hashlib.sha256(data).hexdigest()
    open(os.path.join(blobs, digest), "wb").write(data)
    return {"digest": "sha256:" + digest, "size": len(data)}
config = blob({"os": "linux", "architecture": "amd64", "config": {}})
config["mediaType"] = "application/vnd.oci.image.config.v1+json"
manifest = blob({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                 "config": config, "layers": descriptors})
manifest["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
json.dump({"schemaVersion": 2, "manifests": [manifest]}, open(os.path.join(out, "index.json"), "w"))
open(os.path.join(out, "oci-layout"), "w").write('{"imageLayoutVersion":"1.0.0"}')
print(f"layout: {len(chosen)} files, {total / 2**20:.0f} MB in {layers} gzip layers, "
      f"{sum(d['size'] for d in descriptors) / 2**20:.0f} MB compressed")
PY

layers=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]+"/index.json"))["manifests"][0]["digest"][7:]; print(" ".join(sys.argv[1]+"/blobs/sha256/"+l["digest"][7:] for l in json.load(open(sys.argv[1]+"/blobs/sha256/"+m))["layers"]))' "$work/layout")

# Wall seconds and peak RSS (KB) of one command, from GNU time's format.
measure() {
  /usr/bin/time -f '%e %M' -o "$work/time" "$@" > "$work/out" 2>&1 || true
  tail -n 1 "$work/time" # GNU time puts "Command exited with non-zero status" first
}
kiln_s=() kiln_kb=() zcat_s=() zcat_kb=() one_s=() all_s=() all_kb=()
for ((i = 0; i < rounds; i++)); do
  read -r s kb < <(measure "$kiln" gate residue "$work/layout")
  kiln_s+=("$s") kiln_kb+=("$kb")
  grep -q "refused; 3 build-host file(s) in its 8 layer(s)" "$work/out" || {
    echo "residue_scan.sh: kiln did not report the 3 planted files:" >&2
    cat "$work/out" >&2
    exit 1
  }
  # The same pass judging every ELF file's machine and reading the SBOM's databases.
  read -r s kb < <(measure "$kiln" gate residue "$work/layout" --arch --sbom "$work/sbom.json")
  all_s+=("$s") all_kb+=("$kb")
  sbom_line=$(grep -o "SBOM of .* package(s), SPDX 2.3" "$work/out") || {
    echo "residue_scan.sh: kiln wrote no SBOM:" >&2
    cat "$work/out" >&2
    exit 1
  }
  # The same scan held to one core: what the threads add, against zcat's one.
  read -r s kb < <(measure taskset -c 0 "$kiln" gate residue "$work/layout")
  one_s+=("$s")
  # shellcheck disable=SC2086
  read -r s kb < <(measure sh -c "zcat $layers > /dev/null")
  zcat_s+=("$s") zcat_kb+=("$kb")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
k=$(median "${kiln_s[@]}")
z=$(median "${zcat_s[@]}")
echo "$(nproc) cores, $rounds rounds, medians"
LC_ALL=C printf 'kiln gate residue  %.2f s  peak %d MB\n' "$k" "$(( $(median "${kiln_kb[@]}") / 1024 ))"
LC_ALL=C printf 'kiln on one core   %.2f s\n' "$(median "${one_s[@]}")"
a=$(median "${all_s[@]}")
LC_ALL=C printf 'with --arch --sbom %.2f s  peak %d MB  (%s)\n' "$a" \
  "$(( $(median "${all_kb[@]}") / 1024 ))" "${sbom_line##*: }"
LC_ALL=C printf 'zcat > /dev/null   %.2f s  peak %d MB\n' "$z" "$(( $(median "${zcat_kb[@]}") / 1024 ))"
LC_ALL=C printf 'ratio              %.2f (target <= 1.3); on one core %.2f\n' \
  "$(awk -v k="$k" -v z="$z" 'BEGIN {print k / z}')" \
  "$(awk -v k="$(median "${one_s[@]}")" -v z="$z" 'BEGIN {print k / z}')"
LC_ALL=C printf 'arch + SBOM        %.2f of the residue scan alone (target <= 1.2)\n' \
  "$(awk -v a="$a" -v k="$k" 'BEGIN {print a / k}')"
