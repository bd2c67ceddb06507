//! Multi-row statements: one commit writes many rows of each kind, and
//! minute rollups met twice merge as row-by-row statements did.

use super::store::Store;
use super::tests::count;
use super::{catalog, Durability};

/// A minute rollup of one GPU from the temperatures given (stored units).
fn minute_row(gpu: i64, ts: i64, temperatures: &[i64]) -> super::recorder::RollupRow {
    let column = catalog::FIELDS
        .iter()
        .position(|f| f.name == "temperature")
        .expect("temperature field");
    let mut acc = super::rollup::Accumulator::new(ts);
    for t in temperatures {
        let mut values = vec![None; catalog::FIELDS.len()];
        values[column] = Some(*t);
        acc.add_sample(true, &values);
    }
    super::recorder::RollupRow {
        ts,
        gpu,
        n: acc.n,
        up_n: acc.up_n,
        values: acc.values(),
    }
}

/// Each kind of row goes in multi-row statements (more rows than one
/// statement takes, too): every row lands, a minute met twice in one
/// statement merges as row-by-row statements did, and a later commit merges
/// into the stored row and updates the counters.
#[tokio::test]
async fn one_commit_writes_many_rows_of_each_kind_and_merges_rollups() {
    use super::recorder::{Batch, CounterState, EventRow, GpuRow, SampleRow};
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open_for_writing(&dir.path().join("rows.db"), Durability::Normal)
        .await
        .expect("open");
    let minute = 1_700_000_040_000;
    let mut batch = Batch::default();
    for id in 1..=3 {
        batch.gpus.insert(
            id,
            GpuRow {
                id,
                uuid: format!("GPU-{id}"),
                index: id as u32 - 1,
                name: Some("Test GPU".into()),
                seen_ms: minute,
            },
        );
        batch.minutes.push(minute_row(id, minute, &[40, 50]));
        for counter in ["energy", "xid_total"] {
            batch.counters.insert(
                (id, counter),
                CounterState {
                    last_raw: id as f64,
                    offset: 0.0,
                },
            );
        }
        batch.samples.push(SampleRow {
            ts: minute,
            gpu: id,
            up: true,
            values: vec![Some(id); catalog::FIELDS.len()],
        });
    }
    batch.minutes.push(minute_row(1, minute, &[70]));
    for pid in 0..450 {
        batch.events.push(EventRow {
            ts: minute + pid,
            gpu: Some(1 + pid % 3),
            kind: "process_start",
            code: Some(pid),
            value: Some(pid * 2),
            detail: Some(format!("proc-{pid}")),
        });
    }
    assert_eq!(
        super::sql::commit(&store.pool, &batch)
            .await
            .expect("commit"),
        3 + 4 + 6 + 3 + 450
    );
    let mut later = Batch::default();
    later.minutes.push(minute_row(2, minute, &[60, 60]));
    later.counters.insert(
        (2, "energy"),
        CounterState {
            last_raw: 5.0,
            offset: 2.0,
        },
    );
    super::sql::commit(&store.pool, &later)
        .await
        .expect("second commit");

    assert_eq!(count(&store, "gpu").await, 3);
    assert_eq!(count(&store, "sample").await, 3);
    assert_eq!(count(&store, "event").await, 450);
    assert_eq!(count(&store, "counter_state").await, 6);
    let column = catalog::field("temperature").expect("field").column;
    let rollup = |gpu: i64| {
        let sql = format!(
            "SELECT n, {column}_min, {column}_max, {column}_avg FROM rollup_1m WHERE gpu = ? AND ts = ?"
        );
        let pool = store.pool.clone();
        async move {
            sqlx::query_as::<_, (i64, i64, i64, f64)>(sqlx::AssertSqlSafe(sql))
                .bind(gpu)
                .bind(minute)
                .fetch_one(&pool)
                .await
                .expect("rollup row")
        }
    };
    let (n, min, max, avg) = rollup(1).await;
    assert_eq!((n, min, max), (3, 40, 70), "merged within one statement");
    assert!(
        (avg - 160.0 / 3.0).abs() < 1e-9,
        "average of 40, 50, 70: {avg}"
    );
    assert_eq!(rollup(2).await, (4, 40, 60, 52.5));
    assert_eq!(rollup(3).await, (2, 40, 50, 45.0));
    let energy: (f64, f64) = sqlx::query_as(
        "SELECT last_raw, offset FROM counter_state WHERE gpu = 2 AND counter = 'energy'",
    )
    .fetch_one(&store.pool)
    .await
    .expect("counter");
    assert_eq!(energy, (5.0, 2.0));
    let last: (i64, Option<i64>, String, i64, i64, String) = sqlx::query_as(
        "SELECT ts, gpu, kind, code, value, detail FROM event ORDER BY id DESC LIMIT 1",
    )
    .fetch_one(&store.pool)
    .await
    .expect("event");
    assert_eq!(
        last,
        (
            minute + 449,
            Some(3),
            "process_start".to_string(),
            449,
            898,
            "proc-449".to_string()
        )
    );
}
