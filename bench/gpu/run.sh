#!/usr/bin/env bash
# The device half of `just gpu-verify`: runs on a CUDA machine from the pack
# (bin/, configs/, bench/), with no Rust and no network; needs only a python3
# whose torch is 2.11. Writes every result under OUT (default gpu-results/)
# and a steps.csv saying what ran, what was skipped and why.
#
# Without a GPU it runs in CPU-fallback mode: the GPU-only steps are skipped
# with their reason, the rest runs (the test suite does this, so the recipe
# cannot rot). QUICK=1 shortens the benchmarks (for the test suite).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-gpu-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=${BIN:-$here/bin}
py=${PYTHON:-python3}
quick=${QUICK:-0}
cd "$here"

# The binaries find torch's libraries through that python's torch.
torch_lib=$("$py" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))') || {
    echo "run.sh: $py cannot import torch" >&2
    exit 2
}
export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

gpu=0
if "$bin/train" info --format yaml | grep -q '^cuda_available: true'; then gpu=1; fi
echo "step,status,seconds,note" > "$out/steps.csv"
record() { printf '%s,%s,%s,"%s"\n' "$1" "$2" "$3" "${4//\"/\'}" >> "$out/steps.csv"; echo "run.sh: $1: $2 ${4:+($4)}" >&2; }
# step NAME OK_CODES COMMAND...: runs it, records ok or failed.
step() {
    local name=$1 ok=$2; shift 2
    local start=$SECONDS
    "$@" > "$out/$name.out" 2> "$out/$name.err"
    local rc=$?
    if [[ " $ok " == *" $rc "* ]]; then
        record "$name" ok $((SECONDS - start)) "exit $rc"
    else
        record "$name" failed $((SECONDS - start)) "exit $rc: $(tail -n 1 "$out/$name.err")"
    fi
}
gpu_only() { record "$1" skipped 0 "no CUDA device: $2"; }

{ date -u +%FT%TZ; uname -a; nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"; } > "$out/machine.txt"
step train-info "0" "$bin/train" info --format yaml
step memdiag "0" "$bin/memdiag" --format yaml
step memdiag-table "0" "$bin/memdiag" --format table
runs=50; [ "$quick" = 1 ] && runs=3
step memdiag-oneshot "0" "$py" bench/memdiag_oneshot.py --bin "$bin/memdiag" --python "$py" --runs $runs --alt-runs 1 --out "$out"
# cfgcheck flags the seeds' reduce-overhead + checkpointing config before any run.
sed 's/torch_compile_mode: "default" /torch_compile_mode: "reduce-overhead"/' configs/colab_optimized_full.yaml > "$out/reduce-overhead.yaml"
step cfgcheck-seeds "0 1" bash -c "'$bin/memdiag' | '$bin/cfgcheck' configs/colab_optimized_full.yaml configs/colab_full_stable.yaml configs/colab_optimized.yaml '$out/reduce-overhead.yaml' --format yaml"
step verify-fixes "0 1" bash -c "'$bin/memdiag' | '$bin/verify-fixes' --config configs/demo_cpu.yaml --train '$bin/train' --out '$out/runs' --format yaml"

# A real training run: on a GPU its metrics.csv carries peak allocated and
# reserved memory per epoch from the allocator view.
demo=configs/demo_cpu.yaml
if [ "$quick" = 1 ]; then
    demo="$out/quick.yaml"
    printf 'batch_size: 8\ntemporal_frames: 2\nepochs: 2\nimage_size: 8\nscalar_features: 2\ndata: {synthetic_train_examples: 32, synthetic_val_examples: 8}\narchitecture: {channels: [4], embed_dim: 8, attention_heads: 2}\n' > "$demo"
fi
rm -rf "$out/demo-run"
step train-demo "0" "$bin/train" --config "$demo" --out "$out/demo-run"

rounds=3; steps=20; [ "$quick" = 1 ] && { rounds=1; steps=2; }
step train-vs-pytorch-cpu "0" "$py" bench/train_vs_pytorch.py --train "$bin/train" --config "$demo" --rounds $rounds --steps $steps --warmup 1 --out "$out"

if [ "$gpu" = 1 ]; then
    # train against PyTorch eager and torch.compile on the full 64/128/256
    # model at the seeds' batch size, fp32 and bf16, checkpointing off and on,
    # with each side's peak allocated memory.
    for p in off bf16; do
        step "train-vs-pytorch-gpu-$p" "0" "$py" bench/train_vs_pytorch.py --train "$bin/train" \
            --config configs/colab_full_stable.yaml --device cuda --precision $p --compile \
            --rounds $rounds --steps $steps --tag "-gpu-$p" --out "$out"
    done
    # A batch far too large for the card: train must split it and go on.
    rm -rf "$out/oom-run"
    step oom-recovery "0" "$bin/train" --config configs/gpu_oom.yaml --out "$out/oom-run" --device cuda
    step cudagraph-crash "0" "$py" bench/gpu/cudagraph_crash.py --out "$out"
    step estimate-matrix "0" "$py" bench/gpu/estimate_matrix.py --train "$bin/train" --cfgcheck "$bin/cfgcheck" --out "$out"
else
    for p in off bf16; do gpu_only "train-vs-pytorch-gpu-$p" "the GPU comparison needs a GPU"; done
    gpu_only oom-recovery "a real CUDA out-of-memory needs a GPU (CPU tests inject it with TRAINGUARD_FAULT)"
    gpu_only cudagraph-crash "CUDA graphs need CUDA"
    gpu_only estimate-matrix "peak GPU memory needs a GPU (the CPU check is just bench-activations)"
fi
echo "run.sh: results in $out" >&2
