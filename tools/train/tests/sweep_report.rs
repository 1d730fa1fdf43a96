//! `train sweep --report` of a program that takes flags: its columns never
//! mistake a parameter for one of ours, its floats show what tells them
//! apart, and the best trial's command runs it again (best_command.sh).

use serde_json::Value;
use std::process::Command;
use testkit::python_arg as py;
use testkit::train_sweep as sweep;
use testkit::write;

/// A program whose loss follows its flags; `epochs` is its own parameter.
const PROGRAM: &str = "import argparse, math
p = argparse.ArgumentParser()
p.add_argument('--lr', type=float)
p.add_argument('--epochs', type=int)
a = p.parse_args()
print(f'loss {(math.log10(a.lr) + 2.5) ** 2 + 0.01 * a.epochs!r}', flush=True)
";

const SPACE: &str = "program: fast.py
method: random
run_cap: 4
metric: {name: loss, goal: minimize, regex: 'loss ([0-9.e+-]+)'}
parameters:
  lr: {distribution: log_uniform_values, min: 0.0001, max: 0.1}
  epochs: {values: [1, 2]}
";

#[test]
fn a_flag_program_gets_its_best_command_and_columns_of_its_own() {
    let p = tempfile::tempdir().unwrap();
    write(p.path(), "fast.py", PROGRAM);
    write(p.path(), "space.yaml", SPACE);
    let out = sweep(
        p.path(),
        &[
            "--space",
            "space.yaml",
            "--out",
            "s",
            "--interpreter",
            &py(),
            "--parallel",
            "1",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = sweep(p.path(), &["--report", "s", "--format", "table"]);
    let table = String::from_utf8_lossy(&table.stdout);
    // The parameter and our column, side by side under their own names.
    let header = table.lines().nth(1).unwrap();
    assert!(
        header.contains(" params_epochs ") && header.contains(" epochs "),
        "{table}"
    );
    // A log-uniform draw shown by the digits that tell the draws apart.
    let json: Value =
        serde_json::from_slice(&sweep(p.path(), &["--report", "s", "--format", "json"]).stdout)
            .unwrap();
    assert_eq!(json["schema"], "sweep-report/v2");
    let lr = json["trials"][0]["params"]["lr"].as_f64().unwrap();
    let rows = table.split("best command").next().unwrap();
    assert!(!rows.contains(&lr.to_string()), "{lr}: {table}");
    let four: f64 = format!("{lr:.3e}").parse().unwrap();
    assert!(rows.contains(&format!(" {four} ")), "{four}: {table}");
    let csv = sweep(p.path(), &["--report", "s", "--format", "csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert!(
        csv.starts_with("number,state,error_class,params_epochs,params_lr,value,epochs,"),
        "{csv}"
    );
    assert!(
        csv.contains(&lr.to_string()),
        "the CSV keeps every digit: {csv}"
    );

    // The best trial's command runs it again, to the same loss.
    let best = json["best"]["value"].as_f64().unwrap();
    let argv = json["best_command"]["argv"].as_array().unwrap();
    assert!(
        argv.iter()
            .any(|w| w.as_str().unwrap().starts_with("--lr=")),
        "{argv:?}"
    );
    assert!(
        table.contains("best command (best_command.sh): cd "),
        "{table}"
    );
    let script = p.path().join("s/best_command.sh");
    let again = Command::new("sh")
        .arg(&script)
        .current_dir("/")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&again.stdout);
    let loss: f64 = said
        .trim()
        .strip_prefix("loss ")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{said}{}", String::from_utf8_lossy(&again.stderr)));
    assert_eq!(loss, best, "{said}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&script).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "executable: {mode:o}");
}
