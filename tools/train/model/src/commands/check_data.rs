//! `train check-data --config CFG`: the pre-training data pass alone (seed
//! 004), for verify-fixes: opens the datasets the config names (honouring the
//! caps), checks shapes, dtypes, NaN/inf and labels, and prints the class
//! balance. Prints `train-data/v1` YAML; exit 0 when the data is usable, 2
//! with the problem otherwise.

use crate::model::data;
use common::config::Config;
use common::wire::train::TrainData;
use common::wire::Versioned;
use std::io::Write;
use train_cli::CheckDataArgs as Args;

pub fn run(args: &Args) -> anyhow::Result<u8> {
    let config = Config::load(&common::input::read(&args.config)?)?.config;
    let (train, val) = data::load(&config)?;
    let train_counts = data::check(&config, &train, "training")?;
    let val_counts = data::check(&config, &val, "validation")?;
    let report = TrainData {
        schema: TrainData::SCHEMA.into(),
        source: config
            .data
            .path
            .as_ref()
            .map_or("synthetic".to_string(), |p| p.display().to_string()),
        train_examples: train.len(),
        val_examples: val.len(),
        class_counts: train_counts
            .zip(val_counts)
            .map(|(t, v)| [("training".to_string(), t), ("validation".to_string(), v)].into()),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(serde_yaml::to_string(&report)?.as_bytes())?;
    out.flush()?;
    Ok(common::exit::OK)
}
