//! `train run -- CMD` over a plain PyTorch script's own metric lines
//! (`epoch 3: train_loss=0.51 val_loss=0.43`, `epoch 0 val_loss 2.2527`,
//! `val_loss: 0.43`): read with no flag, and the run has a best. Output no
//! reader reads gets a regex only where one made from its lines reads them.

use std::path::Path;
use std::process::{Command, Output};
use testkit::write;

const BIN: &str = env!("CARGO_BIN_EXE_train");

fn train_run(cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("run").args(args).current_dir(cwd);
    for k in testkit::CALLER_ENV {
        cmd.env_remove(k);
    }
    cmd.output().unwrap()
}

fn summary(dir: &Path) -> serde_yaml::Value {
    testkit::yaml(&std::fs::read(dir.join("summary.yaml")).unwrap())
}

/// A real PyTorch regression with argparse, printing its epochs in the
/// form `--form` names.
const SCRIPT: &str = r#"import argparse, torch
p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=4)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--form", default="equals")
a = p.parse_args()
torch.manual_seed(0)
x = torch.randn(256, 8); y = x @ torch.randn(8, 1)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=a.lr)
print(f"lr={a.lr} batch 32 epochs {a.epochs}", flush=True)
for epoch in range(a.epochs):
    for i in range(0, 192, 32):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[i:i + 32]), y[i:i + 32])
        loss.backward(); opt.step()
    with torch.no_grad():
        val = torch.nn.functional.mse_loss(model(x[192:]), y[192:]).item()
    if a.form == "equals":
        print(f"epoch {epoch}: train_loss={loss.item():.4f} val_loss={val:.4f}", flush=True)
    elif a.form == "spaces":
        print(f"epoch {epoch} val_loss {val:.4f}", flush=True)
    elif a.form == "colon":
        print(f"val_loss: {val:.4f}", flush=True)
    else:
        print(f"epoch {epoch} done, validation: {val:.4f} (lower is better)", flush=True)
        continue
    print(f"New best model saved! (val_loss: {val:.4f})", flush=True)
"#;

#[test]
fn a_plain_scripts_metric_lines_give_the_run_its_best() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "plain_train.py", SCRIPT);
    let py = testkit::python_arg();
    for (form, first_step) in [("equals", 0), ("spaces", 0), ("colon", 1)] {
        let out = train_run(
            tmp.path(),
            &[
                "--out",
                form,
                "--quiet",
                "--",
                &py,
                "plain_train.py",
                "--form",
                form,
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{form}: {err}");
        assert!(!err.contains("never reported"), "{form}: {err}");
        let s = summary(&tmp.path().join(form));
        assert_eq!(s["metric"]["name"], "val_loss", "{form}: {s:?}");
        assert_eq!(s["metric"]["how"], "found", "{form}: {s:?}");
        let best = s["best"]["value"].as_f64().unwrap();
        assert!(best > 0.0 && best < 100.0, "{form}: {s:?}");
        // One report an epoch: the remark after it is not a second.
        let rows = std::fs::read_to_string(tmp.path().join(form).join("metrics.csv")).unwrap();
        let steps: Vec<&str> = rows
            .lines()
            .filter(|l| l.contains(",val_loss,"))
            .map(|l| l.split(',').nth(3).unwrap())
            .collect();
        let want: Vec<String> = (first_step..first_step + 4)
            .map(|n| n.to_string())
            .collect();
        assert_eq!(steps, want, "{form}: {rows}");
        if form == "equals" {
            assert_eq!(s["metric"]["seen"][0], "train_loss", "{s:?}");
        }
    }
}

#[test]
fn no_regex_is_suggested_that_does_not_read_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "plain_train.py", SCRIPT);
    let py = testkit::python_arg();
    // `validation: 0.41` names no result a regex could be sure of.
    let out = train_run(
        tmp.path(),
        &[
            "--out",
            "other",
            "--quiet",
            "--",
            &py,
            "plain_train.py",
            "--form",
            "other",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("no metric was read from its output: print a line per evaluation"),
        "{err}"
    );
    assert!(
        err.contains("or give --metric NAME and --metric-regex with one group around its value"),
        "{err}"
    );
    assert!(!err.contains("--metric-regex '"), "{err}");
    // Named, it is found in its line, and the regex shown reads it there.
    let out = train_run(
        tmp.path(),
        &[
            "--out",
            "named",
            "--quiet",
            "--metric",
            "validation",
            "--",
            &py,
            "plain_train.py",
            "--form",
            "other",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let fix = err
        .split("e.g. ")
        .nth(1)
        .and_then(|r| r.lines().next())
        .unwrap_or_else(|| panic!("no fix in {err}"));
    assert_eq!(
        fix,
        "--metric validation --metric-regex 'validation:? *([0-9.]+)'"
    );
    assert!(
        err.contains("reads it from `epoch 3 done, validation: "),
        "{err}"
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{BIN} run --out fixed --quiet {fix} -- {py} plain_train.py --form other"
        ))
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = summary(&tmp.path().join("fixed"));
    assert_eq!(s["metric"]["reported"], true, "{s:?}");
}
