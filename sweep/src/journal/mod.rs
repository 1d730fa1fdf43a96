//! The sweep's one truth: a journal in the format of Optuna's
//! `JournalFileBackend` (one JSON record per line, op codes 0-10), so that
//! `optuna.load_study(storage=JournalStorage(JournalFileBackend(path)))`,
//! optuna-dashboard and Rustuna read it as it is, and Optuna and Rustuna
//! workers may write to the same file while we do.
//!
//! Reading replays every record the way Optuna's `JournalStorageReplayResult`
//! does: a trial's id is the order of its CREATE_TRIAL among all live
//! studies' trials in the file, its number the order within its study;
//! records about unknown studies or trials and updates to finished trials are
//! ignored (they come from other workers, as Optuna ignores them). Op code
//! 10, DISCARD_TRIALS, only Rustuna writes and Optuna 5 skips: its trials
//! stay, flagged `discarded`, which nothing but the report reads.
//!
//! Writing: every append takes the lock, replays the file (another worker
//! may have written since), checks the records against that state, writes
//! them as whole lines with a single `write()` and fsyncs before the lock is
//! let go, so a record is on disk before the caller goes on. The records of
//! one moment go together (a trial's last attributes and its end; the
//! values read in one look), under one lock and one fsync. A finished
//! trial is one CREATE_TRIAL record, so a crash never leaves half of it.
//! Nothing non-finite is ever written: Optuna would write `NaN`, which is not
//! JSON; a trial whose objective is not finite is the caller's FAIL.
//!
//! The lock is Optuna's `JournalFileSymlinkLock`, so our writers and Optuna's
//! exclude each other: the lock is the symlink `<journal>.lock` (made with
//! `symlink(2)`, which fails if it exists); it is let go by renaming it to a
//! unique `<journal>.lock<uuid>.rename` and unlinking that. A waiter retries
//! with a sleep doubling from 1 ms to 1 s; it watches the mtime seen through
//! the link (the journal's, since the link points at it) and breaks a lock
//! under which the journal has not changed for the grace period (30 s, as
//! Optuna) by the same rename. It guarantees mutual exclusion where
//! `symlink` and `rename` are atomic and seen at once by every host: local
//! file systems, and NFS (v2 and later) with close-to-open consistency, where
//! symlink creation is an atomic operation on the server. It does not hold
//! if a holder stalls past the grace period (a waiter then breaks it); our
//! critical section is one read, one write and one fsync, and, should the
//! lock be broken anyway, the id we return is computed from the offset our
//! line actually landed at, not from what we read before writing. The file
//! is opened only once the lock is held, so on NFS close-to-open
//! consistency gives us every line written under earlier holds. Optuna's
//! other lock, `JournalFileOpenLock`, uses the same `<journal>.lock` name
//! (a plain file made with O_EXCL), so it excludes us, and we it, as well.
//!
//! Each `Journal` keeps its replay and reads only what was appended since
//! its last call (journals are append-only; a file replaced by another,
//! i.e. another inode, is replayed from the start), so an append costs one
//! fsync, not a replay of the whole sweep.
//!
//! Torn lines: a writer killed mid-write leaves a last line with no newline
//! (or a last line that is not JSON). Replay ignores it, as Optuna does; the
//! next append cuts it under the lock (saving the bytes to `<journal>.torn`)
//! before writing, since Optuna fails to load a file in which anything
//! follows such a line (optuna#5138). An unparsable line anywhere else is an
//! error naming the file and line.
//!
//! Differences from Optuna kept on purpose: timestamps are naive UTC (Optuna
//! 4 wrote naive local time; Optuna 5 and Rustuna write UTC with its offset,
//! which replay turns into naive UTC, and read a naive time as local: they
//! agree where TZ is UTC); non-finite numbers
//! read from files Optuna wrote (`NaN`, `Infinity`) are accepted, and in
//! attributes they become the strings "NaN", "Infinity", "-Infinity".
//!
//! Parts: `records` (op codes, the records we write, lines -> records),
//! `replay` (records -> studies and trials), `file` (the cached replay,
//! appends under the lock, the torn-tail cut), `lock` (the symlink lock),
//! `codec` (Optuna's JSON values: distributions, parameters, non-finite
//! numbers), `timestamps`, `checkpoint` (the replay kept beside the
//! journal, so that a large sweep's next reader starts from it).

pub(crate) mod checkpoint;
pub(crate) mod codec;
mod file;
mod lock;
mod records;
mod replay;
mod timestamps;

pub(crate) use timestamps::iso_utc;

use crate::trial::{Direction, Distribution, ParamValue, Trial, TrialState};
use anyhow::{anyhow, bail, Context, Result};
use codec::{compatible, finite, internal_params};
use file::Cache;
use records::*;
use replay::Replay;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Optuna's default grace period before a lock is taken as stale.
pub const DEFAULT_LOCK_GRACE: Duration = Duration::from_secs(30);

/// A study's id in the journal (order of creation among all studies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StudyId(pub u64);

/// A trial's id in the journal (unique across the file's studies; what
/// updates to a trial name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrialId(pub u64);

/// What creating a trial assigned to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrialRef {
    pub id: TrialId,
    /// Its number in the study, from 0.
    pub number: u64,
}

/// A study as replayed from the journal.
#[derive(Clone, Debug, PartialEq)]
pub struct Study {
    pub id: StudyId,
    pub name: String,
    pub direction: Direction,
    /// In number order: `trials[n].number == n`. Shared with the storage's
    /// copy (a load hands out the list, not a copy of it; the storage
    /// changes its own in place when no loaded study still holds it).
    pub trials: Arc<Vec<Arc<Trial>>>,
    /// `trial_ids[n]` is the id of `trials[n]`.
    pub trial_ids: Arc<Vec<TrialId>>,
    pub user_attrs: BTreeMap<String, Value>,
    pub system_attrs: BTreeMap<String, Value>,
    /// A database study other clients may add trials to: only the trials
    /// our workers claimed (system attribute `trainguard:claim`) count
    /// toward the sweep's trials; a journal's are all ours.
    pub shared: bool,
}

/// A trial's content when it is created (its id and number are the
/// journal's to assign).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrialRecord {
    pub params: BTreeMap<String, ParamValue>,
    /// One per parameter, same keys as `params`.
    pub distributions: BTreeMap<String, Distribution>,
    /// Step -> metric (Optuna's intermediate values).
    pub intermediate: BTreeMap<u64, f64>,
    pub user_attrs: BTreeMap<String, Value>,
    /// When the trial started (None: now).
    pub started: Option<SystemTime>,
}

/// How a trial ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// Its objective (finite).
    Complete(f64),
    /// Stopped by the pruner. As Optuna does, its value becomes the last
    /// intermediate value, when there is one.
    Pruned,
    /// Crashed, or a non-finite objective.
    Fail,
}

impl Outcome {
    pub fn state(self) -> TrialState {
        match self {
            Outcome::Complete(_) => TrialState::Complete,
            Outcome::Pruned => TrialState::Pruned,
            Outcome::Fail => TrialState::Fail,
        }
    }
}

/// A journal file, opened for replay and appends.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    lock_path: PathBuf,
    /// What the lock symlink points at: the journal's file name, so that it
    /// resolves (beside it) to the journal wherever the process runs.
    lock_target: PathBuf,
    worker_id: String,
    grace: Duration,
    /// The replay so far, so that each call reads only what was appended
    /// since (a whole replay per append made a long sweep quadratic).
    cache: Mutex<Option<Cache>>,
    /// The journal bytes the newest checkpoint we know of stands for
    /// (u64::MAX: this journal's replay cannot be checkpointed).
    checkpointed: AtomicU64,
    /// A checkpoint failed to be written, and that was said.
    checkpoint_failed: AtomicBool,
}

impl Journal {
    /// Opens `path`, creating an empty journal if there is none (as
    /// `JournalFileBackend` does).
    pub fn open(path: impl Into<PathBuf>) -> Result<Journal> {
        let path = path.into();
        let name = path
            .file_name()
            .with_context(|| format!("{}: not a file name", path.display()))?
            .to_owned();
        if !path.exists() {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("creating the journal {}", path.display()))?
                .sync_all()
                .with_context(|| format!("fsync of {}", path.display()))?;
            common::files::sync_dir(common::files::parent_dir(&path));
        }
        let mut lock_path = path.clone().into_os_string();
        lock_path.push(".lock");
        Ok(Journal {
            lock_path: lock_path.into(),
            lock_target: name.into(),
            worker_id: format!("{}-{}", uuid4(), std::process::id()),
            grace: DEFAULT_LOCK_GRACE,
            cache: Mutex::new(None),
            checkpointed: AtomicU64::new(0),
            checkpoint_failed: AtomicBool::new(false),
            path,
        })
    }

    /// Sets how long a lock under which the journal does not change is
    /// waited for before it is broken (Optuna's `grace_period`).
    pub fn with_lock_grace(mut self, grace: Duration) -> Journal {
        self.grace = grace;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replays the journal and returns the study named `name` (None if the
    /// file has none). Errors: a bad record (naming its line), or a study
    /// that is not single-objective.
    pub fn load(&self, name: &str) -> Result<Option<Study>> {
        self.read(|state| {
            state
                .study_id(name)
                .map(|id| {
                    state
                        .study(id)
                        .with_context(|| self.path.display().to_string())
                })
                .transpose()
        })
    }

    /// The study named `name`, as `load` gives it, for a reader that loads
    /// once (`--report`, `--status`): the replay is not kept for a next
    /// load, so the study's trials are held once, by the study.
    pub fn into_study(self, name: &str) -> Result<Option<Study>> {
        let mut state = self.read_once()?;
        let Some(id) = state.study_id(name) else {
            return Ok(None);
        };
        let path = self.path.display().to_string();
        state.study(id).with_context(|| path).map(Some)
    }

    /// The names of the journal's live studies, in order of creation.
    pub fn study_names(&self) -> Result<Vec<String>> {
        self.read(|state| Ok(state.studies.values().map(|s| s.name.clone()).collect()))
    }

    /// Creates the study `name`, or returns the id of the one of that name
    /// (a resumed sweep), which must have the same direction.
    pub fn create_study(&self, name: &str, direction: Direction) -> Result<StudyId> {
        self.append(
            |state| {
                if let Some(id) = state.study_id(name) {
                    let dirs = &state.studies[&id.0].directions;
                    if dirs.as_slice() != [direction as i64] {
                        bail!(
                            "{}: study {name:?} exists with directions {dirs:?}, not [{}] ({direction:?})",
                            self.path.display(),
                            direction as i64
                        );
                    }
                    return Ok(None);
                }
                self.line(
                    CREATE_STUDY,
                    CreateStudy {
                        study_name: name,
                        directions: [direction as i64],
                    },
                )
                .map(Some)
            },
            |state| {
                state
                    .study_id(name)
                    .ok_or_else(|| anyhow!("{}: study {name:?} vanished", self.path.display()))
            },
        )
    }

    /// Sets a user attribute of a study (one record).
    pub fn set_study_user_attr(&self, study: StudyId, key: &str, value: &Value) -> Result<()> {
        self.append(
            |state| {
                state.live_study(study, &self.path)?;
                self.line(
                    SET_STUDY_USER_ATTR,
                    StudyAttr {
                        study_id: study.0,
                        user_attr: [(key, value)].into(),
                    },
                )
                .map(Some)
            },
            |_| Ok(()),
        )
    }

    /// Records a whole finished trial as one CREATE_TRIAL record (so a crash
    /// leaves all of it or none), completed now.
    pub fn create_finished_trial(
        &self,
        study: StudyId,
        trial: &TrialRecord,
        outcome: Outcome,
    ) -> Result<TrialRef> {
        if let Outcome::Complete(v) = outcome {
            finite(v, "the objective")?;
        }
        let value = match outcome {
            Outcome::Complete(v) => Some(v),
            Outcome::Pruned => pruned_value(&trial.intermediate),
            Outcome::Fail => None,
        };
        self.create_trial(study, trial, outcome.state(), value)
    }

    /// Creates a RUNNING trial with its parameters (one CREATE_TRIAL record);
    /// `set_intermediate`, `set_user_attr` and `finish_trial` go on with it.
    pub fn create_running_trial(&self, study: StudyId, trial: &TrialRecord) -> Result<TrialRef> {
        self.create_trial(study, trial, TrialState::Running, None)
    }

    /// Reports the metric at `step` of a running trial (a step reported
    /// twice keeps the last value, as the journal replays it).
    pub fn set_intermediate(&self, trial: TrialId, step: u64, value: f64) -> Result<()> {
        finite(value, &format!("the intermediate value at step {step}"))?;
        self.append(
            |state| {
                state.running_trial(trial, &self.path)?;
                self.line(
                    SET_TRIAL_INTERMEDIATE_VALUE,
                    Intermediate {
                        trial_id: trial.0,
                        step,
                        intermediate_value: value,
                    },
                )
                .map(Some)
            },
            |_| Ok(()),
        )
    }

    /// Sets one user attribute of a running trial.
    pub fn set_user_attr(&self, trial: TrialId, key: &str, value: &Value) -> Result<()> {
        self.append(
            |state| {
                state.running_trial(trial, &self.path)?;
                self.line(
                    SET_TRIAL_USER_ATTR,
                    TrialAttr {
                        trial_id: trial.0,
                        user_attr: [(key, value)].into(),
                    },
                )
                .map(Some)
            },
            |_| Ok(()),
        )
    }

    /// Ends a running trial now (one SET_TRIAL_STATE_VALUES record).
    pub fn finish_trial(&self, trial: TrialId, outcome: Outcome) -> Result<()> {
        self.finish_with(trial, &[], outcome)
    }

    /// Reports the metric at several steps of a running trial: the records
    /// of one moment, under one lock, in one write and one fsync.
    pub fn set_intermediates(&self, trial: TrialId, values: &[(u64, f64)]) -> Result<()> {
        for (step, v) in values {
            finite(*v, &format!("the intermediate value at step {step}"))?;
        }
        if values.is_empty() {
            return Ok(());
        }
        self.append(
            |state| {
                state.running_trial(trial, &self.path)?;
                let lines = values
                    .iter()
                    .map(|(step, v)| {
                        self.line(
                            SET_TRIAL_INTERMEDIATE_VALUE,
                            Intermediate {
                                trial_id: trial.0,
                                step: *step,
                                intermediate_value: *v,
                            },
                        )
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(Some(lines.join("\n")))
            },
            |_| Ok(()),
        )
    }

    /// Ends a running trial now with its last user attributes: one
    /// SET_TRIAL_USER_ATTR record per attribute (as Optuna writes them), then
    /// SET_TRIAL_STATE_VALUES, all in one write and one fsync under one
    /// lock, so the trial is never seen finished without its attributes.
    pub fn finish_with(
        &self,
        trial: TrialId,
        attrs: &[(String, Value)],
        outcome: Outcome,
    ) -> Result<()> {
        if let Outcome::Complete(v) = outcome {
            finite(v, "the objective")?;
        }
        self.append(
            |state| {
                let t = state.running_trial(trial, &self.path)?;
                let value = match outcome {
                    Outcome::Complete(v) => Some(v),
                    Outcome::Pruned => pruned_value(&t.trial.intermediate),
                    Outcome::Fail => None,
                };
                let mut lines = attrs
                    .iter()
                    .map(|(k, v)| {
                        self.line(
                            SET_TRIAL_USER_ATTR,
                            TrialAttr {
                                trial_id: trial.0,
                                user_attr: [(k.as_str(), v)].into(),
                            },
                        )
                    })
                    .collect::<Result<Vec<_>>>()?;
                lines.push(self.line(
                    SET_TRIAL_STATE_VALUES,
                    StateValues {
                        trial_id: trial.0,
                        state: outcome.state() as u8,
                        values: value.map(|v| [v]),
                        datetime_complete: iso_utc(SystemTime::now())?,
                    },
                )?);
                Ok(Some(lines.join("\n")))
            },
            |_| Ok(()),
        )
    }

    /// Creates a RUNNING trial whose content `decide` computes from the
    /// study as it stands under the lock (None: nothing to create). Workers
    /// sharing the journal claim trials this way, so two of them never take
    /// the same grid point, random index or interrupted trial.
    pub fn claim_trial(
        &self,
        study: StudyId,
        decide: impl FnOnce(&Study) -> Result<Option<TrialRecord>>,
    ) -> Result<Option<TrialRef>> {
        let wrote = std::cell::Cell::new(false);
        self.append(
            |replayed| {
                replayed.live_study(study, &self.path)?;
                let current = replayed
                    .study(study)
                    .with_context(|| self.path.display().to_string())?;
                let Some(trial) = decide(&current)? else {
                    return Ok(None);
                };
                self.check_distributions(replayed, study, &trial)?;
                wrote.set(true);
                self.trial_line(study, &trial, TrialState::Running, None)
                    .map(Some)
            },
            |replayed| {
                if wrote.get() {
                    self.created(replayed, study).map(Some)
                } else {
                    Ok(None)
                }
            },
        )
    }

    fn create_trial(
        &self,
        study: StudyId,
        trial: &TrialRecord,
        state: TrialState,
        value: Option<f64>,
    ) -> Result<TrialRef> {
        let line = self.trial_line(study, trial, state, value)?;
        self.append(
            |replayed| {
                replayed.live_study(study, &self.path)?;
                self.check_distributions(replayed, study, trial)?;
                Ok(Some(line))
            },
            |replayed| self.created(replayed, study),
        )
    }

    /// A CREATE_TRIAL record for `trial`.
    fn trial_line(
        &self,
        study: StudyId,
        trial: &TrialRecord,
        state: TrialState,
        value: Option<f64>,
    ) -> Result<String> {
        let (params, distributions) = internal_params(trial)?;
        for (step, v) in &trial.intermediate {
            finite(*v, &format!("the intermediate value at step {step}"))?;
        }
        let now = SystemTime::now();
        let record = CreateTrial {
            study_id: study.0,
            datetime_start: iso_utc(trial.started.unwrap_or(now))?,
            state: state as u8,
            value,
            values: (),
            datetime_complete: if state.is_finished() {
                Some(iso_utc(now)?)
            } else {
                None
            },
            distributions,
            params,
            user_attrs: &trial.user_attrs,
            system_attrs: Map::new(),
            intermediate_values: trial
                .intermediate
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        };
        self.line(CREATE_TRIAL, record)
    }

    /// Optuna refuses a parameter whose distribution differs from the
    /// study's earlier trials'.
    fn check_distributions(
        &self,
        replayed: &Replay,
        study: StudyId,
        trial: &TrialRecord,
    ) -> Result<()> {
        for (name, dist) in &trial.distributions {
            if let Some(earlier) = replayed.distribution_in_study(study.0, name) {
                compatible(earlier, dist).map_err(|e| {
                    anyhow!(
                        "{}: parameter {name:?}: {e} (earlier trials have {earlier:?}, this one {dist:?})",
                        self.path.display()
                    )
                })?;
            }
        }
        Ok(())
    }

    /// The trial the last CREATE_TRIAL made.
    fn created(&self, replayed: &Replay, study: StudyId) -> Result<TrialRef> {
        let id = replayed.last_created.ok_or_else(|| {
            anyhow!(
                "{}: study {} was deleted while the trial was written",
                self.path.display(),
                study.0
            )
        })?;
        Ok(TrialRef {
            id: TrialId(id),
            number: replayed.trials[id as usize].trial.number,
        })
    }

    /// One record as Optuna writes it: `{"op_code":..,"worker_id":..,...}`.
    fn line<T: Serialize>(&self, op_code: u8, body: T) -> Result<String> {
        serde_json::to_string(&Record {
            op_code,
            worker_id: &self.worker_id,
            body,
        })
        .context("serializing a journal record")
    }
}

/// Replays a journal's bytes as `load` replays the file (`path` names it in
/// messages): every live study, in order of creation. For tests and the
/// fuzzer; a torn last line is ignored, as on resume.
pub fn replay(bytes: &[u8], path: &Path) -> Result<Vec<Study>> {
    let mut cache = Cache::default();
    cache.extend(bytes, path, true)?;
    let ids: Vec<u64> = cache.state.studies.keys().copied().collect();
    ids.into_iter()
        .map(|id| {
            cache
                .state
                .study(StudyId(id))
                .with_context(|| path.display().to_string())
        })
        .collect()
}

/// Whether the replay of `bytes`, written as a checkpoint's records and
/// replayed again, is the same replay (true also where it would not be
/// written). For the fuzzer: errors are the replay's own, as `replay`'s.
pub fn checkpoint_agrees(bytes: &[u8], path: &Path) -> Result<bool> {
    let mut cache = Cache::default();
    cache.extend(bytes, path, true)?;
    checkpoint::agrees(&cache, path)
}

/// Optuna gives a pruned trial its last intermediate value, if finite.
pub(crate) fn pruned_value(intermediate: &BTreeMap<u64, f64>) -> Option<f64> {
    intermediate
        .last_key_value()
        .map(|(_, v)| *v)
        .filter(|v| v.is_finite())
}

/// A random (version 4) UUID, from std's per-process random hasher keys.
pub(crate) fn uuid4() -> String {
    let word = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.finish()
    };
    let (a, b) = (word(), word());
    let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests;
