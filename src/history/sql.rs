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

/// Rows per INSERT statement at most (raw samples: well under SQLite's
/// 32766 bound parameters).
const ROWS_PER_STATEMENT: usize = 400;

fn sample_columns() -> &'static str {
    static COLUMNS: OnceLock<String> = OnceLock::new();
    COLUMNS.get_or_init(|| {
        let mut columns = vec!["ts", "gpu", "up"];
        columns.extend(FIELDS.iter().map(|f| f.column));
        columns.join(", ")
    })
}

/// `INSERT ... ON CONFLICT DO UPDATE` that merges a rollup row into the one
/// already stored for the same period (a minute continued after a restart):
/// the part before VALUES, the values per row, the part after them.
fn rollup_upsert(table: &str) -> (String, usize, String) {
    let columns: Vec<String> = FIELDS.iter().flat_map(rollup_columns).collect();
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
    (
        format!(
            "INSERT INTO {table} (ts, gpu, n, up_n, {})",
            columns.join(", ")
        ),
        columns.len() + 4,
        format!("ON CONFLICT (ts, gpu) DO UPDATE SET {}", sets.join(", ")),
    )
}

type Upsert = (String, usize, String);

fn upserts() -> &'static (Upsert, Upsert) {
    static SQL: OnceLock<(Upsert, Upsert)> = OnceLock::new();
    SQL.get_or_init(|| (rollup_upsert("rollup_1m"), rollup_upsert("rollup_1h")))
}

/// Bound parameters per statement: under SQLite's limit of 32766.
const MAX_PARAMETERS: usize = 30_000;

/// `head VALUES (?, ...), (?, ...) tail` for `rows` rows of `width` values:
/// one statement, one round trip to the connection's thread, however many
/// rows.
fn multi_row(head: &str, width: usize, rows: usize, tail: &str) -> String {
    let row = format!("({})", vec!["?"; width].join(", "));
    format!(
        "{head} VALUES {} {tail}",
        vec![row.as_str(); rows].join(", ")
    )
}

/// Inserts `rows` with as few statements as the parameter limit allows;
/// `bind` adds one row's `width` values. Rows go in order, so an upsert
/// meeting the same key twice merges as row-by-row statements would.
async fn insert_rows<T>(
    tx: &mut sqlx::SqliteConnection,
    (head, width, tail): (&str, usize, &str),
    rows: &[T],
    bind: impl Fn(&mut SqliteArguments, &T) -> Result<(), sqlx::error::BoxDynError>,
) -> Result<(), sqlx::Error> {
    let per_statement = (MAX_PARAMETERS / width).clamp(1, ROWS_PER_STATEMENT);
    for chunk in rows.chunks(per_statement) {
        let mut args = SqliteArguments::default();
        for row in chunk {
            bind(&mut args, row).map_err(sqlx::Error::Encode)?;
        }
        sqlx::query_with(
            AssertSqlSafe(multi_row(head, width, chunk.len(), tail)),
            args,
        )
        // Not kept prepared: the text differs with every row count, and
        // sqlx keeps up to 100 prepared statements per connection, each
        // multi-row INSERT's program tens to hundreds of KiB — the agent's
        // heap grew by ~5 MiB over its first half hour filling that cache
        // with statements it would never run again.
        .persistent(false)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

const GPU_INSERT: (&str, usize, &str) = (
    "INSERT INTO gpu (id, uuid, last_index, name, first_seen_ms, last_seen_ms)",
    6,
    "ON CONFLICT (id) DO UPDATE SET last_index = excluded.last_index, \
     name = coalesce(excluded.name, name), last_seen_ms = excluded.last_seen_ms",
);

const EVENT_INSERT: (&str, usize, &str) = (
    "INSERT INTO event (ts, gpu, kind, code, value, detail)",
    6,
    "",
);

const WORKLOAD_UPSERT: (&str, usize, &str) = (
    "INSERT INTO workload (kind, id, started, ended, last_seen, user, account, partition, \
     namespace, pod, command, gpus, gpu_seconds, sm_active_seconds, energy_joules, \
     peak_memory_bytes, xid_errors, throttle_seconds, dra_claims)",
    19,
    "ON CONFLICT (kind, id, started) DO UPDATE SET ended = excluded.ended, \
     last_seen = excluded.last_seen, user = excluded.user, account = excluded.account, \
     partition = excluded.partition, namespace = excluded.namespace, pod = excluded.pod, \
     command = excluded.command, gpus = excluded.gpus, gpu_seconds = excluded.gpu_seconds, \
     sm_active_seconds = excluded.sm_active_seconds, energy_joules = excluded.energy_joules, \
     peak_memory_bytes = excluded.peak_memory_bytes, xid_errors = excluded.xid_errors, \
     throttle_seconds = excluded.throttle_seconds, dra_claims = excluded.dra_claims",
);

const COUNTER_INSERT: (&str, usize, &str) = (
    "INSERT INTO counter_state (gpu, counter, last_raw, offset)",
    4,
    "ON CONFLICT (gpu, counter) DO UPDATE SET last_raw = excluded.last_raw, offset = excluded.offset",
);

/// Commits `batch`; returns the rows written. Each kind of row goes in
/// multi-row statements: every statement is a round trip to SQLite's
/// connection thread (two thread wake-ups or more), and the minute's commit
/// carries a row per GPU for the GPU table, the minute rollups and each
/// counter.
pub async fn commit(pool: &SqlitePool, batch: &Batch) -> Result<usize, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let gpus: Vec<_> = batch.gpus.values().collect();
    insert_rows(&mut tx, GPU_INSERT, &gpus, |args, g| {
        args.add(g.id)?;
        args.add(g.uuid.as_str())?;
        args.add(g.index)?;
        args.add(g.name.as_deref())?;
        args.add(g.seen_ms)?;
        args.add(g.seen_ms)
    })
    .await?;
    let width = FIELDS.len() + 3;
    let samples = (
        &*format!("INSERT OR REPLACE INTO sample ({})", sample_columns()),
        width,
        "",
    );
    insert_rows(&mut tx, samples, &batch.samples, |args, s| {
        args.add(s.ts)?;
        args.add(s.gpu)?;
        args.add(i64::from(s.up))?;
        for v in &s.values {
            args.add(*v)?;
        }
        Ok(())
    })
    .await?;
    let (minute_sql, hour_sql) = upserts();
    for (sql, rows) in [(minute_sql, &batch.minutes), (hour_sql, &batch.hours)] {
        insert_rows(&mut tx, (&sql.0, sql.1, &sql.2), rows, add_rollup).await?;
    }
    insert_rows(&mut tx, EVENT_INSERT, &batch.events, |args, e| {
        args.add(e.ts)?;
        args.add(e.gpu)?;
        args.add(e.kind)?;
        args.add(e.code)?;
        args.add(e.value)?;
        args.add(e.detail.as_deref())
    })
    .await?;
    insert_rows(&mut tx, WORKLOAD_UPSERT, &batch.workloads, |args, w| {
        args.add(w.kind)?;
        args.add(w.id.as_str())?;
        args.add(w.started_ms)?;
        args.add(w.ended_ms)?;
        args.add(w.last_seen_ms)?;
        for attribute in &w.attributes {
            args.add(attribute.as_deref())?;
        }
        args.add(w.gpus.as_str())?;
        args.add(w.gpu_seconds)?;
        args.add(w.sm_active_seconds)?;
        args.add(w.energy_joules)?;
        args.add(w.peak_memory_bytes)?;
        args.add(w.xid_errors)?;
        args.add(w.throttle_seconds)?;
        args.add(w.dra_claims.as_deref())
    })
    .await?;
    let counters: Vec<_> = batch.counters.iter().collect();
    insert_rows(
        &mut tx,
        COUNTER_INSERT,
        &counters,
        |args, ((gpu, counter), state)| {
            args.add(*gpu)?;
            args.add(*counter)?;
            args.add(state.last_raw)?;
            args.add(state.offset)
        },
    )
    .await?;
    tx.commit().await?;
    Ok(batch.rows())
}

fn add_rollup(args: &mut SqliteArguments, r: &RollupRow) -> Result<(), sqlx::error::BoxDynError> {
    args.add(r.ts)?;
    args.add(r.gpu)?;
    args.add(r.n as i64)?;
    args.add(r.up_n as i64)?;
    for v in &r.values {
        match *v {
            Value::Int(i) => args.add(i),
            Value::Real(f) => args.add(f),
            Value::Null => args.add(Option::<i64>::None),
        }?;
    }
    Ok(())
}

/// Marks the workloads still running in the database (the agent stopped
/// while they ran) as ended when last seen.
pub async fn close_running_workloads(pool: &SqlitePool) -> Result<u64, sqlx::Error> {
    Ok(
        sqlx::query("UPDATE workload SET ended = last_seen WHERE ended IS NULL")
            .execute(pool)
            .await?
            .rows_affected(),
    )
}

/// The Xid events stored since `since_ms` (GPU id, code, ms): what the
/// kernel log's backlog may repeat.
pub async fn load_known_xid(
    pool: &SqlitePool,
    since_ms: i64,
) -> Result<Vec<(i64, u64, i64)>, sqlx::Error> {
    sqlx::query(
        "SELECT gpu, code, ts FROM event WHERE kind = 'xid' AND gpu IS NOT NULL AND code IS NOT NULL AND ts >= ?",
    )
    .bind(since_ms)
    .fetch_all(pool)
    .await?
    .iter()
    .map(|r| {
        let code: i64 = r.try_get("code")?;
        Ok((r.try_get("gpu")?, code.max(0) as u64, r.try_get("ts")?))
    })
    .collect()
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

#[cfg(test)]
mod tests {
    use sqlx::{Connection, Executor};

    use super::*;

    #[tokio::test]
    async fn multi_row_inserts_leave_no_prepared_statement_behind() {
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .expect("an in-memory database");
        conn.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
            .await
            .expect("a table");
        let mut tx = conn.begin().await.expect("a transaction");
        let before = tx.cached_statements_size();
        for rows in 1..=20_i64 {
            let values: Vec<i64> = (0..rows).collect();
            insert_rows(
                &mut tx,
                ("INSERT INTO t (a, b)", 2, ""),
                &values,
                |args, v| {
                    args.add(*v)?;
                    args.add(v * 2)
                },
            )
            .await
            .expect("the rows go in");
        }
        // Twenty row counts, twenty statement texts: none kept prepared.
        assert_eq!(tx.cached_statements_size(), before);
        tx.commit().await.expect("commit");
        let (count,): (i64,) = sqlx::query_as("SELECT count(*) FROM t")
            .fetch_one(&mut conn)
            .await
            .expect("a count");
        assert_eq!(count, (1..=20).sum::<i64>());
    }
}
