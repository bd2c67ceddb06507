use proptest::prelude::*;

use super::*;

const NOW: i64 = 1_800_000_000_000;

fn now() -> Timestamp {
    Timestamp::clamped(NOW)
}

/// Values near what the parameters take, and anything at all.
pub(in crate::http) fn values() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "-?[0-9]{1,25}(ns|ms|s|m|h|d|w|M|y)?( [0-9]{1,20}(ms|s))?",
        "[-+0-9.eE]{0,30}",
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| n.to_string()),
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z",
        prop::sample::select(vec!["now", "", "temperature", "power", "0", "GPU-x"])
            .prop_map(String::from),
    ]
}

/// Query strings: raw text, or pairs of known and unknown names with
/// `values()`, URL-encoded.
pub(in crate::http) fn queries(names: &'static [&'static str]) -> impl Strategy<Value = String> {
    let name = prop_oneof![
        prop::sample::select(names.to_vec()).prop_map(String::from),
        "[a-z]{1,6}",
    ];
    prop_oneof![
        any::<String>(),
        prop::collection::vec((name, values()), 0..7).prop_map(|pairs| {
            let mut query = form_urlencoded::Serializer::new(String::new());
            for (name, value) in pairs {
                query.append_pair(&name, &value);
            }
            query.finish()
        }),
    ]
}

/// A refusal names the parameter, and quotes the value when it is the
/// value that is wrong.
pub(in crate::http) fn names_the_input(query: &str, e: &ParamError) -> Result<(), TestCaseError> {
    let p = params(Some(query));
    let value_checked = ["from", "to", "step", "limit", "metric"];
    if let (true, Some(value)) = (
        value_checked.contains(&e.parameter.as_str()),
        p.get(&e.parameter),
    ) {
        prop_assert!(e.message.contains(&quote(value)), "{e}");
    }
    let prefix = format!("{}: ", e.parameter);
    prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
    Ok(())
}

#[test]
fn out_of_range_values_are_refused_with_their_parameter() {
    let series = |q: &str| series_query(Some(q), now()).map(|_| ()).unwrap_err();
    let e = series("gpu=0&metric=temperature&step=18446744073709551s%20616ms");
    assert_eq!(e.parameter, "step");
    assert!(e.message.contains("1s to 1year"), "{e}");
    let e = series("gpu=0&metric=temperature&from=-99999999999y");
    assert_eq!(e.parameter, "from");
    assert_eq!(series("gpu=0&metric=nope").parameter, "metric");
    assert_eq!(series("metric=temperature").parameter, "gpu");
    let events = |q: &str| events_query(Some(q), now()).unwrap_err();
    assert_eq!(events("to=9223372036854775807").parameter, "to");
    assert_eq!(events("limit=0").parameter, "limit");
    assert_eq!(events("gpu=").parameter, "gpu");
    let q = events_query(Some("from=-1h&kind=xid&gpu=2"), now()).unwrap();
    assert_eq!(q.from.as_ms(), NOW - 3_600_000);
    assert_eq!((q.limit, q.kind.as_deref()), (1000, Some("xid")));
    assert_eq!(q.gpu, Some(GpuSelector::Index(2)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn history_parameters_never_panic(query in queries(&["gpu", "metric", "from", "to", "step"])) {
        match series_query(Some(&query), now()) {
            Ok(q) => {
                if let Some(step) = q.step {
                    prop_assert!(step.as_ms() >= 1000 && step.as_ms() <= 31_557_600_000);
                }
            }
            Err(e) => names_the_input(&query, &e)?,
        }
    }

    #[test]
    fn event_parameters_never_panic(query in queries(&["from", "to", "gpu", "kind", "limit"])) {
        match events_query(Some(&query), now()) {
            Ok(q) => prop_assert!((1..=MAX_EVENTS).contains(&q.limit)),
            Err(e) => names_the_input(&query, &e)?,
        }
    }

    #[test]
    fn valid_parameters_round_trip(
        from in 0i64..NOW,
        span in 1000i64..1_000_000_000,
        step in 1u64..=31_557_600,
        limit in 1u32..=MAX_EVENTS,
    ) {
        let from = Timestamp::from_ms(from - from % 1000).unwrap();
        let to = Timestamp::from_ms(from.as_ms() + span - span % 1000).unwrap();
        let step_text = humantime::format_duration(std::time::Duration::from_secs(step)).to_string();
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("gpu", "GPU-x")
            .append_pair("metric", "power")
            .append_pair("from", &from.to_rfc3339_ms())
            .append_pair("to", &(to.as_ms() / 1000).to_string())
            .append_pair("step", &step_text)
            .append_pair("limit", &limit.to_string())
            .finish();
        let q = series_query(Some(&query), now()).unwrap();
        prop_assert_eq!((q.from, q.to), (from, to));
        prop_assert_eq!(q.step.map(Step::as_ms), Some(step as i64 * 1000));
        prop_assert_eq!(q.gpu, GpuSelector::Uuid("GPU-x".into()));
        let e = events_query(Some(&query.replace("step=", "kind=")), now()).unwrap();
        prop_assert_eq!((e.from, e.to, e.limit), (from, to, limit));
    }
}
