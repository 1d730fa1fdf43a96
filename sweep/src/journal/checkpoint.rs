//! A checkpoint of the replay, kept beside the journal as
//! `<journal>.checkpoint`, so that a worker joining a large sweep (or a
//! `--resume`, `--status`, `--report`) replays one record per trial instead
//! of every line the trials wrote (50,000 trials: 150 MB, 870,000 lines).
//!
//! The file is a header line, then the replay's state written as journal
//! records: a CREATE_STUDY per study and a record per study attribute, one
//! CREATE_TRIAL per trial holding all the trial holds (state, values, params,
//! attributes, intermediate values, times), one DISCARD_TRIALS. The replay
//! reads them as it reads the journal, so the two cannot drift apart. The
//! header names how many bytes (and lines) of the journal the checkpoint
//! stands for and their CRC-32; a reader uses it only if the journal's
//! first bytes still have that CRC (it reads them, and it does not parse
//! them), then replays the journal from there. A checkpoint that does not
//! match or cannot be read is ignored: the journal stays the one truth, and
//! deleting the checkpoint loses nothing.
//!
//! Non-finite values and intermediate values are written as codec's
//! sentinel strings, so the body is our format, not a file for Optuna.

use super::codec::{distribution_to_json, json_to_distribution, to_external, to_internal};
use super::codec::{INF, NAN, NEG_INF};
use super::file::Cache;
use super::records::*;
use super::replay::{read_trial, Dists, NewTrial, Replay};
use super::Journal;
use crate::trial::{Attrs, Direction, Distribution, Trial};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The header's `checkpoint`: this layout's version.
const VERSION: u32 = 1;

/// Journals smaller than this are always replayed whole (about 3,000 of a
/// sweep's trials, replayed in well under 0.1 s): no file for small sweeps.
pub(super) const FROM_BYTES: u64 = if cfg!(test) { 1 << 10 } else { 8 << 20 };

/// The first line: what part of the journal the records stand for.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Header {
    pub(super) checkpoint: u32,
    pub(super) journal_bytes: u64,
    pub(super) journal_lines: usize,
    pub(super) journal_crc32: u32,
}

pub(super) fn path_of(journal: &Path) -> PathBuf {
    let mut p = journal.as_os_str().to_owned();
    p.push(".checkpoint");
    p.into()
}

/// The header of the checkpoint beside `journal` (None: none, or not ours).
pub(super) fn header(journal: &Path) -> Option<(Header, u64)> {
    let (h, at): (Header, u64) = header_line(&path_of(journal))?;
    (h.checkpoint == VERSION).then_some((h, at))
}

/// A checkpoint's first line read as its header, and where its records
/// start (None: no file, or no header of that shape).
pub(crate) fn header_line<H: serde::de::DeserializeOwned>(path: &Path) -> Option<(H, u64)> {
    let mut line = String::new();
    BufReader::new(File::open(path).ok()?.take(64 << 20))
        .read_line(&mut line)
        .ok()?;
    let h = serde_json::from_str(line.strip_suffix('\n')?).ok()?;
    Some((h, line.len() as u64))
}

/// The replay of the journal's first bytes from the checkpoint beside it,
/// if it matches `journal` (open, `len` bytes long); else None.
pub(super) fn load(path: &Path, journal: &File, len: u64) -> Option<Cache> {
    let (h, body_at) = header(path)?;
    if h.journal_bytes > len || crc_of_first(journal, h.journal_bytes)? != h.journal_crc32 {
        return None;
    }
    let mut file = File::open(path_of(path)).ok()?;
    file.seek(SeekFrom::Start(body_at)).ok()?;
    let mut cache = Cache {
        state: replay_records(&mut file)?,
        ..Cache::default()
    };
    cache.offset = h.journal_bytes;
    cache.lines = h.journal_lines;
    cache.crc = crc32fast::Hasher::new_with_initial_len(h.journal_crc32, h.journal_bytes);
    Some(cache)
}

/// The CRC-32 of the first `n` bytes of `file`, read a block at a time.
fn crc_of_first(file: &File, n: u64) -> Option<u32> {
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0; (n.min(8 << 20)) as usize];
    let mut at = 0;
    while at < n {
        let take = (n - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..take], at).ok()?;
        crc.update(&buf[..take]);
        at += take as u64;
    }
    Some(crc.finalize())
}

/// Writes the checkpoint of `cache` beside `journal` (temp, fsync, rename).
/// Ok(false): its state cannot be written as records that replay to the
/// same (a deleted study, a value that does not read back the same); the
/// journal alone is replayed then, as before.
pub(super) fn write(journal: &Path, cache: &Cache) -> Result<bool> {
    let state = &cache.state;
    if !writable(state) {
        return Ok(false);
    }
    let header = Header {
        checkpoint: VERSION,
        journal_bytes: cache.offset,
        journal_lines: cache.lines,
        journal_crc32: cache.crc.clone().finalize(),
    };
    write_file(&path_of(journal), &header, |out| records(state, out))?;
    Ok(true)
}

/// Writes `header`'s line and `body` to `path` atomically, through a temp
/// file of this process's own (workers sharing a folder may write at
/// once); a temp file that a killed writer left, unchanged for an hour, is
/// removed first.
pub(crate) fn write_file(
    path: &Path,
    header: &impl Serialize,
    body: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
) -> Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let dir = common::files::parent_dir(path);
    let (prefix, hour) = (format!(".{name}."), std::time::Duration::from_secs(3600));
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let left = e.file_name().to_string_lossy().starts_with(&prefix)
            && e.file_name().to_string_lossy().ends_with(".tmp");
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok());
        if left && old.is_some_and(|age| age > hour) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let tmp = dir.join(format!("{prefix}{}.tmp", std::process::id()));
    common::files::write_atomic_via(path, &tmp, |tmp| {
        let file = File::create(tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        serde_json::to_writer(&mut out, header)?;
        out.write_all(b"\n")?;
        body(&mut out)?;
        out.flush()
            .with_context(|| format!("writing {}", tmp.display()))
    })
}

/// Whether every study is live (a deleted one's trials would take ids the
/// records could not give back) and every trial reads back the same.
fn writable(state: &Replay) -> bool {
    (0..state.next_study_id).all(|id| state.studies.contains_key(&id))
        && trials_writable(state.trials.iter().map(|e| &*e.trial))
}

/// Whether every distribution and parameter of `trials` reads back from
/// its record as it is.
pub(crate) fn trials_writable<'a>(trials: impl Iterator<Item = &'a Trial>) -> bool {
    let mut seen = HashSet::new();
    trials.into_iter().all(|t| {
        let maps_ok = !seen.insert(Arc::as_ptr(&t.distributions))
            || t.distributions
                .values()
                .all(|d| json_to_distribution(&distribution_to_json(d)).as_ref() == Ok(d));
        maps_ok
            && t.params.iter().all(|(k, v)| {
                t.distributions.get(k).is_some_and(|d| {
                    to_internal(d, v)
                        .ok()
                        .and_then(|i| to_external(d, &i).ok())
                        .as_ref()
                        == Some(v)
                })
            })
    })
}

/// One study's trials as a checkpoint's records, for a storage with a
/// header of its own (rdb/checkpoint.rs): a CREATE_STUDY, then a
/// CREATE_TRIAL a trial in number order (check `trials_writable` first).
pub(crate) fn study_records(
    out: &mut impl Write,
    name: &str,
    direction: Direction,
    trials: &[Arc<Trial>],
) -> Result<()> {
    let directions = [direction as i64];
    line(
        out,
        CREATE_STUDY,
        &Study {
            study_name: name,
            directions: &directions,
        },
    )?;
    for t in trials {
        let values = t.value.map(|v| [v]);
        line(
            out,
            CREATE_TRIAL,
            &Whole::of(0, t, values.as_ref().map(|v| &v[..]))?,
        )?;
    }
    Ok(())
}

/// The trials `study_records` wrote, read from `file`'s position on
/// (None: the records do not read, or hold no study).
pub(crate) fn read_study(file: &mut File) -> Option<Arc<Vec<Arc<Trial>>>> {
    Some(replay_records(file)?.study(super::StudyId(0)).ok()?.trials)
}

/// A checkpoint's records replayed, read from `input` to its end a block
/// at a time, each block's lines read on two threads at once (a
/// checkpoint's CREATE_TRIAL holds all its trial: it needs no record but
/// its study's, which come first) and replayed in order. None: a line
/// that is not a whole record the replay takes.
fn replay_records(input: &mut impl Read) -> Option<Replay> {
    let mut state = Replay::default();
    let mut carry = Vec::new();
    loop {
        let n = input.take(8 << 20).read_to_end(&mut carry).ok()?;
        let whole = memchr::memrchr(b'\n', &carry).map_or(0, |nl| nl + 1);
        if n == 0 && whole < carry.len() {
            return None; // Torn: a writer's temp file is never renamed so.
        }
        replay_block(&mut state, &carry[..whole])?;
        carry.drain(..whole);
        if n == 0 {
            return Some(state);
        }
    }
}

fn replay_block(state: &mut Replay, block: &[u8]) -> Option<()> {
    let half = block.len() / 2;
    let mid = memchr::memchr(b'\n', &block[half..]).map_or(block.len(), |nl| half + nl + 1);
    let (first, second) = block.split_at(mid);
    let (a, b) = std::thread::scope(|s| {
        let later = s.spawn(|| read_lines(second));
        (read_lines(first), later.join().ok().flatten())
    });
    for line in a?.into_iter().chain(b?) {
        match line {
            Line::Trial(t) if state.studies.contains_key(&t.study_id) => state.add_trial(t),
            Line::Trial(_) => return None,
            Line::Other(text) => state.apply(&serde_json::from_slice(text).ok()?).ok()?,
        }
    }
    Some(())
}

enum Line<'a> {
    Trial(NewTrial),
    /// Any other record, replayed as the journal's are.
    Other(&'a [u8]),
}

fn read_lines(bytes: &[u8]) -> Option<Vec<Line<'_>>> {
    let mut dists = Dists::default();
    let mut out = Vec::new();
    for text in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let fields: Fields = serde_json::from_slice(text).ok()?;
        out.push(match fields.get("op_code")?.get() {
            "4" => Line::Trial(read_trial(&fields, &mut dists).ok()?),
            _ => Line::Other(text),
        });
    }
    Some(out)
}

/// Whether `cache`'s state, written as a checkpoint's records and read
/// back, is the same (true where it is not written at all).
pub(super) fn agrees(cache: &Cache, path: &Path) -> Result<bool> {
    if !writable(&cache.state) {
        return Ok(true);
    }
    let mut body = Vec::new();
    records(&cache.state, &mut body)?;
    let back = replay_records(&mut &body[..])
        .with_context(|| format!("{}: its checkpoint's records do not replay", path.display()))?;
    Ok(seen(&back) == seen(&cache.state))
}

/// What a replay knows, as text: equal texts, equal replays (NaN too).
pub(super) fn seen(r: &Replay) -> String {
    let trials: BTreeMap<_, _> = r.study_trials.iter().collect();
    let entries: Vec<_> = (r.trials.iter())
        .map(|e| (e.study_id, &e.trial, &e.values))
        .collect();
    format!(
        "{:?}\n{}\n{trials:?}\n{entries:?}",
        r.studies, r.next_study_id
    )
}

/// The state's records, one per line.
fn records(state: &Replay, out: &mut impl Write) -> Result<()> {
    for (id, s) in &state.studies {
        line(
            out,
            CREATE_STUDY,
            &Study {
                study_name: &s.name,
                directions: &s.directions,
            },
        )?;
        for (user, attrs) in [(true, &s.user_attrs), (false, &s.system_attrs)] {
            for (k, v) in attrs {
                let attr = [(k, v)].into_iter().collect::<BTreeMap<_, _>>();
                let (op, key) = match user {
                    true => (SET_STUDY_USER_ATTR, "user_attr"),
                    false => (SET_STUDY_SYSTEM_ATTR, "system_attr"),
                };
                let mut m = serde_json::Map::new();
                m.insert("study_id".into(), Value::from(*id));
                m.insert(key.into(), serde_json::to_value(attr)?);
                line(out, op, &m)?;
            }
        }
    }
    for e in &state.trials {
        line(
            out,
            CREATE_TRIAL,
            &Whole::of(e.study_id, &e.trial, e.values.as_deref())?,
        )?;
    }
    let discarded: Vec<usize> = (state.trials.iter().enumerate())
        .filter(|(_, e)| e.trial.discarded)
        .map(|(id, _)| id)
        .collect();
    if !discarded.is_empty() {
        line(
            out,
            DISCARD_TRIALS,
            &serde_json::json!({ "trial_ids": discarded }),
        )?;
    }
    Ok(())
}

fn line(out: &mut impl Write, op_code: u8, body: &impl Serialize) -> Result<()> {
    #[derive(Serialize)]
    struct Line<'a, T> {
        op_code: u8,
        #[serde(flatten)]
        body: &'a T,
    }
    serde_json::to_writer(&mut *out, &Line { op_code, body })?;
    out.write_all(b"\n")?;
    Ok(())
}

#[derive(Serialize)]
struct Study<'a> {
    study_name: &'a str,
    directions: &'a [i64],
}

/// A CREATE_TRIAL holding the whole trial.
#[derive(Serialize)]
struct Whole<'a> {
    study_id: u64,
    datetime_start: Option<&'a str>,
    state: u8,
    values: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    datetime_complete: Option<&'a str>,
    distributions: BTreeMap<&'a str, String>,
    params: BTreeMap<&'a str, Value>,
    #[serde(serialize_with = "attrs")]
    user_attrs: &'a Attrs,
    #[serde(serialize_with = "attrs")]
    system_attrs: &'a Attrs,
    intermediate_values: BTreeMap<String, Value>,
}

impl<'a> Whole<'a> {
    fn of(study_id: u64, t: &'a Trial, values: Option<&[f64]>) -> Result<Whole<'a>> {
        let dists: &'a BTreeMap<String, Distribution> = &t.distributions;
        let params = (t.params.iter())
            .map(|(k, v)| Ok((k.as_str(), to_internal(&dists[k], v)?)))
            .collect::<Result<_>>()?;
        Ok(Whole {
            study_id,
            datetime_start: t.datetime_start.as_deref(),
            state: t.state as u8,
            values: values.map(|vs| vs.iter().map(|v| number(*v)).collect()),
            datetime_complete: t.datetime_complete.as_deref(),
            distributions: (dists.iter())
                .map(|(k, d)| (k.as_str(), distribution_to_json(d)))
                .collect(),
            params,
            user_attrs: &t.user_attrs,
            system_attrs: &t.system_attrs,
            intermediate_values: (t.intermediate.iter())
                .map(|(k, v)| (k.to_string(), number(*v)))
                .collect(),
        })
    }
}

/// A float as the replay reads it back (non-finite: codec's sentinels).
fn number(v: f64) -> Value {
    match v {
        v if v.is_nan() => Value::from(NAN),
        f64::INFINITY => Value::from(INF),
        f64::NEG_INFINITY => Value::from(NEG_INF),
        v => Value::from(v),
    }
}

fn attrs<S: Serializer>(a: &&Attrs, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(a.iter())
}

impl Journal {
    /// The replay from the checkpoint beside the journal, if it matches
    /// (`file` open, `len` bytes long).
    pub(super) fn start_from_checkpoint(&self, file: &File, len: u64) -> Option<Cache> {
        let cache = load(&self.path, file, len)?;
        self.checkpointed.fetch_max(cache.offset, Relaxed);
        Some(cache)
    }

    /// Writes a checkpoint of the replay beside the journal when the
    /// journal has grown by a quarter since the newest one (`at_end`: by
    /// anything), from `FROM_BYTES` on; a sweep's driver calls it after
    /// each turn's launches (a turn costs a comparison) and as it ends.
    /// Over a sweep the writes cost about five times the last one. A
    /// failure is said once and the sweep goes on: a checkpoint only saves
    /// a later reader time.
    pub fn keep_checkpoint(&self, at_end: bool) {
        let guard = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let Some(cache) = guard.as_ref() else {
            return;
        };
        let due = |last: u64| {
            cache.offset >= FROM_BYTES
                && cache.offset > last
                && (at_end || cache.offset - last >= last / 4)
        };
        if !due(self.checkpointed.load(Relaxed)) {
            return;
        }
        // Another worker may have written a newer one since.
        if let Some((h, _)) = header(&self.path) {
            self.checkpointed.fetch_max(h.journal_bytes, Relaxed);
            if !due(self.checkpointed.load(Relaxed)) {
                return;
            }
        }
        match write(&self.path, cache) {
            Ok(true) => self.checkpointed.store(cache.offset, Relaxed),
            Ok(false) => self.checkpointed.store(u64::MAX, Relaxed),
            Err(e) => {
                // Tried again once the journal has grown by another quarter.
                self.checkpointed.store(cache.offset, Relaxed);
                if !self.checkpoint_failed.swap(true, Relaxed) {
                    common::say!(
                        "warning: {e:#} (the sweep goes on: the checkpoint only makes a later start faster)"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
