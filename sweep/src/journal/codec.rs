//! Optuna's JSON values both ways: distributions (`distribution_to_json`,
//! `json_to_distribution`), parameter values (internal <-> external
//! representation), and Python's non-finite numbers.

use super::TrialRecord;
use crate::trial::{Choice, Distribution, ParamValue};
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

pub(crate) fn finite(v: f64, what: &str) -> Result<()> {
    if !v.is_finite() {
        bail!("{what} is {v}: the journal holds only finite numbers (record a non-finite objective as a FAIL trial)");
    }
    Ok(())
}

pub(crate) type Internal<'a> = (BTreeMap<&'a str, Value>, BTreeMap<&'a str, String>);

/// Params in Optuna's internal representation (a float; a categorical's
/// index) and distributions as `distribution_to_json` strings, checked as
/// Optuna's constructors check them (a file Optuna cannot load is worse
/// than an error here).
pub(crate) fn internal_params(trial: &TrialRecord) -> Result<Internal<'_>> {
    if let Some(k) = trial
        .distributions
        .keys()
        .find(|k| !trial.params.contains_key(*k))
    {
        bail!("parameter {k:?} has a distribution but no value");
    }
    let mut params = BTreeMap::new();
    let mut dists = BTreeMap::new();
    for (name, value) in &trial.params {
        let dist = trial
            .distributions
            .get(name)
            .with_context(|| format!("parameter {name:?} has no distribution"))?;
        let ctx = || format!("parameter {name:?}");
        check_distribution(dist).with_context(ctx)?;
        params.insert(name.as_str(), to_internal(dist, value).with_context(ctx)?);
        dists.insert(name.as_str(), distribution_to_json(dist));
    }
    Ok((params, dists))
}

pub(super) fn to_internal(dist: &Distribution, value: &ParamValue) -> Result<Value> {
    let float = |x: f64, log: bool| -> Result<Value> {
        finite(x, "the value")?;
        if log && x <= 0.0 {
            bail!("{x} is not > 0 for a log distribution");
        }
        Ok(Value::from(x))
    };
    match (dist, value) {
        (Distribution::Float { log, .. }, ParamValue::Float(x)) => float(*x, *log),
        (Distribution::Float { log, .. }, ParamValue::Int(i)) => float(*i as f64, *log),
        (Distribution::Int { log, .. }, ParamValue::Int(i)) => float(*i as f64, *log),
        (Distribution::Categorical { choices }, v) => {
            let c = match v {
                ParamValue::Choice(c) => c.clone(),
                ParamValue::Int(i) => Choice::Int(*i),
                ParamValue::Float(f) => Choice::Float(*f),
            };
            choices
                .iter()
                .position(|x| *x == c)
                .map(Value::from)
                .with_context(|| format!("{c:?} is not one of the choices {choices:?}"))
        }
        (d, v) => bail!("value {v:?} does not fit distribution {d:?}"),
    }
}

/// The rules of Optuna's distribution constructors, plus finiteness
/// (`Distribution::check`, shared with the samplers).
fn check_distribution(dist: &Distribution) -> Result<()> {
    dist.check().map_err(|e| anyhow!("{e}"))
}

/// `optuna.distributions.distribution_to_json`: Python's `json.dumps` with
/// its default separators and the attributes in `__dict__` order.
pub(super) fn distribution_to_json(dist: &Distribution) -> String {
    match dist {
        Distribution::Float {
            low,
            high,
            log,
            step,
        } => format!(
            r#"{{"name": "FloatDistribution", "attributes": {{"step": {}, "low": {}, "high": {}, "log": {}}}}}"#,
            j(step),
            j(low),
            j(high),
            log
        ),
        Distribution::Int {
            low,
            high,
            log,
            step,
        } => format!(
            r#"{{"name": "IntDistribution", "attributes": {{"log": {log}, "step": {step}, "low": {low}, "high": {high}}}}}"#
        ),
        Distribution::Categorical { choices } => format!(
            r#"{{"name": "CategoricalDistribution", "attributes": {{"choices": [{}]}}}}"#,
            choices.iter().map(j).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn j<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// `check_distribution_compatibility`: same kind, same log; categoricals
/// have the same choices.
pub(crate) fn compatible(old: &Distribution, new: &Distribution) -> Result<(), &'static str> {
    match (old, new) {
        (Distribution::Float { log: a, .. }, Distribution::Float { log: b, .. })
        | (Distribution::Int { log: a, .. }, Distribution::Int { log: b, .. }) => {
            if a != b {
                return Err("cannot set a different log configuration to the same parameter");
            }
            Ok(())
        }
        (Distribution::Categorical { choices: a }, Distribution::Categorical { choices: b }) => {
            let same = a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| match (x, y) {
                    (Choice::Float(x), Choice::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
                    _ => x == y,
                });
            if same {
                Ok(())
            } else {
                Err("a categorical distribution does not support a dynamic value space")
            }
        }
        _ => Err("cannot set a different distribution kind to the same parameter"),
    }
}

pub(crate) fn to_external(dist: &Distribution, v: &Value) -> Result<ParamValue, String> {
    let x = float(v).ok_or_else(|| format!("{v} is not a number"))?;
    match dist {
        Distribution::Float { .. } => Ok(ParamValue::Float(x)),
        Distribution::Int { .. } if x.is_finite() => Ok(ParamValue::Int(x.trunc() as i64)),
        Distribution::Categorical { choices } if x.is_finite() && x >= 0.0 => choices
            .get(x.trunc() as usize)
            .cloned()
            .map(ParamValue::Choice)
            .ok_or_else(|| format!("index {x} is out of the {} choices", choices.len())),
        _ => Err(format!("{x} is not a valid value for {dist:?}")),
    }
}

/// `json_to_distribution`, remembered by text (up to a bound: a study
/// with ever new ranges is read all the same): a study's few distributions
/// are written again with every trial, and parsing each every time was a
/// seventh of a journal's replay.
#[derive(Debug, Default)]
pub(crate) struct ParsedDistributions(std::collections::HashMap<String, Distribution>);

impl ParsedDistributions {
    pub(crate) fn get(&mut self, json: &str) -> Result<Distribution, String> {
        if let Some(d) = self.0.get(json) {
            return Ok(d.clone());
        }
        let d = json_to_distribution(json)?;
        if self.0.len() < 1024 {
            self.0.insert(json.to_owned(), d.clone());
        }
        Ok(d)
    }
}

/// `optuna.distributions.json_to_distribution`, including the deprecated
/// classes and the abbreviated `{"type": ...}` form, with Optuna's checks
/// and its adjustment of `high` onto the step grid.
pub(crate) fn json_to_distribution(json: &str) -> Result<Distribution, String> {
    let v = parse_json(json.as_bytes()).map_err(|e| e.to_string())?;
    let m = v.as_object().ok_or("not an object")?;
    let (kind, a) = if let Some(name) = m.get("name") {
        let a = m
            .get("attributes")
            .and_then(Value::as_object)
            .ok_or("no attributes")?;
        (name.as_str().unwrap_or_default(), a)
    } else {
        (m.get("type").and_then(Value::as_str).unwrap_or_default(), m)
    };
    let a = Attributes { kind, attrs: a };
    let dist = match kind {
        "FloatDistribution" | "float" => a.float_dist(a.flag("log"), a.opt_num("step")?)?,
        "UniformDistribution" => a.float_dist(false, None)?,
        "LogUniformDistribution" => a.float_dist(true, None)?,
        "DiscreteUniformDistribution" => a.float_dist(false, Some(a.num("q")?))?,
        "IntDistribution" | "int" => a.int_dist(a.flag("log"), a.int("step", Some(1))?)?,
        "IntUniformDistribution" => a.int_dist(false, a.int("step", Some(1))?)?,
        "IntLogUniformDistribution" => a.int_dist(true, a.int("step", Some(1))?)?,
        "CategoricalDistribution" | "categorical" => Distribution::Categorical {
            choices: a
                .attrs
                .get("choices")
                .and_then(Value::as_array)
                .ok_or("CategoricalDistribution: choices is not a list")?
                .iter()
                .map(choice)
                .collect::<Result<_, _>>()?,
        },
        other => return Err(format!("unknown distribution {other:?}")),
    };
    check_distribution(&dist).map_err(|e| format!("{kind}: {e:#}"))?;
    Ok(dist)
}

/// A distribution's attributes, read with its class name in errors.
struct Attributes<'a> {
    kind: &'a str,
    attrs: &'a Map<String, Value>,
}

impl Attributes<'_> {
    fn num(&self, k: &str) -> Result<f64, String> {
        self.attrs
            .get(k)
            .and_then(float)
            .ok_or_else(|| format!("{}: {k} is not a number", self.kind))
    }

    fn int(&self, k: &str, default: Option<i64>) -> Result<i64, String> {
        match (self.attrs.get(k), default) {
            (None | Some(Value::Null), Some(d)) => Ok(d),
            (Some(v), _) => v
                .as_i64()
                .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                .ok_or_else(|| format!("{}: {k} is not an integer", self.kind)),
            (None, None) => Err(format!("{}: no {k}", self.kind)),
        }
    }

    fn flag(&self, k: &str) -> bool {
        self.attrs.get(k).and_then(Value::as_bool).unwrap_or(false)
    }

    fn opt_num(&self, k: &str) -> Result<Option<f64>, String> {
        match self.attrs.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.num(k).map(Some),
        }
    }

    /// Optuna moves `high` down onto the step grid.
    fn float_dist(&self, log: bool, step: Option<f64>) -> Result<Distribution, String> {
        let (low, mut high) = (self.num("low")?, self.num("high")?);
        if let Some(s) = step {
            let n = (high - low) / s;
            if (n - n.round()).abs() > 1e-9 * n.abs().max(1.0) {
                high = n.floor() * s + low;
            }
        }
        Ok(Distribution::Float {
            low,
            high,
            log,
            step,
        })
    }

    fn int_dist(&self, log: bool, step: i64) -> Result<Distribution, String> {
        let (low, high) = (self.int("low", None)?, self.int("high", None)?);
        if step <= 0 {
            return Err(format!("{}: step {step} is not > 0", self.kind));
        }
        Ok(Distribution::Int {
            low,
            high: low + (high - low).div_euclid(step) * step,
            log,
            step,
        })
    }
}

fn choice(v: &Value) -> Result<Choice, String> {
    Ok(match v {
        Value::Null => Choice::Null,
        Value::Bool(b) => Choice::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Choice::Int(i),
            None => Choice::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => match nonfinite(s) {
            Some(f) => Choice::Float(f),
            None => Choice::Str(s.clone()),
        },
        _ => return Err(format!("choice {v} is not None, bool, int, float or str")),
    })
}

// Python's json writes NaN and ±Infinity as bare tokens, which are not
// JSON; they are read as these strings and turned back into floats.
pub(super) const NAN: &str = "\u{0}optuna:NaN";
pub(super) const INF: &str = "\u{0}optuna:Infinity";
pub(super) const NEG_INF: &str = "\u{0}optuna:-Infinity";

/// JSON as Python's `json.loads` reads it (with NaN, Infinity, -Infinity).
pub(crate) fn parse_json(line: &[u8]) -> Result<Value, serde_json::Error> {
    match serde_json::from_slice(line) {
        Ok(v) => Ok(v),
        Err(e) => {
            let Some(fixed) = replace_nonfinite(line) else {
                return Err(e);
            };
            serde_json::from_slice(&fixed).map_err(|_| e)
        }
    }
}

/// `line` with the bare tokens NaN / Infinity / -Infinity outside strings
/// replaced by sentinel strings; None if there are none.
pub(crate) fn replace_nonfinite(line: &[u8]) -> Option<Vec<u8>> {
    let tokens: [(&[u8], &str); 3] = [
        (b"-Infinity", "\"\\u0000optuna:-Infinity\""),
        (b"Infinity", "\"\\u0000optuna:Infinity\""),
        (b"NaN", "\"\\u0000optuna:NaN\""),
    ];
    let mut out = Vec::with_capacity(line.len() + 32);
    let (mut in_str, mut escaped, mut found) = (false, false, false);
    let mut i = 0;
    'outer: while i < line.len() {
        let b = line[i];
        if in_str {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_str = false;
            }
        } else if b == b'"' {
            in_str = true;
        } else {
            for (tok, rep) in tokens {
                if line[i..].starts_with(tok) {
                    out.extend_from_slice(rep.as_bytes());
                    i += tok.len();
                    found = true;
                    continue 'outer;
                }
            }
        }
        out.push(b);
        i += 1;
    }
    found.then_some(out)
}

fn nonfinite(s: &str) -> Option<f64> {
    match s {
        NAN => Some(f64::NAN),
        INF => Some(f64::INFINITY),
        NEG_INF => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// A number, or a non-finite one Python wrote.
pub(crate) fn float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => nonfinite(s),
        _ => None,
    }
}

/// An attribute value with Python's non-finite floats as "NaN",
/// "Infinity", "-Infinity" (JSON has no such numbers).
pub(crate) fn readable(v: Value) -> Value {
    match v {
        Value::String(s) => match nonfinite(&s) {
            Some(_) => Value::String(s.trim_start_matches("\u{0}optuna:").to_owned()),
            None => Value::String(s),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(readable).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, readable(v))).collect()),
        v => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_are_written_as_optuna_writes_them() {
        let f = Distribution::Float {
            low: 0.0,
            high: 1.0,
            log: false,
            step: Some(0.25),
        };
        assert_eq!(
            distribution_to_json(&f),
            r#"{"name": "FloatDistribution", "attributes": {"step": 0.25, "low": 0.0, "high": 1.0, "log": false}}"#
        );
        let i = Distribution::Int {
            low: 1,
            high: 64,
            log: true,
            step: 1,
        };
        assert_eq!(
            distribution_to_json(&i),
            r#"{"name": "IntDistribution", "attributes": {"log": true, "step": 1, "low": 1, "high": 64}}"#
        );
        let c = Distribution::Categorical {
            choices: vec![
                Choice::Bool(true),
                Choice::Null,
                Choice::Float(0.5),
                Choice::Str("x".into()),
            ],
        };
        assert_eq!(
            distribution_to_json(&c),
            r#"{"name": "CategoricalDistribution", "attributes": {"choices": [true, null, 0.5, "x"]}}"#
        );
        for d in [f, i, c] {
            assert_eq!(json_to_distribution(&distribution_to_json(&d)).unwrap(), d);
        }
        // Old classes, the short form, and Optuna's grid adjustment of high.
        assert_eq!(
            json_to_distribution(r#"{"name": "IntUniformDistribution", "attributes": {"low": 0, "high": 10, "step": 3}}"#).unwrap(),
            Distribution::Int { low: 0, high: 9, log: false, step: 3 }
        );
        assert_eq!(
            json_to_distribution(r#"{"type": "float", "low": 1e-3, "high": 1.0, "log": true}"#)
                .unwrap(),
            Distribution::Float {
                low: 1e-3,
                high: 1.0,
                log: true,
                step: None
            }
        );
    }
}
