//! Our PercentilePruner against Optuna's own, decision for decision: the
//! same recorded curves go into an Optuna study (create_trial + add_trial)
//! and into ours; every (trial, step) prefix of every curve is judged by
//! both, minimizing and maximizing, with MedianPruner's defaults and with a
//! PercentilePruner that uses warm-up, intervals and n_min_trials.
//!
//! Needs Python with optuna ($VIRTUAL_ENV/bin/python, else python3); a
//! missing optuna fails the test (run `just setup`), it is never skipped.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use sweep::pruner::{PercentilePruner, Pruner};
use sweep::trial::{Direction, Trial, TrialState};

const ORACLE: &str = r#"
import json, sys, warnings
warnings.simplefilter("ignore")
try:
    import optuna
except ImportError as e:
    sys.stderr.write(f"cannot import optuna: {e}\n")
    sys.exit(3)
optuna.logging.set_verbosity(optuna.logging.ERROR)
from optuna.trial import TrialState, create_trial

def curve(d):
    return {int(k): float(v) for k, v in d.items()}

out = []
for case in json.load(sys.stdin):
    p = case["pruner"]
    if p is None:
        pruner = optuna.pruners.MedianPruner()
    else:
        pruner = optuna.pruners.PercentilePruner(
            p["percentile"], n_startup_trials=p["n_startup_trials"],
            n_warmup_steps=p["n_warmup_steps"], interval_steps=p["interval_steps"],
            n_min_trials=p["n_min_trials"])
    study = optuna.create_study(direction=case["direction"], pruner=pruner)
    for t in case["study"]:
        state = TrialState[t["state"]]
        value = float(t["value"]) if t["value"] is not None else None
        study.add_trial(create_trial(state=state, value=value, intermediate_values=curve(t["curve"])))
    answers = []
    for c in case["judge"]:
        frozen = create_trial(state=TrialState.RUNNING, intermediate_values=curve(c))
        answers.append(bool(pruner.prune(study, frozen)))
    out.append(answers)
json.dump(out, sys.stdout)
"#;

/// A small deterministic generator (no rand dependency): 64-bit LCG.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// ~20 recorded curves: loss-like decays with noise, some clearly worse
/// (pruning-worthy), ties, NaN and infinite values, gaps and steps from 0,
/// in every finished state.
fn recorded() -> Vec<Trial> {
    let mut rng = Lcg(2024);
    let mut trials = Vec::new();
    for number in 0..20u64 {
        let state = match number {
            3 | 11 => TrialState::Pruned,
            7 => TrialState::Fail,
            15 => TrialState::Running,
            _ => TrialState::Complete,
        };
        let level = if number % 4 == 1 { 2.0 } else { 1.0 };
        let len = if state == TrialState::Pruned {
            3
        } else {
            6 + (number % 5)
        };
        let start = u64::from(number % 3 == 0);
        let mut intermediate = BTreeMap::new();
        for i in 0..len {
            let step = start + i;
            // Trial 9 skips steps 2 and 5; the interval rule must cope.
            if number == 9 && (step == 2 || step == 5) {
                continue;
            }
            let mut v = level * (0.3 + 1.0 / (1.0 + i as f64)) + 0.05 * rng.next();
            // Rounded so that ties with the median happen.
            v = (v * 20.0).round() / 20.0;
            if (number == 5 && i == 2) || (number == 12 && i >= 4) {
                v = f64::NAN;
            }
            if number == 17 && i == 3 {
                v = f64::INFINITY;
            }
            if number == 18 && i == 1 {
                v = f64::NEG_INFINITY;
            }
            intermediate.insert(step, v);
        }
        if number == 19 {
            intermediate = (0..5).map(|s| (s, f64::NAN)).collect();
        }
        let value = (state == TrialState::Complete).then(|| {
            intermediate
                .values()
                .copied()
                .rfind(|v| v.is_finite())
                .unwrap_or(0.0)
        });
        trials.push(Trial {
            number,
            state,
            params: BTreeMap::new(),
            distributions: Default::default(),
            value,
            intermediate,
            user_attrs: Default::default(),
            system_attrs: Default::default(),
            datetime_start: None,
            datetime_complete: None,
            discarded: false,
        });
    }
    trials
}

fn curve_json(c: &BTreeMap<u64, f64>) -> serde_json::Value {
    // Strings, so that NaN and infinities cross JSON (Python's float() reads
    // Rust's "NaN", "inf", "-inf").
    c.iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(format!("{v:?}"))))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

struct Case {
    pruner: PercentilePruner,
    direction: Direction,
    study: Vec<std::sync::Arc<Trial>>,
    judge: Vec<BTreeMap<u64, f64>>,
    label: String,
}

#[test]
fn percentile_pruner_decides_as_optuna() {
    let trials = recorded();
    let custom = PercentilePruner::new(25.0, 2, 2, 3, 2).unwrap();
    let mut cases = Vec::new();
    for pruner in [PercentilePruner::median(), custom] {
        for direction in [Direction::Minimize, Direction::Maximize] {
            for (k, judged) in trials.iter().enumerate() {
                // Every prefix of the curve, the empty one included.
                let points: Vec<(u64, f64)> =
                    judged.intermediate.iter().map(|(s, v)| (*s, *v)).collect();
                let judge: Vec<BTreeMap<u64, f64>> = (0..=points.len())
                    .map(|i| points[..i].iter().copied().collect())
                    .collect();
                // The study as it was when trial k ran (the trials before
                // it), and as it is at the end (all the others).
                let before: Vec<Trial> = trials[..k].to_vec();
                let others: Vec<Trial> = trials
                    .iter()
                    .filter(|t| t.number != judged.number)
                    .cloned()
                    .collect();
                for (when, study) in [("before", before), ("others", others)] {
                    cases.push(Case {
                        pruner: pruner.clone(),
                        direction,
                        study: study.into_iter().map(std::sync::Arc::new).collect(),
                        judge: judge.clone(),
                        label: format!(
                            "{} {direction:?} trial {k} vs {when}",
                            if pruner == PercentilePruner::median() {
                                "median".to_string()
                            } else {
                                format!("{pruner:?}")
                            }
                        ),
                    });
                }
            }
        }
    }

    let input: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| {
            let pruner = (c.pruner != PercentilePruner::median()).then(|| {
                serde_json::json!({
                    "percentile": c.pruner.percentile,
                    "n_startup_trials": c.pruner.n_startup_trials,
                    "n_warmup_steps": c.pruner.n_warmup_steps,
                    "interval_steps": c.pruner.interval_steps,
                    "n_min_trials": c.pruner.n_min_trials,
                })
            });
            serde_json::json!({
                "pruner": pruner,
                "direction": match c.direction {
                    Direction::Minimize => "minimize",
                    Direction::Maximize => "maximize",
                },
                "study": c.study.iter().map(|t| serde_json::json!({
                    "state": t.state.as_str(),
                    "value": t.value,
                    "curve": curve_json(&t.intermediate),
                })).collect::<Vec<_>>(),
                "judge": c.judge.iter().map(curve_json).collect::<Vec<_>>(),
            })
        })
        .collect();

    let py = testkit::python();
    let mut child = Command::new(&py)
        .args(["-c", ORACLE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; run just setup", py.display()));
    let text = serde_json::to_string(&input).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(3) {
        panic!(
            "{} has no optuna ({}); run just setup",
            py.display(),
            stderr.trim()
        );
    }
    assert!(out.status.success(), "the Optuna oracle failed: {stderr}");
    let answers: Vec<Vec<bool>> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answers.len(), cases.len());

    let mut asked = 0;
    let mut pruned = 0;
    let mut disagree = Vec::new();
    for (case, optuna) in cases.iter().zip(&answers) {
        assert_eq!(optuna.len(), case.judge.len());
        for (curve, &expected) in case.judge.iter().zip(optuna) {
            let ours = case
                .pruner
                .decide(curve, &case.study, case.direction)
                .is_prune();
            asked += 1;
            pruned += usize::from(expected);
            if ours != expected {
                disagree.push(format!(
                    "{}: curve {curve:?}: optuna {expected}, ours {ours}",
                    case.label
                ));
            }
        }
    }
    assert!(
        disagree.is_empty(),
        "{} of {asked} decisions differ from Optuna's:\n{}",
        disagree.len(),
        disagree.join("\n")
    );
    eprintln!("{asked} decisions agree with Optuna, {pruned} of them prune");
    // The curves must exercise both answers, or agreement proves little.
    assert!(
        pruned > asked / 10 && pruned < asked * 9 / 10,
        "{pruned} of {asked} pruned"
    );
}
