"""The corpus: a fixed list of invocations of memdiag, cfgcheck,
verify-fixes and train. Each case runs from the repository root; its argv's
first word is the tool. Placeholders in argv, stdin and file paths:
{FX} the fixtures (fixtures.py), {W} the case's own empty work dir, {G} its
group's shared work dir. Cases of one group run in order, in one worker;
groups run in parallel.

Case ids are stable names: the OUT tree and the --allow file use them, so
rename one only on purpose."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import fixtures


@dataclass
class Case:
    id: str
    argv: list[str]
    stdin: str | None = None  # a file (repo-relative or placeholder); None: /dev/null
    pipe: list[str] | None = None  # argv of a tool whose stdout is this case's stdin
    env: dict[str, str] = field(default_factory=dict)
    files: list[tuple[str, str]] = field(default_factory=list)  # (label, path): outputs too
    group: str | None = None
    setup: Callable[[dict[str, Path]], None] | None = None
    table_columns: tuple[str, ...] = ()  # volatile columns of box-drawn tables
    timeout: int = 120


CASES: list[Case] = []


def case(id: str, *argv: str, **kw) -> Case:
    c = Case(id=id, argv=list(argv), **kw)
    CASES.append(c)
    return c


GPUS = {"t4": "configs/gpus/t4.yaml", "a100": "configs/gpus/a100-40gb.yaml",
        "h100": "configs/gpus/h100-80gb.yaml"}
FORMATS = ("table", "yaml", "json", "csv")
# Every training config under configs/ (the sweep spaces are not configs).
CONFIGS = {
    "colab_optimized": "configs/colab_optimized.yaml",
    "colab_optimized_full": "configs/colab_optimized_full.yaml",
    "colab_full_stable": "configs/colab_full_stable.yaml",
    "gpu_oom": "configs/gpu_oom.yaml",
    "demo_cpu": "configs/demo_cpu.yaml",
    "demo_base": "configs/sweeps/demo_base.yaml",
    "kill_train": "configs/reliability/kill_train.yaml",
    "kill_sweep_base": "configs/reliability/kill_sweep_base.yaml",
    "soak_base": "configs/reliability/soak_base.yaml",
}
SPACES = ["configs/sweeps/demo_faults.yaml", "configs/sweeps/slurm_grid.yaml",
          "configs/sweeps/tiny_cpu.yaml", "configs/sweeps/seed004.yaml",
          "configs/reliability/kill_sweep_space.yaml", "configs/reliability/soak_space.yaml"]
FUZZ_REPORTS = ["h100-80gb.yaml", "no-gpu.yaml", "t4.csv", "t4.json"]
FUZZ_LOGS = ["trial-ok.log", "trial-abort.log", "trial-oom.log", "000_d0f329bad50115c4.txt",
             "001_a5cad946d30cf906.txt", "002_b64687422f1fecf6.txt", "003_03135fe084fd615b.txt",
             "004_74609989aa8665b1.txt"]
RAM = ("--host-ram-gib", "12.7")
T4 = GPUS["t4"]


def usage(tool: str, prefix: list[str] | None = None) -> None:
    """--help, --version and bad flags: clap's words and exit 2."""
    pre = prefix or []
    name = "-".join([tool] + pre)
    case(f"{name}.help", tool, *pre, "--help")
    if pre in ([], ["sweep"]):
        case(f"{name}.bad-flag", tool, *pre, "--bogus")
    if not pre:
        case(f"{name}.help-short", tool, "-h")
        case(f"{name}.version", tool, "--version")
        case(f"{name}.version-short", tool, "-V")


def memdiag_cases() -> None:
    usage("memdiag")
    case("memdiag.live.default", "memdiag")
    for f in ("table", "json"):
        case(f"memdiag.live.{f}", "memdiag", "--format", f)
    case("memdiag.live.require-gpu", "memdiag", "--require-gpu")
    for (g, path), f in itertools.product(GPUS.items(), FORMATS):
        if g == "t4" or f in ("table", "json"):
            case(f"memdiag.profile.{g}.{f}", "memdiag", "--from", path, "--format", f)
    case("memdiag.profile.t4.default", "memdiag", "--from", T4)
    case("memdiag.profile.t4.require-gpu", "memdiag", "--from", T4, "--require-gpu")
    for r in FUZZ_REPORTS:
        case(f"memdiag.fuzz-report.{r}", "memdiag", "--from", f"fuzz/corpus/report/{r}", "--format", "table")
    case("memdiag.fuzz-report.no-gpu.require-gpu", "memdiag", "--from",
         "fuzz/corpus/report/no-gpu.yaml", "--require-gpu")
    for f in FORMATS:
        case(f"memdiag.two-gpus.{f}", "memdiag", "--from", "{FX}/reports/two-gpus.yaml", "--format", f)
    for r in ("t4.yaml", "t4.json", "t4.csv"):
        case(f"memdiag.stdin.{r}", "memdiag", "--from", "-", "--format", "yaml",
             stdin=f"fuzz/corpus/report/{r}")
    case("memdiag.stdin.empty", "memdiag", "--from", "-")
    case("memdiag.stdin.garbage", "memdiag", "--from", "-", stdin="{FX}/reports/garbage.bin")
    case("memdiag.stdin.pipe-json", "memdiag", "--from", "-", "--format", "csv",
         pipe=["memdiag", "--from", "{FX}/reports/two-gpus.yaml", "--format", "json"])
    for name in fixtures.bad_reports(""):
        case(f"memdiag.bad-from.{name}", "memdiag", "--from", f"{{FX}}/reports/{name}")
    case("memdiag.bad-from.missing", "memdiag", "--from", "/nonexistent/report.yaml")
    case("memdiag.bad-from.directory", "memdiag", "--from", "configs")
    case("memdiag.tiers.example-two", "memdiag", "--from", "{FX}/reports/two-gpus.yaml",
         "--tiers", "configs/tiers-example.yaml", "--format", "table")
    case("memdiag.tiers.custom", "memdiag", "--from", T4, "--tiers", "{FX}/tiers/custom.yaml")
    for t in ("bad-type", "bad-schema", "empty"):
        case(f"memdiag.tiers.{t}", "memdiag", "--from", T4, "--tiers", f"{{FX}}/tiers/{t}.yaml")
    case("memdiag.tiers.missing", "memdiag", "--tiers", "/nonexistent/tiers.yaml")
    case("memdiag.watch.stdout", "memdiag", "--from", T4, "--watch", "0.01", "--count", "3")
    case("memdiag.watch.two-gpus", "memdiag", "--from", "{FX}/reports/two-gpus.yaml",
         "--watch", "0.01", "--count", "2")
    case("memdiag.watch.csv-file", "memdiag", "--from", T4, "--watch", "0.01", "--count", "2",
         "--csv", "{W}/watch.csv", files=[("watch.csv", "{W}/watch.csv")])
    case("memdiag.watch.torn-line", "memdiag", "--from", T4, "--watch", "0.01", "--count", "2",
         "--csv", "{W}/torn.csv", files=[("torn.csv", "{W}/torn.csv")],
         setup=lambda d: copy(d["FX"] / "watch/torn.csv", d["W"] / "torn.csv"))
    case("memdiag.watch.other-csv", "memdiag", "--from", T4, "--watch", "0.01", "--count", "1",
         "--csv", "{W}/other.csv", files=[("other.csv", "{W}/other.csv")],
         setup=lambda d: copy(d["FX"] / "watch/other.csv", d["W"] / "other.csv"))
    for name, args in {
        "count-without-watch": ["--count", "3"],
        "csv-without-watch": ["--csv", "{W}/x.csv"],
        "watch-zero": ["--watch", "0"],
        "watch-word": ["--watch", "abc"],
        "format-xml": ["--format", "xml"],
    }.items():
        case(f"memdiag.usage.{name}", "memdiag", *args)


def copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(src.read_bytes())


def cfgcheck_cases() -> None:
    usage("cfgcheck")
    case("cfgcheck.no-args", "cfgcheck")
    case("cfgcheck.list-rules", "cfgcheck", "--list-rules")
    case("cfgcheck.list-rules-json", "cfgcheck", "--list-rules", "--format", "json")
    # Every config against no GPU and each profile as a table; the seeds' and
    # the demo's against the T4 in every other format.
    targets = {"none": [], **{g: ["--gpu", p] for g, p in GPUS.items()}}
    main = ("colab_optimized", "colab_optimized_full", "colab_full_stable", "gpu_oom", "demo_cpu")
    for (name, cfg), (g, gpu) in itertools.product(CONFIGS.items(), targets.items()):
        if name not in main and g in ("a100", "h100"):
            continue
        for f in FORMATS if g == "t4" and name in main else ("table",):
            case(f"cfgcheck.config.{name}.{g}.{f}", "cfgcheck", cfg, *gpu, "--format", f, *RAM)
    case("cfgcheck.config.all-seeds.t4", "cfgcheck", *list(CONFIGS.values())[:4], "--gpu", T4, *RAM)
    case("cfgcheck.config.host-ram-default", "cfgcheck", "configs/colab_full_stable.yaml", "--format", "yaml")
    case("cfgcheck.config.default-format", "cfgcheck", "configs/demo_cpu.yaml", *RAM)
    for r in ("t4.json", "t4.csv", "no-gpu.yaml"):
        case(f"cfgcheck.stdin-report.{r}", "cfgcheck", "configs/colab_optimized_full.yaml",
             *RAM, stdin=f"fuzz/corpus/report/{r}")
    case("cfgcheck.pipe.memdiag-t4", "cfgcheck", "configs/colab_optimized_full.yaml", "--format", "table",
         *RAM, pipe=["memdiag", "--from", T4])
    case("cfgcheck.pipe.memdiag-live", "cfgcheck", "configs/demo_cpu.yaml", "--format", "table",
         *RAM, pipe=["memdiag"])
    case("cfgcheck.stdin-report.other-schema", "cfgcheck", "configs/colab_optimized_full.yaml",
         stdin="{FX}/reports/other-schema.yaml")
    case("cfgcheck.stdin-report.garbage", "cfgcheck", "configs/demo_cpu.yaml",
         stdin="{FX}/reports/garbage.bin")
    for d in ("0", "3"):
        case(f"cfgcheck.device.{d}", "cfgcheck", "configs/colab_optimized_full.yaml",
             "--gpu", "{FX}/reports/two-gpus.yaml", "--device", d, *RAM)
    case("cfgcheck.device.most-free", "cfgcheck", "configs/colab_optimized_full.yaml",
         "--gpu", "{FX}/reports/two-gpus.yaml", "--format", "yaml", *RAM)
    case("cfgcheck.strict.t4", "cfgcheck", "configs/colab_optimized_full.yaml", "--gpu", T4, "--strict", *RAM)
    case("cfgcheck.strict.demo", "cfgcheck", "configs/demo_cpu.yaml", "--strict", *RAM)
    for m in ("0", "99", "150", "x"):
        case(f"cfgcheck.margin.{m}", "cfgcheck", "configs/colab_optimized.yaml", "--gpu", T4,
             "--margin", m, "--format", "csv", *RAM)
    case("cfgcheck.host-ram.bad", "cfgcheck", "configs/demo_cpu.yaml", "--host-ram-gib", "lots")
    case("cfgcheck.gpu.missing", "cfgcheck", "configs/demo_cpu.yaml", "--gpu", "/nonexistent/gpu.yaml")
    case("cfgcheck.gpu.no-gpu-report", "cfgcheck", "configs/demo_cpu.yaml", "--gpu",
         "fuzz/corpus/report/no-gpu.yaml", *RAM)
    # Each rule, in the table and as YAML.
    for rule in [*fixtures.RULE_CONFIGS, "cuda-graphs-checkpointing"]:
        gpu = "fuzz/corpus/report/no-gpu.yaml" if rule == "gpu-features-without-gpu" else T4
        for f in ("table", "yaml") if rule in ("everything", "memory-exceeds-free") else ("table",):
            case(f"cfgcheck.rule.{rule}.{f}", "cfgcheck", f"{{FX}}/rules/{rule}.yaml",
                 "--gpu", gpu, "--format", f, *RAM)
    case("cfgcheck.rule.launch-blocking-shell", "cfgcheck", "configs/demo_cpu.yaml", "--format", "csv",
         *RAM, env={"CUDA_LAUNCH_BLOCKING": "1"})
    case("cfgcheck.rule.alloc-conf-shell", "cfgcheck", "configs/colab_optimized.yaml", "--format", "csv",
         *RAM, env={"PYTORCH_ALLOC_CONF": "expandable_segments:yes"})
    case("cfgcheck.rule.alloc-conf-shell-ok", "cfgcheck", "configs/colab_optimized.yaml", "--format", "csv",
         *RAM, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    case("cfgcheck.rule.host-ram-tiny", "cfgcheck", "configs/demo_cpu.yaml", "--host-ram-gib", "0.5")
    # --fix and --fit: the corrected config on stdout; the input left as it was.
    for rule in ["cuda-graphs-checkpointing", "memory-exceeds-free", "parallel-trials-overflow",
                 "workers-small-host", "uncapped-dataset", "everything"]:
        case(f"cfgcheck.fix.{rule}", "cfgcheck", "{W}/in.yaml", "--gpu", T4, "--fix", *RAM,
             files=[("in.yaml", "{W}/in.yaml")],
             setup=lambda d, r=rule: copy(d["FX"] / f"rules/{r}.yaml", d["W"] / "in.yaml"))
    case("cfgcheck.fix.no-gpu", "cfgcheck", "configs/colab_optimized.yaml", "--fix", *RAM)
    case("cfgcheck.fix.nothing-to-fix", "cfgcheck", "configs/demo_cpu.yaml", "--gpu", T4, "--fix", *RAM)
    case("cfgcheck.fix.env-shell", "cfgcheck", "configs/demo_cpu.yaml", "--gpu", T4, "--fix", *RAM,
         env={"CUDA_LAUNCH_BLOCKING": "1", "PYTORCH_ALLOC_CONF": "expandable_segments:yes"})
    case("cfgcheck.fix.two-configs", "cfgcheck", "configs/demo_cpu.yaml", "configs/gpu_oom.yaml", "--fix")
    for g in GPUS:
        case(f"cfgcheck.fit.gpu_oom.{g}", "cfgcheck", CONFIGS["gpu_oom"], "--gpu", GPUS[g], "--fit", *RAM)
    case("cfgcheck.fit.colab_optimized_full.t4", "cfgcheck", CONFIGS["colab_optimized_full"], "--gpu", T4,
         "--fit", *RAM)
    case("cfgcheck.fit.big.a100", "cfgcheck", "{FX}/rules/memory-exceeds-free.yaml", "--gpu",
         GPUS["a100"], "--fit", *RAM)
    case("cfgcheck.fit.parallel.t4", "cfgcheck", "{FX}/rules/parallel-trials-overflow.yaml", "--gpu", T4,
         "--fit", *RAM)
    case("cfgcheck.fit.busy-gpu", "cfgcheck", "configs/colab_full_stable.yaml", "--gpu",
         "{FX}/reports/two-gpus.yaml", "--device", "0", "--fit", *RAM)
    case("cfgcheck.fit.no-gpu", "cfgcheck", "{FX}/rules/memory-exceeds-free.yaml", "--fit")
    case("cfgcheck.fit.fix-together", "cfgcheck", "configs/gpu_oom.yaml", "--gpu", T4, "--fit", "--fix")
    # Configs that do not load, and values the schema refuses.
    for name in [*fixtures.INVALID_CONFIGS, "bomb", "huge", "garbage"]:
        case(f"cfgcheck.invalid.{name}", "cfgcheck", f"{{FX}}/invalid/{name}.yaml")
    case("cfgcheck.invalid.missing", "cfgcheck", "/nonexistent.yaml")
    case("cfgcheck.invalid.directory", "cfgcheck", "configs")
    case("cfgcheck.invalid.one-of-two", "cfgcheck", "{FX}/invalid/batch0.yaml",
         "configs/colab_optimized_full.yaml", "--format", "csv", *RAM)
    case("cfgcheck.invalid.one-of-two-table", "cfgcheck", "configs/demo_cpu.yaml",
         "{FX}/invalid/typo.yaml", *RAM)
    for s in SPACES[:2]:
        case(f"cfgcheck.space-as-config.{Path(s).stem}", "cfgcheck", s)
    # --explain: every log in the repo, and a line for each known failure.
    for log in FUZZ_LOGS:
        case(f"cfgcheck.explain.fuzz.{log}", "cfgcheck", "--explain", f"fuzz/corpus/explain/{log}")
    for name in fixtures.KNOWN_LOGS:
        case(f"cfgcheck.explain.known.{name}", "cfgcheck", "--explain", f"{{FX}}/logs/known/{name}.log",
             "--format", "table")
    for f in FORMATS:
        case(f"cfgcheck.explain.all.{f}", "cfgcheck", "--explain", "{FX}/logs/all.log", "--format", f)
    for f in ("table", "json"):
        case(f"cfgcheck.explain.seed001.{f}", "cfgcheck", "--explain", "-", "--format", f,
             stdin="{FX}/logs/seed001.log")
    case("cfgcheck.explain.config-diff", "cfgcheck", "--explain", "{FX}/logs/graph-static.log",
         "--config", "{FX}/explain/graph.yaml")
    case("cfgcheck.explain.config-diff-json", "cfgcheck", "--explain", "{FX}/logs/graph-static.log",
         "--config", "{FX}/explain/graph.yaml", "--format", "json")
    case("cfgcheck.explain.oom-capacity", "cfgcheck", "--explain", "{FX}/logs/oom-figures-too-big.log",
         "--config", "{FX}/explain/big.yaml")
    case("cfgcheck.explain.oom-gpu", "cfgcheck", "--explain", "{FX}/logs/oom-figures-too-big.log",
         "--config", "{FX}/explain/big.yaml", "--gpu", GPUS["a100"], "--format", "yaml")
    case("cfgcheck.explain.fragmented-config", "cfgcheck", "--explain", "{FX}/logs/oom-figures-fragmented.log",
         "--config", "configs/colab_optimized.yaml")
    case("cfgcheck.explain.bad-config", "cfgcheck", "--explain", "{FX}/logs/graph-static.log",
         "--config", "{FX}/invalid/typo.yaml")
    for name in ("unknown", "empty", "binary", "long-line", "repeated"):
        case(f"cfgcheck.explain.{name}", "cfgcheck", "--explain", f"{{FX}}/logs/{name}.log")
    case("cfgcheck.explain.stdin-empty", "cfgcheck", "--explain", "-")
    case("cfgcheck.explain.missing", "cfgcheck", "--explain", "/nonexistent.log")
    case("cfgcheck.explain.with-config-arg", "cfgcheck", "--explain", "-", "configs/demo_cpu.yaml")
    case("cfgcheck.explain.config-without", "cfgcheck", "configs/demo_cpu.yaml", "--config", "configs/demo_cpu.yaml")
    case("cfgcheck.usage.format-xml", "cfgcheck", "configs/demo_cpu.yaml", "--format", "xml")
    case("cfgcheck.usage.device-word", "cfgcheck", "configs/demo_cpu.yaml", "--device", "first")


def verify_cases() -> None:
    usage("verify-fixes")
    case("verify-fixes.no-args", "verify-fixes", "--out", "{W}/runs")
    # The one smoke run (it trains): JSON, where its duration is one field.
    case("verify-fixes.demo.smoke", "verify-fixes", "--config", "configs/demo_cpu.yaml",
         "--format", "json", "--out", "{W}/runs", timeout=240)
    quick = ["--skip", "smoke"]
    for f in ("yaml", "json", "csv"):
        case(f"verify-fixes.demo.{f}", "verify-fixes", "--config", "configs/demo_cpu.yaml", *quick,
             "--format", f, "--out", "{W}/runs")
    # Tables wrap by width: the disk check's free space is left out of them.
    case("verify-fixes.demo.table", "verify-fixes", "--config", "configs/demo_cpu.yaml", *quick,
         "--skip", "disk", "--format", "table", "--out", "{W}/runs")
    # The seeds' configs: their synthetic data (2000 examples of 5×128²) takes
    # check-data 20 s, so the data check is left to the demo's and the fixtures'.
    case("verify-fixes.full.t4-table", "verify-fixes", "--config", "configs/colab_optimized_full.yaml",
         "--gpu", T4, *quick, "--skip", "data", "--skip", "disk", "--format", "table", "--out", "{W}/runs")
    case("verify-fixes.full.stdin-t4", "verify-fixes", "--config", "configs/colab_optimized_full.yaml",
         *quick, "--skip", "data", "--format", "yaml", "--out", "{W}/runs", stdin="fuzz/corpus/report/t4.yaml")
    case("verify-fixes.full.two-gpus", "verify-fixes", "--config", "configs/colab_full_stable.yaml",
         "--gpu", "{FX}/reports/two-gpus.yaml", "--device", "0", *quick, "--skip", "data", "--format", "yaml",
         "--out", "{W}/runs")
    case("verify-fixes.require-gpu", "verify-fixes", "--config", "configs/demo_cpu.yaml", *quick,
         "--require-gpu", "--format", "yaml", "--out", "{W}/runs")
    light = [*quick, "--skip", "data", "--skip", "runtime"]
    case("verify-fixes.graph-hazard", "verify-fixes", "--config", "{FX}/rules/cuda-graphs-checkpointing.yaml",
         *light, "--format", "yaml", "--out", "{W}/runs")
    case("verify-fixes.memory-overflow", "verify-fixes", "--config", "{FX}/rules/memory-exceeds-free.yaml",
         "--gpu", T4, *light, "--format", "yaml", "--out", "{W}/runs")
    case("verify-fixes.space-wandb-worst", "verify-fixes", "--config", "{FX}/small.yaml", "--gpu", T4,
         "--space", "{FX}/space/wandb-worst.yaml", *light, "--format", "json", "--out", "{W}/runs")
    case("verify-fixes.parallel-40-space", "verify-fixes", "--config", "{FX}/small.yaml", "--gpu", T4,
         "--space", "{FX}/space/v1-worst.yaml", "--parallel", "40", *light, "--format", "yaml",
         "--out", "{W}/runs")
    case("verify-fixes.alloc-conf-env", "verify-fixes", "--config", "configs/demo_cpu.yaml", *light,
         "--format", "yaml", "--out", "{W}/runs", env={"PYTORCH_ALLOC_CONF": "max_split_size_mb:128"})
    case("verify-fixes.print-env.plain", "verify-fixes", "--print-env")
    case("verify-fixes.print-env.shell", "verify-fixes", "--print-env",
         env={"PYTORCH_ALLOC_CONF": "max_split_size_mb:128", "CUDA_LAUNCH_BLOCKING": "1"})
    case("verify-fixes.print-env.config", "verify-fixes", "--print-env", "--config",
         "{FX}/rules/launch-blocking.yaml")
    case("verify-fixes.smoke.fails", "verify-fixes", "--config", "{FX}/smoke-abort.yaml", *light[2:],
         "--format", "yaml", "--out", "{W}/runs")
    case("verify-fixes.data.bad-label", "verify-fixes", "--config", "{FX}/data/bad-label.yaml", *quick,
         "--skip", "runtime", "--format", "yaml", "--out", "{W}/runs")
    case("verify-fixes.disk.unwritable", "verify-fixes", "--config", "configs/demo_cpu.yaml", *light,
         "--format", "yaml", "--out", "{FX}/a-file/runs")
    case("verify-fixes.bad.config-missing", "verify-fixes", "--config", "/nonexistent.yaml", "--out", "{W}/runs")
    case("verify-fixes.bad.config-invalid", "verify-fixes", "--config", "{FX}/invalid/typo.yaml",
         "--out", "{W}/runs")
    case("verify-fixes.bad.skip-word", "verify-fixes", "--config", "configs/demo_cpu.yaml", "--skip",
         "everything", "--out", "{W}/runs")
    case("verify-fixes.bad.space-key", "verify-fixes", "--config", "configs/demo_cpu.yaml", "--space",
         "{FX}/space/v1-bad-key.yaml", "--out", "{W}/runs")
    case("verify-fixes.bad.stdin-garbage", "verify-fixes", "--config", "configs/demo_cpu.yaml",
         "--out", "{W}/runs", stdin="{FX}/reports/garbage.bin")
    case("verify-fixes.bad.train-missing", "verify-fixes", "--config", "configs/demo_cpu.yaml",
         "--skip", "smoke", "--train", "/nonexistent/train", "--format", "yaml", "--out", "{W}/runs")


TRAIN = ["train", "--threads", "1", "--device", "cpu"]
RUN_FILES = [("summary.yaml", "{W}/run/summary.yaml"), ("metrics.csv", "{W}/run/metrics.csv"),
             ("config.yaml", "{W}/run/config.yaml")]


def train_cases() -> None:
    usage("train")
    for sub in ("info", "check-data", "sweep", "bench"):
        usage("train", [sub])
    case("train.help-subcommand", "train", "help", "sweep")
    case("train.no-args", "train")
    case("train.bad-subcommand", "train", "run")
    for f in ("yaml", "json"):
        case(f"train.info.{f}", "train", "info", "--format", f)
    case("train.info.default", "train", "info")
    case("train.info.format-xml", "train", "info", "--format", "xml")
    # Bad input: exit 2 before any training.
    case("train.bad.config-missing", *TRAIN, "--config", "/nonexistent.yaml", "--out", "{W}/run")
    for name in ("empty", "notyaml", "typo", "type-str", "several", "heads-divisor", "valpath"):
        case(f"train.bad.{name}", *TRAIN, "--config", f"{{FX}}/invalid/{name}.yaml", "--out", "{W}/run")
    case("train.bad.fault-spec", *TRAIN, "--config", "{FX}/tiny.yaml", "--out", "{W}/run",
         env={"TRAINGUARD_FAULT": "boom"})
    case("train.bad.device-cuda", "train", "--device", "cuda", "--config", "{FX}/tiny.yaml", "--out", "{W}/run")
    case("train.bad.resume-missing", *TRAIN, "--resume", "{W}/nothing")
    case("train.bad.resume-empty-dir", *TRAIN, "--resume", "{W}",)
    case("train.bad.fallback-invalid", *TRAIN, "--config", "{FX}/tiny.yaml", "--fallback",
         "{FX}/invalid/typo.yaml", "--out", "{W}/run")
    case("train.bad.data-missing", *TRAIN, "--config", "{FX}/data/missing.yaml", "--out", "{W}/run")
    case("train.bad.data-label", *TRAIN, "--config", "{FX}/data/bad-label.yaml", "--out", "{W}/run")
    case("train.bad.out-is-file", *TRAIN, "--config", "{FX}/tiny.yaml", "--out", "{FX}/a-file")
    # check-data
    for name in ("ok", "bad-label", "nan", "shape"):
        case(f"train.check-data.{name}", "train", "check-data", "--config", f"{{FX}}/data/{name}.yaml")
    case("train.check-data.demo", "train", "check-data", "--config", "configs/demo_cpu.yaml")
    case("train.check-data.tiny-cls", "train", "check-data", "--config", "{FX}/tiny-cls.yaml")
    case("train.check-data.no-config", "train", "check-data")
    case("train.bench.no-save", "train", "bench", "--config", "{FX}/tiny.yaml")
    # Real CPU runs: console output and the run directory's files.
    for name in ("tiny", "tiny-cls", "tiny-fp16"):
        case(f"train.run.{name}", *TRAIN, "--config", f"{{FX}}/{name}.yaml", "--out", "{W}/run",
             files=RUN_FILES)
    case("train.run.data-files", *TRAIN, "--config", "{FX}/data/ok.yaml", "--out", "{W}/run", files=RUN_FILES)
    for fault in ("oom@1:1", "alloc@1:2", "nan@1:2", "nan@1:1,nan@1:2,nan@2:1", "oom-always@2:1",
                  "abort@1:2"):
        case(f"train.fault.{fault.replace(',', '+').replace(':', '.')}", *TRAIN, "--config",
             "{FX}/tiny.yaml", "--out", "{W}/run", env={"TRAINGUARD_FAULT": fault}, files=RUN_FILES)
    case("train.fallback.chain", *TRAIN, "--config", "{FX}/chain/a.yaml", "--fallback", "{FX}/chain/b.yaml",
         "--fallback", "{FX}/chain/c.yaml", "--out", "{W}/run",
         files=RUN_FILES + [("chain.yaml", "{W}/run/chain.yaml")])
    case("train.fallback.nan-then-c", *TRAIN, "--config", "{FX}/chain/nan.yaml", "--fallback",
         "{FX}/chain/c.yaml", "--out", "{W}/run", files=RUN_FILES + [("chain.yaml", "{W}/run/chain.yaml")])
    case("train.fallback.exhausted", *TRAIN, "--config", "{FX}/chain/a.yaml", "--fallback",
         "{FX}/chain/b.yaml", "--out", "{W}/run", files=RUN_FILES + [("chain.yaml", "{W}/run/chain.yaml")])
    # Killed in epoch 3 of 4, resumed, resumed again, run again into it.
    g = "train.resume"
    case("train.resume.1-killed", *TRAIN, "--config", "{FX}/tiny-4epochs.yaml", "--out", "{G}/run",
         env={"TRAINGUARD_FAULT": "sigkill@3:1"}, group=g, files=[("metrics.csv", "{G}/run/metrics.csv")])
    case("train.resume.2-resumed", *TRAIN, "--resume", "{G}/run", group=g,
         files=[("summary.yaml", "{G}/run/summary.yaml"), ("metrics.csv", "{G}/run/metrics.csv")])
    case("train.resume.3-finished", *TRAIN, "--resume", "{G}/run", group=g)
    case("train.resume.4-out-taken", *TRAIN, "--config", "{FX}/tiny-4epochs.yaml", "--out", "{G}/run", group=g)
    g = "train.damaged"
    case("train.damaged.1-run", *TRAIN, "--config", "{FX}/tiny-1epoch.yaml", "--out", "{G}/run", group=g)
    case("train.damaged.2-resume", *TRAIN, "--resume", "{G}/run", group=g,
         setup=lambda d: truncate(d["G"] / "run/checkpoint.safetensors", 100))


def truncate(path: Path, size: int) -> None:
    if path.exists():
        path.write_bytes(path.read_bytes()[:size])
    path.with_name("summary.yaml").unlink(missing_ok=True)


def journal_setup(journal: str, extra: str = "", keep: int | None = None) -> Callable[[dict[str, Path]], None]:
    return lambda d: fixtures.journal_dir(d["G"] / "sweep", d["REPO"], journal, extra, keep)


# A Rustuna-style DISCARD_TRIALS record (op_code 10; issue 22 point 6): an
# error today, read as Optuna 5 reads it after.
OP10 = '{"op_code": 10, "worker_id": "corpus", "trial_ids": [1]}\n'


def sweep_cases() -> None:
    # One real sweep per corpus run, with the binaries under test: a grid of
    # 4 trials (2 complete, 2 out of memory), then every report on it.
    g = "train.sweep.run"
    sw = "{G}/sweep"
    case("train.sweep.run.1-sweep", "train", "sweep", "--config", "{FX}/tiny.yaml", "--space",
         "{FX}/sweep/space.yaml", "--out", sw, "--parallel", "1", group=g, timeout=300,
         files=[("journal.log", f"{sw}/journal.log"), ("sweep.yaml", f"{sw}/sweep.yaml"),
                ("trial-0001.log", f"{sw}/trials/0001/train.log"),
                ("trial-0002-summary.yaml", f"{sw}/trials/0002/run/summary.yaml")])
    for f in FORMATS:
        case(f"train.sweep.run.report-{f}", "train", "sweep", "--report", sw, "--format", f, group=g,
             table_columns=("s",), files=[("best_config.yaml", f"{sw}/best_config.yaml")])
    case("train.sweep.run.report-default", "train", "sweep", "--report", sw, group=g)
    for f in ("table", "json"):
        case(f"train.sweep.run.status-{f}", "train", "sweep", "--status", sw, "--format", f, group=g)
    case("train.sweep.run.explain-trial", "cfgcheck", "--explain", f"{sw}/trials/0001/train.log", group=g)
    case("train.sweep.run.resume-done", "train", "sweep", "--resume", sw, "--parallel", "1", group=g)
    case("train.sweep.run.worker-done", "train", "sweep", "--worker", sw, group=g)
    case("train.sweep.run.out-taken", "train", "sweep", "--config", "{FX}/tiny.yaml", "--space",
         "{FX}/sweep/space.yaml", "--out", sw, group=g)
    # Reports on the fuzz corpus's journals (fixed seconds, no training).
    for name, journal, extra in (("demo", "demo-sweep.log", ""), ("torn", "torn.log", ""),
                                 ("op10", "demo-sweep.log", OP10),
                                 ("op11", "demo-sweep.log", OP10.replace(": 10", ": 11")),
                                 ("garbage-line", "demo-sweep.log", "not json\n" + OP10.replace(": 10", ": 5"))):
        g = f"train.sweep.{name}"
        files = [("best_config.yaml", "{G}/sweep/best_config.yaml")]
        formats = FORMATS if name == "demo" else ("table", "json") if name == "op10" else ("table",)
        for i, f in enumerate(formats):
            case(f"{g}.report-{f}", "train", "sweep", "--report", "{G}/sweep", "--format", f, group=g,
                 setup=journal_setup(journal, extra) if i == 0 else None, files=files)
        if name in ("demo", "torn", "op10"):
            case(f"{g}.status", "train", "sweep", "--status", "{G}/sweep", group=g)
    # --resume of the demo sweep cut while its last trial ran, with a torn
    # last line: the torn line is cut and the interrupted trial runs again.
    g = "train.sweep.resume-torn"
    torn = '{"op_code":8,"worker_id":"fa060e7e-7a4b-4dc3-ba06-52730455c770-4689","trial_id":8,"user_'
    case(f"{g}.1-resume", "train", "sweep", "--resume", "{G}/sweep", "--parallel", "1", group=g, timeout=300,
         setup=journal_setup("demo-sweep.log", torn, keep=65),
         files=[("journal.log", "{G}/sweep/journal.log"), ("journal.log.torn", "{G}/sweep/journal.log.torn")])
    case(f"{g}.2-report", "train", "sweep", "--report", "{G}/sweep", "--format", "csv", group=g)
    case("train.sweep.slurm-dry-run", "train", "sweep", "--config", "{FX}/tiny.yaml", "--space",
         "configs/sweeps/slurm_grid.yaml", "--out", "{W}/sweep", "--slurm", "--dry-run", "--time", "10",
         "--partition", "gpu", "--array", "3",
         files=[("slurm.yaml", "{W}/sweep/slurm.yaml"), ("sbatch", "{W}/sweep/slurm/workers-1.sbatch")])
    # Refused before any trial runs.
    for name in fixtures.BAD_SPACES:
        case(f"train.sweep.bad-space.{name}", "train", "sweep", "--config", "{FX}/tiny.yaml", "--space",
             f"{{FX}}/sweep/bad/{name}.yaml", "--out", "{W}/never")
    for s in SPACES[:2]:
        case(f"train.sweep.repo-space-bad-base.{Path(s).stem}", "train", "sweep", "--config",
             "{FX}/invalid/typo.yaml", "--space", s, "--out", "{W}/never")
    for name, args in {
        "no-args": [],
        "space-missing": ["--config", "{FX}/tiny.yaml", "--space", "/nonexistent/space.yaml", "--out", "{W}/s"],
        "config-missing": ["--config", "/nonexistent.yaml", "--space", "{FX}/sweep/space.yaml", "--out", "{W}/s"],
        "no-space": ["--config", "{FX}/tiny.yaml", "--out", "{W}/s"],
        "parallel-zero": ["--config", "{FX}/tiny.yaml", "--space", "{FX}/sweep/space.yaml", "--out", "{W}/s",
                          "--parallel", "0"],
        "report-missing": ["--report", "/nonexistent/sweep"],
        "status-missing": ["--status", "/nonexistent/sweep"],
        "resume-missing": ["--resume", "/nonexistent/sweep"],
        "dry-run-alone": ["--config", "{FX}/tiny.yaml", "--space", "{FX}/sweep/space.yaml", "--out", "{W}/s",
                          "--dry-run"],
    }.items():
        case(f"train.sweep.usage.{name}", "train", "sweep", *args)


def all_cases() -> list[Case]:
    """Every case, heavy groups first (the pool starts them early)."""
    if not CASES:
        sweep_cases()
        verify_cases()
        train_cases()
        memdiag_cases()
        cfgcheck_cases()
        ids = [c.id for c in CASES]
        dup = {i for i in ids if ids.count(i) > 1}
        assert not dup, f"duplicate case ids: {dup}"
    return CASES
