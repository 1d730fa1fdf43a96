"""The corpus's synthetic inputs, written into the run's scratch dir
(`$TMP/fx/`) before any case runs: small configs that trip each rule and
each validation message, malformed files of every kind, logs holding each
failure the catalogue knows, data files, sweep spaces and journals. Every
byte is fixed here, so the inputs are the same for every run."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

# The tests' tiny CPU model (tools/train/tests/sweep.rs BASE): a run of 2
# epochs takes about a second in a debug build.
TINY = """\
batch_size: 32
temporal_frames: 2
epochs: 2
learning_rate: 0.003
image_size: 8
scalar_features: 2
data: {synthetic_train_examples: 64, synthetic_val_examples: 32}
architecture: {channels: [4], embed_dim: 8, attention_heads: 2}
"""

# tools/train/tests/run_support/mod.rs's TINY (two conv blocks), for the fallback chain.
TINY2 = """\
gradient_checkpointing: true
batch_size: 32
temporal_frames: 3
epochs: 3
learning_rate: 0.003
image_size: 16
scalar_features: 4
data: {synthetic_train_examples: 96, synthetic_val_examples: 32}
architecture: {channels: [8, 16], embed_dim: 16, attention_heads: 2}
"""

# A config per cfgcheck rule (docs/guide/cfgcheck.md, "Rules"); the comment says how the case
# that uses it trips the rule.
RULE_CONFIGS = {
    "memory-exceeds-free": "batch_size: 64   # too big\nimage_size: 256\nepochs: 5\n",
    "parallel-trials-overflow": "batch_size: 8\nimage_size: 128\nepochs: 5\nparallel_trials: 40\n",
    "allocator-conf-syntax": 'epochs: 5\nenvironment: {PYTORCH_ALLOC_CONF: "expandable_segments:yes"}\n',
    "workers-small-host": "epochs: 5\nnum_workers: 4\n",  # with --host-ram-gib 12.7
    "pin-memory-without-workers": "epochs: 5\npin_memory: true\nnum_workers: 0\n",
    "uncapped-dataset": "epochs: 5\ndata: {synthetic_train_examples: 2000000}\n",
    "launch-blocking": 'epochs: 5\nenvironment: {CUDA_LAUNCH_BLOCKING: "1"}\n',
    "gpu-features-without-gpu": "epochs: 5\ntorch_compile: true\nmixed_precision: fp16\n",
    "allocator-fragmentation": "epochs: 50\nparallel_trials: 2\nbatch_size: 4\n",
    "everything": (
        "epochs: 60\nbatch_size: 48\nimage_size: 192\nparallel_trials: 3\n"
        "gradient_checkpointing: true\ntorch_compile: true\n"
        'torch_compile_mode: "max-autotune"\nnum_workers: 2\npin_memory: true\n'
        'environment: {CUDA_LAUNCH_BLOCKING: "1"}\n'
    ),
}

# Configs that load but fail validation (common/src/config.rs `validate`),
# and configs that do not load at all.
INVALID_CONFIGS = {
    "batch0": "batch_size: 0\n",
    "heads0": "architecture: {attention_heads: 0}\n",
    "micro0": "micro_batch_size: 0\n",
    "maxtrain0": "max_train_examples: 0\n",
    "lr0": "learning_rate: 0\n",
    "lr-nan": "learning_rate: .nan\n",
    "wd-neg": "weight_decay: -0.5\n",
    "dropout1": "dropout: 1.5\n",
    "gradclip0": "grad_clip: 0\n",
    "channels-empty": "architecture: {channels: []}\n",
    "channels-zero": "architecture:\n  channels: [8, 0]\n",
    "image-small": "image_size: 4\n",
    "heads-divisor": "architecture: {embed_dim: 10, attention_heads: 3}\n",
    "labels1": "task: classification\nnum_labels: 1\n",
    "loss-regression": "loss: cross_entropy\n",
    "loss-classification": "task: classification\nloss: mse\n",
    "micro-big": "batch_size: 16\nmicro_batch_size: 32\n",
    "valpath": "data: {path: train.safetensors}\n",
    "synth0": "data: {synthetic_train_examples: 0, synthetic_val_examples: 0}\n",
    "warmup": "epochs: 2\nwarmup_epochs: 5\n",
    "several": "batch_size: 0\ndropout: 2\nlearning_rate: -1\n",
    # Not loadable.
    "empty": "",
    "notyaml": "batch_size: [1, 2\nepochs: 3\n",
    "toplist": "- batch_size\n- 3\n",
    "typo": "epochs: 5\ngradient_checkpoint: true\n",
    "typo-nested": "architecture:\n  chanels: [8, 16]\n",
    "unknown-far": "epochs: 5\nzzzzzzzzzzzz: 1\n",
    "type-seq": "epochs: 5\nbatch_size: [1, 2]\n",
    "type-str": "epochs: many\n",
    "type-neg": "epochs: -3\n",
    "enum": "mixed_precision: fp8\n",
    "channels-neg": "architecture:\n  channels: [64, -1]\n",
    "dup-key": "epochs: 5\nepochs: 6\n",
}


def _bomb() -> str:
    text = "a: &a [x, x, x, x, x, x, x, x, x]\n"
    for i in range(9):
        prev = "a" if i == 0 else f"b{i - 1}"
        refs = ", ".join([f"*{prev}"] * 9)
        text += f"b{i}: &b{i} [{refs}]\n"
    return text


# memdiag --from inputs that must be refused (tools/memdiag/tests/cli.rs).
def bad_reports(t4: str) -> dict[str, bytes]:
    return {
        "empty.yaml": b"",
        "garbage.bin": bytes([0xFF, 0xFE, 0x00, 0x81, 0x92]),
        "other-schema.yaml": t4.replace("memdiag/v1", "memdiag/v9").encode(),
        "config.yaml": b"batch_size: 16\nepochs: 50\n",
        "truncated.yaml": t4.encode()[:-20],
        "wrong-type.yaml": t4.replace("total_mib: 15360", "total_mib: lots").encode(),
        "bad.csv": b"schema,source\nmemdiag/v1,nvml,extra\n",
        "notyaml.yaml": b"gpus: [\n",
        "list.yaml": b"- 1\n- 2\n",
        "nogpus.json": b'{"schema": "memdiag/v1", "source": "nvml"}\n',
    }


# A live-looking report of a shared node: a busy card with other processes,
# unreadable fields with their reasons, and a free one.
TWO_GPUS = """\
schema: memdiag/v1
source: nvml
time: 2026-11-22T11:34:32Z
host: gpu-node-7
driver_version: 550.54.15
cuda_driver_version: '12.4'
notes: []
gpus:
- index: 0
  name: NVIDIA A100-SXM4-40GB
  uuid: GPU-0e2a3c44-1b7d-4f7c-9d0e-6a1b2c3d4e5f
  memory: {total_mib: 40960, used_mib: 37000, free_mib: 3960}
  utilization: {gpu_pct: 97, memory_pct: 61}
  temperature_c: 71
  persistence_mode: false
  retired_pages_pending: true
  remapping_failed: false
  mig_enabled: false
  processes:
  - {pid: 4242, name: python, used_mib: 30000, kind: compute, gpu_instance: null}
  - {pid: 4343, name: Xorg, used_mib: 7000, kind: graphics, gpu_instance: null}
  unavailable: {}
  notes: []
- index: 1
  name: Tesla T4
  uuid: null
  memory: {total_mib: 15360, used_mib: 0, free_mib: 15360}
  utilization: null
  temperature_c: null
  persistence_mode: null
  retired_pages_pending: null
  remapping_failed: null
  mig_enabled: null
  processes: null
  unavailable: {utilization: 'Not Supported', processes: 'driver too old'}
  notes: [a note about GPU 1]
"""

# A line for each string the failure catalogue matches (common/src/failures.rs),
# as the library or program really prints it.
OOM_FRAGMENTED = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total"
    " capacity of 79.10 GiB of which 364.31 MiB is free. Process 175356 has 77.26 GiB memory in"
    " use. Of the allocated memory 72.12 GiB is allocated by PyTorch, and 3.78 GiB is reserved by"
    " PyTorch but unallocated."
)
OOM_TOO_BIG = (
    "CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 14.75 GiB of"
    " which 1.02 GiB is free. Of the allocated memory 12.21 GiB is allocated by PyTorch, and"
    " 33.46 MiB is reserved by PyTorch but unallocated."
)
NEEDLE_LINES = {
    "oom-figures-fragmented": OOM_FRAGMENTED,
    "oom-figures-too-big": OOM_TOO_BIG,
    "oom-bare": "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB",
    "oom-cuda-error": "RuntimeError: CUDA error: out of memory",
    "oom-cublas": "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "oom-hip": "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.00 GiB",
    "host-oom": "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried to allocate 68719476736 bytes. Error code 12 (Cannot allocate memory)",
    "graph-static": "RuntimeError: static input data pointer changed.",
    "graph-managed": "RuntimeError: cudagraph managed tensor data pointer changed",
    "graph-overwritten": "RuntimeError: Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run.",
    "device-assert": "RuntimeError: CUDA error: device-side assert triggered",
    "cudnn-error": "RuntimeError: cuDNN error: CUDNN_STATUS_MAPPING_ERROR",
    "cudnn-exec": "RuntimeError: CUDNN_STATUS_EXECUTION_FAILED",
    "cudnn-internal": "RuntimeError: CUDNN_STATUS_INTERNAL_ERROR",
    "cudnn-unsupported": "RuntimeError: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input.",
    "killed-signal": "torch.distributed.elastic.multiprocessing.api: failed (exitcode: -9) Signal 9 (SIGKILL) received by PID 4242",
    "killed-exit-code": "Process finished with exit code -9",
    "killed-exit-code-cap": "Exit code -9",
    "killed-elastic": "  exitcode  : -9 (pid: 4242)",
    "killed-shell": "Killed",
    "nan-train": "train: failed: non-finite loss 3 steps in a row (epoch 2 step 1)",
    "nan-lower": "ValueError: loss is nan",
    "nan-upper": "ValueError: loss is NaN at step 12",
    "inf": "ValueError: loss is inf",
    "neg-inf": "ValueError: loss is -inf",
    "nan-autograd": "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.",
    "aten-cuda": "RuntimeError: Cannot initialize CUDA without ATen_cuda library. PyTorch splits its backend into two shared libraries",
    "tch-version": "Error: this tch version expects PyTorch 2.11.0, got 2.10.0",
    "undefined-symbol": "ImportError: libtorch_cpu.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev",
    "cuda-error": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "cublas": "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm`",
}

# The catalogue's entries, each a log holding every string it matches.
KNOWN_LOGS = {
    "oom-fragmented": ["oom-figures-fragmented"],
    "oom-too-big": ["oom-figures-too-big", "oom-bare"],
    "oom-other": ["oom-cuda-error", "oom-cublas", "oom-hip"],
    "host-oom": ["host-oom"],
    "cuda-graphs": ["graph-static", "graph-managed", "graph-overwritten"],
    "device-assert": ["device-assert"],
    "cudnn": ["cudnn-error", "cudnn-exec", "cudnn-internal", "cudnn-unsupported"],
    "killed": ["killed-signal", "killed-exit-code", "killed-exit-code-cap", "killed-elastic", "killed-shell"],
    "non-finite": ["nan-train", "nan-lower", "nan-upper", "inf", "neg-inf", "nan-autograd"],
    "aten-cuda": ["aten-cuda"],
    "version": ["tch-version", "undefined-symbol"],
    "cuda-error": ["cuda-error", "cublas"],
}

SEED_LOG = (
    "Epoch 1/50 | Train Loss: 4.1156 | Val Loss: 1.3616 | LR: 0.000001 | Time: 140.54s\n"
    "New best model saved! (val_loss: 1.3616)\n"
)

# Sweep spaces that `train sweep` must refuse before any trial runs, and the
# valid grid the corpus's own sweep runs (4 trials: 2 complete, 2 fail).
SWEEP_GRID = (
    "method: grid\nmetric: {name: val_loss, goal: minimize}\nparameters:\n"
    "  learning_rate: {values: [0.001, 0.003]}\n"
    '  environment.TRAINGUARD_FAULT: {values: [none, "oom-always@1:1"]}\n'
)
_HEAD = "method: random\nmetric: {name: val_loss, goal: minimize}\nrun_cap: 2\nparameters:\n"
BAD_SPACES = {
    "unknown-key": _HEAD + "  learnig_rate: {values: [0.1]}\n",
    "bad-distribution": _HEAD + "  learning_rate: {distribution: log_uniform, min: -9, max: -2}\n",
    "no-run-cap": "method: random\nmetric: {name: val_loss, goal: minimize}\nparameters:\n  learning_rate: {min: 0.001, max: 0.01}\n",
    "method": "method: sobol\nmetric: {name: val_loss, goal: minimize}\nparameters:\n  learning_rate: {values: [0.1]}\n",
    "metric": "method: grid\nmetric: {name: val_los, goal: minimize}\nparameters:\n  learning_rate: {values: [0.1]}\n",
    "not-a-key": "method: grid\nparameters:\n  zzzzzzzz: {values: [1]}\n",
    "top-key": "method: grid\nmetrik: {name: val_loss, goal: minimize}\nparameters:\n  learning_rate: {values: [0.1]}\n",
    "list-value": "method: grid\nparameters:\n  architecture.channels: {values: [[4, 8]]}\n",
    "q-multiple": _HEAD + "  dropout: {distribution: q_uniform, min: 0, max: 0.25, q: 0.1}\n",
    "bad-value": "method: grid\nparameters:\n  batch_size: {values: [0, 8]}\n",
    "notyaml": "method: grid\nparameters: [\n",
    "empty": "",
}


def safetensors(tensors: list[tuple[str, str, list[int], bytes]]) -> bytes:
    """A safetensors file (8-byte header length, JSON header, data) from
    (name, dtype, shape, little-endian bytes)."""
    header, offset, data = {}, 0, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def data_file(labels: list[int], nan_at: int | None = None, size: int = 16) -> bytes:
    """A classification set of len(labels) examples of 3 frames of 3×size×size
    and 4 scalars, frames all 0.5 (NaN in example `nan_at`)."""
    n, per = len(labels), 3 * 3 * size * size
    frames = [0.5] * (n * per)
    if nan_at is not None:
        frames[nan_at * per] = float("nan")
    return safetensors(
        [
            ("frames", "F32", [n, 3, 3, size, size], struct.pack(f"<{len(frames)}f", *frames)),
            ("scalars", "F32", [n, 4], struct.pack(f"<{n * 4}f", *([0.25] * (n * 4)))),
            ("target", "I64", [n], struct.pack(f"<{n}q", *labels)),
        ]
    )


def data_config(fx: Path, train: str, val: str) -> str:
    return (
        "task: classification\nnum_labels: 2\nbatch_size: 4\ntemporal_frames: 3\n"
        "image_size: 16\nscalar_features: 4\nepochs: 2\n"
        f"data: {{path: {fx / train}, val_path: {fx / val}}}\n"
        "architecture: {channels: [4, 8], embed_dim: 16, attention_heads: 2}\n"
    )


def write(fx: Path, repo: Path) -> None:
    """Writes every fixture under `fx`."""
    fx.mkdir(parents=True, exist_ok=True)

    def put(name: str, content: str | bytes) -> None:
        path = fx / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)

    put("tiny.yaml", TINY)
    put("tiny-cls.yaml", TINY.replace("epochs: 2", "epochs: 2\ntask: classification\nnum_labels: 3")
        + "torch_compile: true\nnum_workers: 2\npin_memory: true\n")
    put("tiny-1epoch.yaml", TINY.replace("epochs: 2", "epochs: 1"))
    put("tiny-4epochs.yaml", TINY.replace("epochs: 2", "epochs: 4"))
    put("tiny-fp16.yaml", TINY + "mixed_precision: fp16\n")
    put("smoke-abort.yaml", TINY + 'environment: {TRAINGUARD_FAULT: "abort@1:1"}\n')
    put("chain/a.yaml", TINY2 + 'environment: {TRAINGUARD_FAULT: "cuda-graph@2:1"}\n')
    put("chain/b.yaml", TINY2 + 'environment: {TRAINGUARD_FAULT: "oom-always@2:1"}\n')
    put("chain/c.yaml", TINY2.replace("channels: [8, 16]", "channels: [4, 8]")
        + "environment: {TRAINGUARD_FAULT: none}\n")
    put("chain/nan.yaml", TINY2 + 'environment: {TRAINGUARD_FAULT: "nan@1:1,nan@1:2,nan@1:3"}\n')

    full = (repo / "configs/colab_optimized_full.yaml").read_text()
    put("rules/cuda-graphs-checkpointing.yaml",
        full.replace('torch_compile_mode: "default"', 'torch_compile_mode: "reduce-overhead"'))
    for rule, text in RULE_CONFIGS.items():
        put(f"rules/{rule}.yaml", text)
    for name, text in INVALID_CONFIGS.items():
        put(f"invalid/{name}.yaml", text)
    put("invalid/bomb.yaml", _bomb())
    put("invalid/huge.yaml", "# " + "x" * (10 * 1024 * 1024) + "\n")
    put("invalid/garbage.yaml", bytes([0x00, 0xFF, 0x13, 0x37, 0xC3, 0x28]))
    put("invalid/latin1.yaml", "epochs: 5 # caf\xe9\n".encode("latin-1"))

    t4 = (repo / "configs/gpus/t4.yaml").read_text()
    for name, content in bad_reports(t4).items():
        put(f"reports/{name}", content)
    put("reports/two-gpus.yaml", TWO_GPUS)
    put("tiers/custom.yaml", "schema: tiers/v1\ntiers:\n- {min_total_gib: 0, model_size: xl, batch_size: 64, max_train_examples: 1}\n")
    put("tiers/bad-type.yaml", "schema: tiers/v1\ntiers: 3\n")
    put("tiers/bad-schema.yaml", "schema: tiers/v7\ntiers: []\n")
    put("tiers/empty.yaml", "")
    put("watch/torn.csv", "time,index,used_mib,free_mib,utilization_gpu_pct\n"
        "2026-11-22T10:00:00.000Z,0,0,15360,\n2026-11-22T10:00:00.000Z,0,12")
    put("watch/other.csv", "not,a,watch,log\n")

    for name, line in NEEDLE_LINES.items():
        put(f"logs/{name}.log", "step 1\n" + line + "\nstep 2\n")
    for name, keys in KNOWN_LOGS.items():
        put(f"logs/known/{name}.log", "step 1\n" + "".join(NEEDLE_LINES[k] + "\n" for k in keys) + "step 2\n")
    put("logs/all.log", SEED_LOG + "\n".join(NEEDLE_LINES.values()) + "\n")
    put("logs/seed001.log", SEED_LOG + "RuntimeError: static input data pointer changed.\n"
        "input name: primals_1. data pointer changed from 12919305216 to 12919242752.\n"
        + OOM_FRAGMENTED + "\n")
    put("logs/unknown.log", "step 1\nValueError: shapes differ\nstep 2\n")
    put("logs/nothing.log", "all good\n")
    put("logs/empty.log", "")
    put("logs/binary.log", bytes([0x7F, ord("E"), ord("L"), ord("F"), 0, 1, 2, 3]))
    put("logs/long-line.log", "Traceback: " + "y" * 1000 + "\nRuntimeError: CUDA error: " + "z" * 600 + "\n")
    put("logs/repeated.log", (NEEDLE_LINES["device-assert"] + "\n") * 9)
    put("logs/crlf.log", "step 1\r\n" + NEEDLE_LINES["graph-static"] + "\r\n")
    put("explain/big.yaml", "batch_size: 512\nimage_size: 256\n")
    put("explain/graph.yaml",
        full.replace('torch_compile_mode: "default"', 'torch_compile_mode: "reduce-overhead"'))

    put("data/train.safetensors", data_file([0, 1, 1, 0, 1, 0, 0, 1]))
    put("data/val.safetensors", data_file([1, 0, 1, 0]))
    put("data/bad-label.safetensors", data_file([0, 1, 1, 0, 9, 1, 0, 1]))
    put("data/nan.safetensors", data_file([0, 1, 1, 0, 1, 0, 0, 1], nan_at=3))
    put("data/small-frames.safetensors", data_file([0, 1, 1, 0], size=8))
    put("data/truncated.safetensors", data_file([0, 1, 1, 0])[:200])
    put("data/not-tensors.safetensors", b"hello, world\n")
    put("data/ok.yaml", data_config(fx, "data/train.safetensors", "data/val.safetensors"))
    put("data/bad-label.yaml", data_config(fx, "data/bad-label.safetensors", "data/val.safetensors"))
    put("data/nan.yaml", data_config(fx, "data/nan.safetensors", "data/val.safetensors"))
    put("data/shape.yaml", data_config(fx, "data/small-frames.safetensors", "data/val.safetensors"))
    put("data/truncated.yaml", data_config(fx, "data/truncated.safetensors", "data/val.safetensors"))
    put("data/garbage.yaml", data_config(fx, "data/not-tensors.safetensors", "data/val.safetensors"))
    put("data/missing.yaml", data_config(fx, "data/nonexistent.safetensors", "data/val.safetensors"))

    put("sweep/space.yaml", SWEEP_GRID)
    for name, text in BAD_SPACES.items():
        put(f"sweep/bad/{name}.yaml", text)
    put("space/v1-worst.yaml",
        "schema: space/v1\nparameters:\n  batch_size: [8, 16, 1024]\n  memory_optimized: [true, false]\n")
    put("space/v1-bad-key.yaml", "schema: space/v1\nparameters:\n  batchsize: [1]\n")
    put("space/wandb-worst.yaml",
        "method: random\nmetric: {name: val_loss, goal: minimize}\nrun_cap: 10\nparameters:\n"
        "  batch_size: {min: 8, max: 1024}\n"
        "  learning_rate: {distribution: log_uniform_values, min: 0.0001, max: 0.01}\n")
    put("small.yaml", "batch_size: 8\nimage_size: 128\nepochs: 5\n")
    put("a-file", "x")


def journal_dir(dst: Path, repo: Path, journal: str, extra: str = "", keep: int | None = None) -> None:
    """A sweep directory from the fuzz corpus's sweep.yaml and a journal: its
    first `keep` lines (all by default), then `extra`, for --report,
    --status and --resume."""
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(repo / "fuzz/corpus/wire/sweep.yaml", dst / "sweep.yaml")
    lines = (repo / "fuzz/corpus/journal" / journal).read_bytes().splitlines(keepends=True)
    (dst / "journal.log").write_bytes(b"".join(lines[:keep]) + extra.encode())
