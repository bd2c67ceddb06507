use proptest::prelude::*;

use super::*;
use crate::routing::matcher::MAX_VALUE_BYTES;

const NOW_MS: i64 = 1_800_000_000_000;
const NOW: Timestamp = match Timestamp::from_ms(NOW_MS) {
    Some(t) => t,
    None => Timestamp::EARLIEST,
};

fn parse(body: Value) -> Result<NewSilence, FieldError> {
    parse_new(body.to_string().as_bytes(), NOW)
}

#[test]
fn a_silence_from_strings_or_alertmanager_objects() {
    let s = parse(json!({
        "matchers": ["alertname=GpuHot", {"name": "gpu", "value": "[01]", "isRegex": true}],
        "duration": "2h",
        "createdBy": "ops",
        "comment": "fan swap",
    }))
    .unwrap();
    assert_eq!(s.starts_ms, NOW_MS);
    assert_eq!(s.ends_ms, NOW_MS + 2 * 3_600_000);
    assert_eq!(s.matchers.len(), 2);
    assert_eq!(s.matchers[1].to_string(), "gpu=~[01]");
    let s = parse(json!({
        "matchers": ["gpu=0"],
        "startsAt": rfc3339_ms(NOW_MS + 1000),
        "endsAt": rfc3339_ms(NOW_MS + 60_000),
        "createdBy": "ops",
        "comment": "later",
    }))
    .unwrap();
    assert_eq!((s.starts_ms, s.ends_ms), (NOW_MS + 1000, NOW_MS + 60_000));
}

#[test]
fn every_refusal_names_its_field() {
    let base = json!({"matchers": ["gpu=0"], "duration": "1h", "createdBy": "a", "comment": "c"});
    let with = |key: &str, value: Value| {
        let mut b = base.clone();
        b[key] = value;
        parse(b).unwrap_err().field
    };
    let without = |key: &str| {
        let mut b = base.clone();
        b.as_object_mut().unwrap().remove(key);
        parse(b).unwrap_err().field
    };
    assert_eq!(with("matchers", json!([])), "matchers");
    assert_eq!(with("matchers", json!(["gpu=0", "gpu=~("])), "matchers[1]");
    assert_eq!(
        with("matchers", json!([{"name": "gpu"}])),
        "matchers[0].value"
    );
    assert_eq!(
        with("matchers", json!([{"name": "9", "value": "x"}])),
        "matchers[0].name"
    );
    assert_eq!(with("matchers", json!(["gpu=~.*"])), "matchers");
    assert_eq!(with("duration", json!("soon")), "duration");
    assert_eq!(with("endsAt", json!("2020-01-01T00:00:00Z")), "duration");
    assert_eq!(with("startsAt", json!("yesterday")), "startsAt");
    assert_eq!(with("comment", json!("  ")), "comment");
    assert_eq!(with("creator", json!("x")), "creator");
    assert_eq!(without("createdBy"), "createdBy");
    assert_eq!(without("duration"), "endsAt");
    let mut past = base.clone();
    past.as_object_mut().unwrap().remove("duration");
    past["endsAt"] = json!("2020-01-01T00:00:00Z");
    assert_eq!(parse(past).unwrap_err().field, "endsAt");
    assert_eq!(parse_new(b"{", NOW).unwrap_err().field, "body");
}

#[test]
fn state_follows_the_window() {
    let s = Silence {
        id: 1,
        matchers: vec![Matcher::parse("gpu=0").unwrap()],
        starts_ms: 100,
        ends_ms: 200,
        created_by: "a".into(),
        comment: "c".into(),
        updated_ms: 0,
    };
    let gpu0: BTreeMap<String, String> = [("gpu".to_string(), "0".to_string())].into();
    assert_eq!(s.state(99), SilenceState::Pending);
    assert!(!s.mutes(&gpu0, 99));
    assert_eq!(s.state(100), SilenceState::Active);
    assert!(s.mutes(&gpu0, 150));
    assert!(!s.mutes(&BTreeMap::new(), 150));
    assert_eq!(s.state(200), SilenceState::Expired);
    assert!(!s.mutes(&gpu0, 200));
    assert_eq!(s.to_json(150)["status"]["state"], "active");
}

#[test]
fn times_past_9999_and_overlong_silences_are_refused() {
    let base = json!({"matchers": ["alertname=X"], "createdBy": "a", "comment": "b"});
    let with = |pairs: &[(&str, Value)]| {
        let mut b = base.clone();
        for (k, v) in pairs {
            b[*k] = v.clone();
        }
        parse(b)
    };
    // The reported case: stored, then every listing panicked.
    let e = with(&[("duration", json!("10000y"))]).unwrap_err();
    assert_eq!(e.field, "duration");
    assert!(e.message.contains("1s to 1year"), "{e}");
    let e = with(&[("duration", json!("584942418y"))]).unwrap_err();
    assert_eq!(e.field, "duration");
    let e = with(&[
        ("startsAt", json!("9999-12-31T00:00:00Z")),
        ("duration", json!("2d")),
    ])
    .unwrap_err();
    assert_eq!(e.field, "duration");
    assert!(e.message.contains("9999-12-31T23:59:59Z"), "{e}");
    let e = with(&[
        ("startsAt", json!("1969-12-31T23:00:00Z")),
        ("duration", json!("2h")),
    ])
    .unwrap_err();
    assert_eq!(e.field, "startsAt");
    assert!(
        e.message
            .contains("1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z"),
        "{e}"
    );
    let e = with(&[("endsAt", json!("2030-01-01T00:00:00Z"))]).unwrap_err();
    assert_eq!(e.field, "endsAt");
    assert!(e.message.contains("longer than 1year"), "{e}");
    // The most: a year.
    let s = with(&[("duration", json!("1y"))]).unwrap();
    assert_eq!(s.ends_ms - s.starts_ms, 31_557_600_000);
}

#[test]
fn sizes_are_limited_and_each_limit_is_named() {
    let base =
        json!({"matchers": ["alertname=X"], "duration": "1h", "createdBy": "a", "comment": "b"});
    let with = |key: &str, value: Value| {
        let mut b = base.clone();
        b[key] = value;
        parse(b)
    };
    let many: Vec<String> = (0..17).map(|i| format!("l{i}=v")).collect();
    let e = with("matchers", json!(many)).unwrap_err();
    assert_eq!(e.field, "matchers");
    assert!(e.message.contains("at most 16"), "{e}");
    let sixteen: Vec<String> = (0..16).map(|i| format!("l{i}=v")).collect();
    assert_eq!(with("matchers", json!(sixteen)).unwrap().matchers.len(), 16);
    // A 60 KB regex, as in the report: refused, naming the limit.
    let huge = format!("alertname=~{}", "(a|b)".repeat(12_000));
    let e = with("matchers", json!([huge])).unwrap_err();
    assert_eq!(e.field, "matchers[0]");
    assert!(e.message.contains("at most 1024 (1 KiB)"), "{e}");
    let e = with(
        "matchers",
        json!(["alertname=X", {"name": "gpu", "value": "\\w{500}", "isRegex": true}]),
    )
    .unwrap_err();
    assert_eq!(e.field, "matchers[1].value");
    assert!(e.message.contains("64 KiB"), "{e}");
    let e = with("comment", json!("c".repeat(MAX_COMMENT_BYTES + 1))).unwrap_err();
    assert_eq!(e.field, "comment");
    assert!(e.message.contains("at most 1024"), "{e}");
    // Bytes, not characters: 300 two-byte characters are 600 bytes.
    let e = with("createdBy", json!("é".repeat(300))).unwrap_err();
    assert_eq!(e.field, "createdBy");
    assert!(e.message.contains("600 bytes"), "{e}");
    let value = "v".repeat(MAX_VALUE_BYTES);
    assert!(with("matchers", json!([format!("alertname={value}")])).is_ok());
}

#[test]
fn a_stored_time_past_9999_still_formats() {
    let s = Silence {
        id: 7,
        matchers: vec![Matcher::parse("alertname=X").unwrap()],
        starts_ms: -5,
        ends_ms: i64::MAX,
        created_by: "old".into(),
        comment: "from an older version".into(),
        updated_ms: 315_537_897_600_000,
    };
    let json = s.to_json(NOW_MS);
    assert_eq!(json["startsAt"], "1970-01-01T00:00:00.000Z");
    assert_eq!(json["endsAt"], "9999-12-31T23:59:59.999Z");
    assert_eq!(json["updatedAt"], "9999-12-31T23:59:59.999Z");
    assert_eq!(json["status"]["state"], "active");
}

/// Bodies near the accepted shape, with odd values where bugs hide.
fn bodies() -> impl Strategy<Value = Vec<u8>> {
    let text = prop_oneof![
        any::<String>().prop_map(Value::String),
        "[a-z_]{1,8}(=|!=|=~|!~)[a-z0-9.*|()\\[\\]{},+?\\\\]{0,20}".prop_map(Value::String),
        "[0-9]{1,12}(ms|s|m|h|d|y)".prop_map(Value::String),
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z".prop_map(Value::String),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ];
    let keys = prop::sample::select(vec![
        "matchers",
        "startsAt",
        "endsAt",
        "duration",
        "createdBy",
        "comment",
        "other",
    ]);
    let matcher = prop_oneof![
        text.clone(),
        (text.clone(), text.clone(), any::<bool>(), any::<bool>()).prop_map(|(n, v, r, e)| {
            json!({"name": n, "value": v, "isRegex": r, "isEqual": e})
        }),
    ];
    let matchers = prop::collection::vec(matcher, 0..20).prop_map(Value::Array);
    prop_oneof![
        any::<Vec<u8>>(),
        (prop::collection::vec((keys, text), 0..8), matchers).prop_map(|(pairs, m)| {
            let mut object = serde_json::Map::new();
            object.insert("matchers".into(), m);
            for (k, v) in pairs {
                object.insert(k.to_string(), v);
            }
            Value::Object(object).to_string().into_bytes()
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_body_is_parsed_or_refused_with_a_field_never_a_panic(body in bodies()) {
        match parse_new(&body, NOW) {
            Ok(s) => {
                prop_assert!(!s.matchers.is_empty() && s.matchers.len() <= MAX_MATCHERS);
                prop_assert!(s.starts_ms < s.ends_ms && s.ends_ms > NOW_MS);
                prop_assert!(s.ends_ms - s.starts_ms <= 31_557_600_000);
                prop_assert!(s.ends_ms <= crate::timespec::LATEST_MS && s.starts_ms >= 0);
                prop_assert!(s.comment.len() <= MAX_COMMENT_BYTES);
                prop_assert!(s.created_by.len() <= MAX_AUTHOR_BYTES);
            }
            Err(e) => {
                prop_assert!(!e.field.is_empty());
                let prefix = format!("{}: ", e.field);
                prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
            }
        }
    }

    #[test]
    fn valid_silences_round_trip_through_json(
        start in 0i64..crate::timespec::LATEST_MS - 31_557_600_000,
        seconds in 1u64..=31_557_600,
        value in "[a-z0-9]{1,20}",
    ) {
        let start = Timestamp::from_ms(start - start % 1000).unwrap();
        let now = start;
        let body = json!({
            "matchers": [format!("alertname={value}")],
            "startsAt": start.to_rfc3339_ms(),
            "duration": humantime::format_duration(std::time::Duration::from_secs(seconds)).to_string(),
            "createdBy": "a",
            "comment": "b",
        });
        let s = parse_new(body.to_string().as_bytes(), now).unwrap();
        prop_assert_eq!(s.starts_ms, start.as_ms());
        prop_assert_eq!(s.ends_ms, start.as_ms() + seconds as i64 * 1000);
        let stored = Silence {
            id: 1,
            matchers: s.matchers.clone(),
            starts_ms: s.starts_ms,
            ends_ms: s.ends_ms,
            created_by: s.created_by.clone(),
            comment: s.comment.clone(),
            updated_ms: now.as_ms(),
        };
        let json = stored.to_json(now.as_ms());
        let again = json!({
            "matchers": json["matchers"],
            "startsAt": json["startsAt"],
            "endsAt": json["endsAt"],
            "createdBy": json["createdBy"],
            "comment": json["comment"],
        });
        let back = parse_new(again.to_string().as_bytes(), now).unwrap();
        prop_assert_eq!(back, s);
    }
}
