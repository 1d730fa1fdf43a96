//! The sweep's one truth: a journal in the format of Optuna's
//! `JournalFileBackend` (one JSON record per line, op codes 0-9), so that
//! `optuna.load_study(storage=JournalStorage(JournalFileBackend(path)))` and
//! optuna-dashboard read it as it is, and Optuna workers may write to the
//! same file while we do.
//!
//! Reading replays every record the way Optuna's `JournalStorageReplayResult`
//! does: a trial's id is the order of its CREATE_TRIAL among all live
//! studies' trials in the file, its number the order within its study;
//! records about unknown studies or trials and updates to finished trials are
//! ignored (they come from other workers, as Optuna ignores them).
//!
//! Writing: every append takes the lock, replays the file (another worker
//! may have written since), checks the record against that state, writes it
//! as one whole line with a single `write()` and fsyncs before the lock is
//! let go, so a record is on disk before the caller goes on. A finished
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
//! writes naive local time; they agree where TZ is UTC); non-finite numbers
//! read from files Optuna wrote (`NaN`, `Infinity`) are accepted, and in
//! attributes they become the strings "NaN", "Infinity", "-Infinity".

use crate::trial::{Choice, Direction, Distribution, ParamValue, Trial, TrialState};
use anyhow::{anyhow, bail, Context, Result};
use common::bad_input;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Optuna's JournalOperation.
const CREATE_STUDY: u8 = 0;
const DELETE_STUDY: u8 = 1;
const SET_STUDY_USER_ATTR: u8 = 2;
const SET_STUDY_SYSTEM_ATTR: u8 = 3;
const CREATE_TRIAL: u8 = 4;
const SET_TRIAL_PARAM: u8 = 5;
const SET_TRIAL_STATE_VALUES: u8 = 6;
const SET_TRIAL_INTERMEDIATE_VALUE: u8 = 7;
const SET_TRIAL_USER_ATTR: u8 = 8;
const SET_TRIAL_SYSTEM_ATTR: u8 = 9;

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
    /// In number order: `trials[n].number == n`.
    pub trials: Vec<Trial>,
    /// `trial_ids[n]` is the id of `trials[n]`.
    pub trial_ids: Vec<TrialId>,
    pub user_attrs: BTreeMap<String, Value>,
    pub system_attrs: BTreeMap<String, Value>,
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
}

/// The replay of a journal file's first `offset` bytes, all whole lines. It
/// stays valid while the file (same device and inode) only grows: writers
/// only append, and a cut only removes a torn tail, which is never in here.
#[derive(Debug, Default)]
struct Cache {
    file: (u64, u64),
    offset: u64,
    lines: usize,
    state: Replay,
}

impl Cache {
    /// Replays the whole lines of `bytes` (what follows `offset`); returns
    /// the torn tail after them.
    fn extend<'b>(&mut self, bytes: &'b [u8], path: &Path) -> Result<&'b [u8]> {
        let scan = scan(bytes, path, self.lines)?;
        for (line, record) in &scan.records {
            self.state
                .apply(record)
                .map_err(|e| bad_input!("{}:{line}: {e}", path.display()))?;
        }
        self.offset += scan.whole as u64;
        self.lines += scan.records.len();
        Ok(&bytes[scan.whole..])
    }
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
                self.line(
                    SET_TRIAL_STATE_VALUES,
                    StateValues {
                        trial_id: trial.0,
                        state: outcome.state() as u8,
                        values: value.map(|v| [v]),
                        datetime_complete: iso_utc(SystemTime::now())?,
                    },
                )
                .map(Some)
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

    /// The journal replayed, without the lock (a line being written is a
    /// torn tail, ignored).
    fn read<R>(&self, f: impl FnOnce(&Replay) -> Result<R>) -> Result<R> {
        let mut file = File::open(&self.path)
            .with_context(|| format!("opening the journal {}", self.path.display()))?;
        let (cache, _) = self.replay(&mut file)?;
        let out = f(&cache.state);
        self.keep(cache);
        out
    }

    /// The cached replay brought up to the end of `file`, and the torn tail.
    fn replay(&self, file: &mut File) -> Result<(Cache, Vec<u8>)> {
        use std::os::unix::fs::MetadataExt;
        let shown = self.path.display();
        let meta = file
            .metadata()
            .with_context(|| format!("stat of the journal {shown}"))?;
        let id = (meta.dev(), meta.ino());
        let taken = self.cache.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut cache = taken
            .filter(|c| c.file == id && c.offset <= meta.len())
            .unwrap_or_else(|| Cache {
                file: id,
                ..Cache::default()
            });
        let mut rest = Vec::new();
        file.seek(SeekFrom::Start(cache.offset))
            .and_then(|_| file.read_to_end(&mut rest))
            .with_context(|| format!("reading the journal {shown}"))?;
        let torn = cache.extend(&rest, &self.path)?.to_vec();
        Ok((cache, torn))
    }

    fn keep(&self, cache: Cache) {
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some(cache);
    }

    /// Under the lock: cuts a torn tail, replays, asks `decide` for the line
    /// to write (None: nothing to write), writes and fsyncs it, and hands
    /// the state with that line applied to `result`.
    fn append<R>(
        &self,
        decide: impl FnOnce(&Replay) -> Result<Option<String>>,
        result: impl FnOnce(&Replay) -> Result<R>,
    ) -> Result<R> {
        let lock = SymlinkLock::acquire(&self.lock_path, &self.lock_target, self.grace)?;
        let out = self.append_locked(decide, result);
        if let Err(e) = lock.release() {
            // Our line's place was checked after writing, so the state we
            // return is right; the other writer's may not be.
            common::say!(
                "warning: {}: {e:#} (a waiter took it as stale; keep each journal write short)",
                self.lock_path.display()
            );
        }
        out
    }

    fn append_locked<R>(
        &self,
        decide: impl FnOnce(&Replay) -> Result<Option<String>>,
        result: impl FnOnce(&Replay) -> Result<R>,
    ) -> Result<R> {
        let shown = self.path.display();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.path)
            .with_context(|| format!("opening the journal {shown}"))?;
        let (mut cache, torn) = self.replay(&mut file)?;
        if !torn.is_empty() {
            self.cut(&file, &torn, cache.offset)?;
        }
        let Some(line) = decide(&cache.state)? else {
            let out = result(&cache.state);
            self.keep(cache);
            return out;
        };
        let mut buf = line.into_bytes();
        buf.push(b'\n');
        // One write(): with O_APPEND the line lands whole at the end.
        let n = file
            .write(&buf)
            .with_context(|| format!("writing to the journal {shown}"))?;
        let end = file
            .stream_position()
            .with_context(|| format!("seeking in the journal {shown}"))?;
        let start = end - n as u64;
        if n < buf.len() {
            let _ = file.set_len(start).and_then(|()| file.sync_all());
            bail!(
                "{shown}: short write ({n} of {} bytes; disk full?): the record was not written",
                buf.len()
            );
        }
        file.sync_all().with_context(|| {
            format!("fsync of the journal {shown} failed: the last record may not be on disk")
        })?;
        if start == cache.offset {
            cache.extend(&buf, &self.path)?;
        } else {
            // Someone wrote between our read and our write (a broken lock):
            // replay what is really before and at our line.
            let mut bytes = vec![0; end as usize];
            file.seek(SeekFrom::Start(0))
                .and_then(|_| file.read_exact(&mut bytes))
                .with_context(|| format!("re-reading the journal {shown}"))?;
            cache = Cache {
                file: cache.file,
                ..Cache::default()
            };
            if !cache.extend(&bytes, &self.path)?.is_empty() {
                bail!("{shown}: a torn line before our record at byte {start}");
            }
        }
        let out = result(&cache.state);
        self.keep(cache);
        out
    }

    /// Cuts the torn tail at `whole`, keeping its bytes in `<journal>.torn`.
    fn cut(&self, file: &File, tail: &[u8], whole: u64) -> Result<()> {
        let shown = self.path.display();
        let mut torn = self.path.clone().into_os_string();
        torn.push(".torn");
        let torn = PathBuf::from(torn);
        let mut kept = tail.to_vec();
        if kept.last() != Some(&b'\n') {
            kept.push(b'\n');
        }
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&torn)
            .and_then(|mut f| f.write_all(&kept).and_then(|()| f.sync_all()))
            .with_context(|| format!("saving the torn tail of {shown} to {}", torn.display()))?;
        file.set_len(whole)
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cutting the torn tail of {shown}"))?;
        common::say!(
            "warning: {shown}: cut a torn last line ({} bytes, kept in {})",
            tail.len(),
            torn.display()
        );
        Ok(())
    }
}

/// Replays a journal's bytes as `load` replays the file (`path` names it in
/// messages): every live study, in order of creation. For tests and the
/// fuzzer; a torn last line is ignored, as on resume.
pub fn replay(bytes: &[u8], path: &Path) -> Result<Vec<Study>> {
    let mut cache = Cache::default();
    cache.extend(bytes, path)?;
    cache
        .state
        .studies
        .keys()
        .map(|id| {
            cache
                .state
                .study(StudyId(*id))
                .with_context(|| path.display().to_string())
        })
        .collect()
}

// ---------------------------------------------------------------- records

#[derive(Serialize)]
struct Record<'a, T> {
    op_code: u8,
    worker_id: &'a str,
    #[serde(flatten)]
    body: T,
}

#[derive(Serialize)]
struct CreateStudy<'a> {
    study_name: &'a str,
    directions: [i64; 1],
}

#[derive(Serialize)]
struct StudyAttr<'a> {
    study_id: u64,
    user_attr: BTreeMap<&'a str, &'a Value>,
}

/// Field order as Optuna's `create_new_trial` with a template trial.
#[derive(Serialize)]
struct CreateTrial<'a> {
    study_id: u64,
    datetime_start: String,
    state: u8,
    value: Option<f64>,
    /// Always null: single-objective.
    values: (),
    /// Absent, not null, while running: Optuna parses it when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    datetime_complete: Option<String>,
    distributions: BTreeMap<&'a str, String>,
    params: BTreeMap<&'a str, Value>,
    user_attrs: &'a BTreeMap<String, Value>,
    system_attrs: Map<String, Value>,
    intermediate_values: BTreeMap<String, f64>,
}

#[derive(Serialize)]
struct StateValues {
    trial_id: u64,
    state: u8,
    values: Option<[f64; 1]>,
    datetime_complete: String,
}

#[derive(Serialize)]
struct Intermediate {
    trial_id: u64,
    step: u64,
    intermediate_value: f64,
}

#[derive(Serialize)]
struct TrialAttr<'a> {
    trial_id: u64,
    user_attr: BTreeMap<&'a str, &'a Value>,
}

fn finite(v: f64, what: &str) -> Result<()> {
    if !v.is_finite() {
        bail!("{what} is {v}: the journal holds only finite numbers (record a non-finite objective as a FAIL trial)");
    }
    Ok(())
}

/// Optuna gives a pruned trial its last intermediate value, if finite.
fn pruned_value(intermediate: &BTreeMap<u64, f64>) -> Option<f64> {
    intermediate
        .last_key_value()
        .map(|(_, v)| *v)
        .filter(|v| v.is_finite())
}

type Internal<'a> = (BTreeMap<&'a str, Value>, BTreeMap<&'a str, String>);

/// Params in Optuna's internal representation (a float; a categorical's
/// index) and distributions as `distribution_to_json` strings, checked as
/// Optuna's constructors check them (a file Optuna cannot load is worse
/// than an error here).
fn internal_params(trial: &TrialRecord) -> Result<Internal<'_>> {
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

fn to_internal(dist: &Distribution, value: &ParamValue) -> Result<Value> {
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
fn distribution_to_json(dist: &Distribution) -> String {
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
fn compatible(old: &Distribution, new: &Distribution) -> Result<(), &'static str> {
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

// ------------------------------------------------------------------ replay

/// What replaying the journal knows: Optuna's `JournalStorageReplayResult`.
#[derive(Debug, Default)]
struct Replay {
    /// Live studies by id (a deleted one is removed; ids are not reused).
    studies: BTreeMap<u64, StudyState>,
    next_study_id: u64,
    /// By trial id.
    trials: Vec<TrialEntry>,
    /// Trial ids per study id, in number order (kept after a delete).
    study_trials: HashMap<u64, Vec<u64>>,
    /// The trial the last CREATE_TRIAL made (None: it was ignored).
    last_created: Option<u64>,
}

#[derive(Debug)]
struct StudyState {
    name: String,
    directions: Vec<i64>,
    user_attrs: BTreeMap<String, Value>,
    system_attrs: BTreeMap<String, Value>,
}

#[derive(Debug)]
struct TrialEntry {
    study_id: u64,
    /// `value` unset: the values are kept apart (multi-objective).
    trial: Trial,
    values: Option<Vec<f64>>,
}

impl Replay {
    fn study_id(&self, name: &str) -> Option<StudyId> {
        self.studies
            .iter()
            .find(|(_, s)| s.name == name)
            .map(|(id, _)| StudyId(*id))
    }

    fn live_study(&self, id: StudyId, path: &Path) -> Result<&StudyState> {
        self.studies
            .get(&id.0)
            .with_context(|| format!("{}: no study with id {}", path.display(), id.0))
    }

    fn running_trial(&self, id: TrialId, path: &Path) -> Result<&TrialEntry> {
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
    fn distribution_in_study(&self, study: u64, name: &str) -> Option<&Distribution> {
        self.study_trials
            .get(&study)?
            .iter()
            .find_map(|t| self.trials[*t as usize].trial.distributions.get(name))
    }

    fn study(&self, id: StudyId) -> Result<Study> {
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
            let t = &self.trials[*t as usize];
            let mut trial = t.trial.clone();
            trial.value = match t.values.as_deref() {
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

    fn apply(&mut self, r: &Map<String, Value>) -> Result<(), String> {
        let op = uint(r, "op_code")?;
        match u8::try_from(op).unwrap_or(u8::MAX) {
            CREATE_STUDY => {
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
            }
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
            SET_TRIAL_STATE_VALUES => {
                let Some(t) = self.updatable(r)? else {
                    return Ok(());
                };
                let state = trial_state(field(r, "state")?)?;
                if state == TrialState::Running && t.trial.state == TrialState::Running {
                    return Ok(()); // Another worker already runs it.
                }
                if state == TrialState::Running {
                    t.trial.datetime_start = Some(string(r, "datetime_start")?.to_owned());
                }
                if state.is_finished() {
                    t.trial.datetime_complete = Some(string(r, "datetime_complete")?.to_owned());
                }
                t.trial.state = state;
                if let Some(v) = values(field(r, "values")?)? {
                    t.values = Some(v);
                }
            }
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
            _ => return Err(format!("unknown op_code {op} (Optuna's are 0-9)")),
        }
        Ok(())
    }

    fn create_trial(&mut self, r: &Map<String, Value>) -> Result<(), String> {
        self.last_created = None;
        let study_id = uint(r, "study_id")?;
        if !self.studies.contains_key(&study_id) {
            return Ok(());
        }
        let mut distributions = BTreeMap::new();
        if let Some(d) = r.get("distributions") {
            for (k, v) in d.as_object().ok_or("distributions is not an object")? {
                let json = v
                    .as_str()
                    .ok_or_else(|| format!("distributions.{k} is not a string"))?;
                let dist =
                    json_to_distribution(json).map_err(|e| format!("distributions.{k}: {e}"))?;
                distributions.insert(k.clone(), dist);
            }
        }
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
        let datetime_start = match field(r, "datetime_start")? {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            _ => return Err("datetime_start is not a string".into()),
        };
        let datetime_complete = match r.get("datetime_complete") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("datetime_complete is not a string".into()),
        };
        let state = match r.get("state") {
            None => TrialState::Running,
            Some(s) => trial_state(s)?,
        };
        let value = match r.get("value") {
            None | Some(Value::Null) => None,
            Some(v) => Some(float(v).ok_or("value is not a number")?),
        };
        let values = match r.get("values") {
            None => None,
            Some(v) => values(v)?,
        };
        let values = match (value, values) {
            (Some(_), Some(_)) => return Err("both value and values are set".into()),
            (Some(v), None) => Some(vec![v]),
            (None, vs) => vs,
        };
        let mut intermediate = BTreeMap::new();
        if let Some(iv) = r.get("intermediate_values") {
            for (k, v) in iv
                .as_object()
                .ok_or("intermediate_values is not an object")?
            {
                let step = k.trim().parse::<u64>().map_err(|_| {
                    format!("intermediate_values: step {k:?} is not an integer >= 0")
                })?;
                let v =
                    float(v).ok_or_else(|| format!("intermediate_values.{k} is not a number"))?;
                intermediate.insert(step, v);
            }
        }
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

fn to_external(dist: &Distribution, v: &Value) -> Result<ParamValue, String> {
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

/// `optuna.distributions.json_to_distribution`, including the deprecated
/// classes and the abbreviated `{"type": ...}` form, with Optuna's checks
/// and its adjustment of `high` onto the step grid.
fn json_to_distribution(json: &str) -> Result<Distribution, String> {
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
    let num = |k: &str| -> Result<f64, String> {
        a.get(k)
            .and_then(float)
            .ok_or_else(|| format!("{kind}: {k} is not a number"))
    };
    let int = |k: &str, default: Option<i64>| -> Result<i64, String> {
        match (a.get(k), default) {
            (None | Some(Value::Null), Some(d)) => Ok(d),
            (Some(v), _) => v
                .as_i64()
                .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                .ok_or_else(|| format!("{kind}: {k} is not an integer")),
            (None, None) => Err(format!("{kind}: no {k}")),
        }
    };
    let flag = |k: &str| a.get(k).and_then(Value::as_bool).unwrap_or(false);
    let opt_num = |k: &str| -> Result<Option<f64>, String> {
        match a.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => num(k).map(Some),
        }
    };
    let float_dist = |log: bool, step: Option<f64>| -> Result<Distribution, String> {
        let (low, mut high) = (num("low")?, num("high")?);
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
    };
    let int_dist = |log: bool, step: i64| -> Result<Distribution, String> {
        let (low, high) = (int("low", None)?, int("high", None)?);
        if step <= 0 {
            return Err(format!("{kind}: step {step} is not > 0"));
        }
        Ok(Distribution::Int {
            low,
            high: low + (high - low).div_euclid(step) * step,
            log,
            step,
        })
    };
    let dist = match kind {
        "FloatDistribution" | "float" => float_dist(flag("log"), opt_num("step")?)?,
        "UniformDistribution" => float_dist(false, None)?,
        "LogUniformDistribution" => float_dist(true, None)?,
        "DiscreteUniformDistribution" => float_dist(false, Some(num("q")?))?,
        "IntDistribution" | "int" => int_dist(flag("log"), int("step", Some(1))?)?,
        "IntUniformDistribution" => int_dist(false, int("step", Some(1))?)?,
        "IntLogUniformDistribution" => int_dist(true, int("step", Some(1))?)?,
        "CategoricalDistribution" | "categorical" => Distribution::Categorical {
            choices: a
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

// ------------------------------------------------------------------- lines

/// The journal's whole lines, parsed.
struct Scan {
    /// (line number from 1, record).
    records: Vec<(usize, Map<String, Value>)>,
    /// Bytes up to the end of the last whole line; what follows is torn.
    whole: usize,
}

/// Splits the journal into records; a last line with no newline, or a last
/// line that is not JSON, is torn (ignored); any other bad line is an error.
fn scan(bytes: &[u8], path: &Path, lines_before: usize) -> Result<Scan> {
    let mut records = Vec::new();
    let mut whole = 0;
    let mut start = 0;
    let mut line_no = lines_before;
    while let Some(nl) = bytes[start..].iter().position(|&b| b == b'\n') {
        line_no += 1;
        let end = start + nl + 1;
        let line = &bytes[start..end - 1];
        match parse_json(line) {
            Ok(Value::Object(m)) => records.push((line_no, m)),
            Ok(other) => {
                return Err(bad_input!(
                    "{}:{line_no}: a journal record is a JSON object, not {}",
                    path.display(),
                    short(&other.to_string())
                ))
            }
            Err(e) if end == bytes.len() => {
                let _ = e; // The last line, torn by a killed writer.
                return Ok(Scan { records, whole });
            }
            Err(e) => {
                return Err(bad_input!(
                    "{}:{line_no}: not a JSON record ({e}): {}",
                    path.display(),
                    short(&String::from_utf8_lossy(line))
                ))
            }
        }
        whole = end;
        start = end;
    }
    Ok(Scan { records, whole })
}

fn short(s: &str) -> String {
    match s.char_indices().nth(120) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}

// Python's json writes NaN and ±Infinity as bare tokens, which are not
// JSON; they are read as these strings and turned back into floats.
const NAN: &str = "\u{0}optuna:NaN";
const INF: &str = "\u{0}optuna:Infinity";
const NEG_INF: &str = "\u{0}optuna:-Infinity";

/// JSON as Python's `json.loads` reads it (with NaN, Infinity, -Infinity).
fn parse_json(line: &[u8]) -> Result<Value, serde_json::Error> {
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
fn replace_nonfinite(line: &[u8]) -> Option<Vec<u8>> {
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
fn float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => nonfinite(s),
        _ => None,
    }
}

/// An attribute value with Python's non-finite floats as "NaN",
/// "Infinity", "-Infinity" (JSON has no such numbers).
fn readable(v: &Value) -> Value {
    match v {
        Value::String(s) => match nonfinite(s) {
            Some(_) => Value::String(s.trim_start_matches("\u{0}optuna:").to_owned()),
            None => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(readable).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), readable(v))).collect())
        }
        _ => v.clone(),
    }
}

// -------------------------------------------------------------------- lock

/// Optuna's `JournalFileSymlinkLock` (see the module doc).
struct SymlinkLock<'a> {
    path: &'a Path,
    released: bool,
}

impl<'a> SymlinkLock<'a> {
    fn acquire(path: &'a Path, target: &Path, grace: Duration) -> Result<SymlinkLock<'a>> {
        const WARN_EVERY: Duration = Duration::from_secs(10);
        let mut sleep = Duration::from_millis(1);
        let mut last_change = Instant::now();
        let mut last_warning = Instant::now();
        let mut mtime = None;
        loop {
            match std::os::unix::fs::symlink(target, path) {
                Ok(()) => {
                    return Ok(SymlinkLock {
                        path,
                        released: false,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("taking the lock {}", path.display()))
                }
            }
            if last_warning.elapsed() > WARN_EVERY {
                common::say!(
                    "warning: it is taking longer than {}s to take the lock {}; retrying",
                    WARN_EVERY.as_secs(),
                    path.display()
                );
                last_warning = Instant::now();
            }
            // Through the link: the journal's mtime, which each write under
            // the lock moves. A dangling link has its own.
            let now_mtime = std::fs::metadata(path)
                .or_else(|_| std::fs::symlink_metadata(path))
                .and_then(|m| m.modified());
            let Ok(now_mtime) = now_mtime else {
                continue; // Let go meanwhile: retry at once.
            };
            if mtime != Some(now_mtime) {
                mtime = Some(now_mtime);
                last_change = Instant::now();
            }
            if last_change.elapsed() > grace {
                common::say!(
                    "warning: the lock {} has not been let go for {}s: breaking it",
                    path.display(),
                    grace.as_secs_f64()
                );
                last_warning = Instant::now();
                if release(path).is_ok() {
                    sleep = Duration::from_millis(1);
                }
                continue;
            }
            std::thread::sleep(sleep);
            sleep = (sleep * 2).min(Duration::from_secs(1));
        }
    }

    fn release(mut self) -> Result<()> {
        self.released = true;
        release(self.path)
    }
}

impl Drop for SymlinkLock<'_> {
    fn drop(&mut self) {
        if !self.released {
            let _ = release(self.path);
        }
    }
}

/// Lets go of a lock as Optuna does: rename it to a unique name (only one
/// of several racing releasers can), then unlink that.
fn release(path: &Path) -> Result<()> {
    let mut renamed = path.as_os_str().to_owned();
    renamed.push(format!("{}.rename", uuid4()));
    std::fs::rename(path, &renamed)
        .with_context(|| format!("letting go of {}: did not possess the lock", path.display()))?;
    std::fs::remove_file(&renamed)
        .with_context(|| format!("removing {}", Path::new(&renamed).display()))
}

// ------------------------------------------------------------------- utils

/// A random (version 4) UUID, from std's per-process random hasher keys.
fn uuid4() -> String {
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

/// Naive UTC ISO 8601 with microseconds, as Python's
/// `datetime.isoformat(timespec="microseconds")` writes it.
pub(crate) fn iso_utc(t: SystemTime) -> Result<String> {
    let d = t
        .duration_since(UNIX_EPOCH)
        .map_err(|_| anyhow!("a time before 1970"))?;
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    Ok(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_micros()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal_with(lines: &[&str]) -> (tempfile::TempDir, Journal) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.log");
        let mut text = lines.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        let j = Journal::open(&path).unwrap();
        (dir, j)
    }

    const STUDY: &str = r#"{"op_code":0,"worker_id":"w","study_name":"s","directions":[1]}"#;

    fn trial(study: u64) -> String {
        format!(
            r#"{{"op_code":4,"worker_id":"w","study_id":{study},"datetime_start":"2024-01-01T00:00:00.000000"}}"#
        )
    }

    fn record(lr: f64) -> TrialRecord {
        TrialRecord {
            params: [("lr".to_owned(), ParamValue::Float(lr))].into(),
            distributions: [(
                "lr".to_owned(),
                Distribution::Float {
                    low: 1e-5,
                    high: 1e-1,
                    log: true,
                    step: None,
                },
            )]
            .into(),
            ..TrialRecord::default()
        }
    }

    /// Four writers (each its own `Journal`, as separate worker processes
    /// are) claim "the next unclaimed index" at once: each index once.
    #[test]
    fn claims_by_racing_writers_never_take_an_index_twice() {
        let (dir, j) = journal_with(&[]);
        let study = j.create_study("s", Direction::Minimize).unwrap();
        let path = dir.path().join("journal.log");
        let claimed: Vec<Vec<u64>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    let path = path.clone();
                    scope.spawn(move || {
                        let j = Journal::open(&path).unwrap();
                        let mut mine = Vec::new();
                        while let Some(t) = j
                            .claim_trial(study, |s| {
                                let next = s.trials.len() as u64;
                                Ok((next < 40).then(|| {
                                    let mut r = record(1e-3);
                                    r.user_attrs.insert("index".into(), Value::from(next));
                                    r
                                }))
                            })
                            .unwrap()
                        {
                            mine.push(t.number);
                        }
                        mine
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let mut all: Vec<u64> = claimed.concat();
        all.sort_unstable();
        assert_eq!(all, (0..40).collect::<Vec<_>>());
        let s = j.load("s").unwrap().unwrap();
        for t in &s.trials {
            assert_eq!(t.user_attrs["index"], Value::from(t.number));
            assert_eq!(t.state, TrialState::Running);
        }
        // Nothing to claim: nothing written.
        assert_eq!(j.claim_trial(study, |_| Ok(None)).unwrap(), None);
        assert_eq!(j.load("s").unwrap().unwrap().trials.len(), 40);
    }

    #[test]
    fn updates_to_finished_trials_are_ignored() {
        let t = trial(0);
        let (_d, j) = journal_with(&[
            STUDY,
            &t,
            r#"{"op_code":6,"worker_id":"w","trial_id":0,"state":1,"values":[0.5],"datetime_complete":"2024-01-01T00:00:01.000000"}"#,
            r#"{"op_code":6,"worker_id":"w","trial_id":0,"state":3,"values":null,"datetime_complete":"2024-01-01T00:00:02.000000"}"#,
            r#"{"op_code":7,"worker_id":"w","trial_id":0,"step":3,"intermediate_value":1.0}"#,
            r#"{"op_code":8,"worker_id":"w","trial_id":0,"user_attr":{"k":1}}"#,
            r#"{"op_code":7,"worker_id":"w","trial_id":9,"step":3,"intermediate_value":1.0}"#,
        ]);
        let s = j.load("s").unwrap().unwrap();
        assert_eq!(s.trials.len(), 1);
        let t = &s.trials[0];
        assert_eq!((t.state, t.value), (TrialState::Complete, Some(0.5)));
        assert!(t.intermediate.is_empty() && t.user_attrs.is_empty());
        assert_eq!(
            t.datetime_complete.as_deref(),
            Some("2024-01-01T00:00:01.000000")
        );
        // Our own writer refuses what replay would ignore.
        let e = j.set_intermediate(TrialId(0), 1, 1.0).unwrap_err();
        assert!(format!("{e:#}").contains("already finished"), "{e:#}");
    }

    #[test]
    fn unknown_op_code_and_bad_lines_name_the_line() {
        let (_d, j) = journal_with(&[STUDY, r#"{"op_code":12,"worker_id":"w"}"#]);
        let e = format!("{:#}", j.load("s").unwrap_err());
        assert!(e.contains("journal.log:2: unknown op_code 12"), "{e}");

        let t = trial(0);
        let (_d, j) = journal_with(&[STUDY, "{not json", &t]);
        let e = format!("{:#}", j.load("s").unwrap_err());
        assert!(e.contains("journal.log:2: not a JSON record"), "{e}");
        // An append refuses a file with a bad line inside, too.
        assert!(j.create_study("s", Direction::Minimize).is_err());

        let (_d, j) = journal_with(&[STUDY, r#"{"op_code":4,"worker_id":"w"}"#]);
        let e = format!("{:#}", j.load("s").unwrap_err());
        assert!(e.contains("journal.log:2: no field \"study_id\""), "{e}");
    }

    #[test]
    fn study_names_are_reused_only_after_a_delete() {
        let (t0, t1) = (trial(0), trial(1));
        let (_d, j) = journal_with(&[
            STUDY,
            &t0,
            // Same name again: ignored (Optuna's DuplicatedStudyError for its writer).
            r#"{"op_code":0,"worker_id":"x","study_name":"s","directions":[2]}"#,
            r#"{"op_code":1,"worker_id":"w","study_id":0}"#,
            // A trial of the deleted study is ignored and takes no id.
            &t0,
            r#"{"op_code":0,"worker_id":"w","study_name":"s","directions":[2]}"#,
            &t1,
        ]);
        let s = j.load("s").unwrap().unwrap();
        assert_eq!((s.id, s.direction), (StudyId(1), Direction::Maximize));
        assert_eq!(s.trial_ids, [TrialId(1)]);
        assert_eq!(s.trials[0].number, 0);
        assert_eq!(j.study_names().unwrap(), ["s"]);
        assert_eq!(
            j.create_study("s", Direction::Maximize).unwrap(),
            StudyId(1)
        );
        assert!(j.create_study("s", Direction::Minimize).is_err());
        assert_eq!(
            j.create_study("t", Direction::Minimize).unwrap(),
            StudyId(2)
        );
    }

    #[test]
    fn ids_count_across_studies_numbers_within() {
        let (_d, j) = journal_with(&[]);
        let a = j.create_study("a", Direction::Minimize).unwrap();
        let b = j.create_study("b", Direction::Minimize).unwrap();
        let r0 = j
            .create_finished_trial(a, &record(0.01), Outcome::Complete(1.0))
            .unwrap();
        let r1 = j.create_running_trial(b, &record(0.02)).unwrap();
        let r2 = j
            .create_finished_trial(a, &record(0.03), Outcome::Fail)
            .unwrap();
        assert_eq!(
            [r0, r1, r2],
            [
                TrialRef {
                    id: TrialId(0),
                    number: 0
                },
                TrialRef {
                    id: TrialId(1),
                    number: 0
                },
                TrialRef {
                    id: TrialId(2),
                    number: 1
                },
            ]
        );
        j.set_intermediate(r1.id, 0, 3.0).unwrap();
        j.set_intermediate(r1.id, 1, 2.0).unwrap();
        j.finish_trial(r1.id, Outcome::Pruned).unwrap();
        let b = j.load("b").unwrap().unwrap();
        assert_eq!(b.trials[0].state, TrialState::Pruned);
        assert_eq!(
            b.trials[0].value,
            Some(2.0),
            "a pruned trial's value is its last report"
        );
        assert!(j.finish_trial(r1.id, Outcome::Fail).is_err());
    }

    #[test]
    fn a_torn_tail_is_ignored_then_cut_and_kept_aside() {
        let t = trial(0);
        let (d, j) = journal_with(&[STUDY, &t]);
        let mut f = OpenOptions::new().append(true).open(j.path()).unwrap();
        f.write_all(br#"{"op_code":4,"worker_id":"w","stu"#)
            .unwrap();
        assert_eq!(j.load("s").unwrap().unwrap().trials.len(), 1);
        let r = j.create_running_trial(StudyId(0), &record(0.01)).unwrap();
        assert_eq!(
            r,
            TrialRef {
                id: TrialId(1),
                number: 1
            }
        );
        let text = std::fs::read_to_string(j.path()).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(!text.contains("\"stu\n"));
        let torn = std::fs::read_to_string(d.path().join("journal.log.torn")).unwrap();
        assert_eq!(torn, "{\"op_code\":4,\"worker_id\":\"w\",\"stu\n");

        // A last whole line that is not JSON is torn too.
        f.write_all(b"\0\0\0\0\n").unwrap();
        assert_eq!(j.load("s").unwrap().unwrap().trials.len(), 2);
        j.finish_trial(r.id, Outcome::Complete(0.5)).unwrap();
        assert_eq!(j.load("s").unwrap().unwrap().trials[1].value, Some(0.5));
    }

    #[test]
    fn non_finite_numbers_are_refused_but_read() {
        let (_d, j) = journal_with(&[STUDY]);
        let s = StudyId(0);
        for bad in [f64::NAN, f64::INFINITY] {
            assert!(j
                .create_finished_trial(s, &record(0.01), Outcome::Complete(bad))
                .is_err());
            let mut r = record(0.01);
            r.intermediate.insert(0, bad);
            assert!(j.create_running_trial(s, &r).is_err());
            assert!(j.create_running_trial(s, &record(bad)).is_err());
        }
        let t = j.create_running_trial(s, &record(0.01)).unwrap();
        assert!(j.set_intermediate(t.id, 0, f64::NAN).is_err());
        assert!(j
            .finish_trial(t.id, Outcome::Complete(f64::NEG_INFINITY))
            .is_err());
        let text = std::fs::read_to_string(j.path()).unwrap();
        assert_eq!(text.lines().count(), 2, "nothing refused was written");

        // What Python writes for them is read.
        let mut f = OpenOptions::new().append(true).open(j.path()).unwrap();
        writeln!(
            f,
            r#"{{"op_code":7,"worker_id":"p","trial_id":0,"step":1,"intermediate_value":NaN}}"#
        )
        .unwrap();
        writeln!(f, r#"{{"op_code":8,"worker_id":"p","trial_id":0,"user_attr":{{"x":[-Infinity,"NaN in a string"]}}}}"#).unwrap();
        writeln!(f, r#"{{"op_code":6,"worker_id":"p","trial_id":0,"state":1,"values":[Infinity],"datetime_complete":"2024-01-01T00:00:00"}}"#).unwrap();
        let t = &j.load("s").unwrap().unwrap().trials[0];
        assert!(t.intermediate[&1].is_nan());
        assert_eq!(t.value, Some(f64::INFINITY));
        assert_eq!(
            t.user_attrs["x"],
            serde_json::json!(["-Infinity", "NaN in a string"])
        );
    }

    #[test]
    fn params_are_checked_as_optuna_checks_them() {
        let (_d, j) = journal_with(&[STUDY]);
        let s = StudyId(0);
        let mut r = record(0.01);
        r.params.insert("extra".into(), ParamValue::Int(1));
        assert!(j.create_running_trial(s, &r).is_err(), "no distribution");
        let mut r = record(0.01);
        r.distributions.insert(
            "lr".into(),
            Distribution::Float {
                low: 0.1,
                high: 0.01,
                log: false,
                step: None,
            },
        );
        assert!(j.create_running_trial(s, &r).is_err(), "low > high");
        assert!(
            j.create_running_trial(s, &record(-1.0)).is_err(),
            "log and <= 0"
        );
        let cat = |choices: Vec<Choice>, v: Choice| TrialRecord {
            params: [("opt".to_owned(), ParamValue::Choice(v))].into(),
            distributions: [("opt".to_owned(), Distribution::Categorical { choices })].into(),
            ..TrialRecord::default()
        };
        let ab = vec![Choice::Str("a".into()), Choice::Str("b".into())];
        assert!(j
            .create_running_trial(s, &cat(ab.clone(), Choice::Str("c".into())))
            .is_err());
        j.create_running_trial(s, &cat(ab, Choice::Str("b".into())))
            .unwrap();
        // Another study-wide space for the same name is refused.
        let other = vec![Choice::Str("a".into())];
        let e = j
            .create_running_trial(s, &cat(other, Choice::Str("a".into())))
            .unwrap_err();
        assert!(format!("{e:#}").contains("dynamic value space"), "{e:#}");
        let t = &j.load("s").unwrap().unwrap().trials[0];
        assert_eq!(t.params["opt"], ParamValue::Choice(Choice::Str("b".into())));
    }

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

    #[test]
    fn the_cached_replay_follows_other_writers_and_a_replaced_file() {
        let (d, a) = journal_with(&[]);
        let b = Journal::open(a.path()).unwrap();
        let s = a.create_study("s", Direction::Minimize).unwrap();
        for i in 0..3 {
            let (mine, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
            let r = mine.create_running_trial(s, &record(0.01)).unwrap();
            assert_eq!(r.number, 2 * i);
            assert_eq!(
                other.create_running_trial(s, &record(0.02)).unwrap().number,
                2 * i + 1
            );
        }
        assert_eq!(a.load("s").unwrap().unwrap().trials.len(), 6);
        // A new file in its place (another inode) is replayed from scratch.
        let fresh = d.path().join("fresh.log");
        std::fs::write(&fresh, format!("{STUDY}\n{}\n", trial(0))).unwrap();
        std::fs::rename(&fresh, a.path()).unwrap();
        assert_eq!(a.load("s").unwrap().unwrap().trials.len(), 1);
        // Line numbers go on from the cached part.
        let mut f = OpenOptions::new().append(true).open(a.path()).unwrap();
        f.write_all(b"{\"op_code\":99,\"worker_id\":\"w\"}\n")
            .unwrap();
        let e = format!("{:#}", a.load("s").unwrap_err());
        assert!(e.contains("journal.log:3: unknown op_code 99"), "{e}");
    }

    #[test]
    fn timestamps_are_python_isoformat() {
        let t = UNIX_EPOCH + Duration::from_micros(1_709_210_096_123_456);
        assert_eq!(iso_utc(t).unwrap(), "2024-02-29T12:34:56.123456");
        assert_eq!(iso_utc(UNIX_EPOCH).unwrap(), "1970-01-01T00:00:00.000000");
    }

    #[test]
    fn a_stale_lock_is_broken_after_the_grace_period() {
        let (d, j) = journal_with(&[]);
        let j = j.with_lock_grace(Duration::from_millis(300));
        // A lock left by a killed writer (as Optuna makes it: a symlink).
        std::os::unix::fs::symlink("journal.log", d.path().join("journal.log.lock")).unwrap();
        let t0 = Instant::now();
        j.create_study("s", Direction::Minimize).unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(300));
        let left: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".lock"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn worker_ids_look_like_optunas() {
        let (a, b) = (uuid4(), uuid4());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}
