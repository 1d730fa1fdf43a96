//! A journal record's fields read into values, apart from the replay's
//! state: each field's JSON, a CREATE_TRIAL's whole trial (`read_trial`,
//! which a checkpoint's reader runs on a thread of its own), and the
//! distributions read so far (`Dists`).

use super::super::codec::{float, readable, to_external, ParsedDistributions};
use super::super::records::Fields;
use super::super::timestamps::naive_utc;
use crate::trial::{Attrs, Distribution, ParamValue, Trial, TrialState};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Distributions as read: each JSON text parsed once, and a CREATE_TRIAL's
/// whole distributions by their JSON text, so that the trials that have the
/// same share one map.
#[derive(Debug, Default)]
pub(in crate::journal) struct Dists {
    pub(super) parsed: ParsedDistributions,
    maps: HashMap<String, Arc<BTreeMap<String, Distribution>>>,
}

/// A CREATE_TRIAL read, not yet replayed (`Replay::add_trial`).
pub(in crate::journal) struct NewTrial {
    pub(in crate::journal) study_id: u64,
    pub(super) trial: Trial,
    pub(super) values: Option<Vec<f64>>,
}

/// A CREATE_TRIAL read into its trial (number 0) without the replay: the
/// replay adds it (`add_trial`), or a checkpoint's reader on a thread of
/// its own (checkpoint.rs).
pub(in crate::journal) fn read_trial(r: &Fields, dists: &mut Dists) -> Result<NewTrial, String> {
    let study_id = uint(r, "study_id")?;
    let distributions = dists.of(r)?;
    let params = params(r, &distributions)?;
    let (datetime_start, datetime_complete) = datetimes(r)?;
    let state = match opt(r, "state")? {
        None => TrialState::Running,
        Some(s) => trial_state(&s)?,
    };
    Ok(NewTrial {
        study_id,
        values: value_or_values(r)?,
        trial: Trial {
            number: 0,
            state,
            params,
            distributions,
            value: None,
            intermediate: intermediate_values(r)?,
            user_attrs: attrs(r, "user_attrs")?,
            system_attrs: attrs(r, "system_attrs")?,
            datetime_start,
            datetime_complete,
            discarded: false,
        },
    })
}

impl Dists {
    /// A CREATE_TRIAL's distributions, each a JSON string.
    pub(super) fn of(&mut self, r: &Fields) -> Result<Arc<BTreeMap<String, Distribution>>, String> {
        let text = r.get("distributions").map(RawValue::get);
        if let Some(shared) = text.and_then(|t| self.maps.get(t)) {
            return Ok(Arc::clone(shared));
        }
        let mut distributions = BTreeMap::new();
        for (k, v) in object(r, "distributions")?.into_iter().flatten() {
            let json = v
                .as_str()
                .ok_or_else(|| format!("distributions.{k} is not a string"))?;
            let dist = self
                .parsed
                .get(json)
                .map_err(|e| format!("distributions.{k}: {e}"))?;
            distributions.insert(k, dist);
        }
        let shared = Arc::new(distributions);
        if let Some(t) = text.filter(|_| self.maps.len() < 1024) {
            self.maps.insert(t.to_owned(), Arc::clone(&shared));
        }
        Ok(shared)
    }
}

pub(super) fn field<'a>(r: &Fields<'a>, key: &str) -> Result<&'a RawValue, String> {
    r.get(key).ok_or_else(|| format!("no field {key:?}"))
}

/// A field's JSON read as a value (it is valid JSON: the line was parsed).
pub(super) fn value(raw: &RawValue) -> Result<Value, String> {
    serde_json::from_str(raw.get()).map_err(|e| e.to_string())
}

/// An optional field's value (None: absent; `null` is `Some(Value::Null)`).
pub(super) fn opt(r: &Fields, key: &str) -> Result<Option<Value>, String> {
    r.get(key).map(value).transpose()
}

pub(super) fn uint(r: &Fields, key: &str) -> Result<u64, String> {
    serde_json::from_str(field(r, key)?.get()).map_err(|_| format!("{key} is not an integer >= 0"))
}

/// A string field, borrowed from the line unless it has escapes.
pub(super) fn string<'a>(r: &Fields<'a>, key: &str) -> Result<Cow<'a, str>, String> {
    let raw = field(r, key)?.get();
    match serde_json::from_str::<&str>(raw) {
        Ok(s) => Ok(Cow::Borrowed(s)),
        Err(_) => serde_json::from_str::<String>(raw)
            .map(Cow::Owned)
            .map_err(|_| format!("{key} is not a string")),
    }
}

pub(super) fn array(r: &Fields, key: &str) -> Result<Vec<Value>, String> {
    match value(field(r, key)?)? {
        Value::Array(a) => Ok(a),
        _ => Err(format!("{key} is not a list")),
    }
}

pub(super) fn trial_state(v: &Value) -> Result<TrialState, String> {
    Ok(match v.as_u64() {
        Some(0) => TrialState::Running,
        Some(1) => TrialState::Complete,
        Some(2) => TrialState::Pruned,
        Some(3) => TrialState::Fail,
        Some(4) => TrialState::Waiting,
        _ => return Err(format!("state {v} is not a TrialState (0-4)")),
    })
}

pub(super) fn values(v: &Value) -> Result<Option<Vec<f64>>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Array(a) => a
            .iter()
            .map(|x| float(x).ok_or_else(|| format!("values: {x} is not a number")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        _ => Err("values is not a list".into()),
    }
}

/// A field that must be an object, if present (None: absent).
pub(super) fn object(
    r: &Fields,
    key: &str,
) -> Result<Option<serde_json::Map<String, Value>>, String> {
    match opt(r, key)? {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(format!("{key} is not an object")),
    }
}

/// An attribute record's single `{key: value}`.
pub(super) fn one_attr<K: DeserializeOwned>(r: &Fields, key: &str) -> Result<(K, Value), String> {
    let raw = field(r, key)?;
    let Entries(mut one) =
        serde_json::from_str(raw.get()).map_err(|_| format!("{key} is not an object"))?;
    if one.len() != 1 {
        return Err(format!("{key} has {} keys, not one", one.len()));
    }
    let (k, v) = one.remove(0);
    Ok((k, readable(v)))
}

/// An object field's entries as a map iterates them (by key, the last of
/// a repeated key), read into a Vec: a map built to be turned into another
/// was a tenth of a large journal's replay. Absent: none.
pub(super) fn entries<K: DeserializeOwned + Ord>(
    r: &Fields,
    key: &str,
) -> Result<Vec<(K, Value)>, String> {
    let Some(raw) = r.get(key) else {
        return Ok(Vec::new());
    };
    let Entries::<K>(mut v) =
        serde_json::from_str(raw.get()).map_err(|_| format!("{key} is not an object"))?;
    if !v.is_sorted_by(|a, b| a.0 < b.0) {
        v.sort_by(|a, b| a.0.cmp(&b.0)); // Stable: the last of a key stays last.
        let mut kept: Vec<(K, Value)> = Vec::with_capacity(v.len());
        for e in v {
            match kept.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => kept.push(e),
            }
        }
        v = kept;
    }
    Ok(v)
}

/// A JSON object's entries in the order written.
struct Entries<K>(Vec<(K, Value)>);

impl<'de, K: serde::Deserialize<'de>> serde::Deserialize<'de> for Entries<K> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<K>(std::marker::PhantomData<K>);
        impl<'de, K: serde::Deserialize<'de>> serde::de::Visitor<'de> for V<K> {
            type Value = Entries<K>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut m: M,
            ) -> Result<Entries<K>, M::Error> {
                let mut v = Vec::with_capacity(m.size_hint().unwrap_or(0));
                while let Some(e) = m.next_entry::<K, Value>()? {
                    v.push(e);
                }
                Ok(Entries(v))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A trial's attributes: its entries, sorted as read, held as they are.
pub(super) fn attrs(r: &Fields, key: &str) -> Result<Attrs, String> {
    let mut v = entries(r, key)?;
    for e in &mut v {
        e.1 = readable(std::mem::take(&mut e.1));
    }
    // Without the room its growth left (up to half): it is kept as read.
    v.shrink_to_fit();
    Ok(Attrs::from_sorted_store_unchecked(v))
}

/// A CREATE_TRIAL's params, internal values read through their distributions.
pub(super) fn params(
    r: &Fields,
    distributions: &BTreeMap<String, Distribution>,
) -> Result<BTreeMap<String, ParamValue>, String> {
    let mut params = BTreeMap::new();
    for (k, v) in entries::<String>(r, "params")? {
        let dist = distributions
            .get(&k)
            .ok_or_else(|| format!("params.{k} has no distribution"))?;
        let value = to_external(dist, &v).map_err(|e| format!("params.{k}: {e}"))?;
        params.insert(k, value);
    }
    Ok(params)
}

/// A CREATE_TRIAL's start (a field that may be null) and completion.
pub(super) fn datetimes(r: &Fields) -> Result<(Option<String>, Option<String>), String> {
    let datetime_start = match value(field(r, "datetime_start")?)? {
        Value::Null => None,
        Value::String(s) => Some(naive_utc(&s)),
        _ => return Err("datetime_start is not a string".into()),
    };
    let datetime_complete = match opt(r, "datetime_complete")? {
        None => None,
        Some(Value::String(s)) => Some(naive_utc(&s)),
        Some(_) => return Err("datetime_complete is not a string".into()),
    };
    Ok((datetime_start, datetime_complete))
}

/// A CREATE_TRIAL's `value` (Optuna 2) or `values`, not both.
pub(super) fn value_or_values(r: &Fields) -> Result<Option<Vec<f64>>, String> {
    let value = match opt(r, "value")? {
        None | Some(Value::Null) => None,
        Some(v) => Some(float(&v).ok_or("value is not a number")?),
    };
    let values = match opt(r, "values")? {
        None => None,
        Some(v) => values(&v)?,
    };
    match (value, values) {
        (Some(_), Some(_)) => Err("both value and values are set".into()),
        (Some(v), None) => Ok(Some(vec![v])),
        (None, vs) => Ok(vs),
    }
}

pub(super) fn intermediate_values(r: &Fields) -> Result<BTreeMap<u64, f64>, String> {
    let mut intermediate = BTreeMap::new();
    for (k, v) in entries::<String>(r, "intermediate_values")? {
        let step = k
            .trim()
            .parse::<u64>()
            .map_err(|_| format!("intermediate_values: step {k:?} is not an integer >= 0"))?;
        let v = float(&v).ok_or_else(|| format!("intermediate_values.{k} is not a number"))?;
        intermediate.insert(step, v);
    }
    Ok(intermediate)
}
