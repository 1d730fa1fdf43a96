//! The search space: W&B's sweep YAML (docs.wandb.ai, "Sweep configuration
//! options"; the schema in wandb/sweeps, src/sweeps/config/schema.json), read
//! into typed parameters and checked against the training config's schema
//! before any trial runs, so that a typo or an impossible value fails in a
//! second with its line instead of after hours of trials.
//!
//! Accepted: `method` (grid | random | bayes), `metric` ({name, goal}; name a
//! column of train's metrics.csv), `parameters` (config keys, dotted for
//! nested ones, or W&B's nested `parameters:`), `run_cap`, and
//! `early_terminate: {type: hyperband, ...}`. `program`, `name`,
//! `description`, `entity`, `project` and `command` are W&B's and ignored.
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

/// The metric trials are ranked and pruned by: a metrics.csv column.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    pub name: MetricName,
    pub goal: Direction,
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
}

/// A space and the warnings for the caller to print (deprecated format,
/// ignored keys); parsing itself prints nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    pub space: Space,
    pub warnings: Vec<String>,
}

const TOP_KEYS: [&str; 5] = [
    "method",
    "metric",
    "parameters",
    "early_terminate",
    "run_cap",
];
/// W&B keys that do not apply to train sweep; accepted so that a W&B file
/// reads as it is.
const IGNORED_KEYS: [&str; 6] = [
    "program",
    "name",
    "description",
    "entity",
    "project",
    "command",
];
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
        r.check_against(&space, base)?;
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

impl Reader<'_> {
    fn wandb(&mut self, entries: &[(String, &Value)], base: &Config) -> anyhow::Result<Space> {
        let mut known: Vec<&str> = TOP_KEYS.to_vec();
        known.extend(IGNORED_KEYS);
        for (k, _) in entries {
            if !known.contains(&k.as_str()) {
                return Err(self.unknown(k, k, &known));
            }
        }
        if entries.iter().any(|(k, _)| k == "command") {
            self.warn(
                "command",
                "ignored: train sweep runs train itself with each trial's config",
            );
        }
        let get = |key: &str| entries.iter().find(|(k, _)| k == key).map(|(_, v)| *v);

        let method = match get("method") {
            None => {
                return Err(bad_input!(
                    "{}: missing `method`: expected grid, random or bayes",
                    self.name
                ))
            }
            Some(v) => match v.as_str().map(Method::parse) {
                Some(Ok(m)) => m,
                _ => {
                    return Err(self.err(
                        "method",
                        format!("expected grid, random or bayes, found {}", show(v)),
                    ))
                }
            },
        };
        let params = match get("parameters") {
            None => {
                return Err(bad_input!(
                    "{}: missing `parameters`: expected a mapping of config keys to {{values: [...]}}, {{value: x}} or {{min: a, max: b}}",
                    self.name
                ))
            }
            Some(v) => {
                let mut params = Vec::new();
                self.parameters(v, "parameters", "", &mut params)?;
                params
            }
        };
        let metric = self.metric(get("metric"), base, &params)?;
        let run_cap = match get("run_cap") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => Some(n),
                _ => {
                    return Err(self.err(
                        "run_cap",
                        format!("expected a positive integer, found {}", show(v)),
                    ))
                }
            },
        };
        let early_terminate = match get("early_terminate") {
            None => None,
            Some(v) => Some(self.hyperband(v)?),
        };
        Ok(Space {
            method,
            metric,
            params,
            run_cap,
            early_terminate,
        })
    }

    /// `parameters:` and W&B's nested `parameters:` inside a parameter,
    /// flattened to dotted config keys.
    fn parameters(
        &mut self,
        v: &Value,
        path: &str,
        prefix: &str,
        out: &mut Vec<(String, Param)>,
    ) -> anyhow::Result<()> {
        let map = match v.as_mapping() {
            Some(m) if !m.is_empty() => m,
            _ => {
                return Err(self.err(
                    path,
                    "expected at least one parameter: a config key mapped to {values: [...]}, {value: x} or {min: a, max: b}",
                ))
            }
        };
        for (key, spec) in self.entries(map, path)? {
            let ypath = child(path, &key);
            let valid = key
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
            if !valid {
                return Err(self.err(
                    &ypath,
                    "expected a config key (letters, digits, _ and . for nested keys)",
                ));
            }
            let config_key = child(prefix, &key);
            match spec.as_mapping() {
                Some(m) if m.contains_key("parameters") => {
                    if m.len() > 1 {
                        return Err(self.err(
                            &ypath,
                            "a nested `parameters:` takes no other keys",
                        ));
                    }
                    self.parameters(&m["parameters"], &child(&ypath, "parameters"), &config_key, out)?;
                }
                Some(m) => {
                    let param = self.param(m, &ypath)?;
                    if out.iter().any(|(k, _)| *k == config_key) {
                        return Err(self.err(
                            &ypath,
                            format!("`{config_key}` is given twice"),
                        ));
                    }
                    out.push((config_key, param));
                }
                None if spec.is_sequence() => {
                    return Err(self.err(
                        &ypath,
                        "a bare list is the deprecated space/v1 form; write {values: [...]} (or add `schema: space/v1`)",
                    ))
                }
                None => {
                    return Err(self.err(
                        &ypath,
                        format!(
                            "expected {{values: [...]}}, {{value: x}} or {{min: a, max: b}}, found {}; for a fixed value write {{value: {}}}",
                            show(spec),
                            show(spec)
                        ),
                    ))
                }
            }
        }
        Ok(())
    }

    fn param(&self, m: &Mapping, path: &str) -> anyhow::Result<Param> {
        let entries = self.entries(m, path)?;
        for (k, _) in &entries {
            match k.as_str() {
                k if PARAM_KEYS.contains(&k) => {}
                "probabilities" => {
                    return Err(self.err(
                        &child(path, k),
                        "weighted categories are not supported (Optuna's categorical distribution has no weights); list a value more than once, or drop `probabilities`",
                    ))
                }
                "mu" | "sigma" | "a" | "b" => {
                    return Err(self.err(
                        &child(path, k),
                        "normal and beta distributions are not supported; use uniform, int_uniform, log_uniform_values, q_uniform or values",
                    ))
                }
                k => return Err(self.unknown(&child(path, k), k, &PARAM_KEYS)),
            }
        }
        let get = |key: &str| m.get(key);
        let dist_path = child(path, "distribution");
        let dist = match get("distribution") {
            None => None,
            Some(v) => Some(v.as_str().ok_or_else(|| {
                self.err(
                    &dist_path,
                    format!(
                        "expected one of {}, found {}",
                        DISTRIBUTIONS.join(", "),
                        show(v)
                    ),
                )
            })?),
        };
        let has = |k: &str| m.contains_key(k);
        // W&B's inference when no distribution is named.
        let dist = match dist {
            Some(d) => d,
            None if has("values") => "categorical",
            None if has("value") => "constant",
            None if has("min") && has("max") => {
                match (get("min").and_then(number), get("max").and_then(number)) {
                    (Some(Num::Int(_)), Some(Num::Int(_))) => "int_uniform",
                    _ => "uniform",
                }
            }
            None if has("min") || has("max") => {
                let missing = if has("min") { "max" } else { "min" };
                return Err(self.err(
                    path,
                    format!("`{missing}` is missing: a range needs both min and max"),
                ));
            }
            None => return Err(self.err(path, "expected values: [...], value: x, or min and max")),
        };
        if dist == "log_uniform" {
            let hint = match (get("min").and_then(number), get("max").and_then(number)) {
                (Some(a), Some(b)) => format!(
                    " (min: {a}, max: {b} here mean min: {:.3e}, max: {:.3e})",
                    a.f64().exp(),
                    b.f64().exp(),
                    a = a.f64(),
                    b = b.f64()
                ),
                _ => String::new(),
            };
            return Err(self.err(
                &dist_path,
                format!(
                    "log_uniform is W&B's old form whose min and max are exponents (values from e^min to e^max), easy to misread as the values themselves; write `distribution: log_uniform_values` with the values{hint}"
                ),
            ));
        }
        if UNSUPPORTED_DISTRIBUTIONS.contains(&dist) || dist == "categorical_w_probabilities" {
            return Err(self.err(
                &dist_path,
                format!(
                    "{dist} is not supported (Optuna's samplers have no equivalent); use one of {}",
                    DISTRIBUTIONS.join(", ")
                ),
            ));
        }
        if !DISTRIBUTIONS.contains(&dist) {
            let mut all: Vec<&str> = DISTRIBUTIONS.to_vec();
            all.extend(UNSUPPORTED_DISTRIBUTIONS);
            all.push("log_uniform");
            let near = nearest_key(dist, &all)
                .map(|k| format!("did you mean {k}? "))
                .unwrap_or_default();
            return Err(self.err(
                &dist_path,
                format!(
                    "unknown distribution `{dist}`; {near}expected one of {}",
                    DISTRIBUTIONS.join(", ")
                ),
            ));
        }
        // Keys the chosen distribution does not use are refused, not
        // ignored: `values` next to `min` is ambiguous.
        let uses: &[&str] = match dist {
            "categorical" => &["values"],
            "constant" => &["value"],
            "q_uniform" => &["min", "max", "q"],
            _ => &["min", "max"],
        };
        for (k, _) in &entries {
            if k != "distribution" && !uses.contains(&k.as_str()) {
                return Err(self.err(
                    &child(path, k),
                    format!(
                        "not used by distribution {dist} (it takes {})",
                        uses.join(", ")
                    ),
                ));
            }
        }
        for k in uses {
            if !has(k) {
                let why = if *k == "q" {
                    " (W&B would default q to 1; write q: 1 if that is meant)"
                } else {
                    ""
                };
                return Err(self.err(path, format!("distribution {dist} needs `{k}`{why}")));
            }
        }
        match dist {
            "categorical" => {
                let vpath = child(path, "values");
                let list = match get("values").and_then(Value::as_sequence) {
                    Some(l) if !l.is_empty() => l,
                    _ => return Err(self.err(&vpath, "expected a non-empty list of values")),
                };
                let choices = list
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        scalar(v).ok_or_else(|| {
                            self.err(
                                &format!("{vpath}[{i}]"),
                                format!("expected a number, string, boolean or null, found {} (categorical choices are scalars, as in Optuna)", show(v)),
                            )
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                Ok(Param::Sampled(Distribution::Categorical { choices }))
            }
            "constant" => {
                let v = &m["value"];
                let c = scalar(v).ok_or_else(|| {
                    self.err(
                        &child(path, "value"),
                        format!("expected a number, string, boolean or null, found {}; set lists and mappings in the base config", show(v)),
                    )
                })?;
                Ok(Param::Fixed(fixed_value(c)))
            }
            _ => self.range(m, path, dist),
        }
    }

    fn range(&self, m: &Mapping, path: &str, dist: &str) -> anyhow::Result<Param> {
        let num = |k: &str| -> anyhow::Result<Num> {
            let v = &m[k];
            match number(v) {
                Some(n) if n.f64().is_finite() => Ok(n),
                _ => Err(self.err(
                    &child(path, k),
                    format!("expected a finite number, found {}", show(v)),
                )),
            }
        };
        let (min, max) = (num("min")?, num("max")?);
        if min.f64() > max.f64() {
            return Err(self.err(
                &child(path, "min"),
                format!("min ({}) is greater than max ({})", min.f64(), max.f64()),
            ));
        }
        let ints = match (min, max) {
            (Num::Int(a), Num::Int(b)) => Some((a, b)),
            _ => None,
        };
        let float = |log: bool, step: Option<f64>| {
            Param::Sampled(Distribution::Float {
                low: min.f64(),
                high: max.f64(),
                log,
                step,
            })
        };
        match dist {
            "int_uniform" => {
                let (low, high) = ints.ok_or_else(|| {
                    self.err(
                        path,
                        format!(
                            "int_uniform needs integer min and max, found {} and {}",
                            min.f64(),
                            max.f64()
                        ),
                    )
                })?;
                Ok(Param::Sampled(Distribution::Int {
                    low,
                    high,
                    log: false,
                    step: 1,
                }))
            }
            "uniform" => Ok(float(false, None)),
            "log_uniform_values" => {
                if min.f64() <= 0.0 {
                    return Err(self.err(
                        &child(path, "min"),
                        format!("log_uniform_values needs min > 0, found {}", min.f64()),
                    ));
                }
                // Integer bounds stay integers, as int_uniform's do, so that
                // an integer key (batch_size) gets integers.
                Ok(match ints {
                    Some((low, high)) => Param::Sampled(Distribution::Int {
                        low,
                        high,
                        log: true,
                        step: 1,
                    }),
                    None => float(true, None),
                })
            }
            _ => {
                // q_uniform: Optuna's grid low + k·q; the range must hold a
                // whole number of steps (Optuna would lower max silently).
                let q = num("q")?;
                if q.f64() <= 0.0 {
                    return Err(self.err(
                        &child(path, "q"),
                        format!("expected q > 0, found {}", q.f64()),
                    ));
                }
                let steps = (max.f64() - min.f64()) / q.f64();
                if (steps - steps.round()).abs() > 1e-9 * steps.abs().max(1.0) {
                    let fit = min.f64() + steps.floor() * q.f64();
                    return Err(self.err(
                        &child(path, "max"),
                        format!(
                            "max - min ({}) is not a multiple of q ({}); use max: {fit}",
                            max.f64() - min.f64(),
                            q.f64()
                        ),
                    ));
                }
                Ok(match (ints, q) {
                    (Some((low, high)), Num::Int(step)) => Param::Sampled(Distribution::Int {
                        low,
                        high,
                        log: false,
                        step,
                    }),
                    _ => float(false, Some(q.f64())),
                })
            }
        }
    }

    fn metric(
        &mut self,
        v: Option<&Value>,
        base: &Config,
        params: &[(String, Param)],
    ) -> anyhow::Result<Metric> {
        let Some(v) = v else {
            self.warn("", "no `metric`: trials are ranked by val_loss (minimize)");
            return Ok(Metric {
                name: MetricName::ValLoss,
                goal: Direction::Minimize,
            });
        };
        let Some(m) = v.as_mapping() else {
            return Err(self.err(
                "metric",
                format!(
                    "expected {{name: val_loss, goal: minimize}}, found {}",
                    show(v)
                ),
            ));
        };
        let known = ["name", "goal", "target", "impute", "impute_while_running"];
        for (k, _) in self.entries(m, "metric")? {
            if !known.contains(&k.as_str()) {
                return Err(self.unknown(&child("metric", &k), &k, &known));
            }
            if !["name", "goal"].contains(&k.as_str()) {
                self.warn(&child("metric", &k), "ignored: not used by train sweep");
            }
        }
        let known = MetricName::known_names();
        let name = match m.get("name") {
            None => {
                return Err(self.err(
                    "metric",
                    format!("missing `name`: expected one of {}", known.join(", ")),
                ))
            }
            Some(n) => MetricName::from_name(n.as_str().unwrap_or_default()),
        };
        if !name.is_known() {
            let near = nearest_key(name.as_str(), &known)
                .map(|k| format!("did you mean `{k}`? "))
                .unwrap_or_default();
            return Err(self.err(
                "metric.name",
                format!(
                    "`{}` is not a column of train's {}; {near}expected one of {}",
                    show(&m["name"]),
                    run_dir::METRICS,
                    known.join(", ")
                ),
            ));
        }
        // A column train leaves empty for the task would rank nothing.
        if !params.iter().any(|(k, _)| k == "task") {
            use common::config::Task;
            let (task, wrong, right) = match base.task {
                Task::Regression => (
                    "regression",
                    [MetricName::Accuracy, MetricName::MacroF1].as_slice(),
                    "val_loss, train_loss, mae, rmse or r2",
                ),
                Task::Classification => (
                    "classification",
                    [MetricName::Mae, MetricName::Rmse, MetricName::R2].as_slice(),
                    "val_loss, train_loss, accuracy or macro_f1",
                ),
            };
            if wrong.contains(&name) {
                return Err(self.err(
                    "metric.name",
                    format!(
                        "{name} is empty in {} for task {task} (the base config's); use {right}",
                        run_dir::METRICS
                    ),
                ));
            }
        }
        let goal = match m.get("goal") {
            None => Direction::Minimize,
            Some(g) => match g.as_str() {
                Some("minimize") => Direction::Minimize,
                Some("maximize") => Direction::Maximize,
                _ => {
                    return Err(self.err(
                        "metric.goal",
                        format!("expected minimize or maximize, found {}", show(g)),
                    ))
                }
            },
        };
        Ok(Metric { name, goal })
    }

    fn hyperband(&mut self, v: &Value) -> anyhow::Result<Hyperband> {
        let path = "early_terminate";
        let Some(m) = v.as_mapping() else {
            return Err(self.err(
                path,
                format!(
                    "expected {{type: hyperband, min_iter: N}}, found {}",
                    show(v)
                ),
            ));
        };
        let known = ["type", "min_iter", "max_iter", "s", "eta", "strict"];
        for (k, _) in self.entries(m, path)? {
            if !known.contains(&k.as_str()) {
                return Err(self.unknown(&child(path, &k), &k, &known));
            }
        }
        match m.get("type").and_then(Value::as_str) {
            Some("hyperband") => {}
            _ => {
                return Err(self.err(
                    &child(path, "type"),
                    format!(
                        "expected hyperband (the only early termination W&B defines), found {}",
                        m.get("type").map(show).unwrap_or_else(|| "nothing".into())
                    ),
                ))
            }
        }
        let uint = |k: &str| -> anyhow::Result<Option<u64>> {
            match m.get(k) {
                None => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                    self.err(
                        &child(path, k),
                        format!("expected a non-negative integer, found {}", show(v)),
                    )
                }),
            }
        };
        let eta = match m.get("eta") {
            None => 3.0,
            Some(v) => v.as_f64().ok_or_else(|| {
                self.err(
                    &child(path, "eta"),
                    format!("expected a number > 1, found {}", show(v)),
                )
            })?,
        };
        let strict = match m.get("strict") {
            None => true,
            Some(v) => v.as_bool().ok_or_else(|| {
                self.err(
                    &child(path, "strict"),
                    format!("expected true or false, found {}", show(v)),
                )
            })?,
        };
        let (min_iter, max_iter, s) = (uint("min_iter")?, uint("max_iter")?, uint("s")?);
        let made = match (max_iter, s, min_iter) {
            (Some(max_iter), Some(s), min) => {
                if min.is_some() {
                    self.warn(
                        &child(path, "min_iter"),
                        "ignored: max_iter and s set the bands (as in W&B)",
                    );
                }
                Hyperband::from_max_iter(max_iter, s, eta, strict)
            }
            (Some(_), None, _) => {
                return Err(self.err(
                    &child(path, "max_iter"),
                    "max_iter needs s (how many bands below max_iter)",
                ))
            }
            (None, _, Some(min_iter)) => Hyperband::from_min_iter(min_iter, eta, strict),
            (None, _, None) => {
                return Err(self.err(path, "needs min_iter (the first band), or max_iter and s"))
            }
        };
        made.map_err(|e| self.err(path, e))
    }

    fn legacy(&mut self, entries: &[(String, &Value)]) -> anyhow::Result<Space> {
        for (k, _) in entries {
            if k != "schema" && k != "parameters" {
                return Err(self.err(
                    k,
                    "space/v1 has only `schema` and `parameters`; for method, metric and the rest drop `schema` and write W&B sweep YAML",
                ));
            }
        }
        self.warn(
            "schema",
            "space/v1 is deprecated: drop `schema`, add `method: grid` and `metric: {name: val_loss, goal: minimize}`, and write each parameter as `key: {values: [...]}` (W&B sweep YAML)",
        );
        let Some(map) = entries
            .iter()
            .find(|(k, _)| k == "parameters")
            .and_then(|(_, v)| v.as_mapping())
            .filter(|m| !m.is_empty())
        else {
            return Err(self.err(
                "parameters",
                "expected a mapping of config keys to lists of values",
            ));
        };
        let mut params = Vec::new();
        for (key, v) in self.entries(map, "parameters")? {
            let path = child("parameters", &key);
            let list = v
                .as_sequence()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| self.err(&path, "expected a non-empty list of values"))?;
            let choices = list
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    scalar(v).ok_or_else(|| {
                        self.err(
                            &format!("{path}[{i}]"),
                            format!("expected a number, string, boolean or null, found {} (choices are scalars, as in Optuna)", show(v)),
                        )
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            params.push((key, Param::Sampled(Distribution::Categorical { choices })));
        }
        Ok(Space {
            method: Method::Grid,
            metric: Metric {
                name: MetricName::ValLoss,
                goal: Direction::Minimize,
            },
            params,
            run_cap: None,
            early_terminate: None,
        })
    }

    /// Where a parameter stands in the file: its dotted key under
    /// `parameters`, or its nested W&B form.
    fn param_path(&self, key: &str) -> String {
        let flat = child("parameters", key);
        if self.index.nodes.contains_key(&flat) {
            return flat;
        }
        let nested = format!(
            "parameters.{}",
            key.split('.').collect::<Vec<_>>().join(".parameters.")
        );
        if self.index.nodes.contains_key(&nested) {
            nested
        } else {
            flat
        }
    }

    /// Each key a config key; each end value accepted by the schema when set
    /// alone (with the fixed parameters) into `base`.
    fn check_against(&self, space: &Space, base: &Config) -> anyhow::Result<()> {
        let keys = config_keys();
        let known: Vec<&str> = keys.iter().map(String::as_str).collect();
        for (key, _) in &space.params {
            let path = self.param_path(key);
            let free = key
                .rsplit_once('.')
                .is_some_and(|(parent, _)| MAP_KEYS.contains(&parent));
            if free || known.contains(&key.as_str()) {
                continue;
            }
            let below: Vec<&str> = known
                .iter()
                .copied()
                .filter(|k| k.starts_with(&format!("{key}.")))
                .collect();
            let msg = if !below.is_empty() {
                format!(
                    "`{key}` is a section of the config; name one of its keys: {}",
                    below.join(", ")
                )
            } else if MAP_KEYS.contains(&key.as_str()) {
                format!(
                    "`{key}` is a map; name one of its entries, such as `{key}.PYTORCH_ALLOC_CONF`"
                )
            } else {
                match nearest_key(key, &known) {
                    Some(k) => format!("`{key}` is not a config key; did you mean `{k}`?"),
                    None => format!("`{key}` is not a config key (see docs/GUIDE.md, \"Config\")"),
                }
            };
            return Err(self.err(&path, msg));
        }
        let mut doc = serde_yaml::to_value(base)?;
        for (key, param) in &space.params {
            if let Param::Fixed(v) = param {
                // Checked below like the others; set here so the sampled
                // ones are judged with them.
                let _ = set_path(&mut doc, key, v.to_yaml());
            }
        }
        let mut problems = Vec::new();
        for (key, param) in &space.params {
            let path = self.param_path(key);
            let values_path = match self.index.nodes.contains_key(&child(&path, "values")) {
                true => child(&path, "values"),
                // space/v1 lists the values right under the key.
                false => path.clone(),
            };
            for (end, value) in ends(param, &path, &values_path) {
                let mut trial = doc.clone();
                let yaml = value.to_yaml();
                if let Err(e) = set_path(&mut trial, key, yaml.clone()) {
                    problems.push(self.at(&end, e));
                    continue;
                }
                let refused = match serde_yaml::from_value::<Config>(trial) {
                    Err(e) => Some(e.to_string()),
                    Ok(c) => {
                        let p = c.validate();
                        (!p.is_empty()).then(|| {
                            p.iter()
                                .map(|(k, m)| format!("`{k}`: {m}"))
                                .collect::<Vec<_>>()
                                .join("; ")
                        })
                    }
                };
                if let Some(why) = refused {
                    problems.push(self.at(
                        &end,
                        format!(
                            "{key} = {} is refused by the config schema: {why}",
                            show(&yaml)
                        ),
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(bad_input!("{}", problems.join("\n")))
        }
    }
}

/// The values a parameter can take at its ends, with the file path of each
/// (`values_path`: where a categorical's list stands).
fn ends(param: &Param, path: &str, values_path: &str) -> Vec<(String, ParamValue)> {
    match param {
        Param::Fixed(v) => vec![(child(path, "value"), v.clone())],
        Param::Sampled(Distribution::Float { low, high, .. }) => vec![
            (child(path, "min"), ParamValue::Float(*low)),
            (child(path, "max"), ParamValue::Float(*high)),
        ],
        Param::Sampled(Distribution::Int { low, high, .. }) => vec![
            (child(path, "min"), ParamValue::Int(*low)),
            (child(path, "max"), ParamValue::Int(*high)),
        ],
        Param::Sampled(Distribution::Categorical { choices }) => choices
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("{values_path}[{i}]"), ParamValue::Choice(c.clone())))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::exit::{Failure, BAD_INPUT};

    fn parse_with(text: &str, base: &Config) -> anyhow::Result<Parsed> {
        Space::parse(
            &Input {
                name: "space.yaml".into(),
                text: text.into(),
            },
            base,
        )
    }

    fn parse(text: &str) -> Parsed {
        parse_with(text, &Config::default()).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The refusal's message; every refusal is bad input (exit 2).
    fn err(text: &str) -> String {
        let e = parse_with(text, &Config::default()).expect_err("should be refused");
        let code = e.downcast_ref::<Failure>().map(|f| f.code);
        assert_eq!(code, Some(BAD_INPUT), "{e:#}");
        format!("{e:#}")
    }

    fn param<'a>(s: &'a Space, key: &str) -> &'a Param {
        &s.params.iter().find(|(k, _)| k == key).unwrap().1
    }

    const HEAD: &str = "method: random\nmetric: {name: val_loss, goal: minimize}\nparameters:\n";

    #[test]
    fn every_parameter_form_maps_to_optuna_distributions() {
        let p = parse(&format!(
            "{HEAD}  batch_size: {{values: [8, 16, 32]}}\n  memory_optimized: {{values: [true, false]}}\n  torch_compile_mode: {{values: [default, reduce-overhead]}}\n  seed: {{value: 7}}\n  weight_decay: {{value: 0.05}}\n  epochs: {{min: 2, max: 20}}\n  dropout: {{min: 0.0, max: 0.5}}\n  warmup_epochs: {{distribution: int_uniform, min: 0, max: 2}}\n  learning_rate: {{distribution: log_uniform_values, min: 1e-5, max: 1.0e-2}}\n  temporal_frames: {{distribution: log_uniform_values, min: 2, max: 16}}\n  grad_clip: {{distribution: q_uniform, min: 0.5, max: 2.0, q: 0.25}}\n  architecture.embed_dim: {{distribution: q_uniform, min: 64, max: 256, q: 64}}\n  image_size: {{distribution: categorical, values: [32, 64]}}\n  pin_memory: {{distribution: constant, value: true}}\n"
        ));
        let s = &p.space;
        assert_eq!(s.method, Method::Random);
        assert_eq!(
            s.metric,
            Metric {
                name: "val_loss".into(),
                goal: Direction::Minimize
            }
        );
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let cat = |v: Vec<Choice>| Param::Sampled(Distribution::Categorical { choices: v });
        assert_eq!(
            param(s, "batch_size"),
            &cat(vec![Choice::Int(8), Choice::Int(16), Choice::Int(32)])
        );
        assert_eq!(
            param(s, "memory_optimized"),
            &cat(vec![Choice::Bool(true), Choice::Bool(false)])
        );
        assert_eq!(
            param(s, "torch_compile_mode"),
            &cat(vec![
                Choice::Str("default".into()),
                Choice::Str("reduce-overhead".into())
            ])
        );
        assert_eq!(param(s, "seed"), &Param::Fixed(ParamValue::Int(7)));
        assert_eq!(
            param(s, "weight_decay"),
            &Param::Fixed(ParamValue::Float(0.05))
        );
        assert_eq!(
            param(s, "pin_memory"),
            &Param::Fixed(ParamValue::Choice(Choice::Bool(true)))
        );
        let int = |low, high, log, step| {
            Param::Sampled(Distribution::Int {
                low,
                high,
                log,
                step,
            })
        };
        let float = |low, high, log, step| {
            Param::Sampled(Distribution::Float {
                low,
                high,
                log,
                step,
            })
        };
        assert_eq!(
            param(s, "epochs"),
            &int(2, 20, false, 1),
            "integer bounds: int_uniform"
        );
        assert_eq!(param(s, "dropout"), &float(0.0, 0.5, false, None));
        assert_eq!(param(s, "warmup_epochs"), &int(0, 2, false, 1));
        assert_eq!(param(s, "learning_rate"), &float(1e-5, 1e-2, true, None));
        assert_eq!(param(s, "temporal_frames"), &int(2, 16, true, 1));
        assert_eq!(param(s, "grad_clip"), &float(0.5, 2.0, false, Some(0.25)));
        assert_eq!(param(s, "architecture.embed_dim"), &int(64, 256, false, 64));
        assert_eq!(
            param(s, "image_size"),
            &cat(vec![Choice::Int(32), Choice::Int(64)])
        );
        let keys: Vec<&str> = s.params.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys[..3],
            ["batch_size", "memory_optimized", "torch_compile_mode"],
            "file order"
        );
        assert_eq!((s.run_cap, &s.early_terminate), (None, &None));
    }

    #[test]
    fn wandb_extras_nested_parameters_and_early_terminate() {
        let p = parse(
            "program: train.py\nname: demo\ndescription: a sweep\nproject: x\ncommand: [python, train.py]\n\
             method: bayes\nmetric: {name: val_loss, target: 0.1}\nrun_cap: 40\n\
             early_terminate: {type: hyperband, min_iter: 3}\n\
             parameters:\n  architecture:\n    parameters:\n      embed_dim: {values: [64, 128]}\n      name: {value: cnn}\n  environment.PYTORCH_ALLOC_CONF: {value: 'expandable_segments:True'}\n",
        );
        let s = &p.space;
        assert_eq!(s.method, Method::Bayes);
        assert_eq!(
            s.metric.goal,
            Direction::Minimize,
            "goal defaults to minimize"
        );
        assert_eq!(s.run_cap, Some(40));
        let keys: Vec<&str> = s.params.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "architecture.embed_dim",
                "architecture.name",
                "environment.PYTORCH_ALLOC_CONF"
            ]
        );
        let h = s.early_terminate.as_ref().unwrap();
        assert_eq!(
            (h.eta, h.strict, &h.bands[..3]),
            (3.0, true, &[3, 9, 27][..])
        );
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        assert!(
            p.warnings[0].starts_with("space.yaml: line 5: `command`: ignored"),
            "{:?}",
            p.warnings
        );
        assert!(
            p.warnings[1].contains("line 7: `metric.target`: ignored"),
            "{:?}",
            p.warnings
        );

        let p = parse(&format!(
            "{HEAD}  dropout: {{values: [0.1]}}\nearly_terminate: {{type: hyperband, max_iter: 27, s: 2, eta: 3, strict: false}}\n"
        ));
        let h = p.space.early_terminate.unwrap();
        assert_eq!((h.bands, h.strict), (vec![3, 9], false));
        // No metric: val_loss, minimize, with a warning.
        let p = parse("method: grid\nparameters:\n  dropout: {values: [0.1, 0.2]}\n");
        assert_eq!(
            p.space.metric,
            Metric {
                name: "val_loss".into(),
                goal: Direction::Minimize
            }
        );
        assert!(p.warnings[0].contains("no `metric`"), "{:?}", p.warnings);
        // A metric of the base config's task, maximized.
        let base = Config {
            task: common::config::Task::Classification,
            ..Config::default()
        };
        let p = parse_with("method: random\nmetric: {name: accuracy, goal: maximize}\nparameters:\n  dropout: {min: 0.0, max: 0.2}\n", &base).unwrap();
        assert_eq!(
            p.space.metric,
            Metric {
                name: "accuracy".into(),
                goal: Direction::Maximize
            }
        );
    }

    #[test]
    fn unknown_keys_name_the_nearest_known_one_and_the_line() {
        assert_eq!(
            err(&format!("{HEAD}  dropout: {{values: [0.1]}}\n  learning_rte: {{min: 0.001, max: 0.01}}\n")),
            "space.yaml: line 5: `parameters.learning_rte`: `learning_rte` is not a config key; did you mean `learning_rate`?"
        );
        let e = err(&format!(
            "{HEAD}  architecture.embeddim: {{values: [64]}}\n"
        ));
        assert!(
            e.contains("line 4") && e.contains("did you mean `architecture.embed_dim`?"),
            "{e}"
        );
        let e = err(&format!(
            "{HEAD}  architecture:\n    parameters:\n      heads: {{values: [2]}}\n"
        ));
        assert!(
            e.contains("line 6: `parameters.architecture.parameters.heads`")
                && e.contains("not a config key"),
            "{e}"
        );
        let e = err(&format!("{HEAD}  architecture: {{values: [1]}}\n"));
        assert!(
            e.contains("is a section of the config") && e.contains("architecture.embed_dim"),
            "{e}"
        );
        let e = err(&format!("{HEAD}  zzzzzzzzzzzzzz: {{values: [1]}}\n"));
        assert!(
            e.contains("not a config key (see docs/GUIDE.md, \"Config\")"),
            "{e}"
        );
        let e = err(&format!(
            "{HEAD}  dropout: {{values: [0.1]}}\nmethd: grid\n"
        ));
        assert!(
            e.contains("line 5: `methd`: unknown key `methd`; did you mean `method`?"),
            "{e}"
        );
        let e = err(&format!("{HEAD}  dropout: {{valeus: [0.1]}}\n"));
        assert!(
            e.contains("`parameters.dropout.valeus`: unknown key `valeus`; did you mean `values`?"),
            "{e}"
        );
        let e = err("method: grid\nmetric: {name: val_loss, gaol: minimize}\nparameters:\n  dropout: {values: [0.1]}\n");
        assert!(
            e.contains("line 2: `metric.gaol`") && e.contains("did you mean `goal`?"),
            "{e}"
        );
    }

    #[test]
    fn values_the_schema_refuses_name_the_parameter_line_and_expectation() {
        let e = err(&format!("{HEAD}  batch_size:\n    values: [16, 0, 32]\n"));
        assert_eq!(
            e,
            "space.yaml: line 5: `parameters.batch_size.values[1]`: batch_size = 0 is refused by the config schema: `batch_size`: expected a positive integer, found 0"
        );
        let e = err(&format!("{HEAD}  dropout:\n    min: 0.1\n    max: 1.5\n"));
        assert!(
            e.contains("line 6: `parameters.dropout.max`: dropout = 1.5 is refused")
                && e.contains("expected a number in [0, 1)"),
            "{e}"
        );
        let e = err(&format!(
            "{HEAD}  epochs: {{distribution: uniform, min: 2, max: 4}}\n"
        ));
        assert!(
            e.contains("`parameters.epochs.min`: epochs = 2.0 is refused")
                && e.contains("expected u32"),
            "{e}"
        );
        let e = err(&format!(
            "{HEAD}  torch_compile_mode: {{values: [default, fast]}}\n"
        ));
        assert!(
            e.contains("values[1]`: torch_compile_mode = fast")
                && e.contains("unknown variant `fast`"),
            "{e}"
        );
        // Every refused end is reported, not only the first.
        let e = err(&format!(
            "{HEAD}  batch_size: {{values: [0]}}\n  dropout: {{value: 2.0}}\n"
        ));
        assert_eq!(e.lines().count(), 2, "{e}");
        assert!(e.contains("line 5: `parameters.dropout.value`"), "{e}");
        // Judged with the fixed parameters set: 3 heads divide the fixed 96,
        // not the base config's 128.
        parse(&format!(
            "{HEAD}  architecture.embed_dim: {{value: 96}}\n  architecture.attention_heads: {{values: [3, 6]}}\n"
        ));
        let e = err(&format!(
            "{HEAD}  architecture.embed_dim: {{values: [96, 98]}}\n"
        ));
        assert!(
            e.contains("values[1]`: architecture.embed_dim = 98")
                && e.contains("divisor of embed_dim"),
            "{e}"
        );
        // A metric train leaves empty for the task.
        let e = err("method: grid\nmetric: {name: accuracy, goal: maximize}\nparameters:\n  dropout: {values: [0.1]}\n");
        assert!(
            e.contains(
                "line 2: `metric.name`: accuracy is empty in metrics.csv for task regression"
            ),
            "{e}"
        );
    }

    #[test]
    fn log_uniform_is_refused_with_the_reason_and_the_fix() {
        let e = err(&format!("{HEAD}  learning_rate:\n    distribution: log_uniform\n    min: -9.21\n    max: -4.61\n"));
        assert!(e.starts_with("space.yaml: line 5: `parameters.learning_rate.distribution`: log_uniform is W&B's old form whose min and max are exponents"), "{e}");
        assert!(
            e.contains("write `distribution: log_uniform_values`") && e.contains("min: 1.00"),
            "{e}"
        );
    }

    #[test]
    fn malformed_spaces_are_refused_with_a_reason() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("- 1\n", "expected a mapping at the top level"),
            ("method: [\n", "not YAML"),
            ("parameters:\n  dropout: {values: [0.1]}\n", "missing `method`"),
            ("method: hyperopt\nparameters:\n  dropout: {values: [0.1]}\n", "line 1: `method`: expected grid, random or bayes, found hyperopt"),
            ("method: grid\n", "missing `parameters`"),
            ("method: grid\nparameters: {}\n", "line 2: `parameters`: expected at least one parameter"),
            ("method: grid\nmetric: {name: val_los}\nparameters:\n  dropout: {values: [0.1]}\n", "`metric.name`: `val_los` is not a column of train's metrics.csv; did you mean `val_loss`?"),
            ("method: grid\nmetric: {name: loss/val}\nparameters:\n  dropout: {values: [0.1]}\n", "expected one of val_loss, train_loss, mae, rmse, r2, accuracy, macro_f1"),
            ("method: grid\nmetric: {name: val_loss, goal: lower}\nparameters:\n  dropout: {values: [0.1]}\n", "line 2: `metric.goal`: expected minimize or maximize, found lower"),
            ("method: grid\nmetric: val_loss\nparameters:\n  dropout: {values: [0.1]}\n", "`metric`: expected {name: val_loss, goal: minimize}"),
            ("method: grid\nmetric: {goal: minimize}\nparameters:\n  dropout: {values: [0.1]}\n", "`metric`: missing `name`"),
            ("method: grid\nrun_cap: 0\nparameters:\n  dropout: {values: [0.1]}\n", "`run_cap`: expected a positive integer, found 0"),
            ("method: grid\nschema: v2\nparameters:\n  dropout: {values: [0.1]}\n", "`schema`: expected space/v1"),
        ];
        for (text, want) in cases {
            let e = err(text);
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let p = |body: &str| err(&format!("{HEAD}{body}"));
        let cases: &[(&str, &str)] = &[
            ("  dropout: {min: 0.4, max: 0.1}\n", "line 4: `parameters.dropout.min`: min (0.4) is greater than max (0.1)"),
            ("  dropout: {distribution: q_uniform, min: 0.0, max: 0.5}\n", "distribution q_uniform needs `q` (W&B would default q to 1; write q: 1 if that is meant)"),
            ("  dropout: {distribution: q_uniform, min: 0.0, max: 0.5, q: 0.2}\n", "max - min (0.5) is not a multiple of q (0.2); use max: 0.4"),
            ("  dropout: {distribution: q_uniform, min: 0.0, max: 0.5, q: 0}\n", "expected q > 0"),
            ("  learning_rate: {distribution: log_uniform_values, min: 0, max: 0.1}\n", "log_uniform_values needs min > 0"),
            ("  epochs: {distribution: int_uniform, min: 1.5, max: 4}\n", "int_uniform needs integer min and max"),
            ("  dropout: {values: [0.1], min: 0.0}\n", "`parameters.dropout.min`: not used by distribution categorical (it takes values)"),
            ("  dropout: {value: 0.1, max: 0.2}\n", "not used by distribution constant"),
            ("  dropout: {min: 0.1, q: 0.1, max: 0.2}\n", "`parameters.dropout.q`: not used by distribution uniform"),
            ("  dropout: {min: 0.1}\n", "`max` is missing"),
            ("  dropout: {distribution: uniform}\n", "distribution uniform needs `min`"),
            ("  dropout: {}\n", "expected values: [...], value: x, or min and max"),
            ("  dropout: {min: 0.0, max: .inf}\n", "`parameters.dropout.max`: expected a finite number, found .inf"),
            ("  dropout: {min: a, max: 0.2}\n", "expected a finite number, found a"),
            ("  dropout: {values: []}\n", "`parameters.dropout.values`: expected a non-empty list of values"),
            ("  architecture.channels: {values: [[16, 32], [32, 64]]}\n", "`parameters.architecture.channels.values[0]`: expected a number, string, boolean or null, found"),
            ("  architecture.channels: {value: [16, 32]}\n", "set lists and mappings in the base config"),
            ("  dropout: [0.1, 0.2]\n", "a bare list is the deprecated space/v1 form"),
            ("  dropout: 0.1\n", "for a fixed value write {value: 0.1}"),
            ("  dropout: {distribution: normal, mu: 0.1, sigma: 0.01}\n", "`parameters.dropout.mu`: normal and beta distributions are not supported"),
            ("  dropout: {distribution: q_log_uniform_values, min: 0.1, max: 0.2}\n", "q_log_uniform_values is not supported"),
            ("  dropout: {distribution: unifrom, min: 0.1, max: 0.2}\n", "unknown distribution `unifrom`; did you mean uniform?"),
            ("  batch_size: {values: [8, 16], probabilities: [0.5, 0.5]}\n", "weighted categories are not supported"),
            ("  architecture:\n    parameters: {}\n", "`parameters.architecture.parameters`: expected at least one parameter"),
            ("  dropout: {values: [0.1]}\n  architecture:\n    parameters:\n      embed_dim: {values: [64]}\n  architecture.embed_dim: {values: [32]}\n", "`architecture.embed_dim` is given twice"),
            ("  dropout: {values: [0.1]}\nearly_terminate: {type: envelope}\n", "`early_terminate.type`: expected hyperband"),
            ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband}\n", "needs min_iter (the first band), or max_iter and s"),
            ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, max_iter: 27}\n", "max_iter needs s"),
            ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, max_iter: 2, s: 1}\n", "no band: max_iter (2) / eta (3)"),
            ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, min_iter: 3, eta: 1}\n", "eta: expected a number > 1, found 1"),
            ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, min_iter: 0}\n", "min_iter: expected at least 1"),
            ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, min_iter: -3}\n", "`early_terminate.min_iter`: expected a non-negative integer, found -3"),
            ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, min_iter: 3, brackets: 2}\n", "`early_terminate.brackets`: unknown key"),
        ];
        for (body, want) in cases {
            let e = p(body);
            assert!(e.contains(want), "{body:?}: {e}");
            assert!(e.starts_with("space.yaml: "), "{e}");
        }
    }

    #[test]
    fn space_v1_is_a_deprecated_alias() {
        let p = parse("schema: space/v1\nparameters:\n  batch_size: [16, 32]\n  memory_optimized: [true, false]\n");
        assert_eq!(p.space.method, Method::Grid);
        assert_eq!(p.space.metric.name, "val_loss");
        assert_eq!(
            param(&p.space, "batch_size"),
            &Param::Sampled(Distribution::Categorical {
                choices: vec![Choice::Int(16), Choice::Int(32)]
            })
        );
        assert_eq!(p.warnings.len(), 1);
        assert!(
            p.warnings[0].starts_with("space.yaml: line 1: `schema`: space/v1 is deprecated"),
            "{:?}",
            p.warnings
        );
        let e = err("schema: space/v1\nparameters:\n  batch_size: [16, 0]\n");
        assert!(
            e.contains("line 3: `parameters.batch_size[1]`: batch_size = 0 is refused"),
            "{e}"
        );
        let e = err("schema: space/v1\nparameters:\n  batchsize: [16]\n");
        assert!(e.contains("did you mean `batch_size`?"), "{e}");
        let e = err("schema: space/v1\nmethod: grid\nparameters:\n  batch_size: [16]\n");
        assert!(
            e.contains("line 2: `method`: space/v1 has only `schema` and `parameters`"),
            "{e}"
        );
        let e = err("schema: space/v1\nparameters:\n  batch_size: 16\n");
        assert!(
            e.contains("`parameters.batch_size`: expected a non-empty list of values"),
            "{e}"
        );
    }

    #[test]
    fn apply_sets_every_parameter_and_round_trips() {
        let p = parse(&format!(
            "{HEAD}  seed: {{value: 7}}\n  batch_size: {{values: [8, 16]}}\n  learning_rate: {{distribution: log_uniform_values, min: 1e-5, max: 1e-2}}\n  memory_optimized: {{values: [true, false]}}\n  architecture.embed_dim: {{min: 32, max: 256}}\n  environment.PYTORCH_ALLOC_CONF: {{value: 'expandable_segments:True'}}\n"
        ));
        let base = Config::default();
        let values: BTreeMap<String, ParamValue> = [
            ("batch_size".to_string(), ParamValue::Choice(Choice::Int(8))),
            ("learning_rate".to_string(), ParamValue::Float(3e-4)),
            (
                "memory_optimized".to_string(),
                ParamValue::Choice(Choice::Bool(true)),
            ),
            ("architecture.embed_dim".to_string(), ParamValue::Int(64)),
        ]
        .into();
        let c = p.space.apply(&base, &values).unwrap();
        assert_eq!(
            c,
            Config {
                seed: 7,
                batch_size: 8,
                learning_rate: 3e-4,
                memory_optimized: true,
                architecture: common::config::Architecture {
                    embed_dim: 64,
                    ..base.architecture.clone()
                },
                environment: [(
                    "PYTORCH_ALLOC_CONF".to_string(),
                    "expandable_segments:True".to_string()
                )]
                .into(),
                ..base.clone()
            }
        );
        // The config reads back from its YAML as the same config.
        let back: Config = serde_yaml::from_str(&c.to_yaml()).unwrap();
        assert_eq!(back, c);

        let mut missing = values.clone();
        missing.remove("learning_rate");
        let e = format!("{:#}", p.space.apply(&base, &missing).unwrap_err());
        assert_eq!(e, "no value for parameter `learning_rate`");
        let mut extra = values.clone();
        extra.insert("dropout".into(), ParamValue::Float(0.2));
        let e = format!("{:#}", p.space.apply(&base, &extra).unwrap_err());
        assert_eq!(e, "`dropout` is not a parameter of this space");
        // A combination inside the ends that the schema refuses: 66 is not
        // a multiple of 4 heads. The error names every parameter's value.
        let mut odd = values.clone();
        odd.insert("architecture.embed_dim".into(), ParamValue::Int(66));
        let e = p.space.apply(&base, &odd).unwrap_err();
        assert_eq!(e.downcast_ref::<Failure>().map(|f| f.code), Some(BAD_INPUT));
        let e = format!("{e:#}");
        assert!(
            e.contains("architecture.embed_dim=66")
                && e.contains("`architecture.attention_heads`: expected a divisor"),
            "{e}"
        );
    }

    fn repo(path: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(path)
    }

    #[test]
    fn example_spaces_parse_against_the_demo_config() {
        let base = Config::load(&common::input::read(&repo("configs/demo_cpu.yaml")).unwrap())
            .unwrap()
            .config;
        for (file, method, keys) in [
            (
                "configs/sweeps/seed004.yaml",
                Method::Bayes,
                &["memory_optimized", "batch_size", "learning_rate", "dropout"][..],
            ),
            (
                "configs/sweeps/tiny_cpu.yaml",
                Method::Random,
                &["epochs", "learning_rate", "dropout"][..],
            ),
        ] {
            let input = common::input::read(&repo(file)).unwrap();
            let p = Space::parse(&input, &base).unwrap_or_else(|e| panic!("{e:#}"));
            assert!(p.warnings.is_empty(), "{file}: {:?}", p.warnings);
            assert_eq!(p.space.method, method, "{file}");
            let got: Vec<&str> = p.space.params.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(got, keys, "{file}");
            assert_eq!(
                p.space.metric,
                Metric {
                    name: "val_loss".into(),
                    goal: Direction::Minimize
                }
            );
            assert!(p.space.early_terminate.is_some(), "{file}");
            assert!(matches!(
                param(&p.space, "learning_rate"),
                Param::Sampled(Distribution::Float { log: true, .. })
            ));
        }
    }
}
