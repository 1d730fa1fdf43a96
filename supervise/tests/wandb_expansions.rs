//! Every macro expansion recorded from W&B's own agent (wandb 0.31's
//! `Agent._command_run` with only the process start replaced: see
//! tests/data/wandb_expansions.py, which wrote tests/data/wandb_expansions.json)
//! against ours. Where W&B passes a mistake on (an unknown macro dropped, a
//! macro inside a longer item passed as written) we refuse the command; the
//! test checks that too, and that the rest of W&B's line is ours.

use serde_json::Value;
use supervise::command::{expand, Context};

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_recorded_wandb_expansion() {
    let text = include_str!("data/wandb_expansions.json");
    let f: Value = serde_json::from_str(text).unwrap();
    let params: Vec<(String, Value)> = f["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().to_string(), p[1].clone()))
        .collect();
    let vars = f["env"].as_object().unwrap().clone();
    let env = move |name: &str| vars.get(name).and_then(|v| v.as_str()).map(String::from);
    let cases = f["cases"].as_array().unwrap();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let mut refused = 0;
    for case in cases {
        let with = case["with_params"].as_bool().unwrap();
        let ctx = Context {
            params: if with { &params } else { &[] },
            program: f["program"].as_str().unwrap(),
            interpreter: f["interpreter"].as_str().unwrap(),
            args_json_file: f["args_json_file"].as_str().unwrap(),
            config: None,
            env: &env,
        };
        let command = (!case["command"].is_null()).then(|| strings(&case["command"]));
        let wandb = strings(&case["expansion"]);
        let ours = expand(command.as_deref(), &ctx);
        let command = command.unwrap_or_default();
        let mistakes = ["${unknown_macro}", "--lr=${args}", "${args}x"];
        if command.iter().any(|i| mistakes.contains(&i.as_str())) {
            let err = ours.expect_err("a mistake W&B passes on is refused");
            assert_eq!(common::exit::code_of(&err), common::exit::BAD_INPUT);
            // W&B drops the unknown macro and keeps the others as written.
            let kept: Vec<String> = command
                .iter()
                .filter(|i| *i != "${unknown_macro}")
                .cloned()
                .collect();
            assert_eq!(wandb, kept);
            let fine: Vec<String> = kept.into_iter().filter(|i| i == "plain").collect();
            assert_eq!(expand(Some(&fine), &ctx).unwrap(), ["plain"]);
            refused += 1;
            continue;
        }
        assert_eq!(ours.unwrap(), wandb, "{case}");
    }
    assert_eq!(refused, 2);
}
