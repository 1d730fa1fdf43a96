//! The time of single hyperband decisions on a study as it stands (issue
//! 44): loads the study from a journal, takes its last trial's curve as a
//! running trial's, and times `rounds` decisions at W&B's `min_iter: 1,
//! eta: 3` bands, each way: `decide` on all the other trials (every
//! trial's history built at each decision) and `decide_kept` with what it
//! keeps between calls (warmed by one call first), printing one JSON line:
//!
//!     prune_cost JOURNAL STUDY [rounds]
//!     {"trials": 50000, "decide_ms": [...], "kept_ms": [...], "kept_first_ms": ..., "same": true}

use anyhow::{Context, Result};
use std::sync::Arc;
use std::time::Instant;
use sweep::journal::Journal;
use sweep::pruner::{Hyperband, Kept, Pruner};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, name, rest @ ..] = args.as_slice() else {
        anyhow::bail!("usage: prune_cost JOURNAL STUDY [rounds]");
    };
    let rounds: usize = rest.first().map_or(Ok(5), |r| r.parse())?;
    let study = Journal::open(std::path::Path::new(path))?
        .load(name)?
        .context("no such study")?;
    let me = study.trials.last().context("the study has no trial")?;
    let curve = me.intermediate.clone();
    let h = Hyperband::from_min_iter(1, 3.0, true).map_err(anyhow::Error::msg)?;
    let ms = |t0: Instant| t0.elapsed().as_secs_f64() * 1000.0;
    let mut fresh = Vec::new();
    let mut answer = None;
    for _ in 0..rounds {
        let t0 = Instant::now();
        let others: Vec<Arc<_>> = study.trials[..study.trials.len() - 1].to_vec();
        answer = Some(h.decide(&curve, &others, study.direction));
        fresh.push(ms(t0));
    }
    // The trial as if running: the rest of the study, then it.
    let mut kept = Kept::default();
    let trials = &study.trials[..];
    let t0 = Instant::now();
    let first = h.decide_kept(&curve, trials, me.number, &mut kept, study.direction);
    let first_ms = ms(t0);
    let mut warm = Vec::new();
    for _ in 0..rounds {
        let t0 = Instant::now();
        let d = h.decide_kept(&curve, trials, me.number, &mut kept, study.direction);
        warm.push(ms(t0));
        anyhow::ensure!(
            Some(&d) == answer.as_ref() && d == first,
            "the two ways decided apart"
        );
    }
    let out = serde_json::json!({
        "trials": study.trials.len(), "decide_ms": fresh, "kept_ms": warm,
        "kept_first_ms": first_ms, "same": true,
    });
    println!("{out}");
    Ok(())
}
