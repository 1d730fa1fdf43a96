//! `train run --auto-fix` and a sweep's `auto_fix: true`: after a failed
//! attempt, the next one with the fix ladder's turns made
//! (`diagnose::ladder`), in the command's own flags (those its `--help`
//! shows it defines, read once; `knobs`) or in a copy of its config written
//! into the run directory (the user's file is never changed), and resumed
//! from the script's last checkpoint where it can. An attempt's command
//! keeps the words `{config}` and `{resume}`, replaced as it runs
//! (`expand`).

use crate::knobs::{self as flags, Defined, FlagKnob, Source};
use common::wire::failure::Class;
use common::wire::run_dir::RunDir;
use diagnose::any_config;
use diagnose::keys::Scalar;
use diagnose::knobs::{Found, Knob, Turn};
use diagnose::ladder::{self, Device};
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
}

/// Where a knob is turned.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Holder {
    Flag,
    Config,
}

/// The knobs of an attempt, each with where it is turned.
struct Knobs {
    found: Vec<(Found, Holder)>,
    notes: Vec<String>,
}

/// The next attempt, or why there is none.
pub enum Next {
    /// The next attempt, and the fixes passed over as not possible (a
    /// knob not found), with why.
    Attempt(Attempt, Vec<String>),
    None(Vec<String>),
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
    /// The program's flags, from its `--help` (read at the first need).
    defined: Option<Option<Defined>>,
}

impl<'a> Fixer<'a> {
    pub fn new(user: &'a [(Knob, String)], dir: &'a RunDir, cwd: Option<PathBuf>) -> Fixer<'a> {
        Fixer {
            user,
            dir,
            cwd,
            device: None,
            defined: None,
        }
    }

    fn defined(&mut self, argv: &[String]) -> Option<&Defined> {
        let cwd = self.cwd.as_deref();
        self.defined
            .get_or_insert_with(|| {
                flags::read_help(argv, cwd, flags::HELP_TIMEOUT).map(|h| Defined::parse(&h))
            })
            .as_ref()
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
                (Some(f), _) if f.source == Source::Command => (f.found.clone(), Holder::Flag),
                (_, Some(k)) => (k.found(), Holder::Config),
                (Some(f), None) => (f.found.clone(), Holder::Flag),
                (None, None) => continue,
            };
            found.push(pick);
        }
        Ok(Knobs { found, notes })
    }

    /// The knobs as `a` runs them, by name: `value (where)`.
    pub fn effective(&mut self, a: &Attempt) -> BTreeMap<String, String> {
        let argv = expand(&a.command, a.config.as_deref(), self.dir);
        let Ok(k) = self.knobs(a, &argv) else {
            return BTreeMap::new();
        };
        k.found
            .into_iter()
            .map(|(f, _)| {
                let v = f.value.as_ref().map_or("unknown".into(), shown);
                (f.knob.as_str().to_string(), format!("{v} ({})", f.place))
            })
            .collect()
    }

    /// The attempt after `a` (leg `number`) failed with `class`.
    pub fn next(
        &mut self,
        a: &Attempt,
        number: u32,
        class: Class,
        fragmented: bool,
    ) -> anyhow::Result<Next> {
        let argv = expand(&a.command, a.config.as_deref(), self.dir);
        let knobs = self.knobs(a, &argv)?;
        let found: Vec<Found> = knobs.found.iter().map(|(f, _)| f.clone()).collect();
        let device = *self
            .device
            .get_or_insert_with(crate::device::mixed_precision);
        let plan = ladder::next(class, fragmented, &found, device);
        let mut why_not = knobs.notes;
        why_not.extend(plan.not_possible.iter().cloned());
        if self.defined(&argv).is_none() {
            why_not.push("the program's own flags are not known: its --help printed no option flags (argparse's or Hugging Face's)".into());
        }
        if plan.turns.is_empty() {
            return Ok(Next::None(why_not));
        }
        let holder = |t: &Turn| {
            knobs
                .found
                .iter()
                .find(|(f, _)| f.knob == t.knob)
                .map_or(Holder::Flag, |(_, h)| *h)
        };
        let (on_flags, on_keys): (Vec<Turn>, Vec<Turn>) = plan
            .turns
            .iter()
            .cloned()
            .partition(|t| holder(t) == Holder::Flag);
        let mut next = Attempt {
            command: a.command.clone(),
            config: a.config.clone(),
            changed: Vec::new(),
            resumed_from: None,
            flags_set: a.flags_set.clone(),
        };
        if !on_flags.is_empty() {
            let user = self.user;
            let Some(d) = self.defined(&argv) else {
                return Ok(Next::None(why_not));
            };
            next.command = match flags::turn(&a.command, d, &on_flags, user) {
                Ok(c) => c,
                Err(e) => return Ok(Next::None(vec![e])),
            };
            for t in &on_flags {
                let Some((f, _)) = knobs.found.iter().find(|(f, _)| f.knob == t.knob) else {
                    continue;
                };
                next.flags_set.push((f.place.clone(), t.value.clone()));
                next.changed.push(format!(
                    "{}: {} -> {} ({})",
                    f.place,
                    f.value.as_ref().map_or("unknown".into(), shown),
                    shown(&t.value),
                    t.why
                ));
            }
        }
        if let (false, Some(path)) = (on_keys.is_empty(), a.config.as_deref()) {
            if let Err(why) = self.turn_config(path, &on_keys, number + 1, &mut next)? {
                return Ok(Next::None(vec![why]));
            }
        }
        if next.changed.is_empty() {
            why_not.push("the fix changed nothing in the command or its config".into());
            return Ok(Next::None(why_not));
        }
        next.resumed_from = self.resume(&mut next);
        Ok(Next::Attempt(next, why_not))
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
}
