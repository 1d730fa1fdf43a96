#!/usr/bin/env bash
# The aarch64 wheel (`just test-wheel-cross`; too heavy for `just test`):
# builds it as the x86-64 one is built (maturin with zig, manylinux_2_28;
# build.sh checks its tag with auditwheel), then runs its binaries under
# qemu-user on this x86-64 machine against Debian's aarch64 glibc:
# `memdiag --version` and a report, `cfgcheck` on a config against the T4
# profile, `train run -- true` and `train --help`. Installs qemu-user and
# the aarch64 C libraries (Debian's packages) when missing; needs root then.
# Results: target/wheels-cross/ and a line per check. Not the real thing: no
# Arm machine has run these binaries, only an emulator.
#
# Pins: the justfile's MATURIN_VERSION, ZIGLANG_VERSION, AUDITWHEEL_VERSION.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
sysroot=/usr/aarch64-linux-gnu
if ! command -v qemu-aarch64 >/dev/null || [ ! -e "$sysroot/lib/ld-linux-aarch64.so.1" ] || [ ! -e "$sysroot/lib/libgcc_s.so.1" ]; then
    echo "wheel-cross: installing qemu-user and Debian's aarch64 glibc and libgcc (apt-get)" >&2
    apt-get install -y -q qemu-user libc6-arm64-cross libgcc-s1-arm64-cross >/dev/null
fi
out=target/wheels-cross
TARGET=aarch64-unknown-linux-gnu bash scripts/wheel/build.sh release "$out"
wheel=$(ls "$out"/oomkit-*aarch64.whl)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$wheel" "$tmp/bin" <<'PY'
import os, stat, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
os.makedirs(dest)
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if ".data/scripts/" in n:
            path = os.path.join(dest, os.path.basename(n))
            with open(path, "wb") as f:
                f.write(z.read(n))
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
PY
arm() { qemu-aarch64 -L "$sysroot" "$tmp/bin/$1" "${@:2}"; }
passed=0 failed=0
check() {
    local name=$1 want=$2
    shift 2
    local code=0 said
    said=$("$@" 2>&1) || code=$?
    if [ "$code" = 0 ] && grep -qF -- "$want" <<<"$said"; then
        passed=$((passed + 1)); printf 'ok   %s\n' "$name"
    else
        failed=$((failed + 1)); printf 'FAIL %s: exit %s: %s\n' "$name" "$code" "$(tail -n 3 <<<"$said")"
    fi
}
for tool in memdiag cfgcheck verify-fixes train; do
    check "file $tool" "ARM aarch64" file "$tmp/bin/$tool"
done
check "memdiag --version (qemu-aarch64)" "memdiag" arm memdiag --version
check "memdiag report without a driver (qemu-aarch64)" "schema: memdiag/v1" arm memdiag --format yaml
check "cfgcheck --gpu t4 configs/demo_cpu.yaml (qemu-aarch64)" "Tesla T4 (GPU 0),ok" arm cfgcheck --gpu t4 configs/demo_cpu.yaml --format csv
check "train run -- true (qemu-aarch64)" "finished" arm train run --out "$tmp/run" -- true
check "train --help (qemu-aarch64)" "need the source build" arm train --help
echo "wheel-cross: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB): $passed passed, $failed failed (under $(qemu-aarch64 --version | head -n 1))"
[ "$failed" = 0 ]
