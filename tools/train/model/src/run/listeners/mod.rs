//! The standard listeners of a run. Adding one is a file here and a line in
//! `standard`.

mod console;
mod metrics_csv;
mod plot;
mod summary;

pub use console::Console;
pub use metrics_csv::MetricsCsv;
pub use plot::Plot;
pub use summary::Summary;

use crate::training::events::Listeners;
use common::wire::run_dir::RunDir;
use common::wire::train::EpochRow;

/// Console lines, metrics.csv, curves.png and summary.yaml for the run in
/// `run`, whose epochs from `first_epoch` on are (re)run. Returns the
/// metrics.csv rows kept from before, which the caller emits as `History`.
pub fn standard(run: &RunDir, first_epoch: u32) -> anyhow::Result<(Listeners, Vec<EpochRow>)> {
    let (csv, kept) = MetricsCsv::open(&run.metrics(), first_epoch)?;
    let mut l = Listeners::default();
    l.push(Console::new());
    l.push(csv);
    l.push(Plot::new(run));
    l.push(Summary::new(run));
    Ok((l, kept))
}
