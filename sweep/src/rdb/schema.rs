//! Optuna 5's tables, as `optuna.storages.RDBStorage` creates them on an
//! empty PostgreSQL database (`schema.sql`: schema 12, alembic head
//! `v3.2.0.a`), made here when the database has none, and checked when it
//! has them: a database Optuna made is joined as it is; any other version
//! is refused by name, before anything is written.

use anyhow::{Context, Result};
use common::bad_input;
use postgres::Client;

/// `optuna.storages._rdb.models.SCHEMA_VERSION`.
pub const SCHEMA_VERSION: i32 = 12;
/// Alembic's head revision for that schema.
pub const ALEMBIC_HEAD: &str = "v3.2.0.a";
/// `version_info.library_version`: the Optuna release whose schema this is
/// (Optuna writes its own version there; it only shows in its messages).
pub const LIBRARY_VERSION: &str = "5.0.0";
const DDL: &str = include_str!("schema.sql");

/// Makes the schema if the database has no Optuna tables, else checks
/// their version. `shown` names the database in messages. One transaction
/// under an advisory lock, so two workers starting on an empty database
/// make it once.
pub fn ensure(client: &mut Client, shown: &str) -> Result<()> {
    let mut tx = client.transaction().context("starting a transaction")?;
    // Any constant: the key only needs to be the same for our workers.
    tx.execute("SELECT pg_advisory_xact_lock(7135201)", &[])?;
    let has = |tx: &mut postgres::Transaction, table: &str| -> Result<bool> {
        let row = tx.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])?;
        Ok(row.get(0))
    };
    let (info, studies) = (has(&mut tx, "version_info")?, has(&mut tx, "studies")?);
    if !info && !studies {
        tx.batch_execute(DDL)
            .with_context(|| format!("{shown}: creating Optuna's tables"))?;
        tx.execute(
            "INSERT INTO version_info (version_info_id, schema_version, library_version) VALUES (1, $1, $2)",
            &[&SCHEMA_VERSION, &LIBRARY_VERSION],
        )?;
        tx.execute(
            "INSERT INTO alembic_version (version_num) VALUES ($1)",
            &[&ALEMBIC_HEAD],
        )?;
        tx.commit()?;
        common::say!("train sweep: made Optuna's tables (schema {SCHEMA_VERSION}) in {shown}");
        return Ok(());
    }
    if !info {
        return Err(bad_input!(
            "{shown}: has a `studies` table but no `version_info`: not a database Optuna made (train sweep reads and writes Optuna's schema {SCHEMA_VERSION})"
        ));
    }
    let version: Option<i32> = tx
        .query_opt("SELECT schema_version FROM version_info", &[])?
        .and_then(|r| r.get(0));
    let alembic: Option<String> = match has(&mut tx, "alembic_version")? {
        true => tx
            .query_opt("SELECT version_num FROM alembic_version", &[])?
            .map(|r| r.get(0)),
        false => None,
    };
    tx.commit()?;
    check_version(version, alembic.as_deref(), shown)
}

/// Schema 12 at alembic head; anything else is refused, naming it.
fn check_version(version: Option<i32>, alembic: Option<&str>, shown: &str) -> Result<()> {
    if version == Some(SCHEMA_VERSION) && alembic.is_none_or(|a| a == ALEMBIC_HEAD) {
        return Ok(());
    }
    let found = format!(
        "schema {} (alembic {})",
        version.map_or("none".into(), |v| v.to_string()),
        alembic.unwrap_or("none")
    );
    let what = match version {
        Some(v) if v < SCHEMA_VERSION => format!(
            "an older Optuna's: upgrade it first with `optuna storage upgrade --storage {shown}` (Optuna 5)"
        ),
        Some(v) if v > SCHEMA_VERSION => {
            "a newer Optuna's, which this train does not know".to_string()
        }
        _ => "not one Optuna wrote".to_string(),
    };
    Err(bad_input!(
        "{shown}: Optuna's tables are {found}, {what}; train sweep reads and writes schema {SCHEMA_VERSION} (alembic {ALEMBIC_HEAD}, Optuna 5)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_optuna_5s_schema_is_joined() {
        assert!(check_version(Some(12), Some("v3.2.0.a"), "db").is_ok());
        for (v, a, says) in [
            (Some(11), Some("v3.0.0.d"), "schema 11 (alembic v3.0.0.d), an older Optuna's: upgrade it first with `optuna storage upgrade --storage db`"),
            (Some(13), Some("v5.1.0.a"), "schema 13 (alembic v5.1.0.a), a newer Optuna's"),
            (None, None, "schema none (alembic none), not one Optuna wrote"),
        ] {
            let e = check_version(v, a, "db").unwrap_err();
            assert_eq!(common::exit::code_of(&e), 2);
            assert!(format!("{e:#}").contains(says), "{e:#}");
        }
    }
}
