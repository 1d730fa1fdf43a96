//! GPU memory tiers (`tiers/v1`): what to run on a GPU of a given size. The
//! default table is seed 002's auto-scaling (A100-class, T4/V100-class,
//! smaller); a user replaces it with a `tiers/v1` file (`memdiag --tiers
//! FILE`). Reading one and looking a GPU up is `common::tiers`'.

use super::Versioned;
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "tiers/v1";

/// One row of the table: GPUs with at least `min_total_gib` of memory get
/// this model size, batch size and cap on training examples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    pub min_total_gib: f64,
    pub model_size: String,
    pub batch_size: u32,
    pub max_train_examples: u64,
}

/// What memdiag recommends for one GPU; the tier it fell in, copied out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recommendation {
    pub model_size: String,
    pub batch_size: u32,
    pub max_train_examples: u64,
    /// The tier's threshold, so a reader sees why this tier was chosen.
    pub min_total_gib: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierTable {
    pub schema: String,
    pub tiers: Vec<Tier>,
}

impl Versioned for TierTable {
    const SCHEMA: &'static str = SCHEMA;
    fn example() -> Self {
        TierTable::default()
    }
}

impl Default for TierTable {
    /// Seed 002: `>= 35 GiB` medium/16/100000, `>= 14 GiB` small/6/50000,
    /// else tiny/4/30000.
    fn default() -> Self {
        let tier = |min, size: &str, batch, examples| Tier {
            min_total_gib: min,
            model_size: size.to_string(),
            batch_size: batch,
            max_train_examples: examples,
        };
        TierTable {
            schema: SCHEMA.to_string(),
            tiers: vec![
                tier(35.0, "medium", 16, 100_000),
                tier(14.0, "small", 6, 50_000),
                tier(0.0, "tiny", 4, 30_000),
            ],
        }
    }
}
