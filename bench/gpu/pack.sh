#!/usr/bin/env bash
# The local half of `just gpu-verify`: packs what the GPU machine needs (the
# release binaries with debug info stripped, configs/, the bench scripts)
# into target/gpu-pack/trainguard-gpu.tar.gz, and refuses a pack over 64 MiB.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
stage=target/gpu-pack/trainguard-gpu
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/bench/gpu"
for tool in memdiag cfgcheck verify-fixes train; do
    cp "target/release/$tool" "$stage/bin/"
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
