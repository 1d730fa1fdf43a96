#!/usr/bin/env bash
# Builds the pip wheel (packaging/wheel: memdiag, cfgcheck, verify-fixes and
# train without libtorch) for manylinux_2_28 with maturin, linking through zig
# so that the binaries ask for glibc 2.28 at most (built plainly here they ask
# for 2.34), then checks its tag with auditwheel. `just wheel` (release, into
# target/wheels/) and scripts/wheel/test.sh (dev, into target/wheels-dev/)
# call it. Needs Rust and Python 3 with venv; no torch.
#
# Usage: build.sh PROFILE OUT_DIR
# Pins (the justfile's): MATURIN_VERSION, ZIGLANG_VERSION, AUDITWHEEL_VERSION,
# installed into target/wheel-venv when it lacks them. TARGET: the Rust
# target triple (default x86_64-unknown-linux-gnu; aarch64-unknown-linux-gnu
# for Arm GPU nodes, its standard library added with rustup when missing).
set -euo pipefail
profile=${1:?usage: build.sh PROFILE OUT_DIR}
out=${2:?usage: build.sh PROFILE OUT_DIR}
target=${TARGET:-x86_64-unknown-linux-gnu}
arch=${target%%-*}
tag=manylinux_2_28_$arch
: "${MATURIN_VERSION:?set by the justfile}" "${ZIGLANG_VERSION:?}" "${AUDITWHEEL_VERSION:?}"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv="$root/target/wheel-venv"
mkdir -p "$out"
out=$(cd "$out" && pwd)

have() {
    "$venv/bin/python" - <<PY 2>/dev/null
import importlib.metadata as m, sys
want = {"maturin": "$MATURIN_VERSION", "ziglang": "$ZIGLANG_VERSION", "auditwheel": "$AUDITWHEEL_VERSION"}
sys.exit(any(m.version(k) != v for k, v in want.items()))
PY
}
if ! have; then
    echo "wheel: installing maturin==$MATURIN_VERSION, ziglang==$ZIGLANG_VERSION and auditwheel==$AUDITWHEEL_VERSION into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet "maturin==$MATURIN_VERSION" "ziglang==$ZIGLANG_VERSION" "auditwheel==$AUDITWHEEL_VERSION"
fi

# maturin finds zig as `python -m ziglang` through the environment it runs in.
export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"
# Its own target directory: its binaries are named as the workspace's are.
export CARGO_TARGET_DIR="$root/target/wheel-build"
host=$(rustc -vV | sed -n 's/^host: //p')
if [ "$target" != "$host" ] && ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    echo "wheel: adding Rust's standard library for $target (rustup target add)" >&2
    rustup target add "$target"
fi
rm -f "$out"/oomkit-*"$arch".whl
maturin build --manifest-path "$root/packaging/wheel/Cargo.toml" --profile "$profile" \
    --zig --compatibility manylinux_2_28 --target "$target" --out "$out"
wheel=$(ls "$out"/oomkit-*"$arch".whl)

# auditwheel reads every binary's dynamic section and versioned symbols: the
# most compatible tag they allow must be the one the wheel claims.
show=$(auditwheel show "$wheel")
if ! grep -q "consistent with the following platform tag: \"$tag\"" <<<"$(tr '\n' ' ' <<<"$show" | tr -s ' ')"; then
    echo "$show" >&2
    echo "wheel: auditwheel does not find $wheel consistent with $tag" >&2
    exit 1
fi
echo "wheel: $wheel ($(du -k "$wheel" | cut -f1) KiB; auditwheel: $tag)" >&2
