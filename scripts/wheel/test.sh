#!/usr/bin/env bash
# The pip wheel as a user gets it (`just test-wheel`, part of `just test`):
# builds it (dev profile), installs it into a fresh virtual environment that
# has no torch, and from there runs each tool: memdiag, cfgcheck on a seed
# config and `--scan` on Python files, `train run` of examples/own_script/main.py (the project's torch
# environment as its interpreter) whose failing leg `cfgcheck --explain`
# reads, a short program sweep and its --report, and what needs libtorch
# (train --config, a sweep of the seeds' model, verify-fixes --config) exiting
# 5 with its message, and `verify-fixes -- CMD`, which does not need it. ldd and readelf of each binary: no libtorch, nothing
# beyond glibc's libraries and libgcc_s, no glibc symbol newer than 2.28.
# Then the GPU pack built from it, run from another folder.
#
# Environment: TORCH_PY (the torch environment's python, for the scripts the
# tools supervise), and build.sh's pins.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
torch_py=${TORCH_PY:?TORCH_PY: the torch environment python, which the justfile sets}

bash scripts/wheel/build.sh dev target/wheels-dev
wheel=$(ls target/wheels-dev/oomkit-*.whl)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --no-index --no-deps "$wheel"
bin="$tmp/venv/bin"
# What a user of the wheel has: the venv's scripts and the system's, no
# cargo output, no torch environment.
export PATH="$bin:/usr/local/bin:/usr/bin:/bin"
unset VIRTUAL_ENV LIBTORCH_USE_PYTORCH LD_LIBRARY_PATH

passed=0
failed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$1"; }
bad() { failed=$((failed + 1)); printf 'FAIL %s: %s\n' "$1" "$2"; }

# run NAME WANT_CODE CMD...: runs CMD with stdout and stderr in $tmp/NAME.{out,err}
# and checks its exit code; the greps that follow check what it said.
run() {
    local name=$1 want=$2
    shift 2
    local code=0
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || code=$?
    if [ "$code" = "$want" ]; then
        return 0
    fi
    bad "$name" "exit $code, expected $want; stderr: $(tail -n 3 "$tmp/$name.err")"
    return 1
}
# says NAME FILE PATTERN: FILE (out or err) of NAME holds the fixed string.
says() {
    if grep -qF -- "$3" "$tmp/$1.$2"; then
        return 0
    fi
    bad "$1" "its std$2 lacks: $3"
    return 1
}

if "$bin/python" -c 'import torch' 2>/dev/null; then
    bad "fresh venv" "it imports torch"
else
    ok "the fresh venv has no torch"
fi

for tool in memdiag cfgcheck verify-fixes train; do
    if [ "$(command -v "$tool")" != "$bin/$tool" ]; then
        bad "$tool on PATH" "found $(command -v "$tool" || echo nothing), expected $bin/$tool"
        continue
    fi
    libs=$(ldd "$bin/$tool")
    needed=$(readelf -d "$bin/$tool" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
    glibc=$(readelf --version-info --wide "$bin/$tool" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
    # glibc's own libraries and libgcc_s: within manylinux_2_28's set.
    extra=$(tr ' ' '\n' <<<"$needed" | grep -v -E '^(libc|libm|libdl|libpthread|librt)\.so\.[0-9]+$|^libgcc_s\.so\.1$|^ld-linux-x86-64\.so\.2$|^$' || true)
    if grep -qi torch <<<"$libs"; then
        bad "ldd $tool" "links libtorch: $libs"
    elif grep -q 'not found' <<<"$libs"; then
        bad "ldd $tool" "a library is not found: $libs"
    elif [ -n "$extra" ]; then
        bad "ldd $tool" "needs libraries outside manylinux_2_28's set: $extra"
    elif [ "$(printf '%s\nGLIBC_2.28\n' "$glibc" | sort -V | tail -n 1)" != "GLIBC_2.28" ]; then
        bad "ldd $tool" "asks for $glibc, newer than manylinux_2_28's GLIBC_2.28"
    else
        ok "ldd $tool: $needed(newest symbol $glibc; no libtorch)"
    fi
done

# memdiag: NVML is loaded at run time, so it runs (and says why there is no
# GPU) on a machine without a driver, and reads a GPU profile: one built in,
# by name, from a directory with no configs/ (the wheel has none).
run memdiag 0 memdiag --format yaml && says memdiag out "schema: memdiag/v1" && ok "memdiag"
run memdiag-t4 0 sh -c 'cd / && memdiag --from t4 --format yaml' && says memdiag-t4 out "Tesla T4" && ok "memdiag --from t4 (built in, from /)"

# cfgcheck, the T4 as target, on a seed config (exit 0: warnings only), on
# it with seed 000's "reduce-overhead" (exit 1: CUDA graphs clash with
# checkpointing), and through a pipe from memdiag.
memdiag --from t4 --format yaml >"$tmp/t4.yaml"
run cfgcheck-seed 0 cfgcheck --gpu "$tmp/t4.yaml" configs/colab_optimized_full.yaml --format csv &&
    says cfgcheck-seed out "allocator-fragmentation" && ok "cfgcheck configs/colab_optimized_full.yaml"
sed 's/^torch_compile_mode: .*/torch_compile_mode: "reduce-overhead"/' configs/colab_optimized_full.yaml >"$tmp/a.yaml"
run cfgcheck-a 1 cfgcheck --gpu "$tmp/t4.yaml" "$tmp/a.yaml" --format csv &&
    says cfgcheck-a out "cuda-graphs-checkpointing,error" && ok "cfgcheck of the reduce-overhead config: exit 1, the CUDA-graph clash"
run cfgcheck-pipe 0 sh -c 'memdiag --from t4 | cfgcheck configs/demo_cpu.yaml --format csv' &&
    says cfgcheck-pipe out "Tesla T4 (GPU 0),ok" && ok "memdiag | cfgcheck configs/demo_cpu.yaml"
run cfgcheck-named 0 sh -c 'cd / && cfgcheck --gpu t4 "$0" --format csv' "$PWD/configs/demo_cpu.yaml" &&
    says cfgcheck-named out "Tesla T4 (GPU 0),ok" && ok "cfgcheck --gpu t4 (built in, from /)"
# cfgcheck --scan (tree-sitter, compiled into the wheel's cfgcheck by zig's
# C compiler): the example script is clean (exit 0); seed 001's reproducer
# pairs torch.compile "reduce-overhead" with checkpointing (exit 1).
run scan-clean 0 cfgcheck --scan examples/own_script --format yaml && says scan-clean out "verdict: ok" &&
    ok "cfgcheck --scan examples/own_script: no finding"
run scan-crash 1 cfgcheck --scan bench/gpu/cudagraph_crash.py --format yaml &&
    says scan-crash out "id: cuda-graphs-checkpointing" && ok "cfgcheck --scan bench/gpu/cudagraph_crash.py: the CUDA-graph clash"

# train run: seed 000's chain over the example script, A (the CUDA-graph
# error) then C (finishes); the torch environment's python runs it.
if run train-run 0 train run --out "$tmp/run" --config configs/own_script/a.yaml --fallback configs/own_script/c.yaml \
    -- "$torch_py" examples/own_script/main.py --config '{config}' &&
    says train-run err "leg 2 finished: exited 0" && [ -f "$tmp/run/summary.yaml" ]; then
    ok "train run --config A --fallback C -- python main.py"
    run explain 0 cfgcheck --explain "$tmp/run/output.log" --format yaml &&
        says explain out "id: cuda-graphs-checkpointing" && ok "cfgcheck --explain (train run's output.log): the CUDA-graph clash"
fi

# A program sweep: 4 trials of the example script, one label fault per
# learning rate; then its report.
cat >"$tmp/space.yaml" <<'YAML'
program: examples/own_script/main.py
method: grid
metric: {name: val_loss, goal: minimize}
parameters:
  lr: {values: [0.02, 0.1]}
  fault: {values: [none, label]}
  epochs: {value: 2}
YAML
if run sweep 0 train sweep --space "$tmp/space.yaml" --out "$tmp/sweep" --interpreter "$torch_py" --parallel 2 &&
    says sweep err "4 trials (2 complete, 2 fail)"; then
    ok "train sweep of a program space (4 trials, 2 failing on purpose)"
    run report 0 train sweep --report "$tmp/sweep" --format yaml && says report out "schema: sweep-report/v2" &&
        says report out "COMPLETE: 2" && says report out "label-out-of-range" && ok "train sweep --report"
    run status 0 train sweep --status "$tmp/sweep" && says status out "4 trials: COMPLETE 2, FAIL 2" && ok "train sweep --status"
    # Every trial has ended: --resume finds nothing left to run.
    run resume 0 train sweep --resume "$tmp/sweep" && says resume err "4 trials (2 complete, 2 fail)" && ok "train sweep --resume of the finished sweep"
fi

# What needs libtorch: said once in the help and not listed; exit 5 and the
# message, never a loader error.
if run help 0 train --help && says help out "need the source build"; then
    if grep -qE -- '^ +(--config|--resume|check-data)' "$tmp/help.out"; then
        bad "train --help" "lists what needs libtorch: $(grep -E -- '^ +(--config|--resume|check-data)' "$tmp/help.out")"
    else
        ok "train --help: what needs the source build said once, not listed"
    fi
fi
run info 0 train info && says info out "libtorch: not in this build" && ok "train info: libtorch: not in this build"
run train-config 5 train --config configs/demo_cpu.yaml --out "$tmp/own" &&
    says train-config err "train --config (the built-in model) needs libtorch, and $bin/train was built without it" &&
    says train-config err 'docs/guide/install.md, "Install"' && ok "train --config: exit 5, needs libtorch"
run own-sweep 5 train sweep --config configs/sweeps/demo_base.yaml --space configs/sweeps/demo_faults.yaml --out "$tmp/own-sweep" &&
    says own-sweep err "a space without \`program\`" && [ ! -e "$tmp/own-sweep" ] && ok "train sweep of the built-in model: exit 5, nothing written"
run verify 5 verify-fixes --config configs/demo_cpu.yaml --gpu "$tmp/t4.yaml" &&
    says verify err "needs libtorch" && ok "verify-fixes --config: exit 5, needs the full build"
# verify-fixes -- CMD needs no libtorch: it gates the example script's config C.
run verify-cmd 0 verify-fixes --format csv --out "$tmp/verify" -- "$torch_py" examples/own_script/main.py --config configs/own_script/c.yaml &&
    says verify-cmd out "started,command: starts and runs,pass" && ok "verify-fixes -- python main.py (config C): passes"

# The GPU pack (`just gpu-verify`) from this wheel: its binaries, the scripts,
# no train-model, under 64 MiB; unpacked elsewhere, its run.sh runs with the
# torch environment's python as a GPU machine's own python3: the basics run,
# the GPU steps say there is no CUDA device, our trainer's steps say why the
# pack leaves them out.
if run pack 0 env WHEEL="$wheel" PACK_DIR="$tmp/pack" bash bench/gpu/pack.sh &&
    tar -C "$tmp" -xzf "$tmp/pack/trainguard-gpu.tar.gz"; then
    size=$(stat -c %s "$tmp/pack/trainguard-gpu.tar.gz")
    if [ -e "$tmp/trainguard-gpu/bin/train-model" ] || [ "$size" -gt $((64 * 1024 * 1024)) ]; then
        bad "gpu pack" "$size bytes; $(ls "$tmp/trainguard-gpu/bin")"
    elif run pack-run 0 env PYTHON="$torch_py" QUICK=1 bash "$tmp/trainguard-gpu/bench/gpu/run.sh" \
        --only basics,gpu-peak,train-demo "$tmp/gpu-results"; then
        status() { awk -F, -v s="$1" '$1 == s { print $2 }' "$tmp/gpu-results/steps.csv"; }
        if [ "$(status memdiag)" = ok ] && [ "$(status cfgcheck-seeds)" = ok ] && [ "$(status gpu-peak)" = skipped ] &&
            [ "$(status train-demo)" = skipped ] && grep -q 'train-demo,skipped,.*leave out by design' "$tmp/gpu-results/steps.csv"; then
            ok "the GPU pack ($((size / 1024)) KiB, no train-model) runs its recipe on the CPU from another folder"
        else
            bad "gpu pack run" "$(cat "$tmp/gpu-results/steps.csv")"
        fi
    fi
fi

echo "wheel test: $passed passed, $failed failed"
[ "$failed" = 0 ]
