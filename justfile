# trainguard: the map of what a user can do. `just --list` shows it.

set shell := ["bash", "-euo", "pipefail", "-c"]

# The Python environment whose torch (2.13.0, what tch 0.26 expects) `train`
# builds and runs against. Default: a project-local .venv that `just setup`
# fills. Reuse one you have with TORCH_ENV=/path/to/env (a venv or conda env
# with bin/python).
torch_env := env("TORCH_ENV", justfile_directory() / ".venv")
torch_version := "2.13.0"
# The CUDA 13.0 headers for torch 2.13.0+cu130's runtime (nvidia-cuda-runtime 13.0.96; 13.0.88 is the newest nvidia-cuda-crt of CUDA 13.0).
cuda_crt_version := "13.0.88"
# The Optuna the sweep's tests check the journal, TPE and the pruners against.
optuna_version := "5.0.0"
# optuna-dashboard, whose API the sweep's tests read our journal through.
dashboard_version := "0.21.0"
# Rustuna (the Optuna team's Rust port), whose journals (with their
# DISCARD_TRIALS records) the sweep's tests read, and which reads ours.
rustuna_version := "0.2.0"
# wandb, whose own wandb.init reads a program trial's parameters as its agent
# hands them (WANDB_SWEEP_PARAM_PATH, offline) in the program sweep's tests.
wandb_version := "0.31.0"
# Hugging Face transformers (and the accelerate its Trainer needs), for the
# real Trainer script (examples/hf_trainer/train.py) train run --auto-fix is
# tested on.
transformers_version := "5.24.0"
accelerate_version := "1.15.0"
# psycopg2 (its binary wheel), through which Optuna's RDBStorage and
# optuna-dashboard read the PostgreSQL studies `train sweep --storage` writes.
psycopg2_version := "2.9.13"
# The pip wheel's build (`just wheel`, target/wheel-venv): maturin packs the
# binaries, ziglang links them for glibc 2.28 (manylinux_2_28), auditwheel
# checks the tag.
maturin_version := "1.16.0"
ziglang_version := "0.17.0"
auditwheel_version := "6.8.2"
# The pre-commit that `just test-hook` installs the hook with.
pre_commit_version := "4.7.0"

# torch-sys asks `python` on PATH (VIRTUAL_ENV set) for libtorch's paths.
export VIRTUAL_ENV := torch_env
export PATH := torch_env / "bin" + ":" + env("PATH")
export LIBTORCH_USE_PYTORCH := "1"

release := justfile_directory() / "target/release"

# List the recipes
default:
    @just --list

# Run the main job end to end on the built-in defaults (CPU when there is no GPU)
[group('use')]
demo: setup build
    #!/usr/bin/env bash
    set -euo pipefail
    bin="{{ release }}"
    step() { printf '\n\033[1m$ %s\033[0m\n' "$*" >&2; }
    step train info
    "$bin/train" info
    step memdiag
    "$bin/memdiag" --format table
    step memdiag --from t4
    "$bin/memdiag" --from t4 --format table
    step 'memdiag --from t4 --watch 0.2 --count 3'
    "$bin/memdiag" --from t4 --watch 0.2 --count 3
    step 'memdiag --from t4 | cfgcheck configs/colab_optimized_full.yaml'
    "$bin/memdiag" --from t4 | "$bin/cfgcheck" configs/colab_optimized_full.yaml --format table
    step 'memdiag | cfgcheck configs/demo_cpu.yaml   # the demo config on this machine'
    "$bin/memdiag" | "$bin/cfgcheck" configs/demo_cpu.yaml --format table
    step 'memdiag | verify-fixes --config configs/demo_cpu.yaml   # the gate before a run'
    "$bin/memdiag" | "$bin/verify-fixes" --config configs/demo_cpu.yaml --format table
    step 'train --config configs/demo_cpu.yaml --out runs/demo'
    rm -rf runs/demo
    "$bin/train" --config configs/demo_cpu.yaml --out runs/demo
    step 'cat runs/demo/summary.yaml'
    cat runs/demo/summary.yaml
    step 'train sweep --config configs/sweeps/demo_base.yaml --space configs/sweeps/demo_faults.yaml --out runs/demo-sweep'
    rm -rf runs/demo-sweep
    "$bin/train" sweep --config configs/sweeps/demo_base.yaml --space configs/sweeps/demo_faults.yaml --out runs/demo-sweep
    step 'train sweep --report runs/demo-sweep'
    "$bin/train" sweep --report runs/demo-sweep --format table
    py="{{ torch_env }}/bin/python"
    step 'memdiag | verify-fixes --out runs/demo-verify -- python examples/own_script/main.py --config configs/own_script/c.yaml   # the gate, for your own script'
    "$bin/memdiag" | "$bin/verify-fixes" --format table --out runs/demo-verify -- "$py" examples/own_script/main.py --config configs/own_script/c.yaml
    step 'train run --out runs/demo-run --config configs/own_script/a.yaml --fallback configs/own_script/b.yaml --fallback configs/own_script/c.yaml -- python examples/own_script/main.py --config {config}   # your own script, guarded'
    rm -rf runs/demo-run
    "$bin/train" run --out runs/demo-run --config configs/own_script/a.yaml --fallback configs/own_script/b.yaml --fallback configs/own_script/c.yaml -- "$py" examples/own_script/main.py --config {config}
    step 'train sweep --space configs/sweeps/own_script.yaml --out runs/demo-program-sweep   # trials that are your own script'
    rm -rf runs/demo-program-sweep
    "$bin/train" sweep --space configs/sweeps/own_script.yaml --out runs/demo-program-sweep --interpreter "$py" --parallel auto
    step 'train sweep --report runs/demo-program-sweep'
    "$bin/train" sweep --report runs/demo-program-sweep --format table

# Build every tool in release mode
[group('use')]
build: setup
    cargo build --release --workspace

# The pip wheel: memdiag, cfgcheck, verify-fixes and train without libtorch, manylinux_2_28 (maturin and zig from PyPI; no torch needed). Into target/wheels/
[group('use')]
wheel:
    MATURIN_VERSION={{ maturin_version }} ZIGLANG_VERSION={{ ziglang_version }} AUDITWHEEL_VERSION={{ auditwheel_version }} bash scripts/wheel/build.sh release target/wheels

# Create the Python environment with torch 2.13.0 and the CUDA headers train's shim needs, unless they are there
[group('setup')]
setup:
    #!/usr/bin/env bash
    set -euo pipefail
    env_dir="{{ torch_env }}"
    py="$env_dir/bin/python"
    crt_pkg="nvidia-cuda-crt=={{ cuda_crt_version }}"
    have() { "$py" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "{{ torch_version }}")' 2>/dev/null; }
    # A CPU-only torch has no use for the CUDA headers.
    cuda_torch() { "$py" -c 'import torch, sys; sys.exit(torch.version.cuda is None)' 2>/dev/null; }
    # The CUDA runtime's headers (cuda_runtime_api.h, and crt/ from
    # nvidia-cuda-crt), where tools/train/model/build.rs looks for them for train's
    # allocator view (its C++ shim): TRAINGUARD_CUDA_INCLUDE, else beside torch.
    crt() {
        if [ -n "${TRAINGUARD_CUDA_INCLUDE:-}" ]; then
            [ -f "$TRAINGUARD_CUDA_INCLUDE/crt/host_defines.h" ]
            return
        fi
        local site
        site=$("$py" -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null) || return 1
        local inc
        for inc in "$site/nvidia/cu13/include" "$site/nvidia/cuda_runtime/include"; do
            if [ -f "$inc/cuda_runtime_api.h" ]; then
                [ -f "$inc/crt/host_defines.h" ]
                return
            fi
        done
        return 1
    }
    # Installs the headers into the env when a CUDA torch lacks them; if that
    # fails the build goes on, and says what it will lack.
    headers() {
        cuda_torch || return 0
        crt && return 0
        if [ -n "${TRAINGUARD_CUDA_INCLUDE:-}" ]; then
            echo "setup: TRAINGUARD_CUDA_INCLUDE=$TRAINGUARD_CUDA_INCLUDE has no crt/host_defines.h: train will be built without its allocator view (train info: allocator_view: false; no GPU memory figures). Point it at a CUDA 13 include directory, or unset it to use $crt_pkg in $env_dir" >&2
            return 0
        fi
        echo "setup: $env_dir has torch {{ torch_version }} but not the CUDA runtime headers train's allocator view needs; installing $crt_pkg into it" >&2
        if "$py" -m pip install --quiet "$crt_pkg" && crt; then
            # train's build script looked for them before: make it look again.
            cargo clean --quiet -p train-model 2>/dev/null || true
            cargo clean --quiet --release -p train-model 2>/dev/null || true
            return 0
        fi
        echo "setup: could not install $crt_pkg into $env_dir: train will be built without its allocator view (train info: allocator_view: false): on a GPU it reports no peak memory (metrics.csv, train bench), and just gpu-verify refuses to pack it. Fix: $py -m pip install $crt_pkg, or set TRAINGUARD_CUDA_INCLUDE to a CUDA 13 include directory holding crt/host_defines.h; then rebuild (cargo clean -p train-model --release; just build)" >&2
    }
    # Optuna and Rustuna, real clients for the sweep's tests (their journals,
    # TPE, pruners).
    optuna() {
        "$py" -c 'import importlib.metadata as m, optuna, optuna_dashboard, rustuna, sys; sys.exit(optuna.__version__ != "{{ optuna_version }}" or optuna_dashboard.__version__ != "{{ dashboard_version }}" or m.version("rustuna") != "{{ rustuna_version }}" or m.version("wandb") != "{{ wandb_version }}" or m.version("transformers") != "{{ transformers_version }}" or m.version("accelerate") != "{{ accelerate_version }}" or m.version("psycopg2-binary") != "{{ psycopg2_version }}")' 2>/dev/null && return 0
        echo "setup: installing optuna=={{ optuna_version }}, optuna-dashboard=={{ dashboard_version }}, rustuna=={{ rustuna_version }}, wandb=={{ wandb_version }}, transformers=={{ transformers_version }}, accelerate=={{ accelerate_version }} and psycopg2-binary=={{ psycopg2_version }} into $env_dir (the sweep's tests read our journal and database with them, run a W&B script offline and a Hugging Face Trainer script; torch stays the one installed)" >&2
        "$py" -m pip install --quiet "optuna=={{ optuna_version }}" "optuna-dashboard=={{ dashboard_version }}" "rustuna=={{ rustuna_version }}" "wandb=={{ wandb_version }}" "transformers=={{ transformers_version }}" "accelerate=={{ accelerate_version }}" "psycopg2-binary=={{ psycopg2_version }}"
    }
    if [ -n "${TORCH_ENV:-}" ]; then
        if ! have; then
            echo "setup: TORCH_ENV=$env_dir has no torch {{ torch_version }} (bin/python cannot import it); install it there or unset TORCH_ENV" >&2
            exit 2
        fi
        headers
        optuna
        exit 0
    fi
    if ! have; then
        echo "setup: creating $env_dir with torch=={{ torch_version }} from PyPI (about 4.6 GB, cached by pip)" >&2
        python3 -m venv "$env_dir"
        "$py" -m pip install --quiet --upgrade pip
        "$py" -m pip install --quiet "torch=={{ torch_version }}"
    fi
    headers
    optuna

# The whole suite: format, lints, every crate's tests, 10 s of each fuzzer, the short reliability tests, the pip wheel's test
[group('test')]
test: setup
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings
    python3 scripts/lint/long_fns.py --max 5
    cargo test --workspace --no-fail-fast
    bash scripts/fuzz/run.sh short
    {{ just_executable() }} reliability-short
    {{ just_executable() }} test-wheel
    {{ just_executable() }} test-hook
    {{ just_executable() }} test-postgres

# Sweeps whose truth is a real PostgreSQL (part of `just test`; installs Debian's postgresql if missing, which needs root; a throwaway server on 127.0.0.1, removed at the end): pg_dump of Optuna's schema and ours, bad credentials, 4 workers and an Optuna worker on 200 trials with SIGKILLs, optuna-dashboard's server, the database restarted mid-sweep, journal and database reporting alike, a generated study and another study's trials among ours read as Optuna reads them, a 2,503-trial sweep's checkpoint read and passed over once the database changed by hand
[group('test')]
test-postgres: setup
    cargo test --workspace --no-run --quiet
    python scripts/postgres/sweep_test.py --train target/debug/train

# The pip wheel as a user gets it (part of `just test`): a dev build installed into a fresh venv without torch; each tool run from there, ldd of each binary
[group('test')]
test-wheel: setup
    MATURIN_VERSION={{ maturin_version }} ZIGLANG_VERSION={{ ziglang_version }} AUDITWHEEL_VERSION={{ auditwheel_version }} TORCH_PY="{{ torch_env }}/bin/python" bash scripts/wheel/test.sh

# The aarch64 wheel for Arm GPU nodes (not part of `just test`: minutes of cross-compiling): built as the x86-64 one is (maturin with zig, manylinux_2_28, auditwheel), its binaries run under qemu-user (installs Debian's qemu-user and aarch64 glibc if missing; needs root). Into target/wheels-cross/
[group('test')]
test-wheel-cross:
    MATURIN_VERSION={{ maturin_version }} ZIGLANG_VERSION={{ ziglang_version }} AUDITWHEEL_VERSION={{ auditwheel_version }} bash scripts/wheel/cross_test.sh

# The pre-commit hook as a user gets it (part of `just test`): pre-commit installs .pre-commit-hooks.yaml at HEAD into a fixture repository with seed 001's pair (fails, with the finding) and a clean one (passes)
[group('test')]
test-hook:
    PRE_COMMIT_VERSION={{ pre_commit_version }} bash scripts/pre-commit/test.sh

# The fuzzers of every parser a user can feed, 1e6 inputs each (nightly Rust and cargo-fuzz; tens of minutes on 2 cores)
[group('test')]
fuzz:
    bash scripts/fuzz/run.sh long

# A sweep on a real one-node Slurm cluster started here and stopped at the end (debug build, as `just test`'s; installs Debian's slurm-wlm and munge if missing; needs root): 3 workers, one cancelled, one killed, --resume --slurm, Optuna checks the journal
[group('test')]
test-slurm: setup
    # The debug build `just test` made (its features, so nothing rebuilds after it).
    cargo test --workspace --no-run --quiet
    TRAIN="{{ justfile_directory() }}/target/debug/train" bash scripts/slurm/sweep-test.sh

# Reliability, short (part of `just test`; needs root for its tmpfs mounts): 6 SIGKILLs of train (half aimed at atomic writes) and resumes, 3 SIGKILLs of a sweep's driver, a 30-trial soak with faults, disk full and read-only output, 3 SIGKILLs of a program sweep's driver, a 12-trial program soak, and 300 instant trials by 4 workers on one journal with 5 worker SIGKILLs, with `just test`'s debug build. Results: runs/reliability/short/
[group('test')]
reliability-short: setup
    cargo test --workspace --no-run --quiet
    python scripts/reliability/kill_train.py --train target/debug/train --out runs/reliability/short/kill-train --kills 6 --aim-at-writes 0.5 --seed 1
    python scripts/reliability/kill_sweep.py --train target/debug/train --out runs/reliability/short/kill-sweep --kills 3 --seed 1
    python scripts/reliability/soak.py --train target/debug/train --out runs/reliability/short/soak --trials 30
    python scripts/reliability/disk.py --train target/debug/train --out runs/reliability/short/disk --epochs-full 2 --skip-without-mount
    python scripts/reliability/program_sweep.py --mode kill --train target/debug/train --out runs/reliability/short/program --kills 3 --seed 1
    python scripts/reliability/program_sweep.py --mode soak --train target/debug/train --out runs/reliability/short/program --trials 12
    python scripts/reliability/scale_soak.py --train target/debug/train --out runs/reliability/short/scale --trials 300 --workers 4 --kills 5

# The process-tree tests (lineage, keeper, sampler, kill -9 of the supervisor) run 50 times over beside busy processes on every core: a test that waits for an earlier sign of what it asserts fails here first
[group('test')]
reliability-tests-under-load rounds="50":
    python scripts/reliability/tests_under_load.py --rounds {{ rounds }}

# Reliability, recorded (RELIABILITY.md): 100 SIGKILLs of train at random moments and 50 aimed at atomic writes, resumed, each run bit-identical to an uninterrupted one
[group('test')]
reliability-kill-train: build
    python scripts/reliability/kill_train.py --train "{{ release }}/train" --out runs/reliability/kill-train --kills 100 --seed 1
    python scripts/reliability/kill_train.py --train "{{ release }}/train" --out runs/reliability/kill-train-aimed --kills 50 --aim-at-writes 1 --seed 2

# Reliability, recorded: 50 SIGKILLs of a sweep's driver (and random SIGKILLs of its trials), --resume, every grid point finished once, Optuna loads every journal
[group('test')]
reliability-kill-sweep: build
    python scripts/reliability/kill_sweep.py --train "{{ release }}/train" --out runs/reliability/kill-sweep --kills 50 --seed 1

# Reliability, recorded: a 1000-trial sweep, one trial in five failing on purpose, run to the end and checked in Optuna (about 20 minutes on 2 cores)
[group('test')]
reliability-soak: build
    python scripts/reliability/soak.py --train "{{ release }}/train" --out runs/reliability/soak --trials 1000 --parallel 2

# Reliability at scale, recorded: 20,000 instant trials run by 8 workers on one journal, 40 of them SIGKILLed along the way, then resumed and checked in Optuna (about 15 minutes on 2 cores)
[group('test')]
reliability-scale: build
    python scripts/reliability/scale_soak.py --train "{{ release }}/train" --out runs/reliability/scale --trials 20000 --workers 8 --kills 40

# The same soak on a throwaway PostgreSQL (Debian's; installed if missing, which needs root): 8 workers, each with its own --out, a killed one back with its --out, checked in Optuna's RDBStorage
[group('test')]
reliability-scale-postgres: build
    python scripts/reliability/scale_soak.py --train "{{ release }}/train" --out runs/reliability/scale-postgres --trials 20000 --workers 8 --kills 40 --postgres

# Reliability, recorded: a program sweep (examples/own_script/main.py) whose driver is SIGKILLed 20 times and resumed, and a 300-trial program soak with real faults (OOM under a limit, NaN, label, SIGKILL, hang); then both again with the trials forked from a preload server
[group('test')]
reliability-program: build
    python scripts/reliability/program_sweep.py --mode kill --train "{{ release }}/train" --out runs/reliability/program --kills 20 --seed 1
    python scripts/reliability/program_sweep.py --mode soak --train "{{ release }}/train" --out runs/reliability/program --trials 300
    python scripts/reliability/program_sweep.py --mode kill --train "{{ release }}/train" --out runs/reliability/program-preload --kills 20 --seed 1 --preload torch --preload torch._dynamo
    python scripts/reliability/program_sweep.py --mode soak --train "{{ release }}/train" --out runs/reliability/program-preload --trials 120 --preload torch --preload torch._dynamo
    python scripts/reliability/program_sweep.py --mode soak --train "{{ release }}/train" --out runs/reliability/program-autofix --trials 70 --auto-fix

# Reliability, recorded: a sweep on a throwaway PostgreSQL (release build): 4 workers and an Optuna worker on 6000 instant trials, 24 worker SIGKILLs (23 restarted with the same --out, the last left dead); then 2 workers through 5 database restarts
[group('test')]
reliability-postgres: build
    python scripts/postgres/sweep_test.py --train "{{ release }}/train" --only workers restart --trials 6000 --kills 24 --restarts 5 --restart-trials 4000

# Reliability, recorded: train's output and a sweep's journal filesystem filled up mid-run (tmpfs), read-only output; needs root for the mounts
[group('test')]
reliability-disk: build
    python scripts/reliability/disk.py --train "{{ release }}/train" --out runs/reliability/disk --epochs-full 5

# Train a config (a run directory under runs/)
[group('use')]
train config *args: build
    "{{ release }}/train" --config {{ config }} {{ args }}

# A long run: verify-fixes on this machine's GPU first, train only if it passes
[group('use')]
train-long config *args: build
    #!/usr/bin/env bash
    set -euo pipefail
    "{{ release }}/memdiag" | "{{ release }}/verify-fixes" --config {{ config }} --format table
    "{{ release }}/train" --config {{ config }} {{ args }}

# The seeds' A -> B -> C as one gated run
[group('use')]
train-colab: build
    #!/usr/bin/env bash
    set -euo pipefail
    "{{ release }}/memdiag" | "{{ release }}/verify-fixes" --config configs/colab_optimized_full.yaml --format table
    "{{ release }}/train" --config configs/colab_optimized_full.yaml \
        --fallback configs/colab_full_stable.yaml --fallback configs/colab_optimized.yaml

# Side-by-side benchmarks, the activation check among them; results go to bench/results/
[group('bench')]
bench: build bench-activations bench-checkpointing
    python bench/memdiag_oneshot.py --bin "{{ release }}/memdiag" --runs 50
    python bench/train_vs_pytorch.py --train "{{ release }}/train" --config configs/demo_cpu.yaml
    python bench/explain_large_log.py --cfgcheck "{{ release }}/cfgcheck"
    python bench/scan_vs_grep.py --cfgcheck "{{ release }}/cfgcheck"
    python bench/trial_overhead.py --train "{{ release }}/train" --cfgcheck "{{ release }}/cfgcheck"
    python bench/sweep_vs_optuna.py --train "{{ release }}/train" --cfgcheck "{{ release }}/cfgcheck"
    python bench/supervise.py --train "{{ release }}/train"

# From nothing to a running memdiag: a fresh venv + pip install of the wheel + memdiag (5 times), against `cargo build --release --workspace` into an empty target directory (minutes); the wheel's size
[group('bench')]
bench-wheel: setup wheel
    python bench/wheel_install.py --wheel target/wheels/oomkit-*.whl --runs 5 --source-build

# The estimate's activation lines against the bytes autograd saves (CPU, fp32)
[group('bench')]
bench-activations: build
    python bench/saved_activations.py --cfgcheck "{{ release }}/cfgcheck" configs/colab_optimized_full.yaml configs/colab_full_stable.yaml configs/colab_optimized.yaml

# Per-frame checkpointing on against off, train and PyTorch: peak host memory and step time (CPU, about 3 minutes)
[group('bench')]
bench-checkpointing: build
    python bench/checkpointing_memory.py --train "{{ release }}/train" --cfgcheck "{{ release }}/cfgcheck"

# Pack the wheel's binaries, configs and the GPU recipe for a CUDA machine with its own torch (bench/README.md, "The GPU run")
[group('bench')]
gpu-verify: wheel
    bash bench/gpu/pack.sh

# What CI runs (.ci/run)
[group('test')]
ci: test
