use proptest::prelude::*;

use super::*;
use crate::http::history_api::tests::{names_the_input, queries};

const NOW: i64 = 1_800_000_000_000;

fn now() -> Timestamp {
    Timestamp::clamped(NOW)
}

#[test]
fn the_alert_history_parameters_are_checked() {
    let e = history_filter(Some("to=9223372036854775807"), now()).unwrap_err();
    assert_eq!(e.parameter, "to");
    assert!(e.message.contains("9999-12-31T23:59:59Z"), "{e}");
    let e = history_filter(Some("limit=10001"), now()).unwrap_err();
    assert_eq!(e.parameter, "limit");
    assert!(e.message.contains("1 to 10000"), "{e}");
    assert_eq!(
        history_filter(Some("form=-1h"), now())
            .unwrap_err()
            .parameter,
        "form"
    );
    // `to` is inclusive: the latest time still works.
    let f = history_filter(Some("to=9999-12-31T23:59:59.999Z&alertname=GpuHot"), now()).unwrap();
    assert_eq!(f.to_ms, crate::timespec::LATEST_MS + 1);
    assert_eq!((f.limit, f.alertname.as_deref()), (200, Some("GpuHot")));
    assert_eq!(f.from_ms, NOW - 86_400_000);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn alert_history_parameters_never_panic(
        query in queries(&["from", "to", "alertname", "gpu", "limit"])
    ) {
        match history_filter(Some(&query), now()) {
            Ok(f) => {
                prop_assert!(f.from_ms >= 0 && f.to_ms <= crate::timespec::LATEST_MS + 1);
                prop_assert!((1..=i64::from(MAX_TRANSITIONS)).contains(&f.limit));
            }
            Err(e) => names_the_input(&query, &e)?,
        }
    }
}
