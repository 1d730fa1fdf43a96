//! `verify-fixes -- CMD` as a user runs it before a long run of their own
//! script: real Python processes (the repo's small PyTorch script
//! examples/own_script/main.py, and tiny scripts written here), run under
//! the supervisor for a few seconds, judged from what they really printed
//! and the memory they really used.

use std::path::Path;
use testkit::{python, repo_path, ucmd, write, CmdResult};

/// verify-fixes with JSON output and the smoke's directory in `dir`, then
/// `--` and the command; run in `cwd`.
fn gate(cwd: &Path, dir: &Path, opts: &[&str], cmd: &[&str]) -> (CmdResult, serde_json::Value) {
    let r = ucmd("verify-fixes")
        .current_dir(cwd)
        .args(["--format", "json", "--out"])
        .arg(dir)
        .args(opts)
        .arg("--")
        .args(cmd)
        .run();
    let json = r.stdout_json_or_null();
    (r, json)
}

fn check<'a>(v: &'a serde_json::Value, id: &str) -> (&'a str, &'a str) {
    let c = v["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("no checks in {v}"))
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {v}"));
    (c["status"].as_str().unwrap(), c["saw"].as_str().unwrap())
}

fn py() -> String {
    python().display().to_string()
}

#[test]
fn the_repos_pytorch_script_passes_with_a_fit_count_from_its_measured_peak() {
    let tmp = tempfile::tempdir().unwrap();
    let script = repo_path("examples/own_script/main.py");
    let config = repo_path("configs/own_script/c.yaml");
    let (r, v) = gate(
        &testkit::repo(),
        tmp.path(),
        &["--smoke-seconds", "120"],
        &[
            &py(),
            script.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--epochs",
            "5",
            // Half a second an epoch: the smoke stops it well before 5.
            "--epoch_seconds",
            "0.5",
        ],
    );
    assert_eq!(r.code(), Some(0), "{}\n{v:#}", r.stderr_str());
    assert_eq!(v["schema"], "verify-fixes/v1");
    // main.py's own config holds no key cfgcheck's rules read: said, not failed.
    let (s, saw) = check(&v, "config");
    assert_eq!(s, "skip");
    assert!(
        saw.ends_with("c.yaml: not a config cfgcheck reads (no key its rules read): not checked"),
        "{saw}"
    );
    let (s, saw) = check(&v, "started");
    assert_eq!(s, "pass", "{saw}");
    assert!(
        saw.contains("2 evaluation(s) of val_loss reported (up to epoch 2); stopped by verify-fixes after 2 evaluation(s)"),
        "{saw}"
    );
    let (s, saw) = check(&v, "metric");
    assert_eq!(s, "pass");
    assert!(
        saw.starts_with("val_loss by epoch lines (2 report(s), last "),
        "{saw}"
    );
    assert!(saw.contains("val_accuracy by JSON or dict lines"), "{saw}");
    // The smoke ran with the allocator fix, for the torch the script imports.
    let (s, saw) = check(&v, "allocator");
    assert_eq!(s, "pass");
    assert!(
        saw.contains("PYTORCH_ALLOC_CONF=expandable_segments:True"),
        "{saw}"
    );
    // Its measured peak: torch alone holds well over 50 MiB.
    let smoke = &v["smoke"];
    let peak = smoke["peak"]["host_pss_mib"].as_f64().unwrap();
    assert!(peak > 50.0, "{smoke:#}");
    let parallel = smoke["parallel"].as_u64().unwrap();
    assert!(parallel >= 1, "{smoke:#}");
    let (s, saw) = check(&v, "memory");
    assert_eq!(s, "pass");
    assert!(
        saw.contains(&format!("--parallel would take {parallel}")),
        "{saw}"
    );
    assert!(saw.contains("auto, measured: a trial needs"), "{saw}");
    assert!(saw.contains("GPU: "), "{saw}");
    assert_eq!(smoke["epochs"], 2);
    assert_eq!(smoke["dir"], tmp.path().display().to_string());
    // The disk room: twice the peak, said as the upper bound it is.
    let (s, saw) = check(&v, "disk");
    assert_eq!(s, "pass", "{saw}");
    assert!(
        saw.contains("two checkpoints (one written beside the last) take at most about")
            && saw.contains("an upper bound, twice the"),
        "{saw}"
    );
    // It was stopped before its 5 epochs; what it printed and its memory stay.
    let log = std::fs::read_to_string(tmp.path().join("output.log")).unwrap();
    assert!(log.contains("Epoch 2/5"), "{log}");
    assert!(!log.contains("Epoch 5/5"), "{log}");
    let memory = std::fs::read_to_string(tmp.path().join("memory.csv")).unwrap();
    assert!(memory.starts_with("seconds,host_pss_mib"), "{memory}");
    assert!(memory.lines().count() >= 2, "{memory}");
    // The table names the directory too; a second smoke there replaces
    // the first one's log.
    let r = ucmd("verify-fixes")
        .args(["--format", "table", "--smoke-epochs", "1", "--out"])
        .arg(tmp.path())
        .args(["--", &py(), script.to_str().unwrap()])
        .run();
    r.code_is(0)
        .stdout_contains("checks passed")
        .stdout_contains(&format!("are in {}", tmp.path().display()));
    let log = std::fs::read_to_string(tmp.path().join("output.log")).unwrap();
    assert!(log.contains("Epoch 1/3") && !log.contains("/5 "), "{log}");
}

#[test]
fn a_script_that_fails_at_import_or_on_its_arguments_fails_the_command_check() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "imp.py", "import not_a_module\n");
    let (r, v) = gate(tmp.path(), &tmp.path().join("s1"), &[], &[&py(), "imp.py"]);
    r.code_is(1);
    let (s, saw) = check(&v, "started");
    assert_eq!(s, "fail");
    assert!(
        saw.starts_with("ModuleNotFoundError: No module named 'not_a_module' (exit 1)"),
        "{saw}"
    );
    assert_eq!(check(&v, "metric").0, "skip");
    assert_eq!(check(&v, "memory").0, "skip");
    assert_eq!(v["failed"], 1);
    // A bad argument: argparse's own line.
    write(
        tmp.path(),
        "args.py",
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr', type=float)\np.parse_args()\n",
    );
    let (r, v) = gate(
        tmp.path(),
        &tmp.path().join("s2"),
        &[],
        &[&py(), "args.py", "--learning-rate", "1"],
    );
    r.code_is(1);
    let (s, saw) = check(&v, "started");
    assert_eq!(s, "fail");
    assert!(saw.contains("exit 2"), "{saw}");
    assert!(
        saw.contains("error: unrecognized arguments: --learning-rate 1"),
        "{saw}"
    );
    // A program that does not exist.
    let (r, v) = gate(
        tmp.path(),
        &tmp.path().join("s3"),
        &[],
        &["./no-such-program"],
    );
    r.code_is(1);
    let (s, saw) = check(&v, "started");
    assert_eq!(s, "fail");
    assert!(saw.contains("cannot start \"./no-such-program\""), "{saw}");
}

#[test]
fn a_script_that_reports_no_metric_fails_the_metric_check() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "quiet.py",
        "import time\nprint('loading the data...', flush=True)\ntime.sleep(60)\n",
    );
    let (r, v) = gate(
        tmp.path(),
        &tmp.path().join("s"),
        &["--smoke-seconds", "2"],
        &[&py(), "quiet.py"],
    );
    r.code_is(1);
    let (s, saw) = check(&v, "metric");
    assert_eq!(s, "fail");
    assert!(saw.starts_with("no metric read in "), "{saw}");
    // Its one line holds no number: no regex is made up for it.
    let fix = fix_of(&v, "metric");
    assert!(!fix.contains("--metric-regex '"), "{fix}");
    assert!(
        fix.ends_with("or a longer --smoke-seconds, if it reports later"),
        "{fix}"
    );
    // It ran (not a crash): the metric check says what is missing.
    let (s, saw) = check(&v, "started");
    assert_eq!(s, "pass");
    assert!(
        saw.ends_with(
            "0 evaluation(s) reported; stopped by verify-fixes after 2 s (--smoke-seconds)"
        ),
        "{saw}"
    );
    assert_eq!(v["smoke"]["epochs"], 0);
}

#[test]
fn a_loss_that_is_nan_in_the_first_epoch_fails_the_metric_check() {
    let tmp = tempfile::tempdir().unwrap();
    let script = repo_path("examples/own_script/main.py");
    let (r, v) = gate(
        &testkit::repo(),
        tmp.path(),
        &["--smoke-seconds", "120"],
        &[
            &py(),
            script.to_str().unwrap(),
            "--fault",
            "nan",
            "--epochs",
            "5",
            // Half a second an epoch: the smoke stops it well before 5.
            "--epoch_seconds",
            "0.5",
        ],
    );
    r.code_is(1);
    let (s, saw) = check(&v, "metric");
    assert_eq!(s, "fail", "{v:#}");
    assert!(
        saw.starts_with("train_loss NaN at step 1: a non-finite value"),
        "{saw}"
    );
    let (s, saw) = check(&v, "started");
    assert_eq!(s, "pass");
    assert!(
        saw.contains("stopped by verify-fixes at a non-finite train_loss NaN at step 1"),
        "{saw}"
    );
    // Its first epoch's line holds the NaN: stopped there, half a second
    // before its second ends.
    assert_eq!(v["smoke"]["epochs"], 1);
    assert_eq!(
        v["smoke"]["metrics"][1]["non_finite"],
        "val_loss NaN at step 1"
    );
}

#[test]
fn a_config_error_in_the_command_fails_the_gate_before_the_smoke_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo_path("configs/colab_optimized_full.yaml")).unwrap();
    let cfg = write(
        tmp.path(),
        "a.yaml",
        &text.replace("\"default\"", "\"reduce-overhead\""),
    );
    let ran = tmp.path().join("ran");
    let (r, v) = gate(
        tmp.path(),
        &tmp.path().join("s"),
        &[],
        &[
            &py(),
            "-c",
            &format!("open({:?}, 'w')", ran.display().to_string()),
            &format!("--config={}", cfg.display()),
        ],
    );
    r.code_is(1);
    let (s, saw) = check(&v, "config");
    assert_eq!(s, "fail");
    assert!(
        saw.contains("errors: cuda-graphs-checkpointing (line "),
        "{saw}"
    );
    let (s, saw) = check(&v, "started");
    assert_eq!(s, "skip");
    assert!(
        saw.contains("a config file in the command has an error"),
        "{saw}"
    );
    assert!(!ran.exists(), "the command ran");
    assert!(v.get("smoke").is_none(), "{v:#}");
}

#[test]
fn a_hugging_face_config_in_the_command_is_read_and_its_hazard_fails_the_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let args = repo_path("configs/foreign/hf_training_args.json");
    let ran = tmp.path().join("ran");
    let (r, v) = gate(
        tmp.path(),
        &tmp.path().join("s"),
        &[],
        &[
            &py(),
            "-c",
            &format!("open({:?}, 'w')", ran.display().to_string()),
            args.to_str().unwrap(),
        ],
    );
    r.code_is(1);
    let (s, saw) = check(&v, "config");
    assert_eq!(s, "fail");
    assert!(
        saw.contains("hf_training_args.json (hf): errors: cuda-graphs-checkpointing (line 25)"),
        "{saw}"
    );
    assert!(!ran.exists(), "the command ran");
}

#[test]
fn the_command_never_reads_memdiags_pipe_and_the_expected_metric_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "stdin.py",
        "import json, sys\nn = len(sys.stdin.read())\nfor e in (1, 2, 3):\n    print(json.dumps({'epoch': e, 'stdin_bytes': n}), flush=True)\n",
    );
    // The target comes from --gpu, so verify-fixes leaves its stdin unread:
    // a command that inherited it would read these bytes.
    let r = ucmd("verify-fixes")
        .current_dir(tmp.path())
        .args([
            "--format",
            "json",
            "--out",
            "s",
            "--expect-metric",
            "stdin_bytes",
        ])
        .arg("--gpu")
        .arg(repo_path("configs/gpus/t4.yaml"))
        .args(["--", &py(), "stdin.py"])
        .pipe_in("a memdiag report on its way to verify-fixes\n")
        .run();
    r.code_is(0);
    let v = r.stdout_json();
    let (s, saw) = check(&v, "metric");
    assert_eq!(s, "pass");
    // Its 3 epochs may all come before the smoke stops it at 2.
    assert!(
        saw.starts_with("stdin_bytes by JSON or dict lines ("),
        "{saw}"
    );
    assert!(saw.ends_with(" report(s), last 0)"), "{saw}");
    // The T4 profile: a GPU, but nothing measured on it.
    let (_, saw) = check(&v, "memory");
    assert!(saw.contains("GPU: "), "{saw}");
    // An expected metric it does not print fails.
    let r = ucmd("verify-fixes")
        .current_dir(tmp.path())
        .args([
            "--format",
            "json",
            "--out",
            "s2",
            "--expect-metric",
            "eval_loss",
        ])
        .args(["--smoke-seconds", "3", "--", &py(), "stdin.py"])
        .run();
    r.code_is(1);
    let v = r.stdout_json();
    let (s, saw) = check(&v, "metric");
    assert_eq!(s, "fail");
    assert_eq!(
        saw,
        "no report of eval_loss (--expect-metric); read stdin_bytes"
    );
    let fix = fix_flags(&v, "metric");
    assert_eq!(fix, "--expect-metric stdin_bytes");
    let v = as_typed(tmp.path(), &fix, "s3", "stdin.py");
    let (s, saw) = check(&v, "metric");
    assert_eq!(s, "pass", "{fix}: {saw}");
}

/// A check's fix.
fn fix_of(v: &serde_json::Value, id: &str) -> String {
    let c = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap();
    let fix = c["fix"].as_str().unwrap_or_else(|| panic!("no fix in {c}"));
    fix.to_string()
}

/// The flags a check's fix gives (after its "e.g. "), to be run as typed.
fn fix_flags(v: &serde_json::Value, id: &str) -> String {
    let fix = fix_of(v, id);
    let after = fix
        .split("e.g. ")
        .nth(1)
        .unwrap_or_else(|| panic!("no example in {fix}"));
    // Up to the end of the flags: ` (` or `,` outside quotes.
    let mut quoted = false;
    let end = after
        .char_indices()
        .find(|&(i, c)| {
            quoted ^= c == '\'';
            !quoted && (c == ',' || after[i..].starts_with(" ("))
        })
        .map_or(after.len(), |(i, _)| i);
    after[..end].to_string()
}

/// verify-fixes with `flags` as a shell reads them (quotes and all), then
/// `-- python script`, in `cwd`; its JSON.
fn as_typed(cwd: &Path, flags: &str, out: &str, script: &str) -> serde_json::Value {
    let bin = testkit::bin("verify-fixes");
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} --format json --out {out} --smoke-seconds 20 --smoke-epochs 1 {flags} -- {} {script}",
            bin.display(),
            py()
        ))
        .current_dir(cwd)
        .output()
        .unwrap();
    testkit::json(&o.stdout)
}

/// A script whose metric no reader knows: the fix the check gives (a name
/// and a regex) works as typed, and reads it.
#[test]
fn the_metric_fix_for_unread_output_works_as_typed() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "plain.py",
        "for e in (1, 2):\n    print(f'epoch {e}: val loss: {1 / e:.3f}', flush=True)\n",
    );
    let (r, v) = gate(tmp.path(), &tmp.path().join("s"), &[], &[&py(), "plain.py"]);
    r.code_is(1);
    assert_eq!(check(&v, "metric").0, "fail");
    let fix = fix_flags(&v, "metric");
    assert_eq!(
        fix,
        "--expect-metric val_loss --metric-regex 'val loss:? *([0-9.]+)'"
    );
    // Made from its last line, and tested on it before it was shown.
    let said = fix_of(&v, "metric");
    assert!(
        said.contains("(it reads 0.5 from `epoch 2: val loss: 0.500`;"),
        "{said}"
    );
    let v = as_typed(tmp.path(), &fix, "s2", "plain.py");
    let (s, saw) = check(&v, "metric");
    assert_eq!(s, "pass", "{fix}: {saw}");
    assert!(saw.starts_with("val_loss by the regex ("), "{saw}");
}

/// A plain PyTorch script with argparse, printing `epoch 3:
/// train_loss=0.51 val_loss=0.43`: read with no flag, its val_loss the
/// evaluation, its train_loss not.
#[test]
fn a_plain_scripts_name_value_lines_are_read_with_no_flag() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "plain_train.py",
        r#"import argparse, time, torch
p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=6)
p.add_argument("--lr", type=float, default=0.05)
a = p.parse_args()
torch.manual_seed(0)
x = torch.randn(256, 8); y = x @ torch.randn(8, 1)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=a.lr)
print(f"lr={a.lr} batch 32", flush=True)
for epoch in range(a.epochs):
    for i in range(0, 192, 32):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[i:i + 32]), y[i:i + 32])
        loss.backward(); opt.step()
    with torch.no_grad():
        val = torch.nn.functional.mse_loss(model(x[192:]), y[192:]).item()
    print(f"epoch {epoch}: train_loss={loss.item():.4f} val_loss={val:.4f}", flush=True)
    time.sleep(0.5)
"#,
    );
    let (r, v) = gate(
        tmp.path(),
        &tmp.path().join("s"),
        &["--smoke-seconds", "120"],
        &[&py(), "plain_train.py"],
    );
    assert_eq!(r.code(), Some(0), "{}\n{v:#}", r.stderr_str());
    let (s, saw) = check(&v, "metric");
    assert_eq!(s, "pass");
    assert!(
        saw.starts_with("val_loss by name=value pairs (2 report(s), last "),
        "{saw}"
    );
    assert!(saw.contains("also train_loss by name=value pairs"), "{saw}");
    let (_, saw) = check(&v, "started");
    assert!(
        saw.contains("2 evaluation(s) of val_loss reported (up to epoch 1); stopped by verify-fixes after 2 evaluation(s)"),
        "{saw}"
    );
    assert_eq!(v["smoke"]["epoch_metric"], "val_loss");
}

/// A tiny Hugging Face Trainer script (a GPT-2 built from a config, CPU):
/// eight loss lines an epoch, one evaluation at its end.
const TRAINER_SCRIPT: &str = r#"import argparse, os, time
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
p = argparse.ArgumentParser()
p.add_argument("--eval_strategy", default="epoch")
p.add_argument("--eval_steps", type=int, default=None)
p.add_argument("--logging_steps", type=int, default=1)
p.add_argument("--step_seconds", type=float, default=0.0)
a = p.parse_args()
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2))
class Data(torch.utils.data.Dataset):
    def __init__(self, n): self.x = torch.randint(0, 64, (n, 16))
    def __len__(self): return len(self.x)
    def __getitem__(self, i): return {"input_ids": self.x[i], "labels": self.x[i]}
class Slow(Trainer):
    def training_step(self, *args, **kwargs):
        time.sleep(a.step_seconds)
        return super().training_step(*args, **kwargs)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, num_train_epochs=2,
    eval_strategy=a.eval_strategy, eval_steps=a.eval_steps, logging_steps=a.logging_steps,
    save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True)
Slow(model=model, args=args, train_dataset=Data(32), eval_dataset=Data(8)).train()
"#;

/// Its loss lines are not evaluations: when the time runs out before its
/// first evaluation the metric check fails, says how far it got (a
/// Trainer's fractional epoch as printed) and how to evaluate sooner; that
/// way, it passes, its evaluations at fractional epochs.
#[test]
fn a_trainer_script_passes_only_once_it_evaluated() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "lm_train.py", TRAINER_SCRIPT);
    // 4 s a step, 8 steps to its first evaluation: past the 30 s given.
    let (r, v) = gate(
        tmp.path(),
        &tmp.path().join("s1"),
        &["--smoke-seconds", "30"],
        &[
            &py(),
            "lm_train.py",
            "--eval_strategy",
            "epoch",
            "--logging_steps",
            "1",
            "--step_seconds",
            "4",
        ],
    );
    assert_eq!(r.code(), Some(1), "{}\n{v:#}", r.stderr_str());
    let (s, saw) = check(&v, "metric");
    assert_eq!(s, "fail", "{saw}");
    assert!(saw.starts_with("no evaluation in "), "{saw}");
    assert!(
        saw.contains("was reported before --smoke-seconds ran out (up to epoch 0.")
            && saw.contains("; read loss, grad_norm, learning_rate"),
        "{saw}"
    );
    let fix = fix_of(&v, "metric");
    assert!(
        fix.contains("--eval_strategy steps --eval_steps N"),
        "{fix}"
    );
    let (s, saw) = check(&v, "started");
    assert_eq!(s, "pass");
    assert!(
        saw.contains("0 evaluation(s) reported (up to epoch 0."),
        "{saw}"
    );
    assert_eq!(v["smoke"]["epochs"], 0);
    assert!(v["smoke"]["epoch_metric"].is_null(), "{v:#}");
    // The advice taken: an evaluation every 2 steps (a quarter epoch).
    let (r, v) = gate(
        tmp.path(),
        &tmp.path().join("s2"),
        &["--smoke-seconds", "120"],
        &[
            &py(),
            "lm_train.py",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "2",
            "--step_seconds",
            "0.3",
        ],
    );
    let err = r.stderr_str();
    assert_eq!(r.code(), Some(0), "{err}\n{v:#}");
    assert!(
        err.contains("verify-fixes: smoke: evaluation 1 reported (eval_loss at epoch 0.25)")
            && err.contains("verify-fixes: smoke: evaluation 2 reported (eval_loss at epoch 0.5)"),
        "{err}"
    );
    let (_, saw) = check(&v, "started");
    assert!(
        saw.contains(" evaluation(s) of eval_loss reported (up to epoch 0.")
            && saw.ends_with("stopped by verify-fixes after 2 evaluation(s)"),
        "{saw}"
    );
    let (s, saw) = check(&v, "metric");
    assert_eq!(s, "pass");
    assert!(
        saw.starts_with("eval_loss by JSON or dict lines ("),
        "{saw}"
    );
}

/// Without --out, the smoke's temporary directory stays only when a check
/// failed, and the output says where.
#[test]
fn the_smokes_temporary_directory_stays_only_after_a_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let temp = tmp.path().join("tmp");
    std::fs::create_dir(&temp).unwrap();
    write(
        tmp.path(),
        "ok.py",
        "print({'epoch': 1, 'val_loss': 0.5})\n",
    );
    write(tmp.path(), "quiet.py", "print('nothing to report')\n");
    let left = || std::fs::read_dir(&temp).unwrap().count();
    let run = |script: &str| {
        ucmd("verify-fixes")
            .current_dir(tmp.path())
            .env("TMPDIR", &temp)
            .args([
                "--format",
                "json",
                "--smoke-epochs",
                "1",
                "--",
                &py(),
                script,
            ])
            .run()
    };
    let r = run("ok.py");
    r.code_is(0);
    assert_eq!(left(), 0, "{}", r.stderr_str());
    assert!(r.stdout_json()["smoke"]["dir"].is_null());
    let r = run("quiet.py");
    r.code_is(1);
    assert_eq!(left(), 1, "{}", r.stderr_str());
    let kept = r.stdout_json()["smoke"]["dir"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(kept.starts_with(temp.to_str().unwrap()), "{kept}");
    r.stderr_contains(&format!(
        "a check failed: the smoke's output.log and memory.csv stay in {kept}"
    ));
    assert!(Path::new(&kept).join("output.log").exists());
}

#[test]
fn bad_usage_of_the_command_form_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec!["--skip", "data", "--", "true"],
        vec!["--smoke-seconds", "0", "--", "true"],
        vec!["--smoke-epochs", "3"],
        vec!["--config", "configs/demo_cpu.yaml", "--", "true"],
        vec!["--expect-metric", "x", "--metric-regex", "(", "--", "true"],
    ] {
        let r = ucmd("verify-fixes")
            .args(["--out"])
            .arg(tmp.path())
            .args(&args)
            .run();
        r.code_is(2);
        assert!(!r.stderr_str().is_empty(), "{args:?}");
    }
}
