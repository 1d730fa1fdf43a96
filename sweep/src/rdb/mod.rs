//! A sweep's truth in a PostgreSQL database, in the tables Optuna's
//! `RDBStorage` writes (`schema`), so that Optuna's workers on any host,
//! `optuna.load_study(storage=URL)` and optuna-dashboard share the study
//! with `train sweep` workers.
//!
//! Every call is one transaction, retried whole when the connection is
//! lost: the worker says it waits, reconnects with a doubling pause, and
//! goes on; past `patience` it stops with exit code 6 (`UNREACHABLE`),
//! the state intact. A claim whose commit outcome is unknown is settled on
//! reconnect by the token it wrote with the trial (`write::CLAIM_ATTR`),
//! so a trial is neither lost nor made twice; a finish finds the trial
//! already ended by its own cut-off try and stops there.
//!
//! Heartbeats: each worker stamps its running trials' heartbeats
//! (`beat`); the claim of any worker first fails trials whose heartbeat is
//! older than the grace period, with the study locked, so that exactly one
//! worker reclaims each (and its re-run is claimed like any interrupted
//! trial). Parts: `target` (URL, password, TLS), `schema`, `read`, `write`.

mod checkpoint;
mod read;
pub mod schema;
pub mod target;
mod tls;
mod write;

pub use write::CLAIM_ATTR;

use crate::journal::{Outcome, Study, StudyId, TrialId, TrialRecord, TrialRef};
use crate::storage::Storage;
use crate::trial::Direction;
use anyhow::Result;
use common::bad_input;
use common::wire::sweep::Settings;
use postgres::error::SqlState;
use postgres::Client;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use target::Target;

use common::exit::UNREACHABLE;
/// How long a trial's heartbeat may be silent before another worker fails
/// it and runs it again (`--heartbeat-grace`).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(60);
/// How long a worker waits for a database that went away (`--db-patience`).
pub const DEFAULT_PATIENCE: Duration = Duration::from_secs(300);
/// The study system attribute holding the sweep's settings (sweep.yaml's
/// text), so that a worker on another host needs no file from the first.
pub const SETTINGS_ATTR: &str = "trainguard:settings";

pub struct Database {
    target: Target,
    client: Mutex<Option<Client>>,
    cache: Mutex<read::Cache>,
    /// Where the sweep keeps its checkpoint of what was read (None: no
    /// sweep directory, as `--status --storage URL`).
    kept: Mutex<Option<Kept>>,
    grace: Duration,
    patience: Duration,
}

/// A sweep's database checkpoint (checkpoint.rs): its file, its study, and
/// how many trials the newest one this process read or wrote holds.
struct Kept {
    path: PathBuf,
    study: String,
    id: Option<i32>,
    trials: usize,
    /// None can be written (a trial would not read back the same).
    unwritable: bool,
    failed_said: bool,
}

impl Database {
    /// Closes the connection; what was read is left to the process's exit.
    pub fn leave_cache(self) {
        let cache = std::mem::take(&mut *self.cache.lock().unwrap_or_else(|e| e.into_inner()));
        std::mem::forget(cache);
    }

    /// Connects (bad URL, wrong password, no permission: exit 2; no answer:
    /// exit 6) and makes or checks Optuna's tables.
    pub fn open(url: &str, grace: Duration, patience: Duration) -> Result<Database> {
        let target = target::parse(url)?;
        if target.password_in_url {
            common::say!(
                "train sweep: the password in --storage shows in `ps` and shell history: put it in a password file instead (~/.pgpass or PGPASSFILE, mode 0600; docs/FORMATS.md, \"Sweep databases\")"
            );
        }
        let mut client = connect(&target).map_err(|e| first_error(e, &target.shown))?;
        schema::ensure(&mut client, &target.shown).map_err(|e| first_error(e, &target.shown))?;
        Ok(Database {
            target,
            client: Mutex::new(Some(client)),
            cache: Mutex::new(Default::default()),
            kept: Mutex::new(None),
            grace,
            patience,
        })
    }

    /// Reads the study `study` first from its checkpoint in the sweep's
    /// directory `dir`, and keeps one there as the sweep goes
    /// (`Storage::keep_checkpoint`). Asked again for the same, it changes
    /// nothing.
    pub fn keep_checkpoint_in(&self, dir: &std::path::Path, study: &str) {
        let path = common::wire::run_dir::SweepDir::new(dir).database_checkpoint();
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept
            .as_ref()
            .is_some_and(|k| k.path == path && k.study == study)
        {
            return;
        }
        *kept = Some(Kept {
            path,
            study: study.to_string(),
            id: None,
            trials: 0,
            unwritable: false,
            failed_said: false,
        });
    }

    pub fn shown(&self) -> &str {
        &self.target.shown
    }

    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// Runs `op` in a transaction, again on a new connection while the
    /// database is away (up to the patience). `op` gets the try's number
    /// (0 first), so that a retried write can look for its own effect.
    fn with<T>(
        &self,
        what: &str,
        mut op: impl FnMut(&mut postgres::Transaction, u32) -> Result<T>,
    ) -> Result<T> {
        let mut guard = self.client.lock().unwrap_or_else(|p| p.into_inner());
        let mut away_since: Option<Instant> = None;
        let mut pause = Duration::from_millis(100);
        for attempt in 0u32.. {
            let result = (|| -> Result<T> {
                let client = match guard.as_mut() {
                    Some(c) if !c.is_closed() => c,
                    _ => guard.insert(connect(&self.target)?),
                };
                let mut tx = client.transaction()?;
                let out = op(&mut tx, attempt)?;
                tx.commit()?;
                Ok(out)
            })();
            let err = match result {
                Ok(out) => {
                    if let Some(t) = away_since {
                        common::say!(
                            "train sweep: {} is back after {:.0}s: going on",
                            self.target.shown,
                            t.elapsed().as_secs_f64()
                        );
                    }
                    return Ok(out);
                }
                Err(e) => e,
            };
            match kind(&err) {
                Kind::Retry => continue,
                Kind::Fatal | Kind::Certificate => {
                    return Err(err.context(format!("{}: {what}", self.target.shown)))
                }
                Kind::Away => {}
            }
            *guard = None;
            let since = *away_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= self.patience {
                return Err(anyhow::Error::new(common::exit::Failure::new(
                    UNREACHABLE,
                    format!(
                        "{} unreachable for {:.0}s (--db-patience) while {what}: {err:#}. Nothing was lost: run the same command again once the database is back",
                        self.target.shown,
                        since.elapsed().as_secs_f64()
                    ),
                )));
            }
            if pause == Duration::from_millis(100) {
                common::say!(
                    "train sweep: {} is unreachable ({}): waiting for it (up to {}s) while {what}",
                    self.target.shown,
                    short(&err),
                    self.patience.as_secs()
                );
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(5));
        }
        unreachable!("the loop returns")
    }

    pub fn study_names(&self) -> Result<Vec<String>> {
        self.with("listing studies", |tx, _| {
            Ok(tx
                .query("SELECT study_name FROM studies ORDER BY study_id", &[])?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })
    }

    /// The settings a study's first `train sweep` stored, parsed from the
    /// study as read (None: a study another client made).
    pub fn settings(&self, study: &Study) -> Result<Option<Settings>> {
        let shown = format!("{} (study {:?})", self.target.shown, study.name);
        study
            .system_attrs
            .get(SETTINGS_ATTR)
            .and_then(Value::as_str)
            .map(|text| common::wire::parse(&shown, text))
            .transpose()
    }

    /// Stores the sweep's settings in its study (sweep-settings/v1 as YAML
    /// text), for workers on other hosts.
    pub fn set_settings(&self, study: StudyId, settings: &Settings) -> Result<()> {
        let text = Value::from(serde_yaml::to_string(settings)?);
        self.with("storing the sweep's settings", |tx, _| {
            write::set_study_system_attr(tx, study.0 as i32, SETTINGS_ATTR, &text)
        })
    }
}

impl Storage for Database {
    fn describe(&self) -> String {
        self.target.shown.clone()
    }

    fn load(&self, name: &str) -> Result<Option<Study>> {
        self.with("reading the study", |tx, _| {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            // The first read of the sweep's study starts from its checkpoint.
            if let Some(k) = kept.as_mut().filter(|k| k.study == name && k.id.is_none()) {
                if let Some(id) = read::study_id(tx, name)? {
                    k.id = Some(id);
                    if let Some(known) = checkpoint::load(tx, &k.path, id, name) {
                        k.trials = known.len();
                        cache.insert(id, known);
                    }
                }
            }
            drop(kept);
            read::load(tx, name, &mut cache)
        })
    }

    fn create_study(&self, name: &str, direction: Direction) -> Result<StudyId> {
        self.with("creating the study", |tx, _| {
            if let Some(id) = read::study_id(tx, name)? {
                let found = read::direction(tx, id, name)?;
                if found != direction {
                    return Err(bad_input!(
                        "{}: study {name:?} exists to {found:?}, not to {direction:?}",
                        self.target.shown
                    ));
                }
                return Ok(StudyId(id as u64));
            }
            write::create_study(tx, name, direction).map(|id| StudyId(id as u64))
        })
    }

    fn claim_trial(
        &self,
        study: StudyId,
        decide: &mut dyn FnMut(&Study) -> Result<Option<TrialRecord>>,
    ) -> Result<Option<TrialRef>> {
        let token = crate::journal::uuid4();
        let made = self.with("claiming a trial", |tx, attempt| {
            if attempt > 0 {
                if let Some(found) = write::claimed_with(tx, &token)? {
                    return Ok(Some(found));
                }
            }
            let sid = study.0 as i32;
            write::lock_study(tx, sid)?;
            for n in write::fail_stale(tx, sid, self.grace)? {
                common::say!(
                    "train sweep: trial {n} sent no heartbeat for over {}s: failed (ours run again)",
                    self.grace.as_secs()
                );
            }
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            let current = read::load_id(tx, sid, &mut cache)?;
            drop(cache);
            let Some(record) = decide(&current)? else {
                return Ok(None);
            };
            write::insert_trial(tx, &current, &record, &token).map(Some)
        })?;
        Ok(made.map(|(id, number)| TrialRef {
            id: TrialId(id as u64),
            number: number as u64,
        }))
    }

    fn report(&self, trial: TrialId, values: &[(u64, f64)]) -> Result<()> {
        if values.is_empty() {
            return Ok(());
        }
        self.with("recording a trial's metric", |tx, _| {
            write::report(tx, trial.0 as i32, values)
        })?;
        Ok(())
    }

    fn finish(&self, trial: TrialId, attrs: &[(String, Value)], outcome: Outcome) -> Result<()> {
        let ended = self.with(
            "recording a trial's end",
            |tx, attempt| match write::finish(tx, trial.0 as i32, attrs, outcome)? {
                Some(state) if attempt == 0 => Ok(Some(state)),
                _ => Ok(None),
            },
        )?;
        if let Some(state) = ended {
            common::say!(
                "train sweep: trial id {} had already ended {state} in the database (failed by another worker when its heartbeat stopped): its result here is not recorded",
                trial.0
            );
        }
        Ok(())
    }

    fn beat(&self, running: &[TrialId]) -> Result<()> {
        let ids: Vec<i32> = running.iter().map(|t| t.0 as i32).collect();
        if ids.is_empty() {
            return Ok(());
        }
        self.with("sending heartbeats", |tx, _| write::beat(tx, &ids))
    }

    fn heartbeat_every(&self) -> Option<Duration> {
        Some((self.grace / 4).max(Duration::from_secs(1)))
    }

    /// As a journal's: once the study has grown by a quarter since the
    /// newest checkpoint (`at_end`: by anything), from `FROM_TRIALS` on.
    fn keep_checkpoint(&self, at_end: bool) {
        let mut guard = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let Some(k) = guard.as_mut().filter(|k| !k.unwritable) else {
            return;
        };
        let Some(id) = k.id else { return };
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let Some(known) = cache.get(&id).cloned() else {
            return;
        };
        drop(cache);
        let (n, last) = (known.len(), k.trials);
        let due = n >= checkpoint::FROM_TRIALS && n > last && (at_end || n - last >= last / 4);
        let Some(direction) = known.direction().filter(|_| due) else {
            return;
        };
        let written = self.with("keeping the sweep's checkpoint", |tx, _| {
            checkpoint::write(tx, &k.path, (id, &k.study, direction), &known)
        });
        k.trials = n; // A failure is tried again a quarter later.
        match written {
            Ok(true) => {}
            Ok(false) => k.unwritable = true,
            Err(e) if !k.failed_said => {
                k.failed_said = true;
                common::say!(
                    "warning: {e:#} (the sweep goes on: the checkpoint only makes a later start faster)"
                );
            }
            Err(_) => {}
        }
    }
}

fn connect(target: &Target) -> Result<Client> {
    let mut config = target.config.clone();
    config.connect_timeout(Duration::from_secs(10));
    config.application_name("train sweep");
    Ok(match target.tls {
        target::Tls::Disable => config.connect(postgres::NoTls)?,
        _ => config.connect(tls::connector(target)?)?,
    })
}

/// A first connection's error: refused credentials, a database that does
/// not exist or no permission are bad input (exit 2); no answer is exit 6.
fn first_error(e: anyhow::Error, shown: &str) -> anyhow::Error {
    match kind(&e) {
        Kind::Away | Kind::Retry => anyhow::Error::new(common::exit::Failure::new(
            UNREACHABLE,
            format!("{shown}: cannot reach the database: {}", short(&e)),
        )),
        Kind::Certificate => bad_input!(
            "{shown}: the server's certificate was refused ({}): name its CA with sslrootcert=FILE in the URL, or use sslmode=require to encrypt without checking it",
            short(&e)
        ),
        Kind::Fatal => match e.downcast_ref::<common::exit::Failure>() {
            Some(_) => e,
            None => bad_input!("{shown}: {}", short(&e)),
        },
    }
}

enum Kind {
    /// The transaction lost to another (deadlock, serialization): again now.
    Retry,
    /// The connection is gone or the server is not taking any: wait.
    Away,
    /// TLS refused the server's certificate (sslmode=verify-*).
    Certificate,
    /// Anything else: the caller's error.
    Fatal,
}

fn kind(e: &anyhow::Error) -> Kind {
    let Some(pg) = e.chain().find_map(|c| c.downcast_ref::<postgres::Error>()) else {
        return Kind::Fatal;
    };
    if let Some(code) = pg.code() {
        return match code {
            c if *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::T_R_SERIALIZATION_FAILURE =>
            {
                Kind::Retry
            }
            c if c.code().starts_with("08")
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW =>
            {
                Kind::Away
            }
            _ => Kind::Fatal,
        };
    }
    // A certificate refused (rustls' error under the socket's) is the
    // URL's to fix, not a server away.
    let mut cause = std::error::Error::source(pg);
    let mut io = false;
    while let Some(c) = cause {
        if c.is::<rustls::Error>() {
            return Kind::Certificate;
        }
        if let Some(e) = c.downcast_ref::<std::io::Error>() {
            if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
                return Kind::Certificate;
            }
            io = true;
        }
        cause = c.source();
    }
    if pg.is_closed() || io || pg.as_db_error().is_none() && pg.to_string().contains("timed out") {
        Kind::Away
    } else {
        Kind::Fatal
    }
}

/// The error's innermost words (the server's message, or the socket's).
fn short(e: &anyhow::Error) -> String {
    if let Some(db) = e
        .chain()
        .find_map(|c| c.downcast_ref::<postgres::Error>())
        .and_then(|p| p.as_db_error())
    {
        return db.message().to_string();
    }
    e.chain()
        .last()
        .map_or_else(|| e.to_string(), |c| c.to_string())
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.target.shown)
    }
}
