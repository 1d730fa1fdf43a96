//! The rows a program appends to `$TRAINGUARD_TRIAL_DIR/metrics.csv`: a
//! header line, then one row per report (train's own metrics.csv reads the
//! same way). Read as it grows: each call takes the bytes appended since the
//! last, and a last line without its newline waits for the rest.

use super::{number, Report, Source, Steps, STEP_KEYS};
use common::wire::metric::Metric;

/// A line longer than this is not a metrics row: it is dropped (up to its
/// newline) rather than held in memory.
const MAX_LINE: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct CsvRows {
    /// The start of a line whose newline has not come yet.
    pending: Vec<u8>,
    /// Inside a line past MAX_LINE: skip to its newline.
    skipping: bool,
    header: Option<Vec<String>>,
    steps: Steps,
}

impl CsvRows {
    pub fn new() -> CsvRows {
        CsvRows::default()
    }

    /// The reports in the complete lines of `appended` (with what an
    /// earlier call left pending before it). The first non-empty line is
    /// the header; a row's `epoch` column (else `step`, `global_step`,
    /// `_step`) is its step, every other column with a number is a report.
    /// Empty cells and cells that are not numbers report nothing; a row
    /// that repeats the header (a program restarted onto the same file) is
    /// skipped.
    pub fn push(&mut self, appended: &[u8]) -> Vec<Report> {
        let mut reports = Vec::new();
        let mut rest = appended;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            let (line, after) = rest.split_at(nl);
            rest = &after[1..];
            if self.skipping {
                self.skipping = false;
                continue;
            }
            let mut whole = std::mem::take(&mut self.pending);
            whole.extend_from_slice(line);
            if whole.len() <= MAX_LINE {
                self.line(&String::from_utf8_lossy(&whole), &mut reports);
            }
        }
        if !self.skipping {
            self.pending.extend_from_slice(rest);
            if self.pending.len() > MAX_LINE {
                self.pending.clear();
                self.skipping = true;
            }
        }
        reports
    }

    fn line(&mut self, line: &str, reports: &mut Vec<Report>) {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            return;
        }
        let cells = cells(line);
        let Some(header) = &self.header else {
            let names = cells
                .iter()
                .map(|c| c.trim_start_matches('\u{feff}').trim().to_string())
                .collect();
            self.header = Some(names);
            return;
        };
        if cells
            .iter()
            .map(|c| c.trim())
            .eq(header.iter().map(String::as_str))
        {
            return;
        }
        let value_of = |name: &str| {
            header
                .iter()
                .position(|h| h == name)
                .and_then(|i| cells.get(i))
                .and_then(|c| number::whole(c))
        };
        let at = STEP_KEYS.iter().find_map(|k| value_of(k));
        let epoch = value_of("epoch");
        for (name, cell) in header.iter().zip(&cells) {
            if name.is_empty() || STEP_KEYS.contains(&name.as_str()) {
                continue;
            }
            let Some(value) = number::whole(cell) else {
                continue;
            };
            let step = self.steps.next(name, at);
            reports.push(Report {
                metric: Metric::from_name(name),
                value,
                step,
                epoch,
                at,
                source: Source::Csv,
            });
        }
    }
}

/// A CSV line's cells (RFC 4180 quoting; a row is one line here).
fn cells(line: &str) -> Vec<String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(line.as_bytes());
    let mut record = csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => record.iter().map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triples(reports: &[Report]) -> Vec<(String, f64, u64)> {
        reports
            .iter()
            .map(|r| (r.metric.to_string(), r.value, r.step))
            .collect()
    }

    fn t(name: &str, value: f64, step: u64) -> (String, f64, u64) {
        (name.to_string(), value, step)
    }

    #[test]
    fn a_header_then_rows_as_they_are_appended() {
        let mut rows = CsvRows::new();
        assert!(rows.push(b"epoch,val_loss,acc").is_empty());
        assert!(
            rows.push(b"uracy\n1,0.5,0.7").is_empty(),
            "a torn row waits"
        );
        assert_eq!(
            triples(&rows.push(b"\n2,0.4,\n")),
            [
                t("val_loss", 0.5, 1),
                t("accuracy", 0.7, 1),
                t("val_loss", 0.4, 2)
            ]
        );
        let r = rows.push(b"3,nan,x\r\n\n");
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].metric.as_str(), r[0].step), ("val_loss", 3));
        assert!(r[0].value.is_nan(), "a non-finite value is reported");
        // The header again (a program restarted onto the file): skipped.
        assert!(rows.push(b"epoch,val_loss,accuracy\n").is_empty());
        assert_eq!(
            triples(&rows.push(b"4,0.3,0.8\n")),
            [t("val_loss", 0.3, 4), t("accuracy", 0.8, 4)]
        );
    }

    #[test]
    fn trains_own_metrics_csv() {
        use common::wire::Versioned;
        let header = common::wire::train::EpochRow::header();
        let row = common::wire::train::EpochRow::example();
        let mut rows = CsvRows::new();
        let text = format!("{header}\n{}", row.to_csv_line());
        let reports = rows.push(text.as_bytes());
        let val = reports
            .iter()
            .find(|r| r.metric == Metric::ValLoss)
            .unwrap();
        assert_eq!((val.value, val.step), (row.val_loss, row.epoch as u64));
        assert!(reports.iter().all(|r| r.metric.as_str() != "epoch"));
    }

    #[test]
    fn no_step_column_counts_rows_and_quoted_cells_are_read() {
        let mut rows = CsvRows::new();
        let text = b"\xef\xbb\xbf\"loss\",note\n0.9,\"a, b\"\n\"0.8\",\n";
        assert_eq!(
            triples(&rows.push(text)),
            [t("loss", 0.9, 1), t("loss", 0.8, 2)]
        );
    }

    #[test]
    fn an_endless_line_is_dropped_not_held() {
        let mut rows = CsvRows::new();
        rows.push(b"step,loss\n");
        let chunk = vec![b'1'; MAX_LINE / 2 + 1];
        for _ in 0..4 {
            assert!(rows.push(&chunk).is_empty());
            assert!(rows.pending.len() <= MAX_LINE);
        }
        assert!(
            rows.push(b"\n").is_empty(),
            "the long line's end is dropped too"
        );
        assert_eq!(triples(&rows.push(b"5,0.1\n")), [t("loss", 0.1, 5)]);
    }
}
