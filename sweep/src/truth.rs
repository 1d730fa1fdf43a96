//! Where a sweep's one truth is: DIR/journal.log (the default), or a
//! database (`--storage`), whose study also holds the sweep's settings so
//! that a worker on another host needs no file from the first. This is the
//! one place that decides which, for the driver, `--status` and `--report`.

use crate::cli::Args;
use crate::journal::{Journal, Study, StudyId};
use crate::rdb::Database;
use crate::storage::Storage;
use common::bad_input;
use common::wire::run_dir::SweepDir;
use common::wire::sweep::Settings;
use std::path::Path;

// One per process: the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Truth {
    Journal(Journal),
    Db(Database),
}

impl Truth {
    pub fn storage(&self) -> &dyn Storage {
        match self {
            Truth::Journal(j) => j,
            Truth::Db(d) => d,
        }
    }

    /// The study named `name`, for a reader that loads once (`--report`,
    /// `--status`): a journal's replay is not kept for a next load
    /// (`Journal::into_study`).
    pub fn load_once(self, name: &str) -> anyhow::Result<Option<Study>> {
        match self {
            Truth::Journal(j) => j.into_study(name),
            Truth::Db(d) => d.load(name),
        }
    }

    /// At the end of a sweep: the study read so far is left to the
    /// process's exit to free (a heap of small maps: freeing 50,000 trials
    /// one by one took the driver a tenth of a second); a database's
    /// connection is still closed.
    pub fn leave(self) {
        match self {
            Truth::Journal(j) => std::mem::forget(j),
            Truth::Db(d) => d.leave_cache(),
        }
    }

    pub fn db(&self) -> Option<&Database> {
        match self {
            Truth::Db(d) => Some(d),
            Truth::Journal(_) => None,
        }
    }

    /// The truth of the sweep whose settings are `settings` in `dir`: the
    /// database they name (the command's own --storage URL first: it may
    /// carry what the stored one lacks), else DIR's journal.
    pub fn of(args: &Args, dir: &Path, settings: &Settings) -> anyhow::Result<Truth> {
        match (&args.storage, &settings.storage) {
            (Some(url), _) | (None, Some(url)) => {
                let db = open_db(args, url)?;
                db.keep_checkpoint_in(dir, &settings.study_name);
                Ok(Truth::Db(db))
            }
            (None, None) => Ok(Truth::Journal(Journal::open(SweepDir::new(dir).journal())?)),
        }
    }
}

pub fn open_db(args: &Args, url: &str) -> anyhow::Result<Database> {
    let (grace, patience) = args.db_times()?;
    let db = Database::open(url, grace, patience)?;
    // The client keeps what it read; trials (and whatever they start)
    // must not inherit the database's password. Before any trial or
    // preload server exists, while no other thread reads the environment.
    if std::env::var_os("PGPASSWORD").is_some() {
        std::env::remove_var("PGPASSWORD");
    }
    Ok(db)
}

/// A new sweep's study name in a database: --study, else the space's
/// `name` (W&B's key), else the space file's name without its extension.
pub fn new_study_name(args: &Args, space_path: &Path, space_text: &str) -> String {
    if let Some(n) = &args.study {
        return n.clone();
    }
    let named = serde_yaml::from_str::<serde_yaml::Value>(space_text)
        .ok()
        .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(String::from))
        .filter(|n| !n.trim().is_empty());
    named.unwrap_or_else(|| {
        space_path
            .file_stem()
            .map_or("sweep".into(), |s| s.to_string_lossy().into_owned())
    })
}

/// The study a database command names: --study, else the study of DIR's
/// sweep.yaml, else the database's only study.
pub fn study_in(db: &Database, args: &Args, dir: Option<&Path>) -> anyhow::Result<String> {
    if let Some(n) = &args.study {
        return Ok(n.clone());
    }
    if let Some(s) = dir.and_then(|d| crate::layout::read_settings(d).ok()) {
        return Ok(s.study_name);
    }
    let names = db.study_names()?;
    match names.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(bad_input!("{}: holds no study yet", db.shown())),
        many => Err(bad_input!(
            "{}: holds {} studies: name one with --study ({})",
            db.shown(),
            many.len(),
            many.join(", ")
        )),
    }
}

/// A database study's settings, as its first `train sweep` stored them.
pub fn stored_settings(db: &Database, name: &str) -> anyhow::Result<(StudyId, Settings)> {
    let study = db
        .load(name)?
        .ok_or_else(|| bad_input!("{}: no study {name:?} in it", db.shown()))?;
    let settings = db.settings(&study)?.ok_or_else(|| {
        bad_input!(
            "{}: study {name:?} was not started by `train sweep` (it holds no sweep settings): start it with `train sweep --space SPACE --storage URL --study {name} --out DIR`",
            db.shown()
        )
    })?;
    Ok((study.id, settings))
}
