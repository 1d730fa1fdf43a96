//! The search space: W&B's sweep YAML (docs.wandb.ai, "Sweep configuration
//! options"; the schema in wandb/sweeps, src/sweeps/config/schema.json), read
//! into typed parameters and checked against the training config's schema
//! before any trial runs, so that a typo or an impossible value fails in a
//! second with its line instead of after hours of trials.
//!
//! Accepted: `method` (grid | random | bayes), `metric` ({name, goal}; name a
//! column of train's metrics.csv), `parameters` (config keys, dotted for
//! nested ones, or W&B's nested `parameters:`), `run_cap`, and
//! `early_terminate: {type: hyperband, ...}`; trainguard adds `bayes:
//! {variant: multivariate|univariate}` (which TPE `method: bayes` runs;
//! multivariate, Optuna 5's default, when absent) and `memory_model:
//! true|false`. `name`, `description`,
//! `entity` and `project` are W&B's and ignored. With `program` (W&B's
//! meaning: each trial runs the user's program, by `command` and W&B's
//! macros) the parameters are the program's own, not config keys, the
//! metric any name the program reports, and trainguard adds `working_dir:
//! launch|trial`, `preload: [modules]`, `metric.regex` and
//! `metric.summary: best|last`.
//! The older `schema: space/v1` (`parameters: {key: [values...]}`) is read
//! as a deprecated alias.

use crate::pruner::Hyperband;
use crate::trial::{Choice, Direction, Distribution, ParamValue};
use common::bad_input;
use common::config::{nearest_key, Config};
use common::input::Input;
use common::wire::metric::Metric as MetricName;
use common::wire::run_dir;
use common::yaml_index::YamlIndex;
use serde_yaml::{Mapping, Value};
use std::collections::BTreeMap;
use std::fmt::Display;

/// How the sampler picks the next trial (W&B's `method`); the type is
/// the sampler's, which the space names.
pub use crate::sampler::Method;

/// The metric trials are ranked and pruned by: a metrics.csv column, or
/// for a program any name it reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    pub name: MetricName,
    pub goal: Direction,
    /// A program's `metric.regex`: one capture group around the value.
    pub regex: Option<String>,
    /// `summary: last` (W&B's summary): the last report is the objective,
    /// not the best.
    pub summary_last: bool,
}

/// The user's program, each trial's command (the space's `program`).
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// As written: relative to the directory `train sweep` started in.
    pub file: String,
    /// The space's `command` (None: W&B's default).
    pub command: Option<Vec<String>>,
    /// `working_dir: trial`: each trial runs in its own `trials/NNNN/work`.
    pub work_in_trial: bool,
    /// `preload`: the modules a server imports once, each trial a fork of
    /// it (`supervise::preload`), in the file's order, without repeats.
    pub preload: Vec<String>,
    /// `auto_fix: true`: a trial that fails in a way a setting fixes runs
    /// again with the fix applied (`supervise::autofix`).
    pub auto_fix: Option<AutoFix>,
    /// `ranks_per_trial: N`: each trial is a job of N ranks (where the
    /// launcher's own options do not say), given N GPUs where there are.
    pub ranks_per_trial: Option<u32>,
}

/// A program space's `auto_fix: true`, `fix:` and `max_attempts`.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoFix {
    /// `fix: {batch: bsz}`: the user's names for the knobs (flags the
    /// program defines, or keys of its `${config}`).
    pub knobs: Vec<(diagnose::knobs::Knob, String)>,
    pub max_attempts: u32,
}

/// One parameter: held at a value, or drawn from a distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    Fixed(ParamValue),
    Sampled(Distribution),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Space {
    pub method: Method,
    pub metric: Metric,
    /// Config key paths (`architecture.embed_dim`), in the file's order.
    pub params: Vec<(String, Param)>,
    pub run_cap: Option<u64>,
    pub early_terminate: Option<Hyperband>,
    pub program: Option<Program>,
    /// `memory_model: false` turns off each point's predicted peak and the
    /// refusal of points predicted not to fit (`memory_model`); on when
    /// absent.
    pub memory_model: bool,
}

/// A space and the warnings for the caller to print (deprecated format,
/// ignored keys); parsing itself prints nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    pub space: Space,
    pub warnings: Vec<String>,
}

const TOP_KEYS: [&str; 15] = [
    "method",
    "bayes",
    "metric",
    "parameters",
    "early_terminate",
    "run_cap",
    "memory_model",
    "program",
    "command",
    "working_dir",
    "preload",
    "auto_fix",
    "fix",
    "max_attempts",
    "ranks_per_trial",
];
/// W&B keys that do not apply to train sweep; accepted so that a W&B file
/// reads as it is.
const IGNORED_KEYS: [&str; 4] = ["name", "description", "entity", "project"];
const PARAM_KEYS: [&str; 6] = ["values", "value", "min", "max", "distribution", "q"];
const DISTRIBUTIONS: [&str; 6] = [
    "uniform",
    "int_uniform",
    "log_uniform_values",
    "q_uniform",
    "categorical",
    "constant",
];
/// W&B distributions Optuna's samplers cannot reproduce.
const UNSUPPORTED_DISTRIBUTIONS: [&str; 10] = [
    "q_log_uniform",
    "q_log_uniform_values",
    "inv_log_uniform",
    "inv_log_uniform_values",
    "normal",
    "q_normal",
    "log_normal",
    "q_log_normal",
    "beta",
    "q_beta",
];
/// Config keys that are maps of free names (any child key is valid).
const MAP_KEYS: [&str; 1] = ["environment"];

/// A YAML number as written: W&B infers int_uniform from integer bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

fn number(v: &Value) -> Option<Num> {
    let Value::Number(n) = v else {
        return None;
    };
    match n.as_i64() {
        Some(i) => Some(Num::Int(i)),
        None if n.is_f64() => n.as_f64().map(Num::Float),
        // A u64 past i64: not an Optuna int.
        None => None,
    }
}

fn scalar(v: &Value) -> Option<Choice> {
    Some(match v {
        Value::Null => Choice::Null,
        Value::Bool(b) => Choice::Bool(*b),
        Value::String(s) => Choice::Str(s.clone()),
        Value::Number(_) => match number(v)? {
            Num::Int(i) => Choice::Int(i),
            Num::Float(f) => Choice::Float(f),
        },
        _ => return None,
    })
}

fn fixed_value(c: Choice) -> ParamValue {
    match c {
        Choice::Int(i) => ParamValue::Int(i),
        Choice::Float(f) => ParamValue::Float(f),
        other => ParamValue::Choice(other),
    }
}

fn show(v: &Value) -> String {
    serde_yaml::to_string(v)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The file being read: errors carry its name and the line of the path.
struct Reader<'a> {
    name: &'a str,
    index: YamlIndex,
    warnings: Vec<String>,
}

impl Reader<'_> {
    fn err(&self, path: &str, msg: impl Display) -> anyhow::Error {
        bad_input!("{}", self.at(path, msg))
    }

    fn at(&self, path: &str, msg: impl Display) -> String {
        match self.index.line_of(path) {
            Some(line) => format!("{}: line {line}: `{path}`: {msg}", self.name),
            None => format!("{}: `{path}`: {msg}", self.name),
        }
    }

    fn warn(&mut self, path: &str, msg: impl Display) {
        let w = self.at(path, msg);
        self.warnings.push(w);
    }

    /// A mapping's keys as strings, refusing others.
    fn entries<'v>(
        &self,
        map: &'v Mapping,
        path: &str,
    ) -> anyhow::Result<Vec<(String, &'v Value)>> {
        map.iter()
            .map(|(k, v)| match k.as_str() {
                Some(s) => Ok((s.to_string(), v)),
                None => Err(self.err(path, format!("keys must be strings, found {}", show(k)))),
            })
            .collect()
    }

    fn unknown(&self, path: &str, key: &str, known: &[&str]) -> anyhow::Error {
        match nearest_key(key, known) {
            Some(k) => self.err(path, format!("unknown key `{key}`; did you mean `{k}`?")),
            None => self.err(
                path,
                format!("unknown key `{key}`; known keys here: {}", known.join(", ")),
            ),
        }
    }
}

fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Space {
    /// The configs at the space's corners, labelled `key=value, ...`: every
    /// parameter at each end of its range (each choice of a categorical, up
    /// to 16), combinations up to 4096 (a parameter past that is left at its
    /// first end). Combinations the schema refuses are left out. What the
    /// memory checks size for: the worst case is among them, as the
    /// estimate grows with each parameter.
    pub fn corners(&self, base: &Config) -> Vec<(String, Config)> {
        let mut combos: Vec<BTreeMap<String, ParamValue>> = vec![BTreeMap::new()];
        for (name, p) in &self.params {
            let ends: Vec<ParamValue> = match p {
                Param::Fixed(v) => vec![v.clone()],
                Param::Sampled(Distribution::Float { low, high, .. }) => {
                    vec![ParamValue::Float(*low), ParamValue::Float(*high)]
                }
                Param::Sampled(Distribution::Int { low, high, .. }) => {
                    vec![ParamValue::Int(*low), ParamValue::Int(*high)]
                }
                Param::Sampled(Distribution::Categorical { choices }) => choices
                    .iter()
                    .take(16)
                    .map(|c| ParamValue::Choice(c.clone()))
                    .collect(),
            };
            let ends = if combos.len() * ends.len() > 4096 {
                ends[..1].to_vec()
            } else {
                ends
            };
            combos = combos
                .iter()
                .flat_map(|c| {
                    ends.iter().map(move |v| {
                        let mut c = c.clone();
                        c.insert(name.clone(), v.clone());
                        c
                    })
                })
                .collect();
        }
        combos
            .into_iter()
            .filter_map(|values| {
                let label: Vec<String> = values
                    .iter()
                    .map(|(k, v)| {
                        format!(
                            "{k}={}",
                            serde_yaml::to_string(&v.to_yaml())
                                .unwrap_or_default()
                                .trim()
                        )
                    })
                    .collect();
                self.apply(base, &values)
                    .ok()
                    .map(|c| (label.join(", "), c))
            })
            .collect()
    }

    /// What the sampler draws from: the sampled parameters in the file's
    /// order, and the fixed values.
    pub fn search_space(&self) -> crate::sampler::SearchSpace {
        let mut s = crate::sampler::SearchSpace::default();
        for (name, p) in &self.params {
            match p {
                Param::Fixed(v) => {
                    s.fixed.insert(name.clone(), v.clone());
                }
                Param::Sampled(d) => s.params.push((name.clone(), d.clone())),
            }
        }
        s
    }

    /// Reads a space file and checks it against `base` (the config every
    /// trial starts from): each parameter must be a config key, and each
    /// value a distribution can produce at its ends (min, max, every one of
    /// `values`) must be accepted by the schema when set into `base` with
    /// the fixed parameters (the other sampled ones keep `base`'s values; a
    /// combination refused only together is `apply`'s error, per trial).
    /// Errors (exit 2) name the file, the line and the field.
    pub fn parse(input: &Input, base: &Config) -> anyhow::Result<Parsed> {
        let name = input.name.as_str();
        if input.text.trim().is_empty() {
            return Err(bad_input!(
                "{name}: empty; expected a W&B sweep configuration (method, metric, parameters)"
            ));
        }
        let doc: Value =
            serde_yaml::from_str(&input.text).map_err(|e| bad_input!("{name}: not YAML: {e}"))?;
        let Some(top) = doc.as_mapping() else {
            return Err(bad_input!(
                "{name}: expected a mapping at the top level (method, metric, parameters)"
            ));
        };
        let mut r = Reader {
            name,
            index: YamlIndex::build(&input.text),
            warnings: Vec::new(),
        };
        let entries = r.entries(top, "")?;
        let space = match top.get("schema") {
            Some(Value::String(s))
                if s.as_str() == <common::wire::space::Space as common::wire::Versioned>::SCHEMA =>
            {
                r.legacy(&entries)?
            }
            Some(other) => {
                return Err(r.err(
                    "schema",
                    format!(
                        "expected space/v1 (the deprecated trainguard format) or no `schema` (W&B sweep YAML), found {}",
                        show(other)
                    ),
                ))
            }
            None => r.wandb(&entries, base)?,
        };
        if space.program.is_none() {
            r.check_against(&space, base)?;
        }
        Ok(Parsed {
            space,
            warnings: r.warnings,
        })
    }

    /// `base` with every parameter set: the fixed ones from the space, the
    /// sampled ones from `values` (a trial's parameters). The result is
    /// checked as a config file is (serde, then `Config::validate`).
    pub fn apply(
        &self,
        base: &Config,
        values: &BTreeMap<String, ParamValue>,
    ) -> anyhow::Result<Config> {
        if let Some(k) = values
            .keys()
            .find(|k| !self.params.iter().any(|(p, _)| p == *k))
        {
            return Err(bad_input!("`{k}` is not a parameter of this space"));
        }
        let mut set = Vec::new();
        for (key, param) in &self.params {
            let value = match param {
                Param::Fixed(v) => v.clone(),
                Param::Sampled(_) => values
                    .get(key)
                    .cloned()
                    .ok_or_else(|| bad_input!("no value for parameter `{key}`"))?,
            };
            set.push((key.as_str(), value.to_yaml()));
        }
        let label = || {
            set.iter()
                .map(|(k, v)| format!("{k}={}", show(v)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut doc = serde_yaml::to_value(base)?;
        for (key, value) in &set {
            set_path(&mut doc, key, value.clone()).map_err(|e| bad_input!("`{key}`: {e}"))?;
        }
        let config: Config =
            serde_yaml::from_value(doc).map_err(|e| bad_input!("{}: {e}", label()))?;
        let problems = config.validate();
        if !problems.is_empty() {
            let p: Vec<String> = problems
                .iter()
                .map(|(path, msg)| format!("`{path}`: {msg}"))
                .collect();
            return Err(bad_input!("{}: {}", label(), p.join("; ")));
        }
        Ok(config)
    }
}

/// Sets `key` (dotted) in a config's YAML: only keys the config has, and any
/// name under a map key such as `environment`.
fn set_path(doc: &mut Value, key: &str, value: Value) -> Result<(), String> {
    let parts: Vec<&str> = key.split('.').collect();
    let (last, parents) = parts.split_last().ok_or("empty key")?;
    let mut slot = doc;
    for part in parents {
        slot = slot
            .as_mapping_mut()
            .and_then(|m| m.get_mut(*part))
            .ok_or("not a config key")?;
    }
    let map = slot.as_mapping_mut().ok_or("not a config key")?;
    let free = MAP_KEYS.contains(&parents.join(".").as_str());
    match map.get_mut(*last) {
        Some(v) => *v = value,
        None if free => {
            map.insert(Value::from(*last), value);
        }
        None => return Err("not a config key".into()),
    }
    Ok(())
}

/// Every settable key path of the config (leaves of its YAML: scalars,
/// lists, nulls), for "not a config key" checks and suggestions.
fn config_keys() -> Vec<String> {
    fn walk(v: &Value, path: &str, out: &mut Vec<String>) {
        match v.as_mapping() {
            Some(m) if !MAP_KEYS.contains(&path) => {
                for (k, v) in m {
                    if let Some(k) = k.as_str() {
                        walk(v, &child(path, k), out);
                    }
                }
            }
            _ => out.push(path.to_string()),
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = serde_yaml::to_value(Config::default()) {
        walk(&v, "", &mut out);
    }
    out
}

mod params;
mod program;
#[cfg(test)]
mod tests;
mod wandb;
