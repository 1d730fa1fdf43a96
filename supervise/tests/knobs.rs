//! The fix's knobs in the flags of real programs: an argparse script and
//! Hugging Face's `HfArgumentParser(TrainingArguments)` (tests/programs/),
//! their `--help` read by `read_help`, and each turned command run for
//! real, its values as argparse read them printed by the program.

use diagnose::keys::Scalar;
use diagnose::knobs::{Knob, Turn};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use supervise::knobs::{self, Defined, Form, Source};

fn program(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(name)
}

/// The venv's python; the HF program needs transformers (`just setup`).
fn python_with(module: &str) -> String {
    let py = testkit::python();
    let ok = Command::new(&py)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import {module}: run `just setup`",
        py.display()
    );
    py.display().to_string()
}

fn argv(py: &str, script: &str, args: &[&str]) -> Vec<String> {
    [py, &program(script).display().to_string()]
        .into_iter()
        .map(String::from)
        .chain(args.iter().map(|a| a.to_string()))
        .collect()
}

/// Runs `argv`; what the program read, as JSON.
fn read(argv: &[String]) -> serde_json::Value {
    let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn turn(knob: Knob, value: Scalar) -> Turn {
    Turn {
        knob,
        value,
        why: "test".into(),
    }
}

fn ladder() -> Vec<Turn> {
    vec![
        turn(Knob::Batch, Scalar::Int(32)),
        turn(Knob::Accumulation, Scalar::Int(2)),
        turn(Knob::Checkpointing, Scalar::Bool(true)),
        turn(Knob::CompileMode, Scalar::Str("default".into())),
        turn(Knob::Precision, Scalar::Str("bf16".into())),
    ]
}

/// The help at 80 columns, as a terminal-less run prints it: wrapped.
fn wrapped_help(argv: &[String]) -> String {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .arg("--help")
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn hugging_faces_training_arguments() {
    let py = python_with("transformers");
    let cmd = argv(
        &py,
        "hf_train.py",
        &[
            "--per_device_train_batch_size",
            "64",
            "--fp16",
            "--output_dir",
            "out",
        ],
    );
    let help = knobs::read_help(&cmd, None, knobs::HELP_TIMEOUT).expect("its help");
    let d = Defined::parse(&help);
    let bs = d.get("--per_device_train_batch_size").unwrap();
    assert_eq!(bs.names[1], "--per-device-train-batch-size");
    assert_eq!(bs.form, Form::Value { choices: vec![] });
    assert_eq!(bs.default.as_deref(), Some("8"));
    let gc = d.get("--gradient_checkpointing").unwrap();
    assert_eq!(gc.form, Form::OptionalBool);
    assert_eq!(d.get("--bf16").unwrap().form, Form::OptionalBool);
    assert_eq!(d.get("--bf16").unwrap().default.as_deref(), Some("False"));
    assert!(matches!(
        d.get("--torch_compile_mode").unwrap().form,
        Form::Value { .. }
    ));
    assert!(d.flags.len() > 100, "{} flags", d.flags.len());
    // The same entries from the help wrapped at 80 columns.
    assert_eq!(Defined::parse(&wrapped_help(&cmd)), d);

    let found = knobs::found(&d, &cmd, &[]);
    let places: Vec<_> = found.iter().map(|f| f.found.place.as_str()).collect();
    assert_eq!(
        places,
        [
            "--per_device_train_batch_size",
            "--gradient_accumulation_steps",
            "--gradient_checkpointing",
            "--torch_compile_mode",
            "--bf16/--fp16"
        ]
    );
    assert_eq!(found[0].found.value, Some(Scalar::Int(64)));
    assert_eq!(
        (found[1].found.value.clone(), found[1].source),
        (Some(Scalar::Int(1)), Source::Default)
    );
    assert_eq!(found[4].found.value, Some(Scalar::Str("fp16".into())));

    let fixed = knobs::turn(&cmd, &d, &ladder(), &[]).unwrap();
    let fixed =
        knobs::with_flag(&fixed, &d, "resume_from_checkpoint", "out/checkpoint-10").unwrap();
    let got = read(&fixed);
    let want = serde_json::json!({
        "per_device_train_batch_size": 32, "gradient_accumulation_steps": 2,
        "gradient_checkpointing": true, "torch_compile_mode": "default",
        "bf16": true, "fp16": false, "output_dir": "out",
        "resume_from_checkpoint": "out/checkpoint-10"
    });
    assert_eq!(got, want, "{fixed:?}");
    assert_eq!(
        knobs::value_of(&fixed, &["--output_dir", "--output-dir"]).as_deref(),
        Some("out")
    );
}

#[test]
fn an_argparse_script() {
    let py = python_with("json");
    let cmd = argv(
        &py,
        "argparse_train.py",
        &[
            "data.txt",
            "-b",
            "64",
            "--lr",
            "-0.5",
            "--mixed_precision=fp16",
        ],
    );
    let help = knobs::read_help(&cmd, None, knobs::HELP_TIMEOUT).expect("its help");
    let d = Defined::parse(&help);
    assert_eq!(Defined::parse(&wrapped_help(&cmd)), d);
    assert_eq!(d.get("-b").unwrap().default.as_deref(), Some("64"));
    assert_eq!(
        d.get("--compile").unwrap().form,
        Form::Switch {
            off: Some("--no-compile".into())
        }
    );
    assert_eq!(
        d.get("--compile_mode").unwrap().default.as_deref(),
        Some("max-autotune")
    );

    let found = knobs::found(&d, &cmd, &[]);
    let values: Vec<_> = found.iter().map(|f| f.found.value.clone()).collect();
    assert_eq!(
        values,
        [
            Some(Scalar::Int(64)),
            Some(Scalar::Int(1)),
            Some(Scalar::Bool(false)),
            Some(Scalar::Str("max-autotune".into())),
            Some(Scalar::Str("fp16".into())),
        ]
    );
    let fixed = knobs::turn(&cmd, &d, &ladder(), &[]).unwrap();
    let got = read(&fixed);
    assert_eq!(
        got,
        serde_json::json!({
            "data": "data.txt", "batch_size": 32, "grad_accum": 2,
            "gradient_checkpointing": true, "mixed_precision": "bf16",
            "compile": true, "compile_mode": "default", "output_dir": null, "lr": -0.5
        }),
        "{fixed:?}"
    );
    // Compile off through the user's name for a knob: BooleanOptionalAction's --no-compile.
    let user = [(Knob::Checkpointing, "compile".to_string())];
    let off = knobs::turn(
        &cmd,
        &d,
        &[turn(Knob::Checkpointing, Scalar::Bool(false))],
        &user,
    )
    .unwrap();
    assert_eq!(read(&off)["compile"], false, "{off:?}");
    // Never a flag it does not define.
    assert_eq!(
        knobs::with_flag(&cmd, &d, "resume_from_checkpoint", "x"),
        None
    );
}

/// An executable shell script in `dir` running `body`.
fn script(dir: &Path, name: &str, body: &str) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    vec![path.display().to_string()]
}

#[test]
fn no_help_from_a_program_that_cannot_give_one() {
    let py = python_with("json");
    let dir = tempfile::tempdir().unwrap();
    let none = |argv: &[String]| knobs::read_help(argv, None, knobs::HELP_TIMEOUT);
    assert_eq!(none(&["/nonexistent/python".into()]), None);
    let fails = vec![py.clone(), "-c".into(), "import no_such_module_here".into()];
    assert_eq!(none(&fails), None);
    assert_eq!(
        none(&script(dir.path(), "plain", "echo no options here")),
        None
    );
    // Past the timeout: killed with what it started, not waited for.
    let t = Instant::now();
    let slow = script(
        dir.path(),
        "slow",
        "sleep 60 & echo 'options:'; echo '  --bs BS'; sleep 60",
    );
    assert_eq!(
        knobs::read_help(&slow, None, Duration::from_millis(500)),
        None
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // Help on stderr, in the working directory given, `--help` first.
    std::fs::write(dir.path().join("help.txt"), "options:\n  --bs BS\n").unwrap();
    let mut cmd = script(dir.path(), "err", "[ \"$1\" = --help ] && cat help.txt >&2");
    cmd.push("--bs=3".into());
    let help = knobs::read_help(&cmd, Some(dir.path()), knobs::HELP_TIMEOUT).unwrap();
    assert_eq!(Defined::parse(&help).flags[0].names, ["--bs"]);
}
