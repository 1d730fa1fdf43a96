//! Writes to Optuna's tables as `RDBStorage` makes them, each a whole
//! transaction: a trial is created with the study's row locked
//! (`SELECT ... FOR UPDATE`), inserted, and numbered by counting the
//! study's trials with a lower id, as Optuna numbers them, so our workers
//! and Optuna's never share a number. Trial times are naive UTC from the
//! database's clock; heartbeats are `LOCALTIMESTAMP`, as Optuna's
//! `func.now()` lands in its naive column, so both read them alike.

use crate::journal::codec::{compatible, finite, internal_params};
use crate::journal::{pruned_value, Outcome, Study, TrialRecord};
use crate::trial::{Direction, TrialState};
use anyhow::{anyhow, Result};
use postgres::GenericClient;
use serde_json::Value;
use std::time::{Duration, UNIX_EPOCH};

/// The system attribute a claimed trial carries: a token unique to that
/// claim, by which a claim whose commit was cut off is found again.
pub const CLAIM_ATTR: &str = "trainguard:claim";

const UTC_NOW: &str = "(now() AT TIME ZONE 'UTC')";

pub fn create_study(c: &mut impl GenericClient, name: &str, direction: Direction) -> Result<i32> {
    let id: i32 = c
        .query_one(
            "INSERT INTO studies (study_name) VALUES ($1) RETURNING study_id",
            &[&name],
        )?
        .get(0);
    let dir = match direction {
        Direction::Minimize => "MINIMIZE",
        Direction::Maximize => "MAXIMIZE",
    };
    c.execute(
        "INSERT INTO study_directions (direction, study_id, objective) VALUES ($1::text::studydirection, $2, 0)",
        &[&dir, &id],
    )?;
    Ok(id)
}

/// Sets a study's system attribute (Optuna's upsert).
pub fn set_study_system_attr(
    c: &mut impl GenericClient,
    study: i32,
    key: &str,
    value: &Value,
) -> Result<()> {
    c.execute(
        "INSERT INTO study_system_attributes (study_id, key, value_json) VALUES ($1, $2, $3) \
         ON CONFLICT (study_id, key) DO UPDATE SET value_json = EXCLUDED.value_json",
        &[&study, &key, &value.to_string()],
    )?;
    Ok(())
}

/// Locks the study's row until the transaction ends (Optuna's
/// `find_or_raise_by_id(..., for_update=True)`).
pub fn lock_study(c: &mut impl GenericClient, study: i32) -> Result<()> {
    c.query_opt(
        "SELECT study_id FROM studies WHERE study_id = $1 FOR UPDATE",
        &[&study],
    )?
    .ok_or_else(|| anyhow!("study id {study} is gone from the database"))?;
    Ok(())
}

/// Inserts a RUNNING trial with its record, numbered as Optuna numbers
/// trials; the study's row must be locked. Returns (trial id, number).
pub fn insert_trial(
    c: &mut impl GenericClient,
    study: &Study,
    record: &TrialRecord,
    token: &str,
) -> Result<(i32, i64)> {
    let sid = study.id.0 as i32;
    for (name, dist) in &record.distributions {
        if let Some(earlier) = study.trials.iter().find_map(|t| t.distributions.get(name)) {
            compatible(earlier, dist).map_err(|e| {
                anyhow!(
                    "parameter {name:?}: {e} (earlier trials have {earlier:?}, this one {dist:?})"
                )
            })?;
        }
    }
    let (params, dists) = internal_params(record)?;
    let started = record
        .started
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64());
    let tid: i32 = c
        .query_one(
            &format!(
                "INSERT INTO trials (number, study_id, state, datetime_start) \
                 VALUES (NULL, $1, 'RUNNING', COALESCE(to_timestamp($2) AT TIME ZONE 'UTC', {UTC_NOW})) RETURNING trial_id"
            ),
            &[&sid, &started],
        )?
        .get(0);
    for (name, value) in &params {
        let v = value.as_f64().unwrap_or(f64::NAN);
        c.execute(
            "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES ($1, $2, $3, $4)",
            &[&tid, name, &v, &dists[name]],
        )?;
    }
    for (step, v) in &record.intermediate {
        set_intermediate(c, tid, *step, *v)?;
    }
    for (k, v) in &record.user_attrs {
        set_trial_attr(c, "trial_user_attributes", tid, k, v)?;
    }
    set_trial_attr(
        c,
        "trial_system_attributes",
        tid,
        CLAIM_ATTR,
        &Value::from(token),
    )?;
    beat(c, &[tid])?;
    let number: i64 = c
        .query_one(
            "UPDATE trials SET number = (SELECT count(trial_id) FROM trials WHERE study_id = $1 AND trial_id < $2) \
             WHERE trial_id = $2 RETURNING number::bigint",
            &[&sid, &tid],
        )?
        .get(0);
    Ok((tid, number))
}

/// The claim made with `token`, if its commit landed.
pub fn claimed_with(c: &mut impl GenericClient, token: &str) -> Result<Option<(i32, i64)>> {
    Ok(c.query_opt(
        "SELECT t.trial_id, t.number::bigint FROM trials t JOIN trial_system_attributes a ON a.trial_id = t.trial_id \
         WHERE a.key = $1 AND a.value_json = $2",
        &[&CLAIM_ATTR, &Value::from(token).to_string()],
    )?
    .map(|r| (r.get(0), r.get(1))))
}

fn set_trial_attr(
    c: &mut impl GenericClient,
    table: &str,
    tid: i32,
    key: &str,
    value: &Value,
) -> Result<()> {
    c.execute(
        &format!(
            "INSERT INTO {table} (trial_id, key, value_json) VALUES ($1, $2, $3) \
             ON CONFLICT (trial_id, key) DO UPDATE SET value_json = EXCLUDED.value_json"
        ),
        &[&tid, &key, &value.to_string()],
    )?;
    Ok(())
}

fn set_intermediate(c: &mut impl GenericClient, tid: i32, step: u64, v: f64) -> Result<()> {
    finite(v, &format!("the intermediate value at step {step}"))?;
    let step = i32::try_from(step).map_err(|_| anyhow!("step {step} is past Optuna's INTEGER"))?;
    c.execute(
        "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) \
         VALUES ($1, $2, $3, 'FINITE') ON CONFLICT (trial_id, step) DO UPDATE SET \
         intermediate_value = EXCLUDED.intermediate_value, intermediate_value_type = 'FINITE'",
        &[&tid, &step, &v],
    )?;
    Ok(())
}

/// The trial's state with its row locked (None: no such trial).
fn locked_state(c: &mut impl GenericClient, tid: i32) -> Result<Option<String>> {
    Ok(c.query_opt(
        "SELECT state::text FROM trials WHERE trial_id = $1 FOR UPDATE",
        &[&tid],
    )?
    .map(|r| r.get(0)))
}

/// Intermediate values of a running trial. False: the trial is no longer
/// RUNNING (another worker failed it as stale), nothing written.
pub fn report(c: &mut impl GenericClient, tid: i32, values: &[(u64, f64)]) -> Result<bool> {
    if locked_state(c, tid)?.as_deref() != Some("RUNNING") {
        return Ok(false);
    }
    for (step, v) in values {
        set_intermediate(c, tid, *step, *v)?;
    }
    Ok(true)
}

/// Ends a running trial with its last user attributes. Some(state): the
/// trial had already ended so (by another worker, or by this call's
/// earlier try whose commit was cut off), nothing written.
pub fn finish(
    c: &mut impl GenericClient,
    tid: i32,
    attrs: &[(String, Value)],
    outcome: Outcome,
) -> Result<Option<String>> {
    match locked_state(c, tid)? {
        Some(s) if s == "RUNNING" => {}
        Some(s) => return Ok(Some(s)),
        None => return Err(anyhow!("trial id {tid} is gone from the database")),
    }
    for (k, v) in attrs {
        set_trial_attr(c, "trial_user_attributes", tid, k, v)?;
    }
    let value = match outcome {
        Outcome::Complete(v) => Some(v),
        Outcome::Pruned => {
            let rows = c.query(
                "SELECT step, intermediate_value FROM trial_intermediate_values WHERE trial_id = $1 AND intermediate_value_type = 'FINITE'",
                &[&tid],
            )?;
            pruned_value(
                &rows
                    .iter()
                    .map(|r| (r.get::<_, i32>(0) as u64, r.get::<_, f64>(1)))
                    .collect(),
            )
        }
        Outcome::Fail => None,
    };
    if let Some(v) = value {
        c.execute(
            "INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES ($1, 0, $2, 'FINITE') \
             ON CONFLICT (trial_id, objective) DO UPDATE SET value = EXCLUDED.value, value_type = 'FINITE'",
            &[&tid, &v],
        )?;
    }
    set_state(c, tid, outcome.state())?;
    Ok(None)
}

fn set_state(c: &mut impl GenericClient, tid: i32, state: TrialState) -> Result<()> {
    c.execute(
        &format!(
            "UPDATE trials SET state = $2::text::trialstate, datetime_complete = {UTC_NOW} WHERE trial_id = $1"
        ),
        &[&tid, &state.as_str()],
    )?;
    Ok(())
}

/// Stamps the heartbeats of running trials (Optuna's `record_heartbeat`).
pub fn beat(c: &mut impl GenericClient, tids: &[i32]) -> Result<()> {
    for tid in tids {
        c.execute(
            "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES ($1, LOCALTIMESTAMP) \
             ON CONFLICT (trial_id) DO UPDATE SET heartbeat = EXCLUDED.heartbeat",
            &[tid],
        )?;
    }
    Ok(())
}

/// Fails the study's RUNNING trials whose heartbeat is older than `grace`
/// (Optuna's `fail_stale_trials`), under the study's lock so that one
/// worker does it. Ours are marked interrupted, so that they run again;
/// an Optuna client's are only failed, as Optuna fails them. Returns the
/// numbers failed.
pub fn fail_stale(c: &mut impl GenericClient, study: i32, grace: Duration) -> Result<Vec<i64>> {
    let rows = c.query(
        "SELECT t.trial_id, t.number::bigint, EXISTS (SELECT 1 FROM trial_system_attributes a \
         WHERE a.trial_id = t.trial_id AND a.key = $3) FROM trials t JOIN trial_heartbeats h ON h.trial_id = t.trial_id \
         WHERE t.study_id = $1 AND t.state = 'RUNNING' AND LOCALTIMESTAMP - h.heartbeat > make_interval(secs => $2)",
        &[&study, &grace.as_secs_f64(), &CLAIM_ATTR],
    )?;
    let mut failed = Vec::new();
    for r in rows {
        let (tid, number, ours): (i32, i64, bool) = (r.get(0), r.get(1), r.get(2));
        if ours {
            let why = format!(
                "its worker sent no heartbeat for over {}s (killed, or cut off from the database); it runs again as a new trial",
                grace.as_secs()
            );
            for (k, v) in [
                ("error_class", Value::from("interrupted")),
                ("error_message", Value::from(why)),
            ] {
                set_trial_attr(c, "trial_user_attributes", tid, k, &v)?;
            }
        }
        set_state(c, tid, TrialState::Fail)?;
        failed.push(number);
    }
    Ok(failed)
}
