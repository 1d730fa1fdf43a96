//! The metrics a run reports and a sweep ranks trials by: one table of
//! train's metrics.csv columns (`train::EpochRow`), read by the sweep's space
//! check, its driver (a row's value) and its report. A name outside the
//! table is kept as `Other`, for the metrics of programs other than train;
//! train's rows hold no value for it.

use super::train::EpochRow;
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Metric {
    ValLoss,
    TrainLoss,
    Mae,
    Rmse,
    R2,
    Accuracy,
    MacroF1,
    /// A name that is not a column of train's metrics.csv.
    Other(String),
}

/// How a known metric is read from a metrics.csv row.
type Read = fn(&EpochRow) -> Option<f64>;

/// The one table: each metric of train's metrics.csv, its column's name,
/// and its value in a row (None: empty for the task). Messages list the
/// names in this order.
const TABLE: [(Metric, &str, Read); 7] = [
    (Metric::ValLoss, "val_loss", |r| Some(r.val_loss)),
    (Metric::TrainLoss, "train_loss", |r| Some(r.train_loss)),
    (Metric::Mae, "mae", |r| r.mae),
    (Metric::Rmse, "rmse", |r| r.rmse),
    (Metric::R2, "r2", |r| r.r2),
    (Metric::Accuracy, "accuracy", |r| r.accuracy),
    (Metric::MacroF1, "macro_f1", |r| r.macro_f1),
];

impl Metric {
    /// The metric of a name: a known column, else `Other`.
    pub fn from_name(name: &str) -> Metric {
        TABLE
            .into_iter()
            .find(|(_, n, _)| *n == name)
            .map_or_else(|| Metric::Other(name.to_string()), |(m, _, _)| m)
    }

    /// The names of train's metrics.csv columns a sweep can rank by.
    pub fn known_names() -> Vec<&'static str> {
        TABLE.iter().map(|(_, n, _)| *n).collect()
    }

    /// A column of train's metrics.csv.
    pub fn is_known(&self) -> bool {
        !matches!(self, Metric::Other(_))
    }

    pub fn as_str(&self) -> &str {
        match self {
            Metric::Other(name) => name,
            known => TABLE
                .iter()
                .find(|(m, _, _)| m == known)
                .map_or("", |(_, n, _)| *n),
        }
    }

    /// Its value in a metrics.csv row: None when the row leaves it empty,
    /// or for a metric train does not write.
    pub fn value_in(&self, row: &EpochRow) -> Option<f64> {
        TABLE
            .iter()
            .find(|(m, _, _)| m == self)
            .and_then(|(_, _, read)| read(row))
    }
}

impl From<String> for Metric {
    fn from(name: String) -> Metric {
        Metric::from_name(&name)
    }
}

impl From<&str> for Metric {
    fn from(name: &str) -> Metric {
        Metric::from_name(name)
    }
}

impl PartialEq<&str> for Metric {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl From<Metric> for String {
    fn from(m: Metric) -> String {
        m.as_str().to_string()
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Versioned;

    #[test]
    fn every_known_metric_is_a_metrics_csv_column_and_reads_its_cell() {
        let header = EpochRow::header();
        let columns: Vec<&str> = header.split(',').collect();
        let row = EpochRow::example();
        let json = serde_json::to_value(&row).unwrap();
        for name in Metric::known_names() {
            assert!(columns.contains(&name), "{name} not in {header}");
            let m = Metric::from_name(name);
            assert!(m.is_known());
            assert_eq!(m.as_str(), name);
            assert_eq!(m.value_in(&row), json[name].as_f64(), "{name}");
        }
        assert_eq!(
            Metric::known_names().join(", "),
            "val_loss, train_loss, mae, rmse, r2, accuracy, macro_f1"
        );
    }

    #[test]
    fn another_name_is_kept_and_reads_nothing() {
        let m = Metric::from_name("loss/val");
        assert_eq!(m, Metric::Other("loss/val".into()));
        assert!(!m.is_known());
        assert_eq!(m.value_in(&EpochRow::example()), None);
        assert_eq!(format!("[{m:>9}]"), "[ loss/val]");
    }

    #[test]
    fn it_is_written_as_its_name() {
        let yaml =
            serde_yaml::to_string(&vec![Metric::ValLoss, Metric::Other("bleu".into())]).unwrap();
        assert_eq!(yaml, "- val_loss\n- bleu\n");
        let back: Vec<Metric> = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, [Metric::ValLoss, Metric::Other("bleu".into())]);
    }
}
