//! The time of single draws on a study as it stands (issue 44's TPE
//! cost): loads the study from a journal, takes its search space from its
//! first trial's distributions, and times `rounds` draws of the next trial
//! by TPE (multivariate, Optuna's defaults with the start-up a sweep of that
//! many trials has) and by random sampling, printing one JSON line:
//!
//!     draw_cost JOURNAL STUDY [rounds]
//!     {"trials": 28000, "tpe_ms": [...], "random_ms": [...]}
//!
//! bench/draw_cost.py runs it on generated studies of several sizes, beside
//! Optuna's and Rustuna's TPE.

use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::time::Instant;
use sweep::journal::Journal;
use sweep::sampler::{build, Method, SearchSpace, TpeVariant};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, name, rest @ ..] = args.as_slice() else {
        anyhow::bail!("usage: draw_cost JOURNAL STUDY [rounds]");
    };
    let rounds: usize = rest.first().map_or(Ok(5), |r| r.parse())?;
    let study = Journal::open(std::path::Path::new(path))?
        .load(name)?
        .context("no such study")?;
    let first = study.trials.first().context("the study has no trial")?;
    let space = SearchSpace {
        params: first
            .distributions
            .iter()
            .map(|(k, d)| (k.clone(), d.clone()))
            .collect(),
        fixed: BTreeMap::new(),
    };
    let n = study.trials.len() as u64;
    let mut out = serde_json::Map::new();
    out.insert("trials".into(), n.into());
    for (key, method) in [
        ("tpe_ms", Method::Bayes(TpeVariant::Multivariate)),
        ("random_ms", Method::Random),
    ] {
        let sampler = build(method, &space, 0, n + 1)?;
        let ms: Vec<f64> = (0..rounds)
            .map(|r| {
                let t0 = Instant::now();
                sampler
                    .sample(&space, &study.trials, study.direction, n + r as u64)
                    .map(|_| t0.elapsed().as_secs_f64() * 1000.0)
            })
            .collect::<Result<_>>()?;
        out.insert(key.into(), ms.into());
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
