#!/usr/bin/env bash
# Our trainer (train and train-model) built for another torch than the
# workspace's, for a GPU machine that has only that torch and no network:
# train-model links one libtorch, and the workspace's tch expects torch 2.13.
# Builds this commit's source in a git worktree with tch and torch-sys pinned
# to the release made for VERSION (the only change), against that torch's
# libraries and headers from PyPI's wheel (pip download, no install), and
# leaves stripped train and train-model in WORK/bin, to be run there with
# LD_LIBRARY_PATH naming that machine's torch/lib and nvidia/*/lib (run.sh
# sets torch/lib itself; see bench/README.md, "The GPU run").
#
#   build_for_torch.sh VERSION [WORK]    (WORK default target/torch-VERSION)
#
# VERSION: 2.11.0 (tch 0.24), 2.12.0 (tch 0.25) or 2.13.0 (tch 0.26). Runs
# again where it stopped: an existing worktree, torch/ or build is reused.
# Needs the project's .venv (just setup) for pip and for the CUDA 13 headers
# and libraries the link reads (the nvidia-* wheels torch 2.13 brought).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
version=${1:-}
case $version in
    2.11.0) tch=0.24 ;;
    2.12.0) tch=0.25 ;;
    2.13.0) tch=0.26 ;;
    *) echo "usage: build_for_torch.sh VERSION [WORK]: VERSION is 2.11.0, 2.12.0 or 2.13.0, got '$version'" >&2; exit 2 ;;
esac
work=$(mkdir -p "${2:-$root/target/torch-$version}" && cd "${2:-$root/target/torch-$version}" && pwd)
py=$root/.venv/bin/python
nv=$("$py" -c 'import os, nvidia; print(os.path.dirname(nvidia.__file__) if nvidia.__file__ else list(nvidia.__path__)[0])')
[ -d "$nv/cu13/include" ] || { echo "build_for_torch: no CUDA 13 headers in $nv/cu13/include (just setup installs them with torch)" >&2; exit 1; }

head=$(git -C "$root" rev-parse HEAD)
if [ -e "$work/src/Cargo.toml" ]; then
    # A worktree from an earlier run: brought to this commit, pins undone first.
    git -C "$work/src" checkout -q -- Cargo.toml Cargo.lock .cargo/config.toml
    git -C "$work/src" checkout -q --detach "$head"
else
    git -C "$root" worktree add --detach "$work/src" "$head"
fi
# The pins, and torch-sys told where libtorch is rather than asking Python
# (cargo's [env] cannot unset LIBTORCH_USE_PYTORCH, so the line goes).
sed -i -E "s/^(tch|torch-sys) = \"[0-9.]+\"/\1 = \"$tch\"/" "$work/src/Cargo.toml"
sed -i -E 's/^LIBTORCH_USE_PYTORCH = /# LIBTORCH_USE_PYTORCH = /' "$work/src/.cargo/config.toml"

if [ ! -e "$work/torch/lib/libtorch_cuda.so" ]; then
    rm -rf "$work/wheel"
    "$py" -m pip download "torch==$version" --no-deps -d "$work/wheel"
    "$py" - "$work" <<'PY'
import glob, sys, zipfile
work = sys.argv[1]
(wheel,) = glob.glob(f"{work}/wheel/torch-*.whl")
with zipfile.ZipFile(wheel) as z:
    z.extractall(work, [n for n in z.namelist() if n.startswith("torch/")])
PY
    rm -rf "$work/wheel"
fi

links=""
for d in "$nv"/*/lib; do links="$links -C link-arg=-Wl,-rpath-link,$d"; done
(cd "$work/src" && env -u LIBTORCH_USE_PYTORCH -u VIRTUAL_ENV \
    LIBTORCH="$work/torch" LIBTORCH_INCLUDE="$work/torch" LIBTORCH_LIB="$work/torch" LIBTORCH_CXX11_ABI=1 \
    TRAINGUARD_CUDA_INCLUDE="$nv/cu13/include" RUSTFLAGS="$links" CARGO_TARGET_DIR="$work/target" \
    cargo build --release -p train)
mkdir -p "$work/bin"
for b in train train-model; do strip -o "$work/bin/$b" "$work/target/release/$b"; done
echo "build_for_torch: $work/bin/train and train-model for torch $version (tch $tch), from $(git -C "$work/src" rev-parse --short HEAD)" >&2
