//! What `--status` and `--report` read: a sweep's directory (its journal,
//! or the database its sweep.yaml names), a database study (`--storage`),
//! or any Optuna journal file, ours or not. A study `train sweep` did not
//! run (an Optuna client's, in a journal or a database) has no settings or
//! space: it is read all the same, and what only our sweeps record is said
//! to be absent. Nothing is ever written beside a journal we did not write.

use crate::cli::Args;
use crate::journal::{Journal, Study};
use crate::layout::{read_settings, space_of};
use crate::space::Space;
use crate::storage::Storage;
use crate::truth::{open_db, study_in, Truth};
use common::bad_input;
use common::wire::metric::Metric;
use common::wire::run_dir::SweepDir;
use common::wire::sweep::Settings;
use std::path::{Path, PathBuf};

pub(crate) struct Loaded {
    /// The sweep's settings and space (None: a study `train sweep` did not
    /// run).
    pub sweep: Option<(Settings, Space)>,
    pub study: Study,
    /// Where best_config.yaml and objective.png go (None: nowhere: a
    /// database study read without --out, or another's journal).
    pub dir: Option<PathBuf>,
    /// The sweep's name for the reader (its directory, or where it is).
    pub shown: String,
}

impl Loaded {
    /// The metric the trials' values are of ("value" for another's study).
    pub fn metric(&self) -> Metric {
        self.sweep
            .as_ref()
            .map_or(Metric::Other("value".into()), |(_, s)| {
                s.metric.name.clone()
            })
    }

    pub fn method(&self) -> &str {
        self.sweep
            .as_ref()
            .map_or("an Optuna study", |(_, s)| s.method.as_str())
    }
}

pub(crate) fn load(args: &Args, given: &Option<PathBuf>, flag: &str) -> anyhow::Result<Loaded> {
    let dir = args.dir_of(given, flag)?;
    let (settings, study, dir, shown) = match (&args.storage, dir) {
        (Some(url), dir) => {
            let db = open_db(args, url)?;
            let name = study_in(&db, args, dir.as_deref())?;
            if let Some(d) = &dir {
                db.keep_checkpoint_in(d, &name);
            }
            let study = db
                .load(&name)?
                .ok_or_else(|| bad_input!("{}: no study {name:?} in it", db.shown()))?;
            let settings = db.settings(&study)?;
            (
                settings,
                study,
                dir,
                format!("{} (study {name})", db.shown()),
            )
        }
        (None, Some(file)) if file.is_file() => match ours_beside(&file) {
            Some(d) => ours(args, d)?,
            None => {
                let (study, shown) = journal_study(args, &file)?;
                (None, study, None, shown)
            }
        },
        (None, Some(d)) => ours(args, d)?,
        (None, None) => unreachable!("dir_of wants a DIR without --storage"),
    };
    let sweep = match settings {
        Some(s) => {
            let space = space_of(&s)?.space;
            Some((s, space))
        }
        None => {
            common::say!(
                "train sweep: {shown}: study {:?} was not run by `train sweep`: its trials are read as Optuna holds them; failure classes, peaks and trial folders are not in it",
                study.name
            );
            None
        }
    };
    Ok(Loaded {
        sweep,
        study,
        dir,
        shown,
    })
}

type Read = (Option<Settings>, Study, Option<PathBuf>, String);

/// The sweep in DIR, from its truth.
fn ours(args: &Args, dir: PathBuf) -> anyhow::Result<Read> {
    let settings = read_settings(&dir)?;
    let truth = Truth::of(args, &dir, &settings)?;
    let described = truth.storage().describe();
    let study = truth
        .load_once(&settings.study_name)?
        .ok_or_else(|| bad_input!("{described}: no study {:?} in it", settings.study_name))?;
    let shown = dir.display().to_string();
    Ok((Some(settings), study, Some(dir), shown))
}

/// The sweep directory a journal file is the journal of, if it is ours.
fn ours_beside(file: &Path) -> Option<PathBuf> {
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty())?;
    let sweep = SweepDir::new(dir);
    (sweep.journal() == file && sweep.settings().is_file()).then(|| dir.to_path_buf())
}

/// A study of any Optuna journal (Optuna's, Rustuna's): --study, else the
/// journal's only study.
fn journal_study(args: &Args, file: &Path) -> anyhow::Result<(Study, String)> {
    let journal = Journal::open(file)?;
    let shown = file.display().to_string();
    let name = match &args.study {
        Some(n) => n.clone(),
        None => match journal.study_names()?.as_slice() {
            [one] => one.clone(),
            [] => return Err(bad_input!("{shown}: holds no study")),
            many => {
                return Err(bad_input!(
                    "{shown}: holds {} studies: name one with --study ({})",
                    many.len(),
                    many.join(", ")
                ))
            }
        },
    };
    let study = journal
        .into_study(&name)?
        .ok_or_else(|| bad_input!("{shown}: no study {name:?} in it"))?;
    Ok((study, shown))
}
