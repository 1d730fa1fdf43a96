#!/usr/bin/env bash
# The device half of `just gpu-verify`: runs on a CUDA machine from the pack
# (bin/, configs/, bench/), with no Rust and no network; needs only a python3
# whose torch is 2.13 (what train is built against). Writes every result under OUT (default gpu-results/)
# and a steps.csv saying what ran, what was skipped and why.
#
#   run.sh [--only PART[,PART...]] [--budget SECONDS] [--tar FILE] [OUT]
#
# PART: a group (basics, failures, crash, compare, matrix) or one step's
# name; the default is every step. --budget bounds the whole run: each step is given at
# most what is left of it (less a reserve for packing) and a step that would
# start with too little left is recorded as skipped, so a machine lent for a
# fixed time still hands back a complete steps.csv. --tar packs OUT into one
# file at the end (also after an error; checkpoints left out), for machines
# that return few files.
#
# Without a GPU it runs in CPU-fallback mode: the GPU-only steps are skipped
# with their reason, the rest runs (the test suite does this, so the recipe
# cannot rot). When `nvidia-smi -L` sees a GPU but train cannot load or does
# not see CUDA, the GPU steps that need train are recorded as failed with
# `train info`'s error instead. Environment: BIN (binaries, default bin/ of
# the pack), PYTHON (default python3), QUICK=1 shortens the benchmarks (for
# the test suite), STEP_TIMEOUT (one step's limit in seconds, default 1800;
# each step also sees its limit as STEP_LIMIT), CRASH_TIMEOUT and
# CRASH_VARIANTS (cudagraph_crash.py's --timeout per variant and --variants;
# its defaults when unset).
set -uo pipefail
usage() { sed -n '/^#   run.sh/p' "${BASH_SOURCE[0]}" | sed 's/^#   /usage: /' >&2; exit 2; }
only="" budget=0 tarball="" out=""
while [ $# -gt 0 ]; do
    case $1 in
        --only) [ $# -ge 2 ] || usage; only=$2; shift 2 ;;
        --budget) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "run.sh: --budget takes whole seconds, got '${2:-}'" >&2; exit 2; }; budget=$2; shift 2 ;;
        --tar) [ $# -ge 2 ] || usage; tarball=$2; shift 2 ;;
        -h|--help) usage ;;
        -*) echo "run.sh: unknown option $1" >&2; usage ;;
        *) [ -z "$out" ] || usage; out=$1; shift ;;
    esac
done
groups="basics failures crash compare matrix"
declare -A group_of=(
    [train-info]=basics [memdiag]=basics [memdiag-table]=basics [memdiag-oneshot]=basics
    [cfgcheck-seeds]=basics [verify-fixes]=basics [train-demo]=basics [train-vs-pytorch-cpu]=basics
    [trial-overhead]=basics [preload-device]=basics
    [oom-recovery]=failures [cudagraph-crash]=crash [cudagraph-explain]=crash
    [train-vs-pytorch-gpu-off]=compare [train-vs-pytorch-gpu-fp16]=compare [train-vs-pytorch-gpu-bf16]=compare
    [checkpointing-memory-cpu]=compare
    [estimate-matrix]=matrix [estimate-matrix-check]=matrix
)
for part in ${only//,/ }; do
    if [[ " $groups " != *" $part "* ]] && [ -z "${group_of[$part]:-}" ]; then
        echo "run.sh: --only: unknown part '$part' (groups: $groups; or a step: ${!group_of[*]})" >&2
        exit 2
    fi
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${out:-gpu-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -z "$tarball" ] || tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")
bin=${BIN:-$here/bin}
py=${PYTHON:-python3}
quick=${QUICK:-0}
step_timeout=${STEP_TIMEOUT:-1800}
cd "$here"

wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]] || [[ ",$only," == *",${group_of[$1]},"* ]]; }

# Checkpoints are left out: nothing reads them afterwards, and they are most of the bytes.
pack() { [ -z "$tarball" ] || tar -C "$(dirname "$out")" --exclude='*.safetensors' -czf "$tarball" "$(basename "$out")"; }
trap pack EXIT

# The binaries find torch's libraries through that python's torch; whether
# that torch sees CUDA decides cudagraph-crash, which needs torch alone.
torch_probe=$("$py" -c 'import torch, os
print(os.path.join(os.path.dirname(torch.__file__), "lib"))
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())') || {
    echo "run.sh: $py cannot import torch" >&2
    exit 2
}
torch_lib=$(head -n 1 <<<"$torch_probe")
torch_line=$(tail -n 1 <<<"$torch_probe")
torch_cuda=0
[[ $torch_line == *"available True" ]] && torch_cuda=1
export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# gpu: 1 when train sees CUDA; 0 when nothing sees a GPU (CPU fallback);
# "broken" when nvidia-smi sees one but train cannot load or use it (then
# why says so, and the GPU steps that need train fail with it).
gpu=0 why=""
info_err=$(mktemp)
info=$("$bin/train" info --format yaml 2>"$info_err")
info_rc=$?
smi=$(nvidia-smi -L 2>/dev/null | grep '^GPU ' | head -n 1)
if [ "$info_rc" = 0 ] && grep -q '^cuda_available: true' <<<"$info"; then
    gpu=1
elif [ -n "$smi" ]; then
    gpu=broken
    if [ "$info_rc" != 0 ]; then
        why="train info exits $info_rc: $(tail -n 1 "$info_err")"
    else
        notes=$(sed -n '/^notes:/,$p' <<<"$info" | sed -n "s/^- //p" | tr -d "'" | paste -sd ';' -)
        why="train info: cuda_available: false${notes:+ ($notes)}"
    fi
    why="nvidia-smi sees ${smi%% (UUID*} but train cannot use it: $why"
    echo "run.sh: $why" >&2
fi
rm -f "$info_err"
echo "step,status,seconds,note" > "$out/steps.csv"
record() { printf '%s,%s,%s,"%s"\n' "$1" "$2" "$3" "${4//\"/\'}" >> "$out/steps.csv"; echo "run.sh: $1: $2 ${4:+($4)}" >&2; }
# Seconds kept back at the end of a budget for packing the results.
reserve=15
# step NAME OK_CODES COMMAND...: runs it under the time left, records ok,
# failed or timed out.
step() {
    local name=$1 ok=$2; shift 2
    wanted "$name" || return 0
    local limit=$step_timeout
    if [ "$budget" -gt 0 ]; then
        local left=$((budget - reserve - SECONDS))
        if [ "$left" -lt 20 ]; then
            record "$name" skipped 0 "budget of ${budget}s spent"
            return 0
        fi
        [ "$left" -lt "$limit" ] && limit=$left
    fi
    local start=$SECONDS
    STEP_LIMIT=$limit timeout --kill-after=5 "$limit" "$@" < /dev/null > "$out/$name.out" 2> "$out/$name.err"
    local rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        record "$name" "timed out" $((SECONDS - start)) "stopped after ${limit}s: $(tail -n 1 "$out/$name.err")"
    elif [[ " $ok " == *" $rc "* ]]; then
        # A non-zero exit that is a result: its last line, if any, says which.
        local last=""
        [ "$rc" = 0 ] || last=$(tail -n 1 "$out/$name.err")
        record "$name" ok $((SECONDS - start)) "exit $rc${last:+: $last}"
    else
        record "$name" failed $((SECONDS - start)) "exit $rc: $(tail -n 1 "$out/$name.err")"
    fi
}
gpu_only() { wanted "$1" && record "$1" skipped 0 "no CUDA device: $2"; return 0; }
# A GPU step that cannot run because train cannot use the GPU nvidia-smi sees.
gpu_failed() { wanted "$1" && record "$1" failed 0 "${2:-$why}"; return 0; }

{ date -u +%FT%TZ; uname -a; nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null
  echo "$torch_line"
  [ -z "$why" ] || echo "$why"
  echo "parts: ${only:-all}; budget: ${budget}s"; } > "$out/machine.txt" 2>&1

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

# Like for like (bench/train_vs_pytorch.py): train in its own layout and in
# the other one, PyTorch eager, channels-last and (on the CPU) each with
# train's malloc setting, interleaved over the rounds.
rounds=5; steps=20; [ "$quick" = 1 ] && { rounds=1; steps=2; }
step train-vs-pytorch-cpu "0" "$py" bench/train_vs_pytorch.py --train "$bin/train" --config "$demo" --rounds $rounds --steps $steps --warmup 1 --out "$out"

# What a sweep pays per trial: a train process, a Python process, or a
# trial inside one Python process; on a GPU each process also opens a CUDA context.
trials=5; [ "$quick" = 1 ] && trials=1
device=cpu; [ "$gpu" = 1 ] && device=cuda
step trial-overhead "0" "$py" bench/trial_overhead.py --train "$bin/train" --cfgcheck "$bin/cfgcheck" --python "$py" --device $device --trials $trials --out "$out"

# Preloaded program trials: forked from a server that imported torch (and
# never initialised CUDA), each trial must use the device itself.
step preload-device "0" "$py" bench/gpu/preload_cuda.py --train "$bin/train" --python "$py" --device $device --out "$out"

# Seed 001's crash: torch.compile(mode="reduce-overhead") in four variants,
# each in its own process with its own limit (CRASH_TIMEOUT; a cold compile
# takes minutes), within the step's limit. Needs torch's CUDA, not train's.
crash_args=()
[ -z "${CRASH_TIMEOUT:-}" ] || crash_args+=(--timeout "$CRASH_TIMEOUT")
[ -z "${CRASH_VARIANTS:-}" ] || crash_args+=(--variants "$CRASH_VARIANTS")
crash() {
    # Exit 1 is a result too: no variant crashed (the report says what each
    # did instead, and which did not fit in the time).
    step cudagraph-crash "0 1" "$py" bench/gpu/cudagraph_crash.py --out "$out" --cfgcheck "$bin/cfgcheck" "${crash_args[@]}"
    # The real crash text through cfgcheck --explain, with the config fix.
    if [ -f "$out/cudagraph_crash.txt" ]; then
        step cudagraph-explain "0 1" "$bin/cfgcheck" --explain "$out/cudagraph_crash.txt" --config "$out/reduce-overhead.yaml" --format yaml
    elif wanted cudagraph-explain; then
        record cudagraph-explain skipped 0 "cudagraph-crash left no report"
    fi
}

if [ "$gpu" = 1 ]; then
    # A batch far too large for the card: train must split it and go on.
    rm -rf "$out/oom-run"
    step oom-recovery "0" "$bin/train" --config configs/gpu_oom.yaml --out "$out/oom-run" --device cuda
    crash
    # train against PyTorch eager and torch.compile on the full 64/128/256
    # model at the seeds' batch size, fp32, fp16 (the seeds' T4 has no bf16;
    # train's loss scaler against GradScaler) and bf16, checkpointing off and
    # on, with each side's peak allocated memory. Each also measures the
    # channels-last pair on the GPU, where it has never been measured: train
    # with channels_last: on beside its default (auto, NCHW on CUDA), and
    # PyTorch with model.to(memory_format=torch.channels_last) beside eager;
    # `auto` turns on for CUDA only once these figures say so.
    for p in off fp16 bf16; do
        step "train-vs-pytorch-gpu-$p" "0" "$py" bench/train_vs_pytorch.py --train "$bin/train" \
            --config configs/colab_full_stable.yaml --device cuda --precision $p --compile \
            --rounds $rounds --steps $steps --tag "-gpu-$p" --out "$out"
    done
    step estimate-matrix "0" "$py" bench/gpu/estimate_matrix.py --train "$bin/train" --cfgcheck "$bin/cfgcheck" --out "$out"
elif [ "$gpu" = broken ]; then
    # A GPU is there and train cannot use it: a failure to see, not a skip.
    gpu_failed oom-recovery
    if [ "$torch_cuda" = 1 ]; then
        crash
    else
        torch_why="nvidia-smi sees ${smi%% (UUID*} but $py's torch does not see CUDA either ($torch_line)"
        gpu_failed cudagraph-crash "$torch_why"
        gpu_failed cudagraph-explain "$torch_why"
    fi
    for p in off fp16 bf16; do gpu_failed "train-vs-pytorch-gpu-$p"; done
    gpu_failed estimate-matrix
else
    gpu_only oom-recovery "a real CUDA out-of-memory needs a GPU (CPU tests inject it with TRAINGUARD_FAULT)"
    gpu_only cudagraph-crash "CUDA graphs need CUDA"
    for p in off fp16 bf16; do gpu_only "train-vs-pytorch-gpu-$p" "the GPU comparison needs a GPU"; done
    # Checkpointing's memory trade-off in host memory instead (on a GPU the
    # comparison steps above measure peak allocated memory).
    cm_steps=(--steps 2 --warmup 1); [ "$quick" = 1 ] && cm_steps=(--steps 1 --warmup 0)
    step checkpointing-memory-cpu "0" "$py" bench/checkpointing_memory.py --train "$bin/train" --cfgcheck "$bin/cfgcheck" \
        --python "$py" --config "$demo" "${cm_steps[@]}" --out "$out"
    gpu_only estimate-matrix "peak GPU memory needs a GPU (the CPU check of the activations is just bench-activations)"
    # What the matrix would measure is still checked: every config of the
    # grid parses and the estimate has the lines the fit reads.
    step estimate-matrix-check "0" "$py" bench/gpu/estimate_matrix.py --cfgcheck "$bin/cfgcheck" --out "$out" --check
fi
echo "run.sh: results in $out${tarball:+ (packed: $tarball)}" >&2
