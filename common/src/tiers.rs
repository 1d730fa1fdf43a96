//! Reading a `tiers/v1` table (its types are `wire::tiers`', re-exported
//! here) and the tier a GPU of a given size falls in; memdiag's
//! recommendation per GPU comes from it.

use crate::bad_input;
use crate::input::Input;

pub use crate::wire::tiers::*;

impl TierTable {
    /// Parses and checks a `tiers/v1` file. Tiers may come in any order; they
    /// are kept largest threshold first.
    pub fn parse(input: &Input) -> anyhow::Result<TierTable> {
        let name = &input.name;
        if input.text.trim().is_empty() {
            return Err(bad_input!("{name}: empty; expected a {SCHEMA} tier table"));
        }
        let mut table: TierTable = serde_yaml::from_str(&input.text)
            .map_err(|e| bad_input!("{name}: not a {SCHEMA} tier table: {e}"))?;
        if table.schema != SCHEMA {
            return Err(bad_input!(
                "{name}: field `schema`: expected {SCHEMA}, found {:?}",
                table.schema
            ));
        }
        if table.tiers.is_empty() {
            return Err(bad_input!(
                "{name}: field `tiers`: expected at least one tier"
            ));
        }
        for (i, t) in table.tiers.iter().enumerate() {
            if !t.min_total_gib.is_finite() || t.min_total_gib < 0.0 {
                return Err(bad_input!(
                    "{name}: field `tiers[{i}].min_total_gib`: expected a number >= 0, found {}",
                    t.min_total_gib
                ));
            }
            if t.batch_size == 0 {
                return Err(bad_input!(
                    "{name}: field `tiers[{i}].batch_size`: expected a positive integer, found 0"
                ));
            }
        }
        table
            .tiers
            .sort_by(|a, b| b.min_total_gib.total_cmp(&a.min_total_gib));
        if let Some(w) = table
            .tiers
            .windows(2)
            .find(|w| w[0].min_total_gib == w[1].min_total_gib)
        {
            return Err(bad_input!(
                "{name}: field `tiers`: two tiers share min_total_gib {}; expected distinct thresholds",
                w[0].min_total_gib
            ));
        }
        Ok(table)
    }

    /// The tier for a GPU with `total_mib` of memory, or None when the GPU is
    /// below every threshold of a user's table.
    pub fn recommend(&self, total_mib: u64) -> Option<Recommendation> {
        let gib = total_mib as f64 / 1024.0;
        self.tiers
            .iter()
            .find(|t| gib >= t.min_total_gib)
            .map(|t| Recommendation {
                model_size: t.model_size.clone(),
                batch_size: t.batch_size,
                max_train_examples: t.max_train_examples,
                min_total_gib: t.min_total_gib,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(total_mib: u64) -> String {
        TierTable::default()
            .recommend(total_mib)
            .map(|r| r.model_size)
            .unwrap_or_default()
    }

    #[test]
    fn default_tiers_follow_seed_002() {
        assert_eq!(size(81_559), "medium"); // H100 80 GB
        assert_eq!(size(40_960), "medium"); // A100 40 GB
        assert_eq!(size(35 * 1024), "medium"); // boundary is inclusive
        assert_eq!(size(35 * 1024 - 1), "small");
        assert_eq!(size(15_360), "small"); // T4
        assert_eq!(size(14 * 1024), "small");
        assert_eq!(size(14 * 1024 - 1), "tiny");
        assert_eq!(size(0), "tiny");
        let t4 = TierTable::default().recommend(15_360).unwrap();
        assert_eq!((t4.batch_size, t4.max_train_examples), (6, 50_000));
    }

    fn parse(text: &str) -> anyhow::Result<TierTable> {
        TierTable::parse(&Input {
            name: "tiers.yaml".into(),
            text: text.into(),
        })
    }

    #[test]
    fn user_table_replaces_default_and_is_sorted() {
        let t = parse(
            "schema: tiers/v1\ntiers:\n\
             - {min_total_gib: 8, model_size: small, batch_size: 8, max_train_examples: 10}\n\
             - {min_total_gib: 20, model_size: big, batch_size: 32, max_train_examples: 20}\n",
        )
        .unwrap();
        assert_eq!(t.recommend(24 * 1024).unwrap().model_size, "big");
        assert_eq!(t.recommend(10 * 1024).unwrap().model_size, "small");
        assert!(t.recommend(4 * 1024).is_none(), "below every tier");
    }

    #[test]
    fn bad_tables_name_the_field() {
        let err = |text: &str| format!("{:#}", parse(text).unwrap_err());
        assert!(err("").contains("empty"));
        assert!(err("schema: tiers/v2\ntiers: []").contains("field `schema`"));
        assert!(err("schema: tiers/v1\ntiers: []").contains("field `tiers`"));
        assert!(err(
            "schema: tiers/v1\ntiers:\n- {min_total_gib: -1, model_size: a, batch_size: 1, max_train_examples: 1}"
        )
        .contains("tiers[0].min_total_gib"));
        assert!(err(
            "schema: tiers/v1\ntiers:\n- {min_total_gib: 1, model_size: a, batch_size: 0, max_train_examples: 1}"
        )
        .contains("tiers[0].batch_size"));
        assert!(err("schema: tiers/v1\ntiers:\n- {min_gib: 1}").contains("unknown field `min_gib`"));
    }
}
