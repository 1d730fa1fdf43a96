//! Any training config, trainguard's or one cfgcheck did not define
//! (Hugging Face `TrainingArguments` as JSON or YAML, Axolotl's YAML, a
//! project's own nesting): its format recognised from its keys (`recognise`)
//! or named (`--as`), trainguard's schema read strictly as ever, and for the
//! others the rules whose keys are found at any depth (`keys`, the hazards'
//! `check_keys`), each finding naming each key's path and line. `check` is
//! the one entry point (cfgcheck, verify-fixes); `fix` is `--fix` for all
//! formats. `knobs` and `turn` are the fix ladder's knobs in a config
//! (`train run --auto-fix`): where each is, and a copy of the text with
//! them turned.

mod edit;
mod knobs;
mod recognise;
mod tree;
mod turn;

#[cfg(test)]
mod knob_tests;
#[cfg(test)]
mod tests;

pub use common::wire::cfgcheck::ConfigFormat as Format;
pub use knobs::{knobs, ConfigKnobs, KeyAt, KnobAt, Place};
pub use recognise::{recognise, Known};
pub use tree::{Entry, Syntax, Tree};
pub use turn::{turn, KnobChange, Turned};

use crate::hazards::{self, Target, FIX_ORDER};
use crate::keys::{Concept, Found, Hit, KeyChange, KeyPlan};
use crate::plan::Change;
use crate::rules;
use common::bad_input;
use common::config::{Config, LoadedConfig};
use common::estimate::Estimate;
use common::input::Input;
use common::wire::cfgcheck::{Finding, ReadKey, Skipped};

/// `--as`: a format named instead of recognised (`any`: keys of every
/// schema, at any depth).
pub fn parse_as(s: &str) -> Result<Format, String> {
    match s {
        "hf" => Ok(Format::Hf),
        "axolotl" => Ok(Format::Axolotl),
        "trainguard" => Ok(Format::Trainguard),
        "any" => Ok(Format::Generic),
        _ => Err(format!(
            "expected hf, axolotl, trainguard or any, found {s:?}"
        )),
    }
}

/// Every `--as`, for the messages that offer another reading: each says
/// what it reads.
pub const AS_HINT: &str = "--as hf (Hugging Face TrainingArguments), --as axolotl, --as trainguard (trainguard's own schema, strictly) or --as any (every format's keys, at any depth: a project's own config)";

/// A config checked: its format, the findings and skipped rules, and either
/// trainguard's loaded config with its estimate or the keys the rules read.
pub struct Checked {
    pub format: Format,
    pub findings: Vec<Finding>,
    pub skipped: Vec<Skipped>,
    /// The keys the rules read (a config not in trainguard's schema).
    pub read_keys: Vec<ReadKey>,
    /// trainguard's schema: the config as loaded, and its memory estimate.
    pub trainguard: Option<(LoadedConfig, Estimate)>,
}

/// Checks one config file (`common::input::read(path)` gives `input`)
/// against `target`: `named` is `--as`, None to recognise the format from
/// the keys. Bad input (not YAML or JSON, trainguard's schema refused) is an
/// error that exits 2 and names the file.
pub fn check(input: &Input, named: Option<Format>, target: &Target) -> anyhow::Result<Checked> {
    match read(input, named)? {
        Read::Trainguard(loaded) => {
            let outcome = rules::check(&loaded, target);
            Ok(Checked {
                format: Format::Trainguard,
                findings: outcome.findings,
                skipped: outcome.skipped,
                read_keys: vec![],
                trainguard: Some((*loaded, outcome.estimate)),
            })
        }
        Read::Keys(_, found) => {
            let (findings, skipped) = rules::check_keys(&found, target);
            Ok(Checked {
                format: found.format,
                findings,
                skipped,
                read_keys: found.hits.iter().map(read_key).collect(),
                trainguard: None,
            })
        }
    }
}

/// The format `check` would read `input` as, recognised from its keys; an
/// error when it is not YAML or JSON with a mapping at the top. A caller
/// that checks files it was not told are configs (verify-fixes, on the
/// files a command names) tells a trainguard config `check` refused (an
/// error in it) from another file this way.
pub fn format_of(input: &Input) -> anyhow::Result<Format> {
    let tree = Tree::read(input)?;
    Ok(recognise(tree.top().map(|e| e.name.as_str())).0)
}

fn read_key(h: &Hit) -> ReadKey {
    ReadKey {
        key: h.path.clone(),
        line: h.line,
        value: h.shown.clone(),
        reads_as: h.concept.reads_as().to_string(),
    }
}

/// A file read: trainguard's config, or the keys of another format.
enum Read {
    Trainguard(Box<LoadedConfig>),
    Keys(Tree, Found),
}

fn read(input: &Input, named: Option<Format>) -> anyhow::Result<Read> {
    if named == Some(Format::Trainguard) {
        return Ok(Read::Trainguard(Box::new(Config::load(input)?)));
    }
    let tree = Tree::read(input)?;
    let format = match named {
        Some(f) => f,
        None => {
            let (format, tally) = recognise(tree.top().map(|e| e.name.as_str()));
            if format == Format::Trainguard {
                return Config::load(input)
                    .map(|l| Read::Trainguard(Box::new(l)))
                    .map_err(|e| strict_note(e, &tally));
            }
            format
        }
    };
    let found = find(&tree, format, &Concept::RULES);
    // A file of no known schema with no key any rule reads is most likely
    // not a training config at all (a report, a sweep space): say so rather
    // than pass it as checked.
    if named.is_none() && format == Format::Generic && found.hits.is_empty() {
        let top: Vec<&str> = tree.top().map(|e| e.name.as_str()).take(6).collect();
        return Err(bad_input!(
            "{}: not a config cfgcheck knows (top-level keys: {}), and none of the keys its rules read is in it ({}); nothing to check. To read it anyway, name its format: {AS_HINT}",
            input.name,
            top.join(", "),
            Concept::RULES
                .iter()
                .flat_map(|c| c.names(Format::Generic))
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(Read::Keys(tree, found))
}

/// trainguard's refusal of a file recognised as its own, with how it was
/// recognised and how to name another format.
fn strict_note(e: anyhow::Error, tally: &recognise::Tally) -> anyhow::Error {
    let message = format!("{e:#}");
    if !message.contains("unknown key") {
        return e;
    }
    bad_input!(
        "{message}\n(read as a trainguard config: {} of its {} top-level keys are trainguard's or a typo of one{}; if it is another format, tell cfgcheck which: {AS_HINT})",
        tally.trainguard,
        tally.keys,
        match tally.strangers {
            0 => String::new(),
            n => format!(", {n} no known schema's"),
        }
    )
}

/// The keys of `tree` that mean one of `concepts` in `format`, at any
/// depth, in the file's order (a key means the first concept that names it).
fn find(tree: &Tree, format: Format, concepts: &[Concept]) -> Found {
    let hits = tree
        .entries
        .iter()
        .enumerate()
        .filter_map(|(entry, e)| {
            let concept = *concepts
                .iter()
                .find(|c| c.names(format).contains(&e.name.as_str()))?;
            Some(Hit {
                concept,
                path: e.path.clone(),
                line: e.line,
                col: e.col,
                value: e.value.clone(),
                shown: e.shown.clone(),
                entry,
            })
        })
        .collect();
    Found { format, hits }
}

/// `--fix` on any config: the edited text, each change, what no change can
/// fix, and the findings left in the edited text.
pub struct Fixed {
    pub format: Format,
    pub text: String,
    pub changes: Vec<Change>,
    pub unfixable: Vec<String>,
    pub left: Vec<Finding>,
}

/// `--fix` for any format: trainguard's through `fix::plan_fix` (the seeds'
/// decision tree), the others by changing the keys the rules found, in
/// place: YAML keeps its comments, JSON every byte but the values changed.
/// Err(message) when an edit cannot be made safely (nothing is changed).
pub fn fix(
    input: &Input,
    named: Option<Format>,
    target: &Target,
) -> anyhow::Result<Result<Fixed, String>> {
    match read(input, named)? {
        Read::Trainguard(loaded) => {
            let plan = crate::fix::plan_fix(&loaded, target);
            let text = match crate::fix::apply(&loaded, &plan) {
                Ok(t) => t,
                Err(e) => return Ok(Err(e)),
            };
            let edited = LoadedConfig {
                config: plan.config.clone(),
                ..Config::load(&Input {
                    name: loaded.name.clone(),
                    text: text.clone(),
                })?
            };
            Ok(Ok(Fixed {
                format: Format::Trainguard,
                text,
                changes: plan.changes,
                unfixable: plan.unfixable,
                left: rules::check(&edited, target).findings,
            }))
        }
        Read::Keys(tree, found) => {
            let mut plan = KeyPlan::default();
            for id in FIX_ORDER {
                hazards::of(id).fix_keys(&found, target, &mut plan);
            }
            let text = match edit::apply(&input.text, &tree, &plan.changes) {
                Ok(t) => t,
                Err(e) => return Ok(Err(e)),
            };
            let again = Input {
                name: input.name.clone(),
                text: text.clone(),
            };
            let after = match read(&again, Some(found.format)) {
                Ok(Read::Keys(_, f)) => f,
                _ => {
                    return Ok(Err(
                        "the edited file does not read back; nothing was changed".into(),
                    ))
                }
            };
            if !edit::took(&plan.changes, &after) {
                return Ok(Err(
                    "the edited file does not read back with the new values; nothing was changed"
                        .into(),
                ));
            }
            Ok(Ok(Fixed {
                format: found.format,
                text,
                changes: plan.changes.iter().map(change).collect(),
                unfixable: plan.unfixable,
                left: rules::check_keys(&after, target).0,
            }))
        }
    }
}

fn change(c: &KeyChange) -> Change {
    Change {
        key: c.path.clone(),
        value: edit::shown(&c.value),
        why: c.why.clone(),
    }
}
