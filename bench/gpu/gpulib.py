"""What the GPU recipe's steps (bench/gpu/run.sh) share: the ballast that
holds most of the card so that out-of-memory and crowding come at the same
sizes on a 15 GB T4 and a 141 GB H200, nvidia-smi's readings, our binaries
run as a user runs them, their summaries read back, and each step's verdict.

A step script ends with `verdict(...)`: exit 0 when every check held, 1 when
one failed, 3 when the step has no result that is a pass (NVML hides the
per-process memory, the crash did not reproduce); its last stderr line is
the note run.sh writes into steps.csv. Every step also writes its findings
as STEP.json under --out.

With --dry-run (run.sh's DRY_RUN=1) a step runs its machinery on the CPU
(the ballast holds nothing, the sizes are tiny) so that a torch or
transformers version that breaks a script is found before a GPU is lent;
a dry run's figures are not measurements and its verdict says so.
"""

import json
import os
import subprocess
import sys
import time

import yaml

MIB = 1 << 20


def refuse_faults(step):
    """The GPU steps measure real failures: an injected one (the CPU tests'
    TRAINGUARD_FAULT) would turn a measurement into a replay."""
    set_ = sorted(k for k in os.environ if k.startswith("TRAINGUARD_FAULT"))
    if set_:
        print(f"{step}: {', '.join(set_)} is set: the GPU steps measure real failures, never injected ones; "
              "unset it and run again", file=sys.stderr)
        sys.exit(2)


def smi(query, kind="gpu"):
    """nvidia-smi's CSV rows for --query-KIND=QUERY (no header, no units), or
    None where nvidia-smi cannot run."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-{kind}={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [[c.strip() for c in line.split(",")] for line in out.stdout.strip().splitlines() if line.strip()]


def gpu_memory(index=0):
    """GPU INDEX's total, used and free MiB as nvidia-smi reads them (NVML)."""
    rows = smi("memory.total,memory.used,memory.free")
    if not rows or len(rows) <= index:
        return None
    total, used, free = (int(float(x)) for x in rows[index])
    return {"total_mib": total, "used_mib": used, "free_mib": free}


def compute_apps():
    """{pid: used MiB} of the compute processes nvidia-smi lists (used is None
    where NVML does not say)."""
    rows = smi("pid,used_memory", kind="compute-apps") or []
    apps = {}
    for pid, used in rows:
        try:
            apps[int(pid)] = int(float(used))
        except ValueError:
            apps[int(pid)] = None
    return apps


BALLAST = r"""
import json, sys, torch
leave = int(sys.argv[1]) * 2**20
free, total = torch.cuda.mem_get_info()
hold = max(free - leave, 0)
x = torch.empty(hold, dtype=torch.uint8, device="cuda") if hold else None
free_after, _ = torch.cuda.mem_get_info()
print(json.dumps({"held_mib": hold / 2**20, "free_mib": free_after / 2**20, "total_mib": total / 2**20}), flush=True)
sys.stdin.read()
"""


class Ballast:
    """A process that holds all but LEAVE MiB of GPU 0 until stopped (another
    job on a shared card). Dry runs hold nothing."""

    def __init__(self, python, leave_mib, dry=False):
        self.python, self.leave_mib, self.dry = python, int(leave_mib), dry
        self.proc = None
        self.info = {"held_mib": 0.0, "free_mib": None, "leave_mib": self.leave_mib, "dry": dry}

    def __enter__(self):
        if self.dry:
            return self
        self.proc = subprocess.Popen([self.python, "-c", BALLAST, str(self.leave_mib)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RuntimeError(f"the ballast (holding all but {self.leave_mib} MiB) exited {self.proc.returncode}")
        self.info.update(json.loads(line))
        self.info["pid"] = self.proc.pid
        mem = gpu_memory()
        self.info["smi_free_mib"] = mem and mem["free_mib"]
        return self

    def __exit__(self, *_):
        if self.proc:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            # NVML frees a dead process's memory a moment after it exits.
            time.sleep(0.5)


def run(cmd, timeout=None, cwd=None, env=None):
    """cmd to its end: (exit code or None on timeout, seconds, stdout, stderr)."""
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
                              stdin=subprocess.DEVNULL)
        return done.returncode, time.monotonic() - start, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, time.monotonic() - start, out, err


def summary(run_dir):
    """A `train run` directory's summary.yaml (program-summary/v1), or None."""
    path = os.path.join(run_dir, "summary.yaml")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return yaml.safe_load(f)


def last_json(text):
    """The last line of TEXT that is a JSON object, parsed, or None."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def torch_version(python):
    out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return out.stdout.strip() or None


class Checks:
    """A step's checks, each held or not, with its figures; written as
    STEP.json and summed up in the verdict line."""

    def __init__(self, step, out, dry=False):
        self.step, self.out, self.dry = step, out, dry
        self.results = {"step": step, "dry_run": dry, "checks": [], "figures": {}}
        os.makedirs(out, exist_ok=True)

    def figure(self, name, value):
        self.results["figures"][name] = value
        self.save()

    def check(self, name, held, said):
        self.results["checks"].append({"check": name, "held": bool(held), "said": said})
        print(f"{self.step}: {'held' if held else 'FAILED'}: {name}: {said}", file=sys.stderr)
        self.save()
        return held

    def save(self):
        path = os.path.join(self.out, f"{self.step}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self.results, f, indent=1, default=str)
        os.replace(path + ".tmp", path)

    def verdict(self, note, no_result=None):
        """Exits: 3 with NO_RESULT's reason where the step has no result that
        is a pass, else 0 when every check held, 1 when one failed."""
        failed = [c["check"] for c in self.results["checks"] if not c["held"]]
        if self.dry:
            note = f"dry run on the CPU, no measurement: {note}"
        if failed:
            code, line = 1, f"failed: {', '.join(failed)}; {note}"
        elif no_result:
            code, line = 3, f"{no_result}; {note}"
        else:
            code, line = 0, note
        self.results["verdict"] = line
        self.save()
        print(line.replace("\n", " "), file=sys.stderr)
        sys.exit(code)


def common_args(ap):
    ap.add_argument("--bin", required=True, help="the folder holding train, memdiag, cfgcheck")
    ap.add_argument("--python", default=sys.executable, help="the python whose torch the trials use")
    ap.add_argument("--out", required=True, help="the results folder")
    ap.add_argument("--dry-run", action="store_true", help="exercise the step on the CPU (no measurement)")
    return ap


STATES = {0: "RUNNING", 1: "COMPLETE", 2: "PRUNED", 3: "FAIL", 4: "WAITING"}


def external(distribution, v):
    """A parameter's value as the user wrote it (Optuna stores a choice's index)."""
    d = json.loads(distribution)
    return d["attributes"]["choices"][int(v)] if d.get("name") == "CategoricalDistribution" else v


def journal(path):
    """Each trial of an Optuna journal: number, state, params, user attrs."""
    trials = []
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a torn last line
            op = r.get("op_code")
            if op == 4:
                t = {"number": len(trials), "state": STATES.get(r.get("state", 0)), "params": {},
                     "attrs": dict(r.get("user_attrs") or {})}
                for name, v in (r.get("params") or {}).items():
                    t["params"][name] = external(r["distributions"][name], v)
                trials.append(t)
            elif op == 5:
                trials[r["trial_id"]]["params"][r["param_name"]] = external(r["distribution"], r["param_value_internal"])
            elif op == 6:
                trials[r["trial_id"]]["state"] = STATES.get(r["state"], str(r["state"]))
            elif op == 8:
                trials[r["trial_id"]]["attrs"].update(r["user_attr"])
    return trials
