//! Each macro against what W&B's agent gives (worked out from its code; the
//! whole table recorded from the real agent is tests/wandb_expansions.rs).

use super::*;
use serde_json::json;

fn params() -> Vec<(String, Value)> {
    vec![
        ("lr".into(), json!(0.001)),
        ("batch_size".into(), json!(32)),
        ("use_amp".into(), json!(true)),
        ("compile".into(), json!(false)),
        ("name".into(), json!("resnet 50")),
        ("layers".into(), json!([64, "a"])),
        ("nothing".into(), json!(null)),
    ]
}

fn env(name: &str) -> Option<String> {
    (name == "DATA").then(|| "/data".to_string())
}

fn run(command: &[&str], config: Option<&str>) -> anyhow::Result<Vec<String>> {
    let params = params();
    let ctx = Context {
        params: &params,
        program: "train.py",
        interpreter: "/venv/bin/python",
        args_json_file: "trials/0003/params.json",
        config,
        env: &env,
    };
    let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
    expand(Some(&command), &ctx)
}

fn ok(command: &[&str]) -> Vec<String> {
    run(command, Some("trials/0003/config.yaml")).unwrap()
}

fn refused(command: &[&str], config: Option<&str>) -> String {
    let err = run(command, config).unwrap_err();
    assert_eq!(common::exit::code_of(&err), common::exit::BAD_INPUT);
    format!("{err:#}")
}

#[test]
fn the_default_command() {
    let params = params();
    let ctx = Context {
        params: &params[..1],
        program: "train.py",
        interpreter: "python3",
        args_json_file: "",
        config: None,
        env: &env,
    };
    let want = ["/usr/bin/env", "python3", "train.py", "--lr=0.001"];
    assert_eq!(expand(None, &ctx).unwrap(), want);
    assert_eq!(
        expand(Some(&[]), &ctx).unwrap(),
        want,
        "W&B: `command or DEFAULT`"
    );
}

#[test]
fn single_value_macros() {
    assert_eq!(ok(&["${env}"]), ["/usr/bin/env"]);
    assert_eq!(ok(&["${interpreter}"]), ["/venv/bin/python"]);
    assert_eq!(ok(&["${program}"]), ["train.py"]);
    assert_eq!(ok(&["${args_json_file}"]), ["trials/0003/params.json"]);
    assert_eq!(
        ok(&["python", "main.py", "--config", "${config}"]),
        ["python", "main.py", "--config", "trials/0003/config.yaml"]
    );
}

#[test]
fn the_argument_forms() {
    assert_eq!(
        ok(&["${args}"]),
        [
            "--lr=0.001",
            "--batch_size=32",
            "--use_amp=True",
            "--compile=False",
            "--name=resnet 50",
            "--layers=[64, 'a']",
            "--nothing=None"
        ]
    );
    assert_eq!(
        ok(&["${args_no_hyphens}"]),
        [
            "lr=0.001",
            "batch_size=32",
            "use_amp=True",
            "compile=False",
            "name=resnet 50",
            "layers=[64, 'a']",
            "nothing=None"
        ]
    );
    assert_eq!(
        ok(&["${args_no_boolean_flags}"]),
        [
            "--lr=0.001",
            "--batch_size=32",
            "--use_amp",
            "--name=resnet 50",
            "--layers=[64, 'a']",
            "--nothing=None"
        ]
    );
    assert_eq!(
        ok(&["${args_no_equals}"])[..8],
        [
            "--lr",
            "0.001",
            "--batch_size",
            "32",
            "--use_amp",
            "True",
            "--compile",
            "False"
        ]
    );
    assert_eq!(ok(&["${args_append_hydra}"])[0], "+lr=0.001");
    assert_eq!(ok(&["${args_override_hydra}"])[0], "++lr=0.001");
    assert_eq!(
        ok(&["${args_json}"]),
        [
            r#"{"lr": 0.001, "batch_size": 32, "use_amp": true, "compile": false, "name": "resnet 50", "layers": [64, "a"], "nothing": null}"#
        ]
    );
    assert_eq!(args_json(&params()), ok(&["${args_json}"])[0]);
    assert_eq!(args_json(&[]), "{}");
}

#[test]
fn envvar_anywhere_in_an_item() {
    assert_eq!(
        ok(&[
            "${envvar:DATA}",
            "--data=${envvar:DATA}/x${envvar:DATA}",
            "${envvar:UNSET_1}"
        ]),
        ["/data", "--data=/data/x/data", "UNSET_1"]
    );
    // Not W&B's NAME pattern: left as written, inside a longer item.
    assert_eq!(
        ok(&["x${envvar:lower}", "${envvar:A"]),
        ["x${envvar:lower}", "${envvar:A"]
    );
    let m = refused(&["${envvar:lower}"], None);
    assert!(
        m.contains("unknown macro `${envvar:lower}` (${envvar:NAME} takes a NAME of upper-case"),
        "{m}"
    );
}

#[test]
fn mistakes_wandb_passes_on_are_refused() {
    let m = refused(&["python", "${nope}"], None);
    assert!(
        m.starts_with("command: unknown macro `${nope}`; the macros are ${env}, ${interpreter},"),
        "{m}"
    );
    assert!(m.ends_with("${envvar:NAME}, ${config}, ${resume}"), "{m}");
    let m = refused(&["--lr=${args}"], None);
    assert!(
        m.starts_with("command: `--lr=${args}`: a macro is expanded only as a whole item"),
        "{m}"
    );
    assert!(m.contains("`${args}` inside"), "{m}");
    let m = refused(&["--config=${config}"], Some("c.yaml"));
    assert!(m.contains("`${config}` inside"), "{m}");
    let m = refused(&["python", "main.py", "--config", "${config}"], None);
    assert!(
        m.starts_with("command: `${config}` needs a config: give the sweep --config BASE.yaml"),
        "{m}"
    );
    refused(&["${}"], None);
    refused(&["${args} ${program}"], None);
}

#[test]
fn other_items_pass_as_written() {
    assert_eq!(
        ok(&["bash", "-c", "echo ${HOME} $x {config} ${", "", "$"]),
        ["bash", "-c", "echo ${HOME} $x {config} ${", "", "$"]
    );
}

#[test]
fn whether_the_args_json_file_is_written() {
    let c = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(uses_args_json_file(Some(&c(&[
        "python",
        "${args_json_file}"
    ]))));
    assert!(!uses_args_json_file(Some(&c(&[
        "python",
        "--f=${args_json_file}"
    ]))));
    assert!(!uses_args_json_file(None));
}
