use std::sync::Arc;

use super::*;
use crate::alerting::silence::{parse_new, FieldError};
use crate::alerting::silence_set::{MAX_EXPIRED, MAX_LIVE};
use crate::history::{Durability, Store};

const NOW_MS: i64 = 1_800_000_000_000;

fn now() -> Timestamp {
    Timestamp::clamped(NOW_MS)
}

async fn store(dir: &tempfile::TempDir) -> Store {
    Store::open_for_writing(&dir.path().join("h.db"), Durability::Normal)
        .await
        .expect("open")
}

fn new(matcher: &str, minutes: i64) -> Result<NewSilence, FieldError> {
    let body = serde_json::json!({
        "matchers": [matcher],
        "duration": format!("{minutes}m"),
        "createdBy": "t",
        "comment": "c",
    });
    parse_new(body.to_string().as_bytes(), now())
}

/// Writes a row as an older version could have.
async fn insert_raw(pool: &SqlitePool, matchers: &str, starts_ms: i64, ends_ms: i64) -> i64 {
    sqlx::query(
        "INSERT INTO silence (matchers, starts_ms, ends_ms, created_by, comment, created_ms, updated_ms) \
         VALUES (?, ?, ?, 'old', 'from an older version', 0, ?)",
    )
    .bind(matchers)
    .bind(starts_ms)
    .bind(ends_ms)
    .bind(ends_ms)
    .execute(pool)
    .await
    .expect("insert")
    .last_insert_rowid()
}

#[tokio::test]
async fn stored_rows_from_an_older_version_neither_break_listing_nor_memory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = store(&dir).await;
    let plain = r#"[{"name":"alertname","value":"X","isRegex":false,"isEqual":true}]"#;
    // Ends in the year 11 970: the listing used to panic on it forever.
    let far = insert_raw(&store.pool, plain, NOW_MS, 315_537_897_600_000).await;
    // Starts before 1970 and ends at i64::MAX.
    let odd = insert_raw(&store.pool, plain, -5, i64::MAX).await;
    // A 60 KB regex: no longer allowed.
    let huge_regex = format!(
        r#"[{{"name":"alertname","value":"{}","isRegex":true,"isEqual":true}}]"#,
        "a|".repeat(30_000)
    );
    let huge = insert_raw(&store.pool, &huge_regex, NOW_MS, NOW_MS + 3_600_000).await;
    // `\w{500}`: 20 MB compiled with the old limits.
    let wide = insert_raw(
        &store.pool,
        r#"[{"name":"gpu","value":"\\w{500}","isRegex":true,"isEqual":true}]"#,
        NOW_MS,
        NOW_MS + 3_600_000,
    )
    .await;
    // Over 128 KiB of matchers: skipped without being read.
    let giant = format!("[{}]", vec![plain.trim_matches(['[', ']']); 3000].join(","));
    let unread = insert_raw(&store.pool, &giant, NOW_MS, NOW_MS + 3_600_000).await;
    let broken = insert_raw(&store.pool, "not json", NOW_MS, NOW_MS + 3_600_000).await;

    let silences = Silences::open(store.pool.clone(), now())
        .await
        .expect("open");
    let ids: Vec<i64> = silences.list().iter().map(|s| s.id).collect();
    assert_eq!(ids, vec![odd, far], "newest first; the others skipped");
    for id in [huge, wide, unread, broken] {
        assert!(!ids.contains(&id));
    }
    let listed: Vec<serde_json::Value> =
        silences.list().iter().map(|s| s.to_json(NOW_MS)).collect();
    assert_eq!(listed[0]["startsAt"], "1970-01-01T00:00:00.000Z");
    assert_eq!(listed[0]["endsAt"], "9999-12-31T23:59:59.999Z");
    assert_eq!(listed[1]["endsAt"], "9999-12-31T23:59:59.999Z");
    // Such a silence can still be expired.
    let expired = silences
        .expire(far, now())
        .await
        .expect("expire")
        .expect("kept");
    assert_eq!(expired.ends_ms, NOW_MS);
    // The CLI's reading (live ones only) agrees.
    let live = live(&store.pool, now()).await.expect("live");
    assert_eq!(live.iter().map(|s| s.id).collect::<Vec<_>>(), vec![odd]);
}

#[tokio::test]
async fn the_thousand_and_first_silence_is_refused_until_one_is_expired() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = store(&dir).await;
    let silences = Silences::open(store.pool.clone(), now())
        .await
        .expect("open");
    for i in 0..MAX_LIVE {
        silences
            .add(new(&format!("gpu={i}"), 60).unwrap(), now())
            .await
            .expect("add");
    }
    let refused = silences
        .add(new("alertname=One", 60).unwrap(), now())
        .await
        .unwrap_err();
    assert!(
        matches!(refused, AddError::Full(Full::TooMany { live: 1000 })),
        "{refused}"
    );
    assert!(refused.to_string().contains("(1000)"), "{refused}");
    // Nothing of it was stored.
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM silence")
        .fetch_one(&store.pool)
        .await
        .expect("count");
    assert_eq!(rows, MAX_LIVE as i64);
    // Adding keeps what is in memory and does not read the table again: a
    // row written behind the agent's back is not picked up.
    insert_raw(
        &store.pool,
        r#"[{"name":"alertname","value":"Behind","isRegex":false,"isEqual":true}]"#,
        NOW_MS,
        NOW_MS + 60_000,
    )
    .await;
    let first = silences.current()[0].id;
    silences.expire(first, now()).await.expect("expire");
    let id = silences
        .add(new("alertname=One", 60).unwrap(), now())
        .await
        .expect("room after expiring one");
    assert_eq!(
        silences.current().len(),
        MAX_LIVE + 1,
        "999 live, 1 expired, 1 new"
    );
    assert!(silences
        .current()
        .iter()
        .all(|s| s.matchers[0].value != "Behind"));
    // After a restart the same limits hold: 1001 live rows are stored now
    // (one written behind the agent's back); the oldest 1000 are kept and
    // the newest is skipped (with a warning), not the process.
    let again = Silences::open(store.pool.clone(), now())
        .await
        .expect("reopen");
    let kept: Vec<Arc<Silence>> = again.list();
    assert_eq!(kept.len(), MAX_LIVE + 1, "1000 live, 1 expired");
    assert!(kept.iter().any(|s| s.matchers[0].value == "Behind"));
    assert!(kept.iter().all(|s| s.id != id));
}

#[tokio::test]
async fn expired_silences_are_kept_up_to_a_count_and_make_room() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = store(&dir).await;
    let silences = Silences::open(store.pool.clone(), now())
        .await
        .expect("open");
    let mut ids = Vec::new();
    for i in 0..=MAX_EXPIRED {
        let id = silences
            .add(new(&format!("gpu={i}"), 60).unwrap(), now())
            .await
            .expect("add");
        silences.expire(id, now()).await.expect("expire");
        ids.push(id);
    }
    // One more expired than kept: the first is gone, from memory and table.
    let kept: Vec<i64> = silences.current().iter().map(|s| s.id).collect();
    assert_eq!(kept.len(), MAX_EXPIRED);
    assert_eq!(kept[0], ids[1]);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM silence")
        .fetch_one(&store.pool)
        .await
        .expect("count");
    assert_eq!(rows, MAX_EXPIRED as i64);
}
