#!/usr/bin/env bash
# The local half of `just gpu-verify`: packs what a GPU machine needs into
# target/gpu-pack/trainguard-gpu.tar.gz: the pip wheel's binaries (memdiag,
# cfgcheck, verify-fixes, train without libtorch; manylinux_2_28, so they
# run on an older glibc than this machine's), configs/ and the bench
# scripts. No train-model: the GPU machine runs the recipe on its own python3
# and whatever torch it has (2.9 or newer), which train-model (built for one
# torch) would not load; our trainer's GPU steps are skipped there by design.
# Refuses a pack over 64 MiB. WHEEL: the wheel to take the binaries from
# (default the one `just wheel` left in target/wheels/); PACK_DIR: where the
# pack goes (default target/gpu-pack).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
dir=${PACK_DIR:-target/gpu-pack}
pack=$dir/trainguard-gpu.tar.gz
# A refused pack leaves no earlier one behind to be carried by mistake.
rm -f "$pack"
shopt -s nullglob
wheels=(${WHEEL:-target/wheels/oomkit-*-manylinux_2_28_x86_64.whl})
if [ "${#wheels[@]}" != 1 ]; then
    echo "gpu-verify: refusing to pack: expected one wheel, found ${#wheels[@]} (${wheels[*]:-none in target/wheels/}); build it with just wheel, or set WHEEL=PATH" >&2
    exit 1
fi
stage=$dir/trainguard-gpu
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/bench/gpu"
# The wheel's scripts are the four binaries, already stripped.
python3 - "${wheels[0]}" "$stage/bin" <<'PY'
import os, stat, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if ".data/scripts/" in n]
    for n in names:
        path = os.path.join(dest, os.path.basename(n))
        with open(path, "wb") as f:
            f.write(z.read(n))
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
want = {"memdiag", "cfgcheck", "verify-fixes", "train"}
got = {os.path.basename(n) for n in names}
if got != want:
    sys.exit(f"gpu-verify: {wheel} holds {sorted(got)}, expected {sorted(want)}")
PY
cp -r configs "$stage/"
cp bench/*.py bench/*.yaml "$stage/bench/"
cp bench/gpu/run.sh bench/gpu/*.py "$stage/bench/gpu/"
cp bench/README.md "$stage/"
tar -C "$dir" -czf "$pack.tmp" trainguard-gpu
size=$(stat -c %s "$pack.tmp")
if [ "$size" -gt $((64 * 1024 * 1024)) ]; then
    rm -f "$pack.tmp"
    echo "gpu-verify: refusing the pack: $((size / 1024 / 1024)) MiB is over the 64 MiB a lent GPU machine takes" >&2
    exit 1
fi
mv "$pack.tmp" "$pack"
echo "gpu-verify: $pack ($((size / 1024)) KiB, binaries from $(basename "${wheels[0]}"))" >&2
