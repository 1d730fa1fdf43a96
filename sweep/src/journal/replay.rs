//! Replaying records into what the journal knows, as Optuna's
//! `JournalStorageReplayResult` does.

mod fields;

use super::codec::{compatible, float, to_external};
use super::records::*;
use super::timestamps::naive_utc;
use super::{Study, StudyId, TrialId};
use crate::trial::{shrunk, Direction, Distribution, Trial, TrialState};
use anyhow::{bail, Context, Result};
use common::bad_input;
use fields::*;
pub(super) use fields::{read_trial, Dists, NewTrial};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, LazyLock};

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
    dists: Dists,
    /// Per study id, its trials as the last load handed them out. A load
    /// at 50,000 trials cost a pointer a trial, several times a turn of the
    /// driver; now it brings this list up to date with what `changed`
    /// names and hands out the list itself.
    snapshots: HashMap<u64, Snapshot>,
    /// Trials of a study with a snapshot created or updated since the
    /// snapshots were brought up to date (ids, in the order the records
    /// came; a reader that loads once keeps none).
    changed: Vec<u64>,
}

/// What a snapshot holds in the place of a trial being changed.
static VACANT: LazyLock<Arc<Trial>> = LazyLock::new(Arc::default);

#[derive(Debug, Default)]
struct Snapshot {
    trials: Arc<Vec<Arc<Trial>>>,
    ids: Arc<Vec<TrialId>>,
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
    /// Its `value` is the single value, if `values` has one.
    pub(super) trial: Arc<Trial>,
    /// All its values (more than one: multi-objective, refused on load).
    pub(super) values: Option<Vec<f64>>,
}

impl TrialEntry {
    /// The trial to change: copied first only if a study loaded before
    /// still holds it.
    fn trial_mut(&mut self) -> &mut Trial {
        Arc::make_mut(&mut self.trial)
    }

    fn set_values(&mut self, values: Option<Vec<f64>>) {
        self.trial_mut().value = match values.as_deref() {
            Some([v]) => Some(*v),
            _ => None,
        };
        self.values = values;
    }
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

    /// The study `id`: its trials shared with the replay, not copied (a
    /// load costs what changed since the last one; the replay copies a
    /// trial only if it changes while a study loaded before still holds it).
    pub(super) fn study(&mut self, id: StudyId) -> Result<Study> {
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
        self.refresh();
        if !self.snapshots.contains_key(&id.0) {
            let snapshot = self.snapshot(id.0)?;
            self.snapshots.insert(id.0, snapshot);
        }
        let (s, snap) = (&self.studies[&id.0], &self.snapshots[&id.0]);
        Ok(Study {
            id,
            name: s.name.clone(),
            direction,
            trials: Arc::clone(&snap.trials),
            trial_ids: Arc::clone(&snap.ids),
            user_attrs: s.user_attrs.clone(),
            system_attrs: s.system_attrs.clone(),
            shared: false,
        })
    }

    /// The study's trials gathered afresh, refused if one has several values.
    fn snapshot(&self, id: u64) -> Result<Snapshot> {
        let name = &self.studies[&id].name;
        let ids = self.study_trials.get(&id).map_or(&[][..], |v| v);
        let mut trials = Vec::with_capacity(ids.len());
        for t in ids {
            let e = &self.trials[*t as usize];
            if let Some(v) = e.values.as_ref().filter(|v| v.len() > 1) {
                return Err(bad_input!(
                    "trial {} of study {name:?} has {} values: a sweep is single-objective",
                    e.trial.number,
                    v.len()
                ));
            }
            trials.push(Arc::clone(&e.trial));
        }
        Ok(Snapshot {
            trials: Arc::new(trials),
            ids: Arc::new(ids.iter().map(|t| TrialId(*t)).collect()),
        })
    }

    /// The snapshots brought up to date with the trials changed since. A
    /// snapshot is dropped (gathered afresh at its next load) where a trial
    /// does not fit its end, or has several values (so that the load
    /// refuses it, as every load before did).
    fn refresh(&mut self) {
        for t in std::mem::take(&mut self.changed) {
            let e = &self.trials[t as usize];
            let Some(snap) = self.snapshots.get_mut(&e.study_id) else {
                continue;
            };
            let n = e.trial.number as usize;
            if e.values.as_ref().is_some_and(|v| v.len() > 1) || n > snap.trials.len() {
                self.snapshots.remove(&e.study_id);
                continue;
            }
            let trials = Arc::make_mut(&mut snap.trials);
            if n == trials.len() {
                trials.push(Arc::clone(&e.trial));
                Arc::make_mut(&mut snap.ids).push(TrialId(t));
            } else {
                trials[n] = Arc::clone(&e.trial);
            }
        }
    }

    /// The trial `id` if it exists and has not finished (else the record is
    /// ignored, as Optuna ignores other workers' stale updates).
    /// The trial is named changed, and where no loaded study holds the
    /// snapshot it is in, the snapshot's hold on it is let go until the
    /// next load, so that changing it copies nothing.
    fn updatable(&mut self, record: &Fields) -> Result<Option<&mut TrialEntry>, String> {
        let id = uint(record, "trial_id")?;
        let Some(t) = self
            .trials
            .get_mut(id as usize)
            .filter(|t| !t.trial.state.is_finished())
        else {
            return Ok(None);
        };
        if let Some(snap) = self.snapshots.get_mut(&t.study_id) {
            self.changed.push(id);
            if let Some(slot) = Arc::get_mut(&mut snap.trials)
                .and_then(|list| list.get_mut(t.trial.number as usize))
            {
                *slot = Arc::clone(&VACANT);
            }
        }
        Ok(Some(t))
    }

    pub(super) fn apply(&mut self, r: &Fields) -> Result<(), String> {
        let op = uint(r, "op_code")?;
        match u8::try_from(op).unwrap_or(u8::MAX) {
            CREATE_STUDY => self.create_study(r)?,
            DELETE_STUDY => {
                let id = uint(r, "study_id")?;
                self.studies.remove(&id);
                self.snapshots.remove(&id);
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
                    let value = float(&value(field(r, "intermediate_value")?)?)
                        .ok_or("intermediate_value is not a number")?;
                    t.trial_mut().intermediate.insert(step, value);
                }
            }
            SET_TRIAL_USER_ATTR | SET_TRIAL_SYSTEM_ATTR => {
                let user = op == SET_TRIAL_USER_ATTR as u64;
                if let Some(t) = self.updatable(r)? {
                    let (k, v) = one_attr(r, if user { "user_attr" } else { "system_attr" })?;
                    let attrs = if user {
                        &mut t.trial_mut().user_attrs
                    } else {
                        &mut t.trial_mut().system_attrs
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
    fn create_study(&mut self, r: &Fields) -> Result<(), String> {
        let name = string(r, "study_name")?;
        let directions = array(r, "directions")?
            .into_iter()
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
                name: name.into_owned(),
                directions,
                user_attrs: Default::default(),
                system_attrs: Default::default(),
            },
        );
        self.study_trials.insert(id, Vec::new());
        Ok(())
    }

    fn set_state_values(&mut self, r: &Fields) -> Result<(), String> {
        let Some(t) = self.updatable(r)? else {
            return Ok(());
        };
        let state = trial_state(&value(field(r, "state")?)?)?;
        if state == TrialState::Running && t.trial.state == TrialState::Running {
            return Ok(()); // Another worker already runs it.
        }
        let trial = t.trial_mut();
        if state == TrialState::Running {
            trial.datetime_start = Some(naive_utc(&string(r, "datetime_start")?));
        }
        if state.is_finished() {
            trial.datetime_complete = Some(naive_utc(&string(r, "datetime_complete")?));
            // Finished, it takes no more attributes: let go of the room
            // its one-at-a-time inserts doubled (half, at worst).
            trial.user_attrs = shrunk(std::mem::take(&mut trial.user_attrs));
        }
        trial.state = state;
        if let Some(v) = values(&value(field(r, "values")?)?)? {
            t.set_values(Some(v));
        }
        Ok(())
    }

    /// Rustuna's DISCARD_TRIALS: the trials stay, as Optuna 5 (which skips
    /// the record) and Rustuna (unless asked to apply it) keep them, only
    /// flagged; ids of no trial (yet) are ignored, as records about unknown
    /// trials are.
    fn discard(&mut self, r: &Fields) -> Result<(), String> {
        let ids = array(r, "trial_ids")?
            .into_iter()
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
                t.trial_mut().discarded = true;
            }
        }
        Ok(())
    }

    fn create_trial(&mut self, r: &Fields) -> Result<(), String> {
        self.last_created = None;
        if self.studies.contains_key(&uint(r, "study_id")?) {
            let t = read_trial(r, &mut self.dists)?;
            self.add_trial(t);
        }
        Ok(())
    }

    /// A trial read by `read_trial`, of a live study, added.
    pub(super) fn add_trial(&mut self, t: NewTrial) {
        let trials = self.study_trials.entry(t.study_id).or_default();
        let id = self.trials.len() as u64;
        let number = trials.len() as u64;
        trials.push(id);
        self.trials.push(TrialEntry {
            study_id: t.study_id,
            trial: Arc::new(Trial { number, ..t.trial }),
            values: None,
        });
        self.trials[id as usize].set_values(t.values);
        if self.snapshots.contains_key(&t.study_id) {
            self.changed.push(id);
        }
        self.last_created = Some(id);
    }

    fn set_param(&mut self, r: &Fields) -> Result<(), String> {
        let Some(t) = self.updatable(r)? else {
            return Ok(());
        };
        let study = t.study_id;
        let name = string(r, "param_name")?.into_owned();
        let json = string(r, "distribution")?;
        let dist = (self.dists.parsed)
            .get(&json)
            .map_err(|e| format!("distribution: {e}"))?;
        let value = to_external(&dist, &value(field(r, "param_value_internal")?)?)
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
        let t = self.trials[id].trial_mut();
        t.params.insert(name.clone(), value);
        Arc::make_mut(&mut t.distributions).insert(name, dist);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
