//! The journal's records: Optuna's op codes, the records we write (field
//! order as Optuna writes them), and the file's lines parsed into records.

use super::codec::replace_nonfinite;
use anyhow::Result;
use common::bad_input;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Optuna's JournalOperation (Optuna 5's, which added DISCARD_TRIALS).
pub(super) const CREATE_STUDY: u8 = 0;
pub(super) const DELETE_STUDY: u8 = 1;
pub(super) const SET_STUDY_USER_ATTR: u8 = 2;
pub(super) const SET_STUDY_SYSTEM_ATTR: u8 = 3;
pub(super) const CREATE_TRIAL: u8 = 4;
pub(super) const SET_TRIAL_PARAM: u8 = 5;
pub(super) const SET_TRIAL_STATE_VALUES: u8 = 6;
pub(super) const SET_TRIAL_INTERMEDIATE_VALUE: u8 = 7;
pub(super) const SET_TRIAL_USER_ATTR: u8 = 8;
pub(super) const SET_TRIAL_SYSTEM_ATTR: u8 = 9;
/// Written by Rustuna only (`discard_trials`): `{"trial_ids": [...]}`.
/// Optuna 5 skips it, and Rustuna too unless asked to apply it.
pub(super) const DISCARD_TRIALS: u8 = 10;

#[derive(Serialize)]
pub(super) struct Record<'a, T> {
    pub(super) op_code: u8,
    pub(super) worker_id: &'a str,
    #[serde(flatten)]
    pub(super) body: T,
}

#[derive(Serialize)]
pub(super) struct CreateStudy<'a> {
    pub(super) study_name: &'a str,
    pub(super) directions: [i64; 1],
}

#[derive(Serialize)]
pub(super) struct StudyAttr<'a> {
    pub(super) study_id: u64,
    pub(super) user_attr: BTreeMap<&'a str, &'a Value>,
}

/// Field order as Optuna's `create_new_trial` with a template trial.
#[derive(Serialize)]
pub(super) struct CreateTrial<'a> {
    pub(super) study_id: u64,
    pub(super) datetime_start: String,
    pub(super) state: u8,
    pub(super) value: Option<f64>,
    /// Always null: single-objective.
    pub(super) values: (),
    /// Absent, not null, while running: Optuna parses it when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) datetime_complete: Option<String>,
    pub(super) distributions: BTreeMap<&'a str, String>,
    pub(super) params: BTreeMap<&'a str, Value>,
    pub(super) user_attrs: &'a BTreeMap<String, Value>,
    pub(super) system_attrs: Map<String, Value>,
    pub(super) intermediate_values: BTreeMap<String, f64>,
}

#[derive(Serialize)]
pub(super) struct StateValues {
    pub(super) trial_id: u64,
    pub(super) state: u8,
    pub(super) values: Option<[f64; 1]>,
    pub(super) datetime_complete: String,
}

#[derive(Serialize)]
pub(super) struct Intermediate {
    pub(super) trial_id: u64,
    pub(super) step: u64,
    pub(super) intermediate_value: f64,
}

#[derive(Serialize)]
pub(super) struct TrialAttr<'a> {
    pub(super) trial_id: u64,
    pub(super) user_attr: BTreeMap<&'a str, &'a Value>,
}

/// The place in `Fields` of each field a record may have (any op code's);
/// None: a field no record has, skipped.
fn slot(key: &str) -> Option<usize> {
    Some(match key {
        "op_code" => 0,
        "study_id" => 1,
        "trial_id" => 2,
        "study_name" => 3,
        "directions" => 4,
        "user_attr" => 5,
        "system_attr" => 6,
        "state" => 7,
        "value" => 8,
        "values" => 9,
        "datetime_start" => 10,
        "datetime_complete" => 11,
        "distributions" => 12,
        "params" => 13,
        "user_attrs" => 14,
        "system_attrs" => 15,
        "intermediate_values" => 16,
        "param_name" => 17,
        "param_value_internal" => 18,
        "distribution" => 19,
        "step" => 20,
        "intermediate_value" => 21,
        "trial_ids" => 22,
        _ => return None,
    })
}
const FIELDS: usize = 23;

/// A record's fields as the line holds them, each parsed only where the
/// replay reads it: nothing of a record is copied but what it keeps (a
/// `Map` of `Value`s allocated every key and value of every line, and
/// was most of the time of reading a large journal). A present `null` is
/// `Some("null")`, told apart from an absent field; a repeated key keeps
/// its last value, as a JSON map does.
pub(super) struct Fields<'a>([Option<&'a RawValue>; FIELDS]);

impl<'a> Fields<'a> {
    pub(super) fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0[slot(key)?]
    }
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FieldsVisitor)
    }
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Fields<'de>, M::Error> {
        let mut fields = Fields([None; FIELDS]);
        while let Some(Slot(slot)) = m.next_key()? {
            match slot {
                Some(i) => fields.0[i] = Some(m.next_value::<&RawValue>()?),
                None => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(fields)
    }
}

/// A key's place in `Fields` (None: a field no op code has).
struct Slot(Option<usize>);

impl<'de> Deserialize<'de> for Slot {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Slot;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, k: &str) -> Result<Slot, E> {
                Ok(Slot(slot(k)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// A line as read: its fields, or why it is none.
// Nearly every line is a record: boxing its fields would allocate each.
#[allow(clippy::large_enum_variant)]
enum Line<'a> {
    Record(Fields<'a>),
    /// Python's bare NaN / Infinity tokens replaced by codec's sentinels:
    /// the fields borrow this text, so they are read where they are used.
    Fixed(Vec<u8>),
    /// JSON, but not an object.
    NotObject,
    NotJson(serde_json::Error),
}

impl<'a> Line<'a> {
    fn read(line: &'a [u8]) -> Line<'a> {
        match serde_json::from_slice::<Fields>(line) {
            Ok(fields) => Line::Record(fields),
            Err(e) if e.is_data() => Line::NotObject,
            Err(e) => match replace_nonfinite(line) {
                Some(fixed) if serde_json::from_slice::<Fields>(&fixed).is_ok() => {
                    Line::Fixed(fixed)
                }
                _ => Line::NotJson(e),
            },
        }
    }
}

/// Where each whole line of `bytes` ends (one past its newline).
fn line_ends(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memchr_iter(b'\n', bytes).map(|nl| nl + 1)
}

/// From this many bytes on, the lines are read on a thread of their own
/// while this one replays them (when there is a second core): reading is
/// half the cost of a large journal's first load. A turn's few new lines
/// are read in place.
const READ_AHEAD_FROM: usize = 256 << 10;
/// Lines handed over at once: few enough to start the replay early, many
/// enough that the hand-over costs nothing beside reading them.
const BATCH: usize = 256;

/// The journal's whole lines, each record handed to `each` as it is read
/// (line number from 1, its fields), so a large journal is never held
/// parsed all at once; returns the bytes up to the end of the last whole
/// line (what follows is torn). A last line with no newline, or a last line
/// that is not JSON, is torn (ignored); any other bad line is an error, as
/// is an error `each` returns (the records before it were handed over).
/// `at_eof`: `bytes` end where the file does; else no line is torn.
/// Python's bare NaN / Infinity tokens are read as codec's sentinels.
pub(super) fn scan(
    bytes: &[u8],
    path: &Path,
    lines_before: usize,
    at_eof: bool,
    each: &mut dyn FnMut(usize, &Fields) -> Result<()>,
) -> Result<usize> {
    let two_cores = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    let ahead = bytes.len() >= READ_AHEAD_FROM && two_cores;
    scan_with(bytes, path, lines_before, at_eof, each, ahead)
}

/// `scan`, the lines read on a thread of their own where `ahead`.
fn scan_with(
    bytes: &[u8],
    path: &Path,
    lines_before: usize,
    at_eof: bool,
    each: &mut dyn FnMut(usize, &Fields) -> Result<()>,
    ahead: bool,
) -> Result<usize> {
    let mut taker = Taker {
        bytes,
        path,
        line_no: lines_before,
        at_eof,
        whole: 0,
        each,
    };
    if !ahead {
        for end in line_ends(bytes) {
            let start = taker.whole;
            if !taker.take(end, &Line::read(&bytes[start..end - 1]))? {
                break;
            }
        }
        return Ok(taker.whole);
    }
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(usize, Line)>>(2);
        s.spawn(move || {
            let (mut start, mut batch) = (0, Vec::with_capacity(BATCH));
            for end in line_ends(bytes) {
                batch.push((end, Line::read(&bytes[start..end - 1])));
                start = end;
                if batch.len() == BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                    if tx.send(full).is_err() {
                        return; // The replay stopped at a bad line.
                    }
                }
            }
            let _ = tx.send(batch);
        });
        // The receiver goes with this closure's return, which ends the reader.
        let rx = rx;
        for batch in rx {
            for (end, line) in &batch {
                if !taker.take(*end, line)? {
                    return Ok(taker.whole);
                }
            }
        }
        Ok(taker.whole)
    })
}

/// What `scan` hands its lines to, in order.
struct Taker<'b, 'e> {
    bytes: &'b [u8],
    path: &'b Path,
    line_no: usize,
    at_eof: bool,
    /// The end of the last whole line taken.
    whole: usize,
    each: &'e mut dyn FnMut(usize, &Fields) -> Result<()>,
}

impl Taker<'_, '_> {
    /// Takes the line ending at `end`; false: it was the torn last line.
    fn take(&mut self, end: usize, line: &Line) -> Result<bool> {
        self.line_no += 1;
        let line_no = self.line_no;
        let text = || short(&String::from_utf8_lossy(&self.bytes[self.whole..end - 1]));
        match line {
            Line::Record(fields) => (self.each)(line_no, fields)?,
            Line::Fixed(fixed) => {
                let fields = serde_json::from_slice::<Fields>(fixed)
                    .expect("Line::read parsed the fixed text");
                (self.each)(line_no, &fields)?
            }
            Line::NotObject => {
                return Err(bad_input!(
                    "{}:{line_no}: a journal record is a JSON object, not {}",
                    self.path.display(),
                    text()
                ))
            }
            Line::NotJson(_) if self.at_eof && end == self.bytes.len() => {
                return Ok(false); // The last line, torn by a killed writer.
            }
            Line::NotJson(e) => {
                return Err(bad_input!(
                    "{}:{line_no}: not a JSON record ({e}): {}",
                    self.path.display(),
                    text()
                ))
            }
        }
        self.whole = end;
        Ok(true)
    }
}

#[cfg(test)]
mod tests;

fn short(s: &str) -> String {
    match s.char_indices().nth(120) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}
