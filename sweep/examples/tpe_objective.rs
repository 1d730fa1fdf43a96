//! A sweep loop for bench/tpe_vs_optuna.py, which holds the objective
//! functions: this side samples, the script evaluates. One JSON line of
//! parameters out per trial, one objective value in, so the objectives are
//! written once (in Python, next to Optuna's run of them).
//!
//!     tpe_objective <tpe|tpe-univariate|random|grid> <seed> <n_trials> '<space JSON>' [batch]
//!
//! The space: [{"name", "type": float|int|categorical, "low", "high",
//! "log", "step", "choices"}]. Minimises. `tpe` is `bayes` as a new sweep
//! runs it (Optuna 5's default TPESampler: multivariate, constant liar);
//! `tpe-univariate` is `bayes: {variant: univariate}` (Optuna 4.x's default,
//! Optuna 5's `TPESampler(multivariate=False, constant_liar=False)`).
//! `batch` k (default 1): k trials are drawn, all RUNNING, before their k
//! values are read, as k parallel workers would.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use sweep::sampler::{build, Method, Sampler, SearchSpace, TpeVariant};
use sweep::trial::{Choice, Direction, Distribution, ParamValue, Trial, TrialState};

fn distribution(p: &Value) -> Result<Distribution> {
    let f = |k: &str| p[k].as_f64().with_context(|| format!("{p}: {k}"));
    let log = p["log"].as_bool().unwrap_or(false);
    Ok(match p["type"].as_str() {
        Some("float") => Distribution::Float {
            low: f("low")?,
            high: f("high")?,
            log,
            step: p["step"].as_f64(),
        },
        Some("int") => Distribution::Int {
            low: f("low")? as i64,
            high: f("high")? as i64,
            log,
            step: p["step"].as_i64().unwrap_or(1),
        },
        Some("categorical") => Distribution::Categorical {
            choices: serde_json::from_value::<Vec<Choice>>(p["choices"].clone())?,
        },
        _ => bail!("{p}: type must be float, int or categorical"),
    })
}

fn json(v: &ParamValue) -> Value {
    match v {
        ParamValue::Float(f) => Value::from(*f),
        ParamValue::Int(i) => Value::from(*i),
        ParamValue::Choice(c) => serde_json::to_value(c).unwrap_or(Value::Null),
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (method, seed, n, space, batch) = match args.as_slice() {
        [m, s, n, sp] => (m, s, n, sp, 1),
        [m, s, n, sp, b] => (m, s, n, sp, b.parse::<u64>()?.max(1)),
        _ => bail!(
            "usage: tpe_objective <tpe|tpe-univariate|random|grid> <seed> <n_trials> '<space JSON>' [batch]"
        ),
    };
    let method = match method.as_str() {
        "tpe-univariate" => Method::Bayes(TpeVariant::Univariate),
        m => Method::parse(m)?,
    };
    let seed: u64 = seed.parse()?;
    let n: u64 = n.parse()?;
    let params = serde_json::from_str::<Value>(space)?
        .as_array()
        .context("the space is a JSON list")?
        .iter()
        .map(|p| {
            Ok((
                p["name"].as_str().context("name")?.to_string(),
                distribution(p)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let space = SearchSpace {
        params,
        fixed: BTreeMap::new(),
    };
    // TPE's start-up scaled to the trials, as a sweep of n trials has it.
    let sampler = sampler(method, &space, seed, n)?;

    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut out = std::io::stdout().lock();
    let mut trials: Vec<std::sync::Arc<Trial>> = Vec::new();
    let mut number = 0;
    while number < n {
        // Draw the batch: each draw sees the ones before it as RUNNING.
        let first = trials.len();
        for _ in 0..batch.min(n - number) {
            let params = sampler.sample(&space, &trials, Direction::Minimize, number)?;
            let line: serde_json::Map<String, Value> =
                params.iter().map(|(k, v)| (k.clone(), json(v))).collect();
            writeln!(out, "{}", Value::Object(line))?;
            trials.push(std::sync::Arc::new(Trial {
                number,
                state: TrialState::Running,
                distributions: std::sync::Arc::new(space.params.iter().cloned().collect()),
                params,
                ..Trial::default()
            }));
            number += 1;
        }
        out.flush()?;
        for t in &mut trials[first..] {
            let t = std::sync::Arc::make_mut(t);
            let value: f64 = lines
                .next()
                .context("the driver closed stdin")??
                .trim()
                .parse()?;
            t.state = TrialState::Complete;
            t.value = Some(value);
        }
    }
    Ok(())
}

/// The method's sampler as a sweep of n trials builds it; with
/// TPE_ABOVE_WINDOW=N (0: none) a TPE weighing that many of its worse side
/// (bench/tpe_window.py).
fn sampler(method: Method, space: &SearchSpace, seed: u64, n: u64) -> Result<Box<dyn Sampler>> {
    let Ok(w) = std::env::var("TPE_ABOVE_WINDOW") else {
        return build(method, space, seed, n);
    };
    let Method::Bayes(variant) = method else {
        anyhow::bail!("TPE_ABOVE_WINDOW is for a TPE method");
    };
    let mut tpe = sweep::sampler::TpeSampler::new(seed, variant);
    tpe.n_startup_trials = sweep::sampler::startup_for(n);
    tpe.above_window = Some(w.parse()?).filter(|w: &usize| *w > 0);
    Ok(Box::new(tpe))
}
