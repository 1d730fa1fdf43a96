//! `train run --auto-fix` and a sweep's `auto_fix: true`: after a failed
//! attempt, the next one with the fix ladder's turns made
//! (`diagnose::ladder`), in the command's own flags (those its argparse
//! parser or its `--help` shows it defines, read once; `knobs`) or in a
//! copy of its config written
//! into the run directory (the user's file is never changed), and resumed
//! from the script's last checkpoint where it can. An attempt's command
//! keeps the words `{config}` and `{resume}`, replaced as it runs
//! (`expand`).

use crate::knobs::{self as flags, Defined, FlagKnob, Source};
use crate::leg::Ended;
use common::wire::failure::{Class, OomFigures};
use common::wire::run_dir::RunDir;
use diagnose::any_config;
use diagnose::keys::Scalar;
use diagnose::knobs::{Found, Knob, Turn};
use diagnose::ladder::{self, Device, OomSeen};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What one leg runs: its command (with `{config}` and `{resume}` words
/// still in it) and config, and how it came from the leg before.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub command: Vec<String>,
    pub config: Option<String>,
    /// Each knob changed from the leg before, in words.
    pub changed: Vec<String>,
    pub resumed_from: Option<String>,
    /// The flags turned so far (this attempt's and the earlier ones'), as
    /// the command names them, with their values: a sweep maps them back to
    /// its parameters.
    pub flags_set: Vec<(String, Scalar)>,
    /// The out-of-memory failures of the attempts before it: the evidence
    /// that halving the batch cannot help (`ladder::halving_cannot_help`).
    pub out_of_memory: Vec<OomSeen>,
}

impl Attempt {
    /// A first attempt: `command` with `config` in `{config}`'s place.
    pub fn new(command: Vec<String>, config: Option<String>) -> Attempt {
        Attempt {
            command,
            config,
            changed: vec![],
            resumed_from: None,
            flags_set: vec![],
            out_of_memory: vec![],
        }
    }
}

/// What the fix reads of a failed attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub class: Class,
    /// An out-of-memory from fragmentation (`Verdict::fragmented`).
    pub fragmented: bool,
    /// Its out-of-memory message's figures.
    pub oom: Option<OomFigures>,
    /// The metric or step lines it printed before it failed.
    pub reports: u64,
}

impl Failure {
    pub fn of(e: &Ended) -> Failure {
        Failure {
            class: e.leg.class.unwrap_or(Class::Other),
            fragmented: e.verdict.fragmented(),
            oom: e.verdict.oom,
            reports: e.leg.reports,
        }
    }
}

/// Where a knob is turned: a flag (and where its value came from), or
/// the config.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Holder {
    Flag(Source),
    Config,
}

/// The knobs of an attempt, each with where it is turned.
struct Knobs {
    found: Vec<(Found, Holder)>,
    notes: Vec<String>,
}

impl Knobs {
    fn holder(&self, knob: Knob) -> Option<Holder> {
        self.found
            .iter()
            .find(|(f, _)| f.knob == knob)
            .map(|(_, h)| *h)
    }
}

/// The settings an attempt ran with (`Fixer::effective`).
#[derive(Debug, Default)]
pub struct Effective {
    /// Each knob by name: `value (where)`.
    pub knobs: BTreeMap<String, String>,
    /// The batch each optimizer step sees, in words (`batch_words`).
    pub batch: Option<String>,
}

/// A knob's whole-number value among `found`, if it has one.
fn int_of(found: &[Found], knob: Knob) -> Option<i64> {
    match found.iter().find(|f| f.knob == knob)?.value {
        Some(Scalar::Int(v)) => Some(v),
        _ => None,
    }
}

/// The batch each optimizer step sees as `argv` runs with the knobs
/// `found`: per-device batch x accumulation, x world size for a launcher's
/// job of ranks, in words; None where the batch or the accumulation is not
/// known.
fn batch_words(found: &[Found], argv: &[String]) -> Option<String> {
    let (batch, accum) = (
        int_of(found, Knob::Batch)?,
        int_of(found, Knob::Accumulation)?,
    );
    Some(match crate::launcher::ranks_of(argv) {
        None => format!("{} (batch {batch} x accumulation {accum})", batch * accum),
        Some(Ok((n, from))) => format!(
            "{} (per-device batch {batch} x accumulation {accum} x world size {n}, {from})",
            batch * accum * i64::from(n)
        ),
        Some(Err(why)) => format!(
            "{} per rank (per-device batch {batch} x accumulation {accum}); the world size is not known: {why}",
            batch * accum
        ),
    })
}

/// `a`'s out-of-memory failures with this one (at the batch `found` says).
fn seen_with(a: &Attempt, failure: &Failure, found: &[Found]) -> Vec<OomSeen> {
    let mut seen = a.out_of_memory.clone();
    if failure.class == Class::OutOfMemory {
        seen.push(OomSeen {
            batch: int_of(found, Knob::Batch),
            tried_mib: failure.oom.and_then(|o| o.tried_mib),
            allocated_mib: failure.oom.and_then(|o| o.allocated_mib),
            reports: failure.reports,
        });
    }
    seen
}

/// A smaller batch's turns in a job of `ranks` ranks: their why says what
/// each optimizer step then sees, the world size counted (every rank reads
/// the same flags, so each is turned on all of them).
fn with_world(turns: &mut [Turn], ranks: u32, from: &str) {
    let int = |knob| {
        turns
            .iter()
            .find(|t| t.knob == knob)
            .and_then(|t| match t.value {
                Scalar::Int(v) => Some(v),
                _ => None,
            })
    };
    let (Some(b), Some(a)) = (int(Knob::Batch), int(Knob::Accumulation)) else {
        return;
    };
    for t in turns
        .iter_mut()
        .filter(|t| matches!(t.knob, Knob::Batch | Knob::Accumulation))
    {
        t.why.push_str(&format!(
            "; on each of the {ranks} ranks ({from}), so batch x accumulation x world size stays {}",
            b * a * i64::from(ranks)
        ));
    }
}

/// The next attempt, or why there is none.
pub enum Next {
    /// The next attempt, and the fixes passed over as not possible (a
    /// knob not found), with why.
    Attempt(Attempt, Vec<String>),
    /// None: why the fixes stop here, and those not possible.
    None {
        stopped: String,
        not_possible: Vec<String>,
    },
}

/// Why a run stops when no rung of the ladder is left.
const NO_FIX_LEFT: &str = "no fix left to try";

impl Next {
    fn none(not_possible: Vec<String>) -> Next {
        Next::None {
            stopped: NO_FIX_LEFT.into(),
            not_possible,
        }
    }
}

/// The word replaced by the attempt's config's path.
pub const CONFIG_WORD: &str = "{config}";
/// The word replaced by a directory kept across attempts (RUN/checkpoints),
/// for a script that saves its checkpoints there and resumes from it.
pub const RESUME_WORD: &str = "{resume}";

/// The command as it runs: `{config}` and `{resume}` replaced.
pub fn expand(command: &[String], config: Option<&str>, dir: &RunDir) -> Vec<String> {
    let resume = resume_dir(dir).display().to_string();
    command
        .iter()
        .map(|w| {
            let w = match config {
                Some(c) => w.replace(CONFIG_WORD, c),
                None => w.clone(),
            };
            w.replace(RESUME_WORD, &resume)
        })
        .collect()
}

/// `{resume}`'s directory.
pub fn resume_dir(dir: &RunDir) -> PathBuf {
    dir.path().join("checkpoints")
}

pub struct Fixer<'a> {
    user: &'a [(Knob, String)],
    dir: &'a RunDir,
    /// Where the command runs (None: here).
    cwd: Option<PathBuf>,
    /// The device's mixed precision (NVML), asked at the first fix: a
    /// trial that ends well never loads NVML for it.
    device: Option<Device>,
    /// The program's flags, from argparse or its `--help` (read at the
    /// first need).
    read: Option<Option<flags::ProgramFlags>>,
    /// Resume from a checkpoint the last attempt left (false: fixes
    /// chosen before a first attempt, which has none to resume).
    resume: bool,
}

impl<'a> Fixer<'a> {
    pub fn new(user: &'a [(Knob, String)], dir: &'a RunDir, cwd: Option<PathBuf>) -> Fixer<'a> {
        Fixer {
            user,
            dir,
            cwd,
            device: None,
            read: None,
            resume: true,
        }
    }

    /// A fixer whose attempts never resume: the fixes are made before a
    /// first attempt (a sweep's point predicted not to fit as sampled).
    pub fn before_start(self) -> Fixer<'a> {
        Fixer {
            resume: false,
            ..self
        }
    }

    fn defined(&mut self, argv: &[String]) -> Option<&Defined> {
        let cwd = self.cwd.as_deref();
        self.read
            .get_or_insert_with(|| flags::read_flags(argv, cwd, flags::HELP_TIMEOUT))
            .as_ref()
            .map(|r| &r.defined)
    }

    /// Where the program's flags were read from, in words; None before
    /// they were needed, or when none were found.
    pub fn flags_from(&self) -> Option<String> {
        Some(self.read.as_ref()?.as_ref()?.from.words())
    }

    /// The knobs of `a` (whose command, expanded, is `argv`): a flag the
    /// command gives wins over the config's key; then a key the config has,
    /// or a known format's key it would add (a script that takes one config
    /// file, as Hugging Face's do, may take no flag beside it); then a flag
    /// the program only defines.
    fn knobs(&mut self, a: &Attempt, argv: &[String]) -> anyhow::Result<Knobs> {
        let user = self.user;
        let by_flag: Vec<FlagKnob> = match self.defined(argv) {
            Some(d) => flags::found(d, argv, user),
            None => vec![],
        };
        let (by_key, notes) = match &a.config {
            Some(path) => {
                let input = common::input::read(&self.at(path))?;
                let k = any_config::knobs(&input, None, user)?;
                (k.knobs, k.notes)
            }
            None => (vec![], vec![]),
        };
        let mut found = Vec::new();
        for knob in Knob::ALL {
            let flag = by_flag.iter().find(|f| f.found.knob == knob);
            let key = by_key.iter().find(|k| k.knob == knob);
            let pick = match (flag, key) {
                (Some(f), _) if f.source == Source::Command => {
                    (f.found.clone(), Holder::Flag(f.source))
                }
                (_, Some(k)) => (k.found(), Holder::Config),
                (Some(f), None) => (f.found.clone(), Holder::Flag(f.source)),
                (None, None) => continue,
            };
            found.push(pick);
        }
        Ok(Knobs { found, notes })
    }

    /// The settings as `a` runs them, from one reading of its knobs.
    pub fn effective(&mut self, a: &Attempt) -> Effective {
        let argv = expand(&a.command, a.config.as_deref(), self.dir);
        let Ok(k) = self.knobs(a, &argv) else {
            return Effective::default();
        };
        let found: Vec<Found> = k.found.into_iter().map(|(f, _)| f).collect();
        Effective {
            batch: batch_words(&found, &argv),
            knobs: found
                .iter()
                .map(|f| {
                    let v = f.value.as_ref().map_or("unknown".into(), shown);
                    (f.knob.as_str().to_string(), format!("{v} ({})", f.place))
                })
                .collect(),
        }
    }

    /// The attempt after `a` (leg `number`) failed as `failure` says.
    pub fn next(&mut self, a: &Attempt, number: u32, failure: &Failure) -> anyhow::Result<Next> {
        let argv = expand(&a.command, a.config.as_deref(), self.dir);
        let knobs = self.knobs(a, &argv)?;
        let found: Vec<Found> = knobs.found.iter().map(|(f, _)| f.clone()).collect();
        let device = *self
            .device
            .get_or_insert_with(crate::device::mixed_precision);
        let seen = seen_with(a, failure, &found);
        let mut plan = ladder::next(failure.class, failure.fragmented, &found, device, &seen);
        if let Some(Ok((ranks, from))) = crate::launcher::ranks_of(&argv) {
            with_world(&mut plan.turns, ranks, &from);
        }
        let mut why_not = knobs.notes.clone();
        why_not.extend(plan.not_possible.iter().cloned());
        if self.defined(&argv).is_none() {
            why_not.push("the program's own flags are not known: it reached no argparse parser, and its --help printed no option flags (argparse's or Hugging Face's)".into());
        }
        if let Some(stopped) = plan.stopped {
            return Ok(Next::None {
                stopped,
                not_possible: why_not,
            });
        }
        if plan.turns.is_empty() {
            return Ok(Next::none(why_not));
        }
        let (on_flags, on_keys): (Vec<Turn>, Vec<Turn>) = plan
            .turns
            .iter()
            .cloned()
            .partition(|t| !matches!(knobs.holder(t.knob), Some(Holder::Config)));
        let mut next = Attempt {
            command: a.command.clone(),
            config: a.config.clone(),
            changed: Vec::new(),
            resumed_from: None,
            flags_set: a.flags_set.clone(),
            out_of_memory: seen,
        };
        if !on_flags.is_empty() {
            if let Err(why) = self.turn_flags(a, &argv, &knobs, &on_flags, &mut next) {
                return Ok(Next::none(why.unwrap_or(why_not)));
            }
        }
        if let (false, Some(path)) = (on_keys.is_empty(), a.config.as_deref()) {
            if let Err(why) = self.turn_config(path, &on_keys, number + 1, &mut next)? {
                return Ok(Next::none(vec![why]));
            }
        }
        if next.changed.is_empty() {
            why_not.push("the fix changed nothing in the command or its config".into());
            return Ok(Next::none(why_not));
        }
        if self.resume {
            next.resumed_from = self.resume(&mut next);
        }
        Ok(Next::Attempt(next, why_not))
    }

    /// `turns` made in `a`'s flags (`argv` expanded), into `next`; Err(why)
    /// when they cannot be (None: the flags are not known).
    fn turn_flags(
        &mut self,
        a: &Attempt,
        argv: &[String],
        knobs: &Knobs,
        turns: &[Turn],
        next: &mut Attempt,
    ) -> Result<(), Option<Vec<String>>> {
        let user = self.user;
        let d = self.defined(argv).ok_or(None)?;
        next.command = flags::turn(&a.command, d, turns, user).map_err(|e| Some(vec![e]))?;
        for t in turns {
            let Some((f, h)) = knobs.found.iter().find(|(f, _)| f.knob == t.knob) else {
                continue;
            };
            next.flags_set.push((f.place.clone(), t.value.clone()));
            next.changed.push(format!(
                "{}: {} -> {} ({})",
                f.place,
                was(f, *h),
                shown_new(&t.value),
                t.why
            ));
        }
        Ok(())
    }

    /// `turns` made in a copy of the config at `path`, leg `number`'s, which
    /// `next` then runs; Err(why) when they cannot be made.
    fn turn_config(
        &self,
        path: &str,
        turns: &[Turn],
        number: u32,
        next: &mut Attempt,
    ) -> anyhow::Result<Result<(), String>> {
        let input = common::input::read(&self.at(path))?;
        let turned = match any_config::turn(&input, None, turns, self.user)? {
            Ok(t) => t,
            Err(e) => return Ok(Err(format!("{path}: {e}"))),
        };
        let copy = self.config_copy(path, number);
        common::files::write_atomic(&copy, turned.text.as_bytes())?;
        next.changed.extend(
            turned
                .changes
                .iter()
                .map(|c| format!("{path}: {}", c.words())),
        );
        next.config = Some(copy.display().to_string());
        Ok(Ok(()))
    }

    /// A path of the command's, from where it runs.
    fn at(&self, path: &str) -> PathBuf {
        match &self.cwd {
            Some(c) => c.join(path),
            None => PathBuf::from(path),
        }
    }

    /// DIR/config-N.EXT: leg N's config.
    fn config_copy(&self, original: &str, number: u32) -> PathBuf {
        let ext = Path::new(original)
            .extension()
            .map_or("yaml".into(), |e| e.to_string_lossy().into_owned());
        self.dir.path().join(format!("config-{number}.{ext}"))
    }

    /// Resumes `next` from the checkpoint the last attempt left: Hugging
    /// Face Trainer's newest `OUTPUT_DIR/checkpoint-N`, through
    /// `--resume_from_checkpoint` where the program defines it; the
    /// `{resume}` directory, for a script that saves there.
    fn resume(&mut self, next: &mut Attempt) -> Option<String> {
        if next.command.iter().any(|w| w.contains(RESUME_WORD)) {
            let dir = resume_dir(self.dir);
            let any = std::fs::read_dir(&dir).ok()?.next().is_some();
            return any.then(|| dir.display().to_string());
        }
        let argv = expand(&next.command, next.config.as_deref(), self.dir);
        let out = flags::value_of(&argv, &["--output_dir", "--output-dir"])?;
        let newest = newest_checkpoint(&self.at(&out))?;
        let d = self.defined(&argv)?;
        let path = newest.display().to_string();
        next.command = flags::with_flag(&next.command, d, "--resume_from_checkpoint", &path)?;
        Some(path)
    }
}

/// Trainer's newest `checkpoint-N` directory in `dir` (largest N).
fn newest_checkpoint(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| {
            let n: u64 = e
                .file_name()
                .to_str()?
                .strip_prefix("checkpoint-")?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, p)| p)
}

/// A flag's value before a fix, in words: as the command gave it, else
/// "not given" (with the default where that is a value).
fn was(f: &Found, h: Holder) -> String {
    let given = matches!(h, Holder::Flag(Source::Command));
    match (&f.value, given) {
        (Some(v), true) => shown_new(v),
        (None | Some(Scalar::Null | Scalar::Bool(false)), false) => "not given".into(),
        (Some(Scalar::Str(s)), false) if s == "no" => "not given".into(),
        (Some(v), false) => format!("not given (default {})", shown_new(v)),
        (None, true) => "unknown".into(),
    }
}

/// A value set by a fix, in words: a switch on or off.
fn shown_new(v: &Scalar) -> String {
    match v {
        Scalar::Bool(true) => "on".into(),
        Scalar::Bool(false) => "off".into(),
        other => shown(other),
    }
}

fn shown(v: &Scalar) -> String {
    match v {
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(n) => n.to_string(),
        Scalar::Str(s) => s.clone(),
        Scalar::Null => "none".into(),
        Scalar::Other => "?".into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_newest_checkpoint_is_the_largest_step() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(super::newest_checkpoint(tmp.path()), None);
        for n in ["checkpoint-8", "checkpoint-16", "checkpoint-x", "runs"] {
            std::fs::create_dir(tmp.path().join(n)).unwrap();
        }
        std::fs::write(tmp.path().join("checkpoint-99"), "a file").unwrap();
        assert_eq!(
            super::newest_checkpoint(tmp.path()),
            Some(tmp.path().join("checkpoint-16"))
        );
    }

    use super::*;

    #[test]
    fn a_flags_value_before_a_fix_in_words() {
        let f = |value| Found {
            knob: Knob::Checkpointing,
            place: "--x".into(),
            value,
        };
        let by = |s| Holder::Flag(s);
        assert_eq!(was(&f(None), by(Source::Unknown)), "not given");
        assert_eq!(
            was(&f(Some(Scalar::Null)), by(Source::Default)),
            "not given"
        );
        assert_eq!(
            was(&f(Some(Scalar::Bool(false))), by(Source::Default)),
            "not given"
        );
        assert_eq!(
            was(&f(Some(Scalar::Int(1))), by(Source::Default)),
            "not given (default 1)"
        );
        assert_eq!(was(&f(Some(Scalar::Int(64))), by(Source::Command)), "64");
        assert_eq!(was(&f(Some(Scalar::Bool(true))), by(Source::Command)), "on");
        assert_eq!(shown_new(&Scalar::Bool(false)), "off");
    }

    #[test]
    fn an_out_of_memory_is_seen_at_the_batch_it_ran() {
        let batch = Found {
            knob: Knob::Batch,
            place: "--bs".into(),
            value: Some(Scalar::Int(32)),
        };
        let mut a = Attempt::new(vec!["python".into()], None);
        a.out_of_memory.push(OomSeen {
            batch: Some(64),
            ..OomSeen::default()
        });
        let oom = Failure {
            class: Class::OutOfMemory,
            fragmented: false,
            oom: Some(OomFigures {
                tried_mib: Some(64.0),
                allocated_mib: Some(900.0),
                ..OomFigures::default()
            }),
            reports: 2,
        };
        let seen = seen_with(&a, &oom, std::slice::from_ref(&batch));
        assert_eq!(
            seen[1],
            OomSeen {
                batch: Some(32),
                tried_mib: Some(64.0),
                allocated_mib: Some(900.0),
                reports: 2
            }
        );
        let other = Failure {
            class: Class::NonFiniteLoss,
            ..oom
        };
        assert_eq!(seen_with(&a, &other, &[batch]).len(), 1);
    }
}
