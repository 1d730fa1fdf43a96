//! Which schema a config is written for, from its top-level keys
//! (docs/guide/cfgcheck-other-configs.md, "Configs cfgcheck did not define"). trainguard's own
//! schema stays strict: a file that is mostly trainguard's keys is read as
//! trainguard's, so a typo in it is an error naming the nearest key, never a
//! silent fall into reading it loosely. The rule:
//!
//! - a key "belongs" to a schema when the schema has it; a top-level key no
//!   schema has but within a typo of a trainguard key (an edit distance of a
//!   quarter of the longer key's length, at least 1: `batchsize`,
//!   `gradient_checkpoint`, not `step` for `seed`) belongs to trainguard;
//! - a "stranger" is a top-level key no schema has and no typo of ours:
//!   the mark of a project's own config (`hidden`, `num_layers`);
//! - trainguard when more than half the top-level keys belong to it, it
//!   has at least as many keys of its own (no other schema has them) as
//!   either other schema, and the strangers, if any, are fewer than its
//!   own keys spelled exactly (a typo is a guess, not evidence): a file of
//!   ours with one stray key is still ours and refused for it, while
//!   `{learning_rate, epochs, dropout_p, hidden}` (one exact key of ours,
//!   `epochs`, against one stranger) is a project's own;
//! - else Hugging Face or Axolotl when more than half the top-level keys
//!   belong to it, the one with more keys of its own winning (then the one
//!   with more keys);
//! - else generic: a project's own nesting, whose keys are found at any
//!   depth under each schema's names (`check` refuses one holding none of
//!   the keys the rules read, unless `--as any` names the format).

use common::config::Config;
use common::wire::cfgcheck::ConfigFormat;
use std::collections::BTreeSet;
use std::sync::OnceLock;

const HF: &str = include_str!("known/hf.txt");
const AXOLOTL: &str = include_str!("known/axolotl.txt");

fn words(list: &'static str) -> BTreeSet<&'static str> {
    list.lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(str::split_whitespace)
        .collect()
}

/// The key names of each schema.
pub struct Known {
    pub trainguard: BTreeSet<String>,
    pub hf: BTreeSet<&'static str>,
    pub axolotl: BTreeSet<&'static str>,
}

impl Known {
    pub fn get() -> &'static Known {
        static KNOWN: OnceLock<Known> = OnceLock::new();
        KNOWN.get_or_init(|| {
            // trainguard's keys from its schema itself, every field written out.
            let ours = serde_yaml::to_value(Config::default()).expect("a Config serialises");
            let trainguard = ours
                .as_mapping()
                .expect("a Config is a mapping")
                .keys()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect();
            Known {
                trainguard,
                hf: words(HF),
                axolotl: words(AXOLOTL),
            }
        })
    }

    fn has(&self, format: ConfigFormat, key: &str) -> bool {
        match format {
            ConfigFormat::Trainguard => self.trainguard.contains(key),
            ConfigFormat::Hf => self.hf.contains(key),
            ConfigFormat::Axolotl => self.axolotl.contains(key),
            ConfigFormat::Generic => false,
        }
    }

    /// A key no schema has that is a typo of a trainguard key.
    fn typo_of_ours(&self, key: &str) -> bool {
        const SCHEMAS: [ConfigFormat; 3] = [
            ConfigFormat::Trainguard,
            ConfigFormat::Hf,
            ConfigFormat::Axolotl,
        ];
        if SCHEMAS.iter().any(|f| self.has(*f, key)) {
            return false;
        }
        self.trainguard.iter().any(|k| {
            let limit = (k.len().max(key.len()) / 4).max(1);
            strsim::damerau_levenshtein(key, k) <= limit
        })
    }
}

/// The tally behind a recognition, for the message when trainguard's
/// strict reading refuses the file.
#[derive(Debug, PartialEq, Eq)]
pub struct Tally {
    pub keys: usize,
    pub trainguard: usize,
    /// Keys no schema has and no typo of ours.
    pub strangers: usize,
}

/// The format of a file whose top-level keys are `top`.
pub fn recognise<'a>(top: impl IntoIterator<Item = &'a str>) -> (ConfigFormat, Tally) {
    use ConfigFormat::*;
    let known = Known::get();
    let top: BTreeSet<&str> = top.into_iter().collect();
    let belongs =
        |f: ConfigFormat, k: &str| known.has(f, k) || (f == Trainguard && known.typo_of_ours(k));
    let schemas = [Trainguard, Hf, Axolotl];
    let count = |f: ConfigFormat| top.iter().filter(|k| belongs(f, k)).count();
    let own = |f: ConfigFormat| {
        top.iter()
            .filter(|k| belongs(f, k) && schemas.iter().all(|g| *g == f || !known.has(*g, k)))
            .count()
    };
    let most = |f: ConfigFormat| 2 * count(f) > top.len();
    let strangers = top
        .iter()
        .filter(|k| schemas.iter().all(|f| !belongs(*f, k)))
        .count();
    let exact_own = top
        .iter()
        .filter(|k| known.has(Trainguard, k) && !known.has(Hf, k) && !known.has(Axolotl, k))
        .count();
    let tally = Tally {
        keys: top.len(),
        trainguard: count(Trainguard),
        strangers,
    };
    if top.is_empty()
        || (most(Trainguard)
            && own(Trainguard) >= own(Hf).max(own(Axolotl))
            && (strangers == 0 || exact_own > strangers))
    {
        return (Trainguard, tally);
    }
    let rank = |f: ConfigFormat| (own(f), count(f));
    let format = match (most(Hf), most(Axolotl)) {
        (true, false) => Hf,
        (false, true) => Axolotl,
        (true, true) if rank(Hf) > rank(Axolotl) => Hf,
        (true, true) if rank(Axolotl) > rank(Hf) => Axolotl,
        _ => Generic,
    };
    (format, tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(keys: &str) -> ConfigFormat {
        recognise(keys.split_whitespace()).0
    }

    #[test]
    fn the_lists_hold_the_rules_keys() {
        let k = Known::get();
        for key in [
            "torch_compile",
            "torch_compile_mode",
            "gradient_checkpointing",
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "fp16",
            "bf16",
            "dataloader_num_workers",
            "dataloader_pin_memory",
        ] {
            assert!(k.hf.contains(key), "hf: {key}");
        }
        for key in [
            "torch_compile",
            "torch_compile_mode",
            "torch_compile_options",
            "gradient_checkpointing",
            "micro_batch_size",
            "dataloader_num_workers",
            "base_model",
        ] {
            assert!(k.axolotl.contains(key), "axolotl: {key}");
        }
        assert!(k.trainguard.contains("num_workers") && k.trainguard.contains("environment"));
    }

    #[test]
    fn trainguard_files_stay_trainguard_typos_and_all() {
        assert_eq!(
            format("batch_size epochs image_size torch_compile"),
            ConfigFormat::Trainguard
        );
        // A typo of ours is ours: the strict reading names the nearest key.
        assert_eq!(format("batchsize"), ConfigFormat::Trainguard);
        assert_eq!(
            format("gradient_checkpoint epochs torch_compile_mode"),
            ConfigFormat::Trainguard
        );
        // A Hugging Face key among ours is an error in ours, not a new format.
        assert_eq!(
            format("batch_size epochs image_size num_train_epochs"),
            ConfigFormat::Trainguard
        );
        // Only keys every schema shares: trainguard's (use --as to say otherwise).
        assert_eq!(
            format("torch_compile_mode gradient_checkpointing"),
            ConfigFormat::Trainguard
        );
        assert_eq!(format(""), ConfigFormat::Trainguard);
        // One stray key among many of ours: ours, refused for the stray one.
        assert_eq!(
            format("batch_size epochs image_size memory_optimized notes"),
            ConfigFormat::Trainguard
        );
    }

    #[test]
    fn a_project_config_sharing_a_few_names_with_ours_is_its_own() {
        // learning_rate is ours (and Hugging Face's), epochs ours, dropout_p
        // a typo of dropout; hidden is nobody's. One exact key of ours
        // against one stranger: the project's own nesting.
        let (f, tally) = recognise("learning_rate hidden epochs dropout_p".split_whitespace());
        assert_eq!(f, ConfigFormat::Generic);
        assert_eq!(
            tally,
            Tally {
                keys: 4,
                trainguard: 3,
                strangers: 1
            }
        );
        assert_eq!(
            format("learning_rate batch_size epochs hidden_size num_layers"),
            ConfigFormat::Generic
        );
    }

    #[test]
    fn foreign_files_by_their_own_keys() {
        assert_eq!(
            format("output_dir torch_compile_mode gradient_checkpointing learning_rate per_device_train_batch_size"),
            ConfigFormat::Hf
        );
        assert_eq!(
            format("base_model datasets micro_batch_size gradient_accumulation_steps num_epochs torch_compile gradient_checkpointing bf16"),
            ConfigFormat::Axolotl
        );
        // A project's own nesting, even with a generic name Axolotl also has.
        assert_eq!(format("model data training device"), ConfigFormat::Generic);
        assert_eq!(format("training device"), ConfigFormat::Generic);
        // Keys both Hugging Face and Axolotl have, and nothing else: no telling.
        assert_eq!(
            format("output_dir bf16 logging_steps"),
            ConfigFormat::Generic
        );
    }
}
