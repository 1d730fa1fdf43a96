//! What a database read knows, kept in the sweep's directory
//! (`DIR/database.checkpoint`) so that the next reader of a large study (a
//! worker joining, `--resume`, `--status DIR`, `--report DIR`) fetches
//! only the rows that can have changed since, as the driver's later reads
//! do, not every trial's.
//!
//! The file is a header line, then the study's trials as the journal's
//! checkpoint writes them (journal/checkpoint.rs: a CREATE_STUDY, one
//! CREATE_TRIAL a trial, in number order). The header names the study (id
//! and name), the trial ids the records stand for (as ranges), and a
//! digest the server computes over the finished ones' id, number, state
//! and completion time (the others, not finished when written, are read
//! again). A
//! finished trial never changes (Optuna refuses updates to one), so a
//! reader uses the records only if the server still computes the same
//! digest for them: a study made again, a trial deleted or rewritten by
//! hand, another database with the same names, and the checkpoint is
//! passed over and every row read, as without one.

use super::read::{Known, ISO};
use crate::journal::checkpoint::{
    header_line, read_study, study_records, trials_writable, write_file,
};
use crate::journal::TrialId;
use crate::trial::Direction;
use anyhow::Result;
use postgres::GenericClient;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

/// The header's `checkpoint`: this layout's version.
const VERSION: u32 = 1;

/// Studies of fewer trials are read whole (their read takes well under a
/// tenth of a second): no file for small sweeps.
pub(super) const FROM_TRIALS: usize = 2000;

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    checkpoint: u32,
    study_id: i32,
    study_name: String,
    /// The trials' ids, ascending, as inclusive ranges.
    ids: Vec<(i32, i32)>,
    /// The server's digest of the finished ones (`digest`; those not
    /// finished are the records' own, read again).
    digest: String,
}

/// The server's digest of the study's finished trials with ids up to
/// `last`, but `open`: their count and the sum of a hash of each one's
/// id, number, state and completion time.
fn digest(c: &mut impl GenericClient, study: i32, last: i32, open: &[i32]) -> Result<String> {
    let row = c.query_one(
        &format!(
            "SELECT count(*)::text || ':' || coalesce(sum(hashtextextended(\
               trial_id::text || ' ' || coalesce(number::text, '') || ' ' || state::text || ' ' \
               || coalesce(to_char(datetime_complete, {ISO}), ''), 0)), 0)::text \
             FROM trials WHERE study_id = $1 AND trial_id <= $2 \
             AND state IN ('COMPLETE', 'PRUNED', 'FAIL') AND NOT (trial_id = ANY($3))"
        ),
        &[&study, &last, &open],
    )?;
    Ok(row.get(0))
}

/// What was read of study `id` named `name`, from the checkpoint at `path`
/// if it is that study's and the server's digest still matches (else
/// None: read every row).
pub(super) fn load(c: &mut impl GenericClient, path: &Path, id: i32, name: &str) -> Option<Known> {
    let (h, body_at): (Header, u64) = header_line(path)?;
    if h.checkpoint != VERSION || h.study_id != id || h.study_name != name {
        return None;
    }
    let ids: Vec<TrialId> = (h.ids.iter())
        .flat_map(|&(lo, hi)| (lo..=hi).map(|t| TrialId(t as u64)))
        .collect();
    let mut file = File::open(path).ok()?;
    file.seek(SeekFrom::Start(body_at)).ok()?;
    let trials = read_study(&mut file)?;
    if trials.len() != ids.len() {
        return None;
    }
    // The trials not finished when it was written are read again.
    let open: HashMap<i32, usize> = (ids.iter().enumerate())
        .filter(|(n, _)| !trials[*n].state.is_finished())
        .map(|(n, t)| (t.0 as i32, n))
        .collect();
    let last = ids.last().map_or(0, |t| t.0 as i32);
    let open_ids: Vec<i32> = open.keys().copied().collect();
    (digest(c, id, last, &open_ids).ok()? == h.digest)
        .then(|| Known::from_parts(trials, Arc::new(ids), open))
}

/// Writes the checkpoint of `known` (study `id` named `name`) to `path`
/// (temp, fsync, rename). Ok(false): a trial would not read back the same.
pub(super) fn write(
    c: &mut impl GenericClient,
    path: &Path,
    (id, name, direction): (i32, &str, Direction),
    known: &Known,
) -> Result<bool> {
    let (trials, ids, open) = known.parts();
    if !trials_writable(trials.iter().map(|t| &**t)) {
        return Ok(false);
    }
    let open: Vec<i32> = open.keys().copied().collect();
    let last = ids.last().map_or(0, |t| t.0 as i32);
    let header = Header {
        checkpoint: VERSION,
        study_id: id,
        study_name: name.to_string(),
        ids: ranges(ids.iter().map(|t| t.0 as i32)),
        digest: digest(c, id, last, &open)?,
    };
    write_file(path, &header, |out| {
        study_records(out, name, direction, trials)
    })?;
    Ok(true)
}

/// Ascending ids as inclusive ranges.
fn ranges(ids: impl Iterator<Item = i32>) -> Vec<(i32, i32)> {
    let mut out: Vec<(i32, i32)> = Vec::new();
    for t in ids {
        match out.last_mut() {
            Some((_, hi)) if *hi + 1 == t => *hi = t,
            _ => out.push((t, t)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_kept_as_ranges() {
        assert_eq!(
            super::ranges([1, 2, 3, 7, 9, 10].into_iter()),
            [(1, 3), (7, 7), (9, 10)]
        );
        assert!(super::ranges(std::iter::empty()).is_empty());
    }
}
