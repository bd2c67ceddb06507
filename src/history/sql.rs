//! Writing a [`Batch`] in one transaction, and loading what the recorder
//! needs at start-up. Every value is bound, never spliced into SQL.

use std::sync::OnceLock;

use sqlx::sqlite::SqliteArguments;
// Dynamic SQL here is built from the catalogue's column names only; every
// value is bound.
use sqlx::{Arguments, AssertSqlSafe, Row, SqlitePool};

use super::catalog::{rollup_columns, FIELDS};
use super::recorder::{Batch, CounterState, RollupRow};
use super::rollup::Value;

/// Samples per INSERT statement: well under SQLite's 32766 bound parameters.
const SAMPLES_PER_STATEMENT: usize = 400;

fn sample_columns() -> &'static str {
    static COLUMNS: OnceLock<String> = OnceLock::new();
    COLUMNS.get_or_init(|| {
        let mut columns = vec!["ts", "gpu", "up"];
        columns.extend(FIELDS.iter().map(|f| f.column));
        columns.join(", ")
    })
}

/// `INSERT ... ON CONFLICT DO UPDATE` that merges a rollup row into the one
/// already stored for the same period (a minute continued after a restart).
fn rollup_upsert(table: &str) -> String {
    let columns: Vec<String> = FIELDS.iter().flat_map(rollup_columns).collect();
    let placeholders = vec!["?"; columns.len() + 4].join(", ");
    let mut sets = vec![
        "n = n + excluded.n".to_string(),
        "up_n = up_n + excluded.up_n".to_string(),
    ];
    for c in &columns {
        let set = if c.ends_with("_min") {
            format!("{c} = min(coalesce({c}, excluded.{c}), coalesce(excluded.{c}, {c}))")
        } else if c.ends_with("_max") {
            format!("{c} = max(coalesce({c}, excluded.{c}), coalesce(excluded.{c}, {c}))")
        } else if c.ends_with("_avg") {
            format!(
                "{c} = CASE WHEN {c} IS NULL THEN excluded.{c} WHEN excluded.{c} IS NULL THEN {c} \
                 ELSE ({c} * n + excluded.{c} * excluded.n) / (n + excluded.n) END"
            )
        } else if c.ends_with("_any") {
            format!("{c} = CASE WHEN {c} IS NULL AND excluded.{c} IS NULL THEN NULL ELSE coalesce({c}, 0) | coalesce(excluded.{c}, 0) END")
        } else {
            format!("{c} = coalesce(excluded.{c}, {c})")
        };
        sets.push(set);
    }
    format!(
        "INSERT INTO {table} (ts, gpu, n, up_n, {}) VALUES ({placeholders}) ON CONFLICT (ts, gpu) DO UPDATE SET {}",
        columns.join(", "),
        sets.join(", ")
    )
}

fn upserts() -> &'static (String, String) {
    static SQL: OnceLock<(String, String)> = OnceLock::new();
    SQL.get_or_init(|| (rollup_upsert("rollup_1m"), rollup_upsert("rollup_1h")))
}

/// Commits `batch`; returns the rows written.
pub async fn commit(pool: &SqlitePool, batch: &Batch) -> Result<usize, sqlx::Error> {
    let mut tx = pool.begin().await?;
    for g in batch.gpus.values() {
        sqlx::query(
            "INSERT INTO gpu (id, uuid, last_index, name, first_seen_ms, last_seen_ms) VALUES (?, ?, ?, ?, ?, ?) \
             ON CONFLICT (id) DO UPDATE SET last_index = excluded.last_index, \
             name = coalesce(excluded.name, name), last_seen_ms = excluded.last_seen_ms",
        )
        .bind(g.id)
        .bind(&g.uuid)
        .bind(g.index)
        .bind(&g.name)
        .bind(g.seen_ms)
        .bind(g.seen_ms)
        .execute(&mut *tx)
        .await?;
    }
    for chunk in batch.samples.chunks(SAMPLES_PER_STATEMENT) {
        let row = format!("({})", vec!["?"; FIELDS.len() + 3].join(", "));
        let sql = format!(
            "INSERT OR REPLACE INTO sample ({}) VALUES {}",
            sample_columns(),
            vec![row.as_str(); chunk.len()].join(", ")
        );
        let mut args = SqliteArguments::default();
        for s in chunk {
            args.add(s.ts).map_err(sqlx::Error::Encode)?;
            args.add(s.gpu).map_err(sqlx::Error::Encode)?;
            args.add(i64::from(s.up)).map_err(sqlx::Error::Encode)?;
            for v in &s.values {
                args.add(*v).map_err(sqlx::Error::Encode)?;
            }
        }
        sqlx::query_with(AssertSqlSafe(sql), args)
            .execute(&mut *tx)
            .await?;
    }
    let (minute_sql, hour_sql) = upserts();
    for (sql, rows) in [(minute_sql, &batch.minutes), (hour_sql, &batch.hours)] {
        for r in rows {
            sqlx::query_with(AssertSqlSafe(sql.as_str()), rollup_args(r)?)
                .execute(&mut *tx)
                .await?;
        }
    }
    for e in &batch.events {
        sqlx::query(
            "INSERT INTO event (ts, gpu, kind, code, value, detail) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(e.ts)
        .bind(e.gpu)
        .bind(e.kind)
        .bind(e.code)
        .bind(e.value)
        .bind(&e.detail)
        .execute(&mut *tx)
        .await?;
    }
    for ((gpu, counter), state) in &batch.counters {
        sqlx::query(
            "INSERT INTO counter_state (gpu, counter, last_raw, offset) VALUES (?, ?, ?, ?) \
             ON CONFLICT (gpu, counter) DO UPDATE SET last_raw = excluded.last_raw, offset = excluded.offset",
        )
        .bind(gpu)
        .bind(*counter)
        .bind(state.last_raw)
        .bind(state.offset)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(batch.rows())
}

fn rollup_args(r: &RollupRow) -> Result<SqliteArguments, sqlx::Error> {
    let mut args = SqliteArguments::default();
    args.add(r.ts).map_err(sqlx::Error::Encode)?;
    args.add(r.gpu).map_err(sqlx::Error::Encode)?;
    args.add(r.n as i64).map_err(sqlx::Error::Encode)?;
    args.add(r.up_n as i64).map_err(sqlx::Error::Encode)?;
    for v in &r.values {
        match *v {
            Value::Int(i) => args.add(i),
            Value::Real(f) => args.add(f),
            Value::Null => args.add(Option::<i64>::None),
        }
        .map_err(sqlx::Error::Encode)?;
    }
    Ok(args)
}

/// The GPUs (id, uuid) and counter states already stored.
pub async fn load_state(
    pool: &SqlitePool,
) -> Result<(Vec<(i64, String)>, Vec<((i64, String), CounterState)>), sqlx::Error> {
    let gpus = sqlx::query("SELECT id, uuid FROM gpu")
        .fetch_all(pool)
        .await?
        .iter()
        .map(|r| Ok((r.try_get("id")?, r.try_get("uuid")?)))
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let counters = sqlx::query("SELECT gpu, counter, last_raw, offset FROM counter_state")
        .fetch_all(pool)
        .await?
        .iter()
        .map(|r| {
            Ok((
                (r.try_get("gpu")?, r.try_get("counter")?),
                CounterState {
                    last_raw: r.try_get("last_raw")?,
                    offset: r.try_get("offset")?,
                },
            ))
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    Ok((gpus, counters))
}
