//! Every file format a trainguard tool writes for another tool, or for a
//! user's script, to read: one struct each, the schema's name and version
//! beside it (ripgrep documents its wire format on the type that writes it).
//! Writers serialise the struct; readers go through [`parse`], which reads
//! `schema` first, so a file of another version or kind is named as such
//! before its fields are judged. docs/FORMATS.md, "File formats" documents
//! each one, and a test (common/tests/formats_documented.rs) checks that it
//! names every schema in [`all`] and every field of its example.
//!
//! This module is the floor of the workspace: it imports nothing of it but
//! `exit` (for `bad_input!`), so every other module, and every crate, can
//! stand on it. Reading a format beyond its schema and fields (memdiag's
//! CSV, a config's validation) is done above, in the module named for it.
//!
//! - `config`: the training config's schema (no schema field; docs/guide/config.md,
//!   "Config"), with the defaults;
//! - `memdiag`, `tiers`: memdiag/v1 and tiers/v1;
//! - `hazard`, `failure`: the ids and classes the diagnosis formats carry;
//! - `cfgcheck`, `explain`, `verify`: cfgcheck/v2, cfgcheck-explain/v1,
//!   verify-fixes/v1;
//! - `scan`: scan/v2 (`cfgcheck --scan`'s findings in Python code);
//! - `train`: train-info/v1, train-data/v1, train-metrics/v1,
//!   train-summary/v1, train-checkpoint/v1, train-chain/v1, train-bench/v1;
//! - `space`: space/v1;
//! - `sweep`: sweep-settings/v1, sweep-report/v2, sweep-slurm/v1;
//! - `metric`: the metrics.csv columns a sweep ranks by;
//! - `program`: program-summary/v1 and supervise-metrics/v1, what the
//!   supervisor of any command writes;
//! - `run_dir`: the names of the files in a run's, a sweep's and a trial's
//!   directory.

pub mod cfgcheck;
pub mod config;
pub mod explain;
pub mod failure;
pub mod hazard;
pub mod memdiag;
pub mod metric;
pub mod program;
pub mod run_dir;
pub mod scan;
pub mod space;
pub mod sweep;
pub mod tiers;
pub mod train;
pub mod verify;

use crate::bad_input;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A versioned format: its schema name (`name/vN`) and an example instance
/// with every optional field filled, from which the docs check
/// (`formats_documented`) takes the field names.
pub trait Versioned: Serialize + DeserializeOwned {
    const SCHEMA: &'static str;
    fn example() -> Self;
}

/// Reads a YAML or JSON document of format `T`, from the file called `name`
/// in messages: the schema first, then the fields (serde names the field and
/// the line).
pub fn parse<T: Versioned>(name: &str, text: &str) -> anyhow::Result<T> {
    check_schema(name, text, T::SCHEMA)?;
    serde_yaml::from_str(text)
        .map_err(|e| bad_input!("{name}: not a valid {} document: {e}", T::SCHEMA))
}

/// Checks that `text` is a mapping whose `schema` is `expected`.
pub fn check_schema(name: &str, text: &str, expected: &str) -> anyhow::Result<()> {
    let text = text.trim_start_matches('\u{feff}');
    if text.trim().is_empty() {
        return Err(bad_input!("{name}: empty; expected a {expected} document"));
    }
    let value: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| bad_input!("{name}: not YAML or JSON: {e}"))?;
    let Some(map) = value.as_mapping() else {
        return Err(bad_input!(
            "{name}: expected a {expected} document (a mapping with `schema: {expected}`), found {}",
            kind_of(&value)
        ));
    };
    match map.get("schema") {
        None => Err(bad_input!(
            "{name}: field `schema` missing; expected `schema: {expected}`"
        )),
        Some(serde_yaml::Value::String(s)) if s == expected => Ok(()),
        Some(other) => Err(bad_input!(
            "{name}: field `schema`: expected {expected}, found {}",
            serde_yaml::to_string(other)
                .unwrap_or_default()
                .trim()
                .to_string()
        )),
    }
}

/// What a YAML value is, for messages.
pub fn kind_of(v: &serde_yaml::Value) -> &'static str {
    use serde_yaml::Value::*;
    match v {
        Null => "nothing",
        Bool(_) => "a boolean",
        Number(_) => "a number",
        String(_) => "a string",
        Sequence(_) => "a list",
        Mapping(_) => "a mapping",
        Tagged(_) => "a tagged value",
    }
}

/// Every format: its schema name and its example as JSON (for the docs
/// check and for tools that list formats).
pub fn all() -> Vec<(&'static str, serde_json::Value)> {
    fn entry<T: Versioned>() -> (&'static str, serde_json::Value) {
        (
            T::SCHEMA,
            serde_json::to_value(T::example()).expect("examples serialise"),
        )
    }
    vec![
        entry::<memdiag::Report>(),
        entry::<tiers::TierTable>(),
        entry::<train::TrainInfo>(),
        entry::<train::TrainData>(),
        entry::<train::EpochRow>(),
        entry::<train::TrainSummary>(),
        entry::<train::CheckpointMeta>(),
        entry::<train::ChainState>(),
        entry::<train::TrainBench>(),
        entry::<cfgcheck::Output>(),
        entry::<explain::Output>(),
        entry::<verify::Output>(),
        entry::<scan::Output>(),
        entry::<space::Space>(),
        entry::<sweep::Settings>(),
        entry::<sweep::SweepReport>(),
        entry::<sweep::SlurmJobs>(),
        entry::<program::ProgramSummary>(),
        entry::<program::ReportRow>(),
    ]
}

/// The field names of a JSON value, nested ones included (each name alone,
/// as docs/FORMATS.md's tables write them).
pub fn field_names(v: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                // Numeric keys are data (labels), not field names.
                if k.parse::<f64>().is_err() {
                    out.insert(k.clone());
                }
                field_names(x, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| field_names(x, out)),
        _ => {}
    }
}

/// What docs/FORMATS.md, "File formats" (with docs/guide/config.md, "Config", where a
/// resolved config's keys are documented) does not name of format `T`: its
/// schema, and each field of its example, as whole words. The tests of every
/// crate with formats call it (common's and sweep's).
pub fn undocumented<T: Versioned>(readme: &str) -> Vec<String> {
    undocumented_in(
        readme,
        T::SCHEMA,
        &serde_json::to_value(T::example()).expect("examples serialise"),
    )
}

/// `undocumented` for a schema and its example as JSON (an entry of `all`).
pub fn undocumented_in(readme: &str, schema: &str, example: &serde_json::Value) -> Vec<String> {
    fn section(readme: &str, title: &str) -> String {
        let Some(start) = readme.find(&format!("\n## {title}\n")) else {
            return String::new();
        };
        let rest = &readme[start + 1..];
        let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
        rest[..end].to_string()
    }
    fn names_word(text: &str, word: &str) -> bool {
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        text.match_indices(word).any(|(i, _)| {
            !part(text[..i].chars().next_back()) && !part(text[i + word.len()..].chars().next())
        })
    }
    let text = section(readme, "File formats") + &section(readme, "Config");
    let mut missing = Vec::new();
    if !text.contains(schema) {
        missing.push(format!("schema {schema}"));
    }
    let mut fields = std::collections::BTreeSet::new();
    field_names(example, &mut fields);
    for f in fields {
        if !names_word(&text, &f) {
            missing.push(format!("{schema}: field `{f}`"));
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_reads_back_through_parse() {
        for (schema, example) in all() {
            // metrics.csv's row has no schema column.
            if example.get("schema").is_none() {
                continue;
            }
            let text = serde_yaml::to_string(&example).unwrap();
            // The schema field is checked before anything else.
            check_schema("x", &text, schema).unwrap();
            let wrong = text.replacen(schema, "other/v9", 1);
            let e = check_schema("x", &wrong, schema).unwrap_err().to_string();
            assert!(e.contains("expected") && e.contains("other/v9"), "{e}");
        }
        let t = train::TrainInfo::example();
        let back: train::TrainInfo =
            parse("info.yaml", &serde_yaml::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }
}
