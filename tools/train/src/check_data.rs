//! `train check-data --config CFG`: the pre-training data pass alone (seed
//! 004), for verify-fixes: opens the datasets the config names (honouring the
//! caps), checks shapes, dtypes, NaN/inf and labels, and prints the class
//! balance. Prints `train-data/v1` YAML; exit 0 when the data is usable, 2
//! with the problem otherwise.

use crate::data;
use common::config::{Config, Task};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use tch::Kind;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_name = "CFG")]
    config: PathBuf,
}

#[derive(Serialize)]
struct Report {
    schema: &'static str,
    source: String,
    train_examples: i64,
    val_examples: i64,
    /// Label -> count, classification only.
    class_counts: Option<BTreeMap<String, BTreeMap<i64, i64>>>,
}

pub fn run(args: &Args) -> anyhow::Result<u8> {
    let config = Config::load(&common::input::read(&args.config)?)?.config;
    let (train, val) = data::load(&config)?;
    crate::trainer::check_data(&config, &train, "training")?;
    crate::trainer::check_data(&config, &val, "validation")?;
    let counts = |d: &data::Dataset| -> BTreeMap<i64, i64> {
        (0..config.num_labels as i64)
            .map(|k| (k, d.target.eq(k).sum(Kind::Int64).int64_value(&[])))
            .collect()
    };
    let report = Report {
        schema: "train-data/v1",
        source: config
            .data
            .path
            .as_ref()
            .map_or("synthetic".to_string(), |p| p.display().to_string()),
        train_examples: train.len(),
        val_examples: val.len(),
        class_counts: (config.task == Task::Classification).then(|| {
            [
                ("training".to_string(), counts(&train)),
                ("validation".to_string(), counts(&val)),
            ]
            .into()
        }),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(serde_yaml::to_string(&report)?.as_bytes())?;
    out.flush()?;
    Ok(common::exit::OK)
}
