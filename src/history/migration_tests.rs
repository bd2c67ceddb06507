//! Schema upgrades: a database written by an older gpuwatch opens with the
//! new migrations applied and keeps every row it had.

use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::Row;

use super::store::{Store, MIGRATOR};
use super::Durability;

/// The last schema before the GPM columns (migration 5).
const BEFORE_GPM: i64 = 20261129000004;

#[tokio::test]
async fn a_history_from_before_gpm_opens_and_keeps_its_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.db");
    {
        let pool = SqlitePoolOptions::new()
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(&path)
                    .create_if_missing(true),
            )
            .await
            .expect("create");
        MIGRATOR
            .run_to(BEFORE_GPM, &pool)
            .await
            .expect("the old schema");
        for sql in [
            "INSERT INTO gpu (id, uuid, last_index, name, first_seen_ms, last_seen_ms) VALUES (1, 'GPU-old', 0, 'Old GPU', 1000, 2000)",
            "INSERT INTO sample (ts, gpu, up, util_gpu, temp_gpu) VALUES (1000, 1, 1, 90, 55)",
            "INSERT INTO rollup_1m (ts, gpu, n, up_n, temp_gpu_avg) VALUES (0, 1, 1, 1, 55.0)",
        ] {
            sqlx::query(sql).execute(&pool).await.expect(sql);
        }
        pool.close().await;
    }
    let store = Store::open_for_writing(&path, Durability::Normal)
        .await
        .expect("the old history opens");
    let row = sqlx::query("SELECT util_gpu, temp_gpu, sm_active, dram_active FROM sample")
        .fetch_one(&store.pool)
        .await
        .expect("the old sample");
    assert_eq!(row.get::<Option<i64>, _>("util_gpu"), Some(90));
    assert_eq!(row.get::<Option<i64>, _>("temp_gpu"), Some(55));
    // Rows from before GPM have none: NULL, never 0.
    assert_eq!(row.get::<Option<i64>, _>("sm_active"), None);
    assert_eq!(row.get::<Option<i64>, _>("dram_active"), None);
    let rollup =
        sqlx::query("SELECT temp_gpu_avg, sm_active_avg, tensor_active_last FROM rollup_1m")
            .fetch_one(&store.pool)
            .await
            .expect("the old rollup");
    assert_eq!(rollup.get::<Option<f64>, _>("temp_gpu_avg"), Some(55.0));
    assert_eq!(rollup.get::<Option<f64>, _>("sm_active_avg"), None);
    assert_eq!(rollup.get::<Option<i64>, _>("tensor_active_last"), None);
    sqlx::query("SELECT sm_occupancy_min, sm_occupancy_max FROM rollup_1h")
        .fetch_all(&store.pool)
        .await
        .expect("the hour tier has the GPM columns");
}
