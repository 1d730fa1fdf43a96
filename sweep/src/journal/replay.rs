//! Replaying records into what the journal knows, as Optuna's
//! `JournalStorageReplayResult` does.

use super::codec::{compatible, float, json_to_distribution, readable, to_external};
use super::records::*;
use super::timestamps::naive_utc;
use super::{Study, StudyId, TrialId};
use crate::trial::{Direction, Distribution, ParamValue, Trial, TrialState};
use anyhow::{bail, Context, Result};
use common::bad_input;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// What replaying the journal knows: Optuna's `JournalStorageReplayResult`.
#[derive(Debug, Default)]
pub(super) struct Replay {
    /// Live studies by id (a deleted one is removed; ids are not reused).
    pub(super) studies: BTreeMap<u64, StudyState>,
    pub(super) next_study_id: u64,
    /// By trial id.
    pub(super) trials: Vec<TrialEntry>,
    /// Trial ids per study id, in number order (kept after a delete).
    pub(super) study_trials: HashMap<u64, Vec<u64>>,
    /// The trial the last CREATE_TRIAL made (None: it was ignored).
    pub(super) last_created: Option<u64>,
}

#[derive(Debug)]
pub(super) struct StudyState {
    pub(super) name: String,
    pub(super) directions: Vec<i64>,
    pub(super) user_attrs: BTreeMap<String, Value>,
    pub(super) system_attrs: BTreeMap<String, Value>,
}

#[derive(Debug)]
pub(super) struct TrialEntry {
    pub(super) study_id: u64,
    /// `value` unset: the values are kept apart (multi-objective).
    pub(super) trial: Trial,
    pub(super) values: Option<Vec<f64>>,
}

impl Replay {
    pub(super) fn study_id(&self, name: &str) -> Option<StudyId> {
        self.studies
            .iter()
            .find(|(_, s)| s.name == name)
            .map(|(id, _)| StudyId(*id))
    }

    pub(super) fn live_study(&self, id: StudyId, path: &Path) -> Result<&StudyState> {
        self.studies
            .get(&id.0)
            .with_context(|| format!("{}: no study with id {}", path.display(), id.0))
    }

    pub(super) fn running_trial(&self, id: TrialId, path: &Path) -> Result<&TrialEntry> {
        let t = self
            .trials
            .get(id.0 as usize)
            .with_context(|| format!("{}: no trial with id {}", path.display(), id.0))?;
        if t.trial.state.is_finished() {
            bail!(
                "{}: trial {} has already finished ({}) and cannot be updated",
                path.display(),
                t.trial.number,
                t.trial.state.as_str()
            );
        }
        Ok(t)
    }

    /// The distribution of `name` in the study's first trial that has it.
    pub(super) fn distribution_in_study(&self, study: u64, name: &str) -> Option<&Distribution> {
        self.study_trials
            .get(&study)?
            .iter()
            .find_map(|t| self.trials[*t as usize].trial.distributions.get(name))
    }

    pub(super) fn study(&self, id: StudyId) -> Result<Study> {
        self.assemble(id, &mut |t| {
            let e = &self.trials[t as usize];
            (e.trial.clone(), e.values.clone())
        })
    }

    /// The study `id`, its trials moved out of the replay (which is spent):
    /// a reader that loads once (`--report`, `--status`) holds them once.
    pub(super) fn into_study(self, id: StudyId) -> Result<Study> {
        let mut entries: Vec<Option<TrialEntry>> = Vec::new();
        let replay = Replay {
            trials: Vec::new(),
            ..self
        };
        entries.extend(self.trials.into_iter().map(Some));
        replay.assemble(id, &mut |t| {
            let e = entries[t as usize]
                .take()
                .expect("a trial is in one study once");
            (e.trial, e.values)
        })
    }

    /// The study `id` with each trial as `trial_of` gives it (its record and
    /// its values).
    fn assemble(
        &self,
        id: StudyId,
        trial_of: &mut dyn FnMut(u64) -> (Trial, Option<Vec<f64>>),
    ) -> Result<Study> {
        let s = &self.studies[&id.0];
        let direction = match s.directions.as_slice() {
            [1] => Direction::Minimize,
            [2] => Direction::Maximize,
            d => {
                return Err(bad_input!(
                    "study {:?} has directions {d:?}: a sweep is single-objective, minimize (1) or maximize (2)",
                    s.name
                ))
            }
        };
        let ids = self.study_trials.get(&id.0).map_or(&[][..], |v| v);
        let mut trials = Vec::with_capacity(ids.len());
        for t in ids {
            let (mut trial, values) = trial_of(*t);
            trial.value = match values.as_deref() {
                None => None,
                Some([v]) => Some(*v),
                Some(v) => {
                    return Err(bad_input!(
                        "trial {} of study {:?} has {} values: a sweep is single-objective",
                        trial.number,
                        s.name,
                        v.len()
                    ))
                }
            };
            trials.push(trial);
        }
        Ok(Study {
            id,
            name: s.name.clone(),
            direction,
            trials,
            trial_ids: ids.iter().map(|t| TrialId(*t)).collect(),
            user_attrs: s.user_attrs.clone(),
            system_attrs: s.system_attrs.clone(),
            shared: false,
        })
    }

    /// The trial `id` if it exists and has not finished (else the record is
    /// ignored, as Optuna ignores other workers' stale updates).
    fn updatable(
        &mut self,
        record: &Map<String, Value>,
    ) -> Result<Option<&mut TrialEntry>, String> {
        let id = uint(record, "trial_id")?;
        Ok(self
            .trials
            .get_mut(id as usize)
            .filter(|t| !t.trial.state.is_finished()))
    }

    pub(super) fn apply(&mut self, r: &Map<String, Value>) -> Result<(), String> {
        let op = uint(r, "op_code")?;
        match u8::try_from(op).unwrap_or(u8::MAX) {
            CREATE_STUDY => self.create_study(r)?,
            DELETE_STUDY => {
                self.studies.remove(&uint(r, "study_id")?);
            }
            SET_STUDY_USER_ATTR | SET_STUDY_SYSTEM_ATTR => {
                let user = op == SET_STUDY_USER_ATTR as u64;
                let id = uint(r, "study_id")?;
                if let Some(s) = self.studies.get_mut(&id) {
                    let (k, v) = one_attr(r, if user { "user_attr" } else { "system_attr" })?;
                    let attrs = if user {
                        &mut s.user_attrs
                    } else {
                        &mut s.system_attrs
                    };
                    attrs.insert(k, v);
                }
            }
            CREATE_TRIAL => self.create_trial(r)?,
            SET_TRIAL_PARAM => self.set_param(r)?,
            SET_TRIAL_STATE_VALUES => self.set_state_values(r)?,
            SET_TRIAL_INTERMEDIATE_VALUE => {
                if let Some(t) = self.updatable(r)? {
                    let step = uint(r, "step")?;
                    let value = float(field(r, "intermediate_value")?)
                        .ok_or("intermediate_value is not a number")?;
                    t.trial.intermediate.insert(step, value);
                }
            }
            SET_TRIAL_USER_ATTR | SET_TRIAL_SYSTEM_ATTR => {
                let user = op == SET_TRIAL_USER_ATTR as u64;
                if let Some(t) = self.updatable(r)? {
                    let (k, v) = one_attr(r, if user { "user_attr" } else { "system_attr" })?;
                    let attrs = if user {
                        &mut t.trial.user_attrs
                    } else {
                        &mut t.trial.system_attrs
                    };
                    attrs.insert(k, v);
                }
            }
            DISCARD_TRIALS => self.discard(r)?,
            _ => return Err(format!("unknown op_code {op} (Optuna 5's are 0-10)")),
        }
        Ok(())
    }

    /// A study of a name already taken is ignored, as in Optuna.
    fn create_study(&mut self, r: &Map<String, Value>) -> Result<(), String> {
        let name = string(r, "study_name")?;
        let directions = array(r, "directions")?
            .iter()
            .map(|d| match d.as_i64() {
                Some(d @ 0..=2) => Ok(d),
                _ => Err(format!("directions: {d} is not a StudyDirection (0, 1, 2)")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if self.studies.values().any(|s| s.name == name) {
            return Ok(());
        }
        let id = self.next_study_id;
        self.next_study_id += 1;
        self.studies.insert(
            id,
            StudyState {
                name: name.to_owned(),
                directions,
                user_attrs: BTreeMap::new(),
                system_attrs: BTreeMap::new(),
            },
        );
        self.study_trials.insert(id, Vec::new());
        Ok(())
    }

    fn set_state_values(&mut self, r: &Map<String, Value>) -> Result<(), String> {
        let Some(t) = self.updatable(r)? else {
            return Ok(());
        };
        let state = trial_state(field(r, "state")?)?;
        if state == TrialState::Running && t.trial.state == TrialState::Running {
            return Ok(()); // Another worker already runs it.
        }
        if state == TrialState::Running {
            t.trial.datetime_start = Some(naive_utc(string(r, "datetime_start")?));
        }
        if state.is_finished() {
            t.trial.datetime_complete = Some(naive_utc(string(r, "datetime_complete")?));
        }
        t.trial.state = state;
        if let Some(v) = values(field(r, "values")?)? {
            t.values = Some(v);
        }
        Ok(())
    }

    /// Rustuna's DISCARD_TRIALS: the trials stay, as Optuna 5 (which skips
    /// the record) and Rustuna (unless asked to apply it) keep them, only
    /// flagged; ids of no trial (yet) are ignored, as records about unknown
    /// trials are.
    fn discard(&mut self, r: &Map<String, Value>) -> Result<(), String> {
        let ids = array(r, "trial_ids")?
            .iter()
            .map(|id| {
                id.as_u64()
                    .ok_or_else(|| format!("trial_ids: {id} is not an integer >= 0"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        for id in ids {
            if let Some(t) = usize::try_from(id)
                .ok()
                .and_then(|i| self.trials.get_mut(i))
            {
                t.trial.discarded = true;
            }
        }
        Ok(())
    }

    fn create_trial(&mut self, r: &Map<String, Value>) -> Result<(), String> {
        self.last_created = None;
        let study_id = uint(r, "study_id")?;
        if !self.studies.contains_key(&study_id) {
            return Ok(());
        }
        let distributions = distributions(r)?;
        let params = params(r, &distributions)?;
        let (datetime_start, datetime_complete) = datetimes(r)?;
        let state = match r.get("state") {
            None => TrialState::Running,
            Some(s) => trial_state(s)?,
        };
        let values = value_or_values(r)?;
        let intermediate = intermediate_values(r)?;
        let trials = self.study_trials.entry(study_id).or_default();
        let id = self.trials.len() as u64;
        let number = trials.len() as u64;
        trials.push(id);
        self.trials.push(TrialEntry {
            study_id,
            trial: Trial {
                number,
                state,
                params,
                distributions,
                value: None,
                intermediate,
                user_attrs: attrs(r.get("user_attrs"), "user_attrs")?,
                system_attrs: attrs(r.get("system_attrs"), "system_attrs")?,
                datetime_start,
                datetime_complete,
                discarded: false,
            },
            values,
        });
        self.last_created = Some(id);
        Ok(())
    }

    fn set_param(&mut self, r: &Map<String, Value>) -> Result<(), String> {
        let Some(t) = self.updatable(r)? else {
            return Ok(());
        };
        let study = t.study_id;
        let name = string(r, "param_name")?.to_owned();
        let json = string(r, "distribution")?;
        let dist = json_to_distribution(json).map_err(|e| format!("distribution: {e}"))?;
        let value = to_external(&dist, field(r, "param_value_internal")?)
            .map_err(|e| format!("param_value_internal: {e}"))?;
        if let Some(earlier) = self.study_trials.get(&study).and_then(|ids| {
            ids.iter()
                .find_map(|t| self.trials[*t as usize].trial.params.get(&name).map(|_| *t))
        }) {
            let old = &self.trials[earlier as usize].trial.distributions[&name];
            if compatible(old, &dist).is_err() {
                return Ok(()); // Optuna ignores another worker's incompatible param.
            }
        }
        let id = uint(r, "trial_id")? as usize;
        let t = &mut self.trials[id].trial;
        t.params.insert(name.clone(), value);
        t.distributions.insert(name, dist);
        Ok(())
    }
}

fn field<'a>(r: &'a Map<String, Value>, key: &str) -> Result<&'a Value, String> {
    r.get(key).ok_or_else(|| format!("no field {key:?}"))
}

fn uint(r: &Map<String, Value>, key: &str) -> Result<u64, String> {
    field(r, key)?
        .as_u64()
        .ok_or_else(|| format!("{key} is not an integer >= 0"))
}

fn string<'a>(r: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    field(r, key)?
        .as_str()
        .ok_or_else(|| format!("{key} is not a string"))
}

fn array<'a>(r: &'a Map<String, Value>, key: &str) -> Result<&'a Vec<Value>, String> {
    field(r, key)?
        .as_array()
        .ok_or_else(|| format!("{key} is not a list"))
}

fn trial_state(v: &Value) -> Result<TrialState, String> {
    Ok(match v.as_u64() {
        Some(0) => TrialState::Running,
        Some(1) => TrialState::Complete,
        Some(2) => TrialState::Pruned,
        Some(3) => TrialState::Fail,
        Some(4) => TrialState::Waiting,
        _ => return Err(format!("state {v} is not a TrialState (0-4)")),
    })
}

fn values(v: &Value) -> Result<Option<Vec<f64>>, String> {
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

/// An attribute record's single `{key: value}`.
fn one_attr(r: &Map<String, Value>, key: &str) -> Result<(String, Value), String> {
    let m = field(r, key)?
        .as_object()
        .ok_or_else(|| format!("{key} is not an object"))?;
    let mut it = m.iter();
    match (it.next(), it.next()) {
        (Some((k, v)), None) => Ok((k.clone(), readable(v))),
        _ => Err(format!("{key} has {} keys, not one", m.len())),
    }
}

fn attrs(v: Option<&Value>, key: &str) -> Result<BTreeMap<String, Value>, String> {
    match v {
        None => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => Ok(m.iter().map(|(k, v)| (k.clone(), readable(v))).collect()),
        Some(_) => Err(format!("{key} is not an object")),
    }
}

/// A CREATE_TRIAL's distributions, each a JSON string.
fn distributions(r: &Map<String, Value>) -> Result<BTreeMap<String, Distribution>, String> {
    let mut distributions = BTreeMap::new();
    if let Some(d) = r.get("distributions") {
        for (k, v) in d.as_object().ok_or("distributions is not an object")? {
            let json = v
                .as_str()
                .ok_or_else(|| format!("distributions.{k} is not a string"))?;
            let dist = json_to_distribution(json).map_err(|e| format!("distributions.{k}: {e}"))?;
            distributions.insert(k.clone(), dist);
        }
    }
    Ok(distributions)
}

/// A CREATE_TRIAL's params, internal values read through their distributions.
fn params(
    r: &Map<String, Value>,
    distributions: &BTreeMap<String, Distribution>,
) -> Result<BTreeMap<String, ParamValue>, String> {
    let mut params = BTreeMap::new();
    if let Some(p) = r.get("params") {
        for (k, v) in p.as_object().ok_or("params is not an object")? {
            let dist = distributions
                .get(k)
                .ok_or_else(|| format!("params.{k} has no distribution"))?;
            params.insert(
                k.clone(),
                to_external(dist, v).map_err(|e| format!("params.{k}: {e}"))?,
            );
        }
    }
    Ok(params)
}

/// A CREATE_TRIAL's start (a field that may be null) and completion.
fn datetimes(r: &Map<String, Value>) -> Result<(Option<String>, Option<String>), String> {
    let datetime_start = match field(r, "datetime_start")? {
        Value::Null => None,
        Value::String(s) => Some(naive_utc(s)),
        _ => return Err("datetime_start is not a string".into()),
    };
    let datetime_complete = match r.get("datetime_complete") {
        None => None,
        Some(Value::String(s)) => Some(naive_utc(s)),
        Some(_) => return Err("datetime_complete is not a string".into()),
    };
    Ok((datetime_start, datetime_complete))
}

/// A CREATE_TRIAL's `value` (Optuna 2) or `values`, not both.
fn value_or_values(r: &Map<String, Value>) -> Result<Option<Vec<f64>>, String> {
    let value = match r.get("value") {
        None | Some(Value::Null) => None,
        Some(v) => Some(float(v).ok_or("value is not a number")?),
    };
    let values = match r.get("values") {
        None => None,
        Some(v) => values(v)?,
    };
    match (value, values) {
        (Some(_), Some(_)) => Err("both value and values are set".into()),
        (Some(v), None) => Ok(Some(vec![v])),
        (None, vs) => Ok(vs),
    }
}

fn intermediate_values(r: &Map<String, Value>) -> Result<BTreeMap<u64, f64>, String> {
    let mut intermediate = BTreeMap::new();
    if let Some(iv) = r.get("intermediate_values") {
        for (k, v) in iv
            .as_object()
            .ok_or("intermediate_values is not an object")?
        {
            let step = k
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("intermediate_values: step {k:?} is not an integer >= 0"))?;
            let v = float(v).ok_or_else(|| format!("intermediate_values.{k} is not a number"))?;
            intermediate.insert(step, v);
        }
    }
    Ok(intermediate)
}

#[cfg(test)]
mod tests;
