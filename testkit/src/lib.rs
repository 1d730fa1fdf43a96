//! The command-line test harness every trainguard test shares (uutils'
//! `TestScenario` in spirit): tests read like the command line. Run a tool
//! with arguments, pipe stdin, set or remove variables, then expect an exit
//! code, what stdout or stderr contains, or read stdout as YAML or JSON.
//!
//! ```no_run
//! let r = testkit::ucmd("cfgcheck")
//!     .args(["--gpu", "t4", "configs/demo_cpu.yaml"])
//!     .run();
//! r.code_is(0).stdout_contains("verdict");
//! ```

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub mod budget;

/// Variables of the caller's shell that change what the tools say: removed
/// from every command so results do not depend on who runs the tests.
pub const CALLER_ENV: [&str; 4] = [
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_CUDA_ALLOC_CONF",
    "CUDA_LAUNCH_BLOCKING",
    "TRAINGUARD_FAULT",
];

/// The workspace root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit sits in the workspace root")
        .to_path_buf()
}

/// A path under the workspace root.
pub fn repo_path(path: &str) -> PathBuf {
    repo().join(path)
}

/// Every chapter of docs/guide/, in name order, as one text (what the
/// format and citation checks read as "the guide").
pub fn guide_chapters() -> String {
    let dir = repo_path("docs/guide");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("docs/guide at the workspace root")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no chapter in docs/guide");
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("a readable chapter"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Python that defines `sampled(secs)`: in a sweep's trial, waits (60 s at
/// most) until its sampler has written two more rows of the trial's
/// memory.csv (memory-N.csv for its attempt N), so that it has seen what
/// the process holds now (the first new row may come from a reading taken
/// before); anywhere else, sleeps `secs`. A trial whose peak or limit the test asserts holds it so,
/// however slow the machine, not for a time that a busy one overruns.
pub const SAMPLED_PY: &str = concat!(
    "def sampled(secs):\n",
    "    import os, time\n",
    "    d = os.environ.get('TRAINGUARD_TRIAL_DIR')\n",
    "    if not d:\n",
    "        time.sleep(secs)\n",
    "        return\n",
    "    import glob\n",
    "    csvs = os.path.join(d, 'run', 'memory*.csv')\n",
    "    rows = lambda: sum(open(c).read().count('\\n') for c in glob.glob(csvs))\n",
    "    n, t = rows(), time.time()\n",
    "    while rows() < n + 2 and time.time() - t < 60:\n",
    "        time.sleep(0.05)\n",
);

/// A Python program that holds `--rows` × `--width` MiB under an
/// address-space limit (RLIMIT_AS) of what it maps at start plus
/// `room_mib`, until its trial's sampler has seen it (`SAMPLED_PY`; else
/// for `sleep_s` seconds), then reports `valid loss 1/MiB`: the memory
/// model's real trials, a point too big dying of a real MemoryError.
pub fn hold_rows_width(room_mib: u32, sleep_s: f64) -> String {
    format!(
        "import resource, sys\n\
{SAMPLED_PY}\
args = dict(a.lstrip('-').split('=') for a in sys.argv[1:])\n\
mib = int(args['rows']) * int(args['width'])\n\
pages = int(open('/proc/self/statm').read().split()[0])\n\
limit = pages * resource.getpagesize() + ({room_mib} << 20)\n\
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n\
b = bytearray(b'\\x01') * (mib << 20)\n\
sampled({sleep_s})\n\
print('valid loss', 1.0 / mib, flush=True)\n"
    )
}

/// `python()` as a command-line argument (`--interpreter`).
pub fn python_arg() -> String {
    python().display().to_string()
}

/// `train sweep ARGS` run from `cwd` as a user runs it (the caller's
/// environment variables that would change it removed): its output.
pub fn train_sweep(cwd: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(bin("train"));
    cmd.arg("sweep").args(args).current_dir(cwd);
    for k in CALLER_ENV {
        cmd.env_remove(k);
    }
    cmd.output().expect("train sweep runs")
}

/// `train sweep ARGS` from `cwd` that must exit 0 (its stderr shown if
/// not), writing its journal in `cwd/out`: its stderr and its trials as
/// Optuna loads them (`optuna_trials`, the study named after `out`).
pub fn train_sweep_ok(cwd: &Path, args: &[&str], out: &str) -> (String, serde_json::Value) {
    let run = train_sweep(cwd, args);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(0), "{err}");
    (err, optuna_trials(&cwd.join(out), out))
}

/// A user attribute of a trial as `optuna_trials` lists it ("-" if absent
/// or not a string).
pub fn user_attr<'a>(t: &'a serde_json::Value, k: &str) -> &'a str {
    t["user_attrs"][k].as_str().unwrap_or("-")
}

/// target/<profile>/<name>, next to the running test's executable (in deps/).
pub fn bin(name: &str) -> PathBuf {
    let mut dir = std::env::current_exe().expect("the test's own path");
    dir.pop();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not built: run `cargo test --workspace`",
        path.display()
    );
    path
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// The Python whose Optuna the tests check our journal, samplers and
/// pruners against: `$VIRTUAL_ENV/bin/python` (what the justfile exports),
/// else `python3`. Fails, saying to run `just setup`, when it cannot import
/// optuna: these tests need the real one, never a skip.
pub fn python() -> PathBuf {
    let py = std::env::var_os("VIRTUAL_ENV")
        .map(|v| Path::new(&v).join("bin/python"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| "python3".into());
    let ok = Command::new(&py)
        .args(["-c", "import optuna"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import optuna: run `just setup` (these tests need real Optuna)",
        py.display()
    );
    py
}

/// Polls `ready` every 20 ms until it says true; fails naming `what` after
/// `secs` seconds. `ready` may assert too (a child that must still run).
pub fn wait_until(what: &str, secs: u64, mut ready: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !ready() {
        assert!(
            started.elapsed().as_secs() < secs,
            "{what}: not within {secs} s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Bytes read as YAML.
pub fn yaml(bytes: &[u8]) -> serde_yaml::Value {
    serde_yaml::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not YAML ({e}):\n{}", String::from_utf8_lossy(bytes)))
}

/// Bytes read as JSON.
pub fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", String::from_utf8_lossy(bytes)))
}

/// A tool of the workspace, run from the workspace root with the caller's
/// variables ([`CALLER_ENV`]) removed and stdin empty.
pub fn ucmd(tool: &str) -> UCommand {
    UCommand::new(bin(tool))
}

/// A command being set up.
pub struct UCommand {
    cmd: Command,
    stdin: Option<Vec<u8>>,
}

impl UCommand {
    pub fn new(program: impl AsRef<OsStr>) -> UCommand {
        let mut cmd = Command::new(program);
        cmd.current_dir(repo());
        for v in CALLER_ENV {
            cmd.env_remove(v);
        }
        UCommand { cmd, stdin: None }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.cmd.arg(arg);
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub fn env_remove(mut self, key: &str) -> Self {
        self.cmd.env_remove(key);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// What the command reads on stdin.
    pub fn pipe_in(mut self, input: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(input.into());
        self
    }

    /// Runs it to the end.
    pub fn run(mut self) -> CmdResult {
        self.cmd
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self.cmd.spawn().expect("the command starts");
        if let Some(input) = self.stdin.take() {
            let mut pipe = child.stdin.take().expect("piped stdin");
            // A tool may exit without reading it all.
            let _ = pipe.write_all(&input);
        }
        CmdResult {
            output: child.wait_with_output().expect("the command ends"),
        }
    }
}

/// What a command did.
pub struct CmdResult {
    pub output: Output,
}

impl CmdResult {
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    pub fn stdout(&self) -> &[u8] {
        &self.output.stdout
    }

    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// Expects exit code `code`, showing stderr when it is not.
    pub fn code_is(&self, code: i32) -> &Self {
        assert_eq!(
            self.code(),
            Some(code),
            "stderr: {}\nstdout: {}",
            self.stderr_str(),
            self.stdout_str()
        );
        self
    }

    pub fn success(&self) -> &Self {
        self.code_is(0)
    }

    pub fn stdout_contains(&self, text: &str) -> &Self {
        let out = self.stdout_str();
        assert!(out.contains(text), "stdout lacks {text:?}:\n{out}");
        self
    }

    pub fn stderr_contains(&self, text: &str) -> &Self {
        let err = self.stderr_str();
        assert!(err.contains(text), "stderr lacks {text:?}:\n{err}");
        self
    }

    pub fn stdout_yaml(&self) -> serde_yaml::Value {
        yaml(&self.output.stdout)
    }

    pub fn stdout_json(&self) -> serde_json::Value {
        json(&self.output.stdout)
    }

    /// stdout as JSON, or null when it is not JSON.
    pub fn stdout_json_or_null(&self) -> serde_json::Value {
        serde_json::from_slice(&self.output.stdout).unwrap_or(serde_json::Value::Null)
    }
}

/// Every trial as Optuna sees it: number, state, params, value,
/// intermediate values, user attributes, start and complete (seconds
/// since the epoch, null if not set).
pub fn optuna_trials(dir: &Path, study: &str) -> serde_json::Value {
    let script = r#"
import json, sys
try:
    import optuna
except ImportError:
    sys.exit("optuna is not installed: run `just setup`")
optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(sys.argv[1]))
s = optuna.load_study(study_name=sys.argv[2], storage=storage)
print(json.dumps([{"number": t.number, "state": t.state.name, "params": t.params,
    "value": t.value, "intermediate": {str(k): v for k, v in t.intermediate_values.items()},
    "user_attrs": t.user_attrs,
    "start": t.datetime_start.timestamp() if t.datetime_start else None,
    "complete": t.datetime_complete.timestamp() if t.datetime_complete else None} for t in s.trials]))
"#;
    let out = Command::new(python())
        .args(["-c", script])
        .arg(dir.join("journal.log"))
        .arg(study)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "Optuna could not load the journal: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
