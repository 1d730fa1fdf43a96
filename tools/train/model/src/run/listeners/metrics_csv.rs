//! metrics.csv (train-metrics/v1): one row per epoch, each written whole and
//! flushed. A resumed run keeps the rows of the epochs before the one it
//! restarts at and drops a torn last line.

use crate::training::events::{Event, Listener};
use common::wire::train::EpochRow;
use std::io::Write;
use std::path::Path;

pub struct MetricsCsv {
    file: std::fs::File,
}

impl MetricsCsv {
    /// Opens `path` keeping only whole rows of epochs before `first_epoch`
    /// (rewritten atomically); returns them too.
    pub fn open(path: &Path, first_epoch: u32) -> anyhow::Result<(MetricsCsv, Vec<EpochRow>)> {
        let name = path.display().to_string();
        let old = match std::fs::read_to_string(path) {
            Ok(t) => EpochRow::read_all(&name, &t)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(common::bad_input!("{name}: cannot read: {e}")),
        };
        let kept: Vec<EpochRow> = old.into_iter().filter(|r| r.epoch < first_epoch).collect();
        let mut text = EpochRow::header();
        text.push('\n');
        for r in &kept {
            text += &r.to_csv_line();
        }
        common::files::write_atomic(path, text.as_bytes())?;
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok((MetricsCsv { file }, kept))
    }
}

impl Listener for MetricsCsv {
    fn on(&mut self, event: &Event) -> anyhow::Result<()> {
        if let Event::EpochEnd(r) = event {
            self.file.write_all(r.to_csv_line().as_bytes())?;
            self.file.flush()?;
        }
        Ok(())
    }
}
