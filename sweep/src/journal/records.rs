//! The journal's records: Optuna's op codes, the records we write (field
//! order as Optuna writes them), and the file's lines parsed into records.

use super::codec::parse_json;
use anyhow::Result;
use common::bad_input;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
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

/// The journal's whole lines, each parsed record handed to `each` as it is
/// read (line number from 1, record), so a large journal is never held
/// parsed all at once; returns the bytes up to the end of the last whole
/// line (what follows is torn). A last line with no newline, or a last line
/// that is not JSON, is torn (ignored); any other bad line is an error, as
/// is an error `each` returns (the records before it were handed over).
pub(super) fn scan(
    bytes: &[u8],
    path: &Path,
    lines_before: usize,
    each: &mut dyn FnMut(usize, Map<String, Value>) -> Result<()>,
) -> Result<usize> {
    let mut whole = 0;
    let mut start = 0;
    let mut line_no = lines_before;
    while let Some(nl) = bytes[start..].iter().position(|&b| b == b'\n') {
        line_no += 1;
        let end = start + nl + 1;
        let line = &bytes[start..end - 1];
        match parse_json(line) {
            Ok(Value::Object(m)) => each(line_no, m)?,
            Ok(other) => {
                return Err(bad_input!(
                    "{}:{line_no}: a journal record is a JSON object, not {}",
                    path.display(),
                    short(&other.to_string())
                ))
            }
            Err(e) if end == bytes.len() => {
                let _ = e; // The last line, torn by a killed writer.
                return Ok(whole);
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
    Ok(whole)
}

fn short(s: &str) -> String {
    match s.char_indices().nth(120) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_owned(),
    }
}
