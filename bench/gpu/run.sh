#!/usr/bin/env bash
# The device half of `just gpu-verify`: runs on a CUDA machine from the pack
# (bin/ from the pip wheel, configs/, bench/), with no Rust and no network,
# on that machine's own python3 and whatever torch it has (2.9 or newer).
# Writes every result under OUT (default gpu-results/) and steps.csv: one row
# per step with its status (ok, failed, no result, timed out, skipped), its
# seconds, its cap and a note; the first row (`machine`) names the GPU, the
# driver, torch and the C compiler.
#
#   run.sh [--only PART[,PART...]] [--again STEPS_CSV] [--budget SECONDS] [--tar FILE] [OUT]
#
# PART: a group (basics, gpu, trainer, model, study) or one step's name; the
# default is every group but `model` and `study`. --again runs the steps a previous steps.csv
# records as failed, no result, timed out, or skipped for its budget.
# --budget bounds the whole run: a step gets at most its cap and what is left
# (less 10 s for packing); one that would start with under 20 s left is
# skipped, so a machine lent for a fixed time still hands back a complete
# steps.csv. --tar packs OUT into one file at the end (also after an error;
# checkpoints left out).
#
# The steps and their caps are the table below (`steps`); the gpu group's
# caps and the basics' add up to 480 s (bench/README.md, "The GPU run").
# Without a GPU the gpu steps are skipped with their reason (DRY_RUN=1 runs
# them on the CPU instead, to check a torch or transformers version: no
# measurement). The trainer group (our own model, train-model) needs the
# source build's train-model and the torch it is built for; the pack leaves
# train-model out by design, so on a GPU machine from the pack those steps
# are skipped and their GPU claims stay unmeasured. Environment: BIN
# (binaries, default bin/ of the pack), PYTHON (default python3), QUICK=1
# (short benchmarks, for the test suite), STEP_TIMEOUT (every step's limit
# in seconds, below its cap), DRY_RUN=1. Each step sees its limit as
# STEP_LIMIT. TRAINGUARD_FAULT (the CPU tests' injected faults) is refused.
set -uo pipefail
usage() { sed -n '/^#   run.sh/p' "${BASH_SOURCE[0]}" | sed 's/^#   /usage: /' >&2; exit 2; }
if env | grep -q '^TRAINGUARD_FAULT'; then
    echo "run.sh: TRAINGUARD_FAULT is set: the GPU recipe measures real failures, never injected ones; unset it" >&2
    exit 2
fi
only="" again="" budget=0 tarball="" out=""
while [ $# -gt 0 ]; do
    case $1 in
        --only) [ $# -ge 2 ] || usage; only=$2; shift 2 ;;
        --again) [ -f "${2:-}" ] || { echo "run.sh: --again takes a steps.csv, got '${2:-}'" >&2; exit 2; }; again=$2; shift 2 ;;
        --budget) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "run.sh: --budget takes whole seconds, got '${2:-}'" >&2; exit 2; }; budget=$2; shift 2 ;;
        --tar) [ $# -ge 2 ] || usage; tarball=$2; shift 2 ;;
        -h|--help) usage ;;
        -*) echo "run.sh: unknown option $1" >&2; usage ;;
        *) [ -z "$out" ] || usage; out=$1; shift ;;
    esac
done

# name, group, cap in seconds, what it needs (none; torch: 2.9 or newer;
# gpu: torch that sees CUDA; hf: gpu and transformers; trainer: train-model
# and its torch; trainer-gpu; trainer-cpu; cpu: only without a GPU).
steps="
memdiag                   basics    5 none
memdiag-table             basics    5 none
memdiag-oneshot           basics   30 torch
cfgcheck-seeds            basics    5 none
gpu-peak                  gpu      20 gpu
hf-oom                    gpu     170 hf
cudagraph                 gpu      80 gpu
sweep-pack                gpu      90 gpu
preload-device            gpu      30 torch
estimate-matrix           gpu      30 gpu
estimate-matrix-check     basics   30 cpu
train-info                trainer  30 trainer
verify-fixes              trainer 300 trainer
train-demo                trainer 600 trainer
train-vs-pytorch-cpu      trainer 600 trainer
trial-overhead            trainer 600 trainer
checkpointing-memory-cpu  trainer 600 trainer-cpu
oom-recovery              trainer 300 trainer-gpu
train-vs-pytorch-gpu-off  trainer 300 trainer-gpu
train-vs-pytorch-gpu-fp16 trainer 300 trainer-gpu
train-vs-pytorch-gpu-bf16 trainer 300 trainer-gpu
sweep-model               model   300 gpu
cudagraph-variants        study   600 gpu
"
declare -A group_of cap_of needs_of
order=()
while read -r name group cap needs; do
    [ -n "$name" ] || continue
    order+=("$name"); group_of[$name]=$group; cap_of[$name]=$cap; needs_of[$name]=$needs
done <<<"$steps"
groups="basics gpu trainer model study"
for part in ${only//,/ }; do
    if [[ " $groups " != *" $part "* ]] && [ -z "${group_of[$part]:-}" ]; then
        echo "run.sh: --only: unknown part '$part' (groups: $groups; or a step: ${order[*]})" >&2
        exit 2
    fi
done
if [ -n "$again" ]; then
    failed=$(awk -F, 'NR > 1 && $1 != "machine" && ($2 == "failed" || $2 == "no result" || $2 == "timed out" || ($2 == "skipped" && $0 ~ /budget of/)) { print $1 }' "$again" | paste -sd, -)
    if [ -z "$failed" ]; then
        echo "run.sh: --again: $again records no failed, timed-out or budget-skipped step" >&2
        exit 0
    fi
    only=${only:+$only,}$failed
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${out:-gpu-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -z "$tarball" ] || tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")
bin=${BIN:-$here/bin}
py=${PYTHON:-python3}
quick=${QUICK:-0}
dry=${DRY_RUN:-0}
cd "$here"

wanted() {
    if [ -z "$only" ]; then [ "${group_of[$1]}" != study ] && [ "${group_of[$1]}" != model ]; return; fi
    [[ ",$only," == *",$1,"* ]] || [[ ",$only," == *",${group_of[$1]},"* ]]
}

# Checkpoints are left out: nothing reads them afterwards, and they are most of the bytes.
pack() { [ -z "$tarball" ] || tar -C "$(dirname "$out")" --exclude='*.safetensors' -czf "$tarball" "$(basename "$out")"; }
trap pack EXIT

# What the python has: torch (its version, libraries, CUDA), transformers.
declare -A probe=()
probe_out=$("$py" bench/gpu/probe_torch.py 2>&1)
probe_rc=$?
while IFS='=' read -r k v; do [ -n "$k" ] && probe[$k]=$v; done <<<"$probe_out"
torch=${probe[torch]:-}
no_torch=""
if [ "$probe_rc" != 0 ] || [ -z "$torch" ]; then
    no_torch="$py cannot import torch (${probe[error]:-$(tail -n 1 <<<"$probe_out")})"
else
    IFS=. read -r tmaj tmin _ <<<"${torch%%+*}"
    if [ "${tmaj:-0}" -lt 2 ] || { [ "${tmaj:-0}" = 2 ] && [ "${tmin:-0}" -lt 9 ]; }; then
        no_torch="torch $torch is older than 2.9, the oldest these steps are written for"
    fi
    export LD_LIBRARY_PATH="${probe[torch_lib]}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
smi=$(nvidia-smi -L 2>/dev/null | grep '^GPU ' | head -n 1)
# gpu: 1 when torch sees CUDA; 0 without a GPU; broken when nvidia-smi sees
# one and torch cannot use it (then the GPU steps fail with why).
gpu=0 broken=""
if [ -z "$no_torch" ] && [ "${probe[cuda_available]:-}" = True ]; then
    gpu=1
elif [ -n "$smi" ]; then
    gpu=broken
    torch_said="the torch of $py, $torch (CUDA ${probe[cuda]:-none}), does not see it"
    [ -z "$no_torch" ] || torch_said=$no_torch
    broken="nvidia-smi sees ${smi%% (UUID*} but $torch_said"
    echo "run.sh: $broken" >&2
fi
# The trainer (our own model): train-model beside train, loading this torch.
no_trainer=""
if [ ! -x "$bin/train-model" ]; then
    no_trainer="our trainer needs train-model (libtorch), which the pip wheel and the GPU pack leave out by design; its steps run from the source build (just build, then BIN=target/release)"
elif [ -n "$no_torch" ]; then
    no_trainer=$no_torch
else
    info=$("$bin/train" info --format yaml 2>&1)
    built=$(sed -n "s/^torch_version: '\{0,1\}\([^']*\)'\{0,1\}$/\1/p" <<<"$info")
    if [ -z "$built" ]; then
        no_trainer="train info fails with this torch: $(tail -n 1 <<<"$info")"
    elif [ "${built%%+*}" != "${torch%%+*}" ]; then
        no_trainer="torch $torch here; our trainer (train-model) is built for torch ${built%%+*}"
    fi
fi
device=cpu; [ "$gpu" = 1 ] && device=cuda

cc_line=$( (cc --version || gcc --version) 2>/dev/null | head -n 1)
gpu_line=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
machine="GPU: ${gpu_line:-none}; torch ${torch:-none} (CUDA ${probe[cuda]:-none}); python ${probe[python]:-?}; transformers ${probe[transformers]:-none}; accelerate ${probe[accelerate]:-none}; C compiler: ${cc_line:-none (the inductor of torch.compile needs one)}; $(nproc) cores"
{ date -u +%FT%TZ; uname -a; nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null
  echo "$probe_out"
  echo "C compiler: ${cc_line:-none}"
  free -m 2>/dev/null | sed -n 2p
  [ -z "$broken" ] || echo "$broken"
  [ -z "$no_trainer" ] || echo "trainer: $no_trainer"
  echo "parts: ${only:-default}; budget: ${budget}s; dry run: $dry"; } > "$out/machine.txt" 2>&1

echo "step,status,seconds,cap,note" > "$out/steps.csv"
record() { printf '%s,%s,%s,%s,"%s"\n' "$1" "$2" "$3" "$4" "${5//\"/\'}" >> "$out/steps.csv"; echo "run.sh: $1: $2 ${5:+($5)}" >&2; }
record machine info 0 0 "$machine"
reserve=10

# Why a step cannot run here ("skip:..." or "fail:..."), or nothing.
blocked() {
    case ${needs_of[$1]} in
        none) ;;
        torch) [ -z "$no_torch" ] || echo "skip:$no_torch" ;;
        gpu|hf)
            if [ "$gpu" = broken ]; then echo "fail:$broken"
            elif [ -n "$no_torch" ]; then echo "skip:$no_torch"
            elif [ "$gpu" = 0 ] && [ "$dry" != 1 ]; then echo "skip:no CUDA device (DRY_RUN=1 checks the step on the CPU)"
            elif [ "${needs_of[$1]}" = hf ] && [ -z "${probe[transformers]:-}" ]; then echo "skip:$py has no transformers"
            fi ;;
        cpu) [ "$gpu" = 0 ] || echo "skip:the GPU steps measure this" ;;
        trainer*)
            if [ -n "$no_trainer" ]; then echo "skip:$no_trainer"
            elif [ "${needs_of[$1]}" = trainer-gpu ] && [ "$gpu" != 1 ]; then
                [ "$gpu" = broken ] && echo "fail:$broken" || echo "skip:no CUDA device"
            elif [ "${needs_of[$1]}" = trainer-cpu ] && [ "$gpu" = 1 ]; then echo "skip:the GPU comparison steps measure this"
            fi ;;
    esac
}

# step NAME OK_CODES COMMAND...: under the least of its cap, STEP_TIMEOUT and
# what is left of the budget; records ok, failed, no result or timed out.
step() {
    local name=$1 ok=$2; shift 2
    wanted "$name" || return 0
    local cap=${cap_of[$name]} why
    why=$(blocked "$name")
    case $why in
        skip:*) record "$name" skipped 0 "$cap" "${why#skip:}"; return 0 ;;
        fail:*) record "$name" failed 0 "$cap" "${why#fail:}"; return 0 ;;
    esac
    local limit=$cap
    [ -n "${STEP_TIMEOUT:-}" ] && [ "$STEP_TIMEOUT" -lt "$limit" ] && limit=$STEP_TIMEOUT
    if [ "$budget" -gt 0 ]; then
        local left=$((budget - reserve - SECONDS))
        if [ "$left" -lt 20 ]; then
            record "$name" skipped 0 "$cap" "budget of ${budget}s spent"
            return 0
        fi
        [ "$left" -lt "$limit" ] && limit=$left
    fi
    local start=$SECONDS
    STEP_LIMIT=$limit timeout --kill-after=5 "$limit" "$@" < /dev/null > "$out/$name.out" 2> "$out/$name.err"
    local rc=$?
    local last
    last=$(grep -v '^\s*$' "$out/$name.err" | tail -n 1)
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        record "$name" "timed out" $((SECONDS - start)) "$cap" "stopped after ${limit}s: $last"
    elif [[ " $ok " == *" $rc "* ]]; then
        record "$name" ok $((SECONDS - start)) "$cap" "${last:-exit $rc}"
    elif [ "$rc" = 3 ] && [ "${group_of[$name]}" = gpu ]; then
        record "$name" "no result" $((SECONDS - start)) "$cap" "$last"
    else
        record "$name" failed $((SECONDS - start)) "$cap" "exit $rc: $last"
    fi
}

gpu_args=(--bin "$bin" --python "$py" --out "$out")
[ "$gpu" = 1 ] || gpu_args+=(--dry-run)
runs=50; [ "$quick" = 1 ] && runs=3
step memdiag 0 "$bin/memdiag" --format yaml
step memdiag-table 0 "$bin/memdiag" --format table
step memdiag-oneshot 0 "$py" bench/memdiag_oneshot.py --bin "$bin/memdiag" --python "$py" --runs $runs --alt-runs 1 --out "$out"
# cfgcheck flags the seeds' reduce-overhead + checkpointing config before any run.
sed 's/torch_compile_mode: "default" /torch_compile_mode: "reduce-overhead"/' configs/colab_optimized_full.yaml > "$out/reduce-overhead.yaml"
step cfgcheck-seeds "0 1" bash -c "'$bin/memdiag' | '$bin/cfgcheck' configs/colab_optimized_full.yaml configs/colab_full_stable.yaml configs/colab_optimized.yaml '$out/reduce-overhead.yaml' --format yaml"

# The user's path on a GPU (bench/README.md, "The GPU run").
step gpu-peak 0 "$py" bench/gpu/gpu_peak.py "${gpu_args[@]}"
step hf-oom 0 "$py" bench/gpu/hf_oom.py "${gpu_args[@]}"
step cudagraph 0 "$py" bench/gpu/cudagraph_fix.py "${gpu_args[@]}"
step sweep-pack 0 "$py" bench/gpu/sweep_pack.py "${gpu_args[@]}"
step preload-device 0 "$py" bench/gpu/preload_cuda.py --train "$bin/train" --python "$py" --device $device --out "$out"
matrix_train=(); [ -z "$no_trainer" ] && matrix_train=(--train "$bin/train")
matrix_dry=(); [ "$gpu" = 1 ] || matrix_dry=(--dry-run)
step estimate-matrix 0 "$py" bench/gpu/estimate_matrix.py --cfgcheck "$bin/cfgcheck" "${matrix_train[@]}" "${matrix_dry[@]}" --out "$out"
# Without a GPU, what the matrix would measure is still checked: every config
# parses and the estimate has the lines the fit reads.
# The memory model on the GPU's own peaks (issue 43; only with --only).
step sweep-model 0 "$py" bench/gpu/sweep_model.py "${gpu_args[@]}"
step estimate-matrix-check 0 "$py" bench/gpu/estimate_matrix.py --cfgcheck "$bin/cfgcheck" --out "$out" --check

# Our own trainer (train-model): the source build's, against its torch.
demo=configs/demo_cpu.yaml
if [ "$quick" = 1 ]; then
    demo="$out/quick.yaml"
    printf 'batch_size: 8\ntemporal_frames: 2\nepochs: 2\nimage_size: 8\nscalar_features: 2\ndata: {synthetic_train_examples: 32, synthetic_val_examples: 8}\narchitecture: {channels: [4], embed_dim: 8, attention_heads: 2}\n' > "$demo"
fi
rounds=5; steps_n=20; trials=5; [ "$quick" = 1 ] && { rounds=1; steps_n=2; trials=1; }
step train-info 0 "$bin/train" info --format yaml
step verify-fixes "0 1" bash -c "'$bin/memdiag' | '$bin/verify-fixes' --config configs/demo_cpu.yaml --train '$bin/train' --out '$out/runs' --format yaml"
rm -rf "$out/demo-run"
step train-demo 0 "$bin/train" --config "$demo" --out "$out/demo-run"
step train-vs-pytorch-cpu 0 "$py" bench/train_vs_pytorch.py --train "$bin/train" --config "$demo" --rounds $rounds --steps $steps_n --warmup 1 --out "$out"
step trial-overhead 0 "$py" bench/trial_overhead.py --train "$bin/train" --cfgcheck "$bin/cfgcheck" --python "$py" --device $device --trials $trials --out "$out"
cm_steps=(--steps 2 --warmup 1); [ "$quick" = 1 ] && cm_steps=(--steps 1 --warmup 0)
step checkpointing-memory-cpu 0 "$py" bench/checkpointing_memory.py --train "$bin/train" --cfgcheck "$bin/cfgcheck" \
    --python "$py" --config "$demo" "${cm_steps[@]}" --out "$out"
rm -rf "$out/oom-run"
step oom-recovery 0 "$bin/train" --config configs/gpu_oom.yaml --out "$out/oom-run" --device cuda
for p in off fp16 bf16; do
    step "train-vs-pytorch-gpu-$p" 0 "$py" bench/train_vs_pytorch.py --train "$bin/train" \
        --config configs/colab_full_stable.yaml --device cuda --precision $p --compile \
        --rounds $rounds --steps $steps_n --tag="-gpu-$p" --out "$out"
done
# The four-variant study of seed 001's crash (only with --only): exit 1 (no
# variant reproduced it) is a result too.
step cudagraph-variants "0 1" "$py" bench/gpu/cudagraph_crash.py --out "$out" --cfgcheck "$bin/cfgcheck"
echo "run.sh: results in $out${tarball:+ (packed: $tarball)}" >&2
