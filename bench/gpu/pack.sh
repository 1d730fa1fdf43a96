#!/usr/bin/env bash
# The local half of `just gpu-verify`: packs what the GPU machine needs (the
# release binaries with debug info stripped, configs/, the bench scripts)
# into target/gpu-pack/trainguard-gpu.tar.gz. Refuses a train that could not
# measure GPU memory there (`train info`: allocator_view: false, or a CPU-only
# libtorch) and a pack over 64 MiB. RELEASE: the binaries' folder (default
# target/release); CUDA_CRT_VERSION: nvidia-cuda-crt's version, for the
# message (the justfile passes its cuda_crt_version).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
release=${RELEASE:-target/release}
crt_pkg="nvidia-cuda-crt${CUDA_CRT_VERSION:+==$CUDA_CRT_VERSION}"
# A refused pack leaves no earlier one behind to be carried by mistake.
rm -f target/gpu-pack/trainguard-gpu.tar.gz

# On the GPU, train's memory figures (metrics.csv's peaks, train bench's, the
# estimate matrix) come from its allocator view: a train built without the
# CUDA runtime headers would run there and measure nothing.
if ! info=$("$release/train" info --format yaml 2>&1); then
    echo "gpu-verify: refusing to pack: $release/train info fails here, so the pack's train cannot be checked:" >&2
    echo "$info" | tail -n 3 | sed 's/^/    /' >&2
    exit 1
fi
if ! grep -q '^cuda_build: true' <<<"$info"; then
    echo "gpu-verify: refusing to pack: $release/train is linked against a CPU-only libtorch (train info: cuda_build: false), so it cannot use a GPU. Fix: build against a CUDA torch 2.13 (the default torch from PyPI, which just setup installs; or TORCH_ENV=/path/to/env), then rebuild." >&2
    exit 1
fi
if ! grep -q '^allocator_view: true' <<<"$info"; then
    echo "gpu-verify: refusing to pack: $release/train was built without the CUDA runtime headers (train info: allocator_view: false), so on the GPU it would report no memory figures (no peak allocated/reserved memory in metrics.csv, train bench or the estimate matrix)." >&2
    echo "gpu-verify: fix: install $crt_pkg into the torch env (just setup does it, TORCH_ENV included; or <env>/bin/python -m pip install $crt_pkg), or set TRAINGUARD_CUDA_INCLUDE to a CUDA 13 include directory holding crt/host_defines.h; then rebuild train so its build script looks again: cargo clean --release -p train-model && just gpu-verify" >&2
    exit 1
fi

stage=target/gpu-pack/trainguard-gpu
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/bench/gpu"
for tool in memdiag cfgcheck verify-fixes train train-model; do
    cp "$release/$tool" "$stage/bin/"
    strip --strip-debug "$stage/bin/$tool" 2>/dev/null || true
done
cp -r configs "$stage/"
cp bench/*.py bench/*.yaml "$stage/bench/"
cp bench/gpu/run.sh bench/gpu/*.py "$stage/bench/gpu/"
cp bench/README.md "$stage/"
tar -C target/gpu-pack -czf target/gpu-pack/trainguard-gpu.tar.gz trainguard-gpu
size=$(stat -c %s target/gpu-pack/trainguard-gpu.tar.gz)
echo "gpu-verify: target/gpu-pack/trainguard-gpu.tar.gz ($((size / 1024 / 1024)) MiB)" >&2
if [ "$size" -gt $((64 * 1024 * 1024)) ]; then
    echo "gpu-verify: the pack is over 64 MiB" >&2
    exit 1
fi
