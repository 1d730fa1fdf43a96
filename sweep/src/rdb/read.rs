//! A study as Optuna's tables hold it, read into the journal's `Study`:
//! trials in id order (their numbers must then be 0, 1, 2...), parameters
//! back from Optuna's internal representation, attributes from their JSON
//! (Python's `NaN` too), values and intermediate values from their value
//! types. A finished trial never changes (Optuna refuses updates to one),
//! so each is read once and kept; a read fetches the rows of the trials
//! that are new or were not finished at the last read, so that a claim in a
//! study of thousands of trials does not read them all again.

use crate::journal::codec::{parse_json, readable, to_external, ParsedDistributions};
use crate::journal::{Study, StudyId, TrialId};
use crate::trial::{shrunk, Attrs, Direction, Distribution, Trial, TrialState};
use anyhow::{anyhow, Result};
use common::bad_input;
use postgres::GenericClient;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Trials whose rows are fetched at once (one query a table).
const BATCH: usize = 4096;

/// The UTC timestamps as Optuna's journal writes them (naive, ISO 8601).
pub(super) const ISO: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS.US'"#;

/// What was read of each study (by study id), so that a read fetches only
/// what can have changed.
pub type Cache = HashMap<i32, Known>;

#[derive(Clone, Default)]
pub struct Known {
    /// The study's trials in number order, as last handed out: a read
    /// changes this list in place when no loaded study still holds it (a
    /// finished trial never changes, so most reads change a few entries).
    trials: Arc<Vec<Arc<Trial>>>,
    /// `ids[n]` is the id of `trials[n]`.
    ids: Arc<Vec<TrialId>>,
    /// The trials not finished at the last read, by id: their number.
    open: HashMap<i32, usize>,
    direction: Option<Direction>,
}

impl Known {
    /// What a checkpoint kept (rdb/checkpoint.rs).
    pub(super) fn from_parts(
        trials: Arc<Vec<Arc<Trial>>>,
        ids: Arc<Vec<TrialId>>,
        open: HashMap<i32, usize>,
    ) -> Known {
        Known {
            trials,
            ids,
            open,
            direction: None,
        }
    }

    pub(super) fn parts(&self) -> (&[Arc<Trial>], &[TrialId], &HashMap<i32, usize>) {
        (&self.trials, &self.ids, &self.open)
    }

    pub(super) fn direction(&self) -> Option<Direction> {
        self.direction
    }

    /// How many trials were read.
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }
}

pub fn study_id(c: &mut impl GenericClient, name: &str) -> Result<Option<i32>> {
    Ok(c.query_opt(
        "SELECT study_id FROM studies WHERE study_name = $1",
        &[&name],
    )?
    .map(|r| r.get(0)))
}

/// The study's single direction (bad input for a multi-objective one).
pub fn direction(c: &mut impl GenericClient, id: i32, name: &str) -> Result<Direction> {
    let rows = c.query(
        "SELECT direction::text FROM study_directions WHERE study_id = $1 ORDER BY objective",
        &[&id],
    )?;
    let dirs: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    match dirs
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["MINIMIZE"] => Ok(Direction::Minimize),
        ["MAXIMIZE"] => Ok(Direction::Maximize),
        d => Err(bad_input!(
            "study {name:?} has directions {d:?}: a sweep is single-objective, MINIMIZE or MAXIMIZE"
        )),
    }
}

/// The study named `name` (None: no such study).
pub fn load(c: &mut impl GenericClient, name: &str, cache: &mut Cache) -> Result<Option<Study>> {
    match study_id(c, name)? {
        Some(id) => load_known(c, id, name, cache).map(Some),
        None => Ok(None),
    }
}

/// The study whose id is `id` (a claim knows it; its row is locked).
pub fn load_id(c: &mut impl GenericClient, id: i32, cache: &mut Cache) -> Result<Study> {
    let name: String = c
        .query_opt("SELECT study_name FROM studies WHERE study_id = $1", &[&id])?
        .ok_or_else(|| anyhow!("study id {id} is gone from the database"))?
        .get(0);
    load_known(c, id, &name, cache)
}

fn load_known(c: &mut impl GenericClient, id: i32, name: &str, cache: &mut Cache) -> Result<Study> {
    let known = cache.entry(id).or_default();
    // A study's direction never changes: read once.
    let direction = match known.direction {
        Some(d) => d,
        None => *known.direction.insert(direction(c, id, name)?),
    };
    if let Err(e) = refresh(c, id, name, known) {
        cache.remove(&id); // Half brought up to date: read afresh next time.
        return Err(e);
    }
    Ok(Study {
        id: StudyId(id as u64),
        name: name.to_string(),
        direction,
        trials: Arc::clone(&known.trials),
        trial_ids: Arc::clone(&known.ids),
        user_attrs: attrs(c, "study_user_attributes", "study_id", id)?,
        system_attrs: attrs(c, "study_system_attributes", "study_id", id)?,
        shared: true,
    })
}

/// Brings `known` up to date with only the rows that can have changed:
/// trials new since the last read, and those not finished then.
fn refresh(c: &mut impl GenericClient, id: i32, name: &str, known: &mut Known) -> Result<()> {
    let open: Vec<i32> = known.open.keys().copied().collect();
    let last = known.ids.last().map_or(0, |t| t.0 as i32);
    // Each row as the few fields it has: 50,000 rows as the driver
    // returns them were 15 MB held through the whole read.
    let mut heads: Vec<Head> = c
        .query(
            &format!(
                "SELECT trial_id, number, state::text, to_char(datetime_start, {ISO}), to_char(datetime_complete, {ISO}) \
                 FROM trials WHERE study_id = $1 AND (trial_id > $2 OR trial_id = ANY($3)) ORDER BY trial_id"
            ),
            &[&id, &last, &open],
        )?
        .iter()
        .map(|r| {
            Ok(Head {
                tid: r.get(0),
                number: r.get(1),
                state: state(r.get(2))?,
                start: r.get(3),
                complete: r.get(4),
            })
        })
        .collect::<Result<_>>()?;
    if let Some(gone) = open
        .iter()
        .find(|t| heads.binary_search_by_key(*t, |h| h.tid).is_err())
    {
        return Err(anyhow!(
            "study {name:?}: trial id {gone} is gone from the database"
        ));
    }
    let (trials, ids) = (
        Arc::make_mut(&mut known.trials),
        Arc::make_mut(&mut known.ids),
    );
    // A batch of trials at a time: the rows of all a large study's trials
    // at once (a first read) held 50,000 trials' rows beside the trials.
    for heads in heads.chunks_mut(BATCH) {
        let batch: Vec<i32> = heads.iter().map(|h| h.tid).collect();
        let mut details = Details::fetch(c, &batch)?;
        for h in heads {
            let n = match known.open.get(&h.tid) {
                Some(n) => *n,
                None => {
                    let n = ids.len();
                    if h.number != Some(n as i32) {
                        return Err(anyhow!(
                            "study {name:?}: trial id {} has number {:?} where {n} was expected (numbers count the study's trials with a lower id)",
                            h.tid,
                            h.number
                        ));
                    }
                    ids.push(TrialId(h.tid as u64));
                    trials.push(Arc::default());
                    n
                }
            };
            let (start, complete) = (h.start.take(), h.complete.take());
            let t = details.trial(h.tid, n as u64, h.state, start, complete)?;
            match t.state.is_finished() {
                true => known.open.remove(&h.tid),
                false => known.open.insert(h.tid, n),
            };
            trials[n] = Arc::new(t);
        }
    }
    Ok(())
}

/// A trial's row in `trials`.
struct Head {
    tid: i32,
    number: Option<i32>,
    state: TrialState,
    start: Option<String>,
    complete: Option<String>,
}

fn state(s: &str) -> Result<TrialState> {
    Ok(match s {
        "RUNNING" => TrialState::Running,
        "COMPLETE" => TrialState::Complete,
        "PRUNED" => TrialState::Pruned,
        "FAIL" => TrialState::Fail,
        "WAITING" => TrialState::Waiting,
        other => return Err(anyhow!("unknown trial state {other:?}")),
    })
}

/// An attribute's value as Optuna's `json.loads` reads it.
fn attr_value(json: Option<&str>) -> Value {
    json.and_then(|j| parse_json(j.as_bytes()).ok())
        .map(readable)
        .unwrap_or(Value::Null)
}

fn attrs(
    c: &mut impl GenericClient,
    table: &str,
    column: &str,
    id: i32,
) -> Result<BTreeMap<String, Value>> {
    let rows = c.query(
        &format!("SELECT key, value_json FROM {table} WHERE {column} = $1"),
        &[&id],
    )?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, &str>(0).to_owned(), attr_value(r.get(1))))
        .collect())
}

/// A parameter's name, internal value and distribution (or why its JSON
/// is none).
type Param = (String, f64, Result<Distribution, String>);

/// The rows of several trials, read in one query per table.
#[derive(Default)]
struct Details {
    params: HashMap<i32, Vec<Param>>,
    values: HashMap<i32, Vec<(i32, f64)>>,
    intermediate: HashMap<i32, BTreeMap<u64, f64>>,
    user: HashMap<i32, Attrs>,
    system: HashMap<i32, Attrs>,
    /// The last trial's distributions, handed to the next trial that has
    /// the same (a sweep's trials all do): one map, not one a trial.
    last_distributions: Arc<BTreeMap<String, Distribution>>,
    parsed: ParsedDistributions,
}

impl Details {
    /// The rows of the trials `ids` (ascending, as the trials query
    /// orders them).
    fn fetch(c: &mut impl GenericClient, ids: &[i32]) -> Result<Details> {
        let mut d = Details::default();
        if ids.is_empty() {
            return Ok(d);
        }
        for r in rows_of(
            c,
            "trial_params",
            "param_name, param_value, distribution_json",
            ids,
        )? {
            let dist = d.parsed.get(r.get(3));
            d.params.entry(r.get(0)).or_default().push((
                r.get::<_, &str>(1).to_owned(),
                r.get(2),
                dist,
            ));
        }
        for r in rows_of(c, "trial_values", "objective, value, value_type::text", ids)? {
            d.values
                .entry(r.get(0))
                .or_default()
                .push((r.get(1), typed(r.get(2), r.get(3))));
        }
        let columns = "step, intermediate_value, intermediate_value_type::text";
        for r in rows_of(c, "trial_intermediate_values", columns, ids)? {
            let v = typed(r.get(2), r.get(3));
            let step: i32 = r.get(1);
            d.intermediate
                .entry(r.get(0))
                .or_default()
                .insert(step.max(0) as u64, v);
        }
        for (table, map) in [
            ("trial_user_attributes", &mut d.user),
            ("trial_system_attributes", &mut d.system),
        ] {
            for r in rows_of(c, table, "key, value_json", ids)? {
                map.entry(r.get(0))
                    .or_default()
                    .insert(r.get::<_, &str>(1).into(), attr_value(r.get(2)));
            }
        }
        Ok(d)
    }

    fn trial(
        &mut self,
        tid: i32,
        number: u64,
        state: TrialState,
        start: Option<String>,
        complete: Option<String>,
    ) -> Result<Trial> {
        let (mut params, mut distributions) = (BTreeMap::new(), BTreeMap::new());
        for (name, internal, dist) in self.params.remove(&tid).unwrap_or_default() {
            let bad = |e: String| anyhow!("trial {number}: parameter {name:?}: {e}");
            let dist = dist.map_err(bad)?;
            let value = to_external(&dist, &Value::from(internal)).map_err(bad)?;
            params.insert(name.clone(), value);
            distributions.insert(name, dist);
        }
        let values = self.values.remove(&tid).unwrap_or_default();
        if values.len() > 1 {
            return Err(bad_input!(
                "trial {number} has {} values: a sweep is single-objective",
                values.len()
            ));
        }
        if *self.last_distributions != distributions {
            self.last_distributions = Arc::new(distributions);
        }
        Ok(Trial {
            number,
            state,
            params,
            distributions: Arc::clone(&self.last_distributions),
            value: values.first().map(|(_, v)| *v),
            intermediate: self.intermediate.remove(&tid).unwrap_or_default(),
            user_attrs: shrunk(self.user.remove(&tid).unwrap_or_default()),
            system_attrs: shrunk(self.system.remove(&tid).unwrap_or_default()),
            datetime_start: start,
            datetime_complete: complete,
            discarded: false,
        })
    }
}

/// `table`'s rows of the trials `ids` (ascending): trial_id, then
/// `columns`. Ids that are dense (a first read's batch of a study's
/// trials) are fetched by their range, an index range scan: a list of
/// 4,096 ids looked up one by one took twice as long. The rows of other
/// studies' trials in the range come too, and are never asked for (at
/// most as many as ours). Scattered ids (a later read's new and
/// unfinished trials) are fetched by the list.
fn rows_of(
    c: &mut impl GenericClient,
    table: &str,
    columns: &str,
    ids: &[i32],
) -> Result<Vec<postgres::Row>> {
    let (lo, hi) = (ids[0], ids[ids.len() - 1]);
    let select = format!("SELECT trial_id, {columns} FROM {table} WHERE");
    if (hi - lo) as usize >= 2 * ids.len() {
        return Ok(c.query(&format!("{select} trial_id = ANY($1)"), &[&ids])?);
    }
    Ok(c.query(&format!("{select} trial_id BETWEEN $1 AND $2"), &[&lo, &hi])?)
}

/// A value and its type column (Optuna stores infinities and NaN as NULL
/// with the type saying which).
fn typed(v: Option<f64>, kind: &str) -> f64 {
    match kind {
        "INF_POS" => f64::INFINITY,
        "INF_NEG" => f64::NEG_INFINITY,
        "NAN" => f64::NAN,
        _ => v.unwrap_or(f64::NAN),
    }
}
