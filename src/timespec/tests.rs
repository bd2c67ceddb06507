use proptest::prelude::*;

use super::*;

const NOW: Timestamp = Timestamp(1_800_000_000_000);

#[test]
fn times_in_every_form() {
    let t = |text: &str| Timestamp::parse(text, NOW).map(Timestamp::as_ms);
    assert_eq!(t("now"), Ok(NOW.as_ms()));
    assert_eq!(t(""), Ok(NOW.as_ms()));
    assert_eq!(t("-1h"), Ok(NOW.as_ms() - 3_600_000));
    assert_eq!(t("6h"), Ok(NOW.as_ms() - 6 * 3_600_000));
    assert_eq!(t("1700000000"), Ok(1_700_000_000_000));
    assert_eq!(t("1700000000.25"), Ok(1_700_000_000_250));
    assert_eq!(t("0"), Ok(0));
    assert_eq!(t("2026-11-29T02:00:00Z"), Ok(1_795_917_600_000));
    assert_eq!(t("9999-12-31T23:59:59.999Z"), Ok(LATEST_MS));
    assert!(t("yesterday-ish")
        .unwrap_err()
        .to_string()
        .contains("RFC 3339"));
}

#[test]
fn times_outside_1970_to_9999_are_refused_not_wrapped() {
    let refused = |text: &str| match Timestamp::parse(text, NOW) {
        Err(e @ SpecError::TimeOutOfRange { .. }) => e.to_string(),
        other => panic!("{text}: {other:?}"),
    };
    // Used to wrap before 1970 (as_millis() as i64).
    assert!(refused("-99999999999y").contains("1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z"));
    assert!(refused("-60y").contains("\"-60y\""));
    // Used to overflow on `+ 1` in the alert history.
    refused("9223372036854775807");
    refused("1e300");
    refused("-5");
    refused("253402300800");
    assert!(matches!(
        Timestamp::parse("inf", NOW),
        Err(SpecError::NotATime { .. })
    ));
    assert!(matches!(
        Timestamp::parse("NaN", NOW),
        Err(SpecError::NotATime { .. })
    ));
}

#[test]
fn arithmetic_is_checked() {
    let last_day = Timestamp::parse_rfc3339("9999-12-31T23:00:00Z").unwrap();
    assert_eq!(last_day.checked_add(Duration::from_secs(7200)), None);
    assert_eq!(
        last_day.checked_add(Duration::from_secs(3599)),
        Timestamp::from_ms(LATEST_MS - 999)
    );
    assert_eq!(
        Timestamp::EARLIEST.checked_sub(Duration::from_millis(1)),
        None
    );
    assert_eq!(NOW.checked_add(Duration::MAX), None);
    assert_eq!(NOW.since(Timestamp::LATEST), Duration::ZERO);
}

#[test]
fn formatting_is_total() {
    assert_eq!(format_rfc3339_ms(i64::MAX), "9999-12-31T23:59:59.999Z");
    assert_eq!(format_rfc3339_ms(i64::MIN), "1970-01-01T00:00:00.000Z");
    assert_eq!(
        format_rfc3339_ms(1_795_917_600_000),
        "2026-11-29T02:00:00.000Z"
    );
    assert_eq!(
        format_rfc3339_seconds(f64::INFINITY),
        "9999-12-31T23:59:59Z"
    );
    assert_eq!(format_rfc3339_seconds(f64::NAN), "1970-01-01T00:00:00Z");
    assert_eq!(format_rfc3339_seconds(-1.0), "1970-01-01T00:00:00Z");
}

#[test]
fn steps_and_durations_are_bounded() {
    assert_eq!(
        Step::parse("1m").map(Step::get),
        Ok(Duration::from_secs(60))
    );
    assert_eq!(Step::parse("1y").map(Step::as_ms), Ok(31_557_600_000));
    let e = Step::parse("10ms").unwrap_err().to_string();
    assert!(e.contains("\"10ms\"") && e.contains("1s to 1year"), "{e}");
    // Used to truncate to 0 ms and divide by it.
    let e = Step::parse("18446744073709551s 616ms").unwrap_err();
    assert!(matches!(e, SpecError::DurationOutOfRange { .. }), "{e}");
    assert!(Step::parse("soon")
        .unwrap_err()
        .to_string()
        .contains("10s, 1m or 1h"));
    assert!(Step::new(Duration::ZERO).is_err());
    // Used to be stored, ending far beyond 9999.
    assert!(parse_duration("584942418y", SILENCE).is_err());
    assert!(parse_duration("10000y", SILENCE).is_err());
    assert_eq!(parse_duration("2h", SILENCE), Ok(Duration::from_secs(7200)));
}

#[test]
fn counts_are_whole_numbers_in_range() {
    assert_eq!(parse_count("200", 1, 10_000), Ok(200));
    assert!(matches!(
        parse_count("0", 1, 10_000),
        Err(SpecError::CountOutOfRange { .. })
    ));
    assert!(matches!(
        parse_count("99999999999999999999", 1, 10_000),
        Err(SpecError::CountOutOfRange { .. })
    ));
    assert!(matches!(
        parse_count("-1", 1, 10_000),
        Err(SpecError::NotACount { .. })
    ));
    assert!(parse_count("ten", 1, 10)
        .unwrap_err()
        .to_string()
        .contains("from 1 to 10"));
}

#[test]
fn quoting_shortens_and_escapes() {
    assert_eq!(quote("a\"b\n"), "a\\\"b\\n");
    let long = "x".repeat(10_000);
    assert_eq!(quote(&long).chars().count(), QUOTE_CHARS + 1);
}

/// Strings that look almost like the accepted forms, where bugs hide.
fn near_times() -> impl Strategy<Value = String> {
    let units = prop::sample::select(vec![
        "ns", "ms", "s", "m", "h", "d", "w", "M", "y", "years", "",
    ]);
    prop_oneof![
        any::<String>(),
        "[-+0-9.eE]{0,30}",
        (
            any::<bool>(),
            any::<u64>(),
            units.clone(),
            any::<u64>(),
            units
        )
            .prop_map(|(minus, a, u, b, v)| format!(
                "{}{a}{u} {b}{v}",
                if minus { "-" } else { "" }
            )),
        any::<f64>().prop_map(|f| f.to_string()),
        any::<i64>().prop_map(|i| i.to_string()),
        (
            0u32..20_000,
            0u32..20,
            0u32..40,
            0u32..30,
            0u32..70,
            0u32..70
        )
            .prop_map(|(y, mo, d, h, mi, s)| format!(
                "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"
            )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parsing_a_time_never_panics_and_errors_quote_the_input(text in near_times()) {
        match Timestamp::parse(&text, NOW) {
            Ok(t) => prop_assert!((EARLIEST_MS..=LATEST_MS).contains(&t.as_ms())),
            Err(e) => prop_assert!(e.to_string().contains(&quote(&text)), "{e}"),
        }
        match Timestamp::parse_rfc3339(&text) {
            Ok(t) => prop_assert!((EARLIEST_MS..=LATEST_MS).contains(&t.as_ms())),
            Err(e) => prop_assert!(e.to_string().contains(&quote(&text)), "{e}"),
        }
    }

    #[test]
    fn parsing_a_duration_never_panics_and_stays_in_range(text in near_times()) {
        match Step::parse(&text) {
            Ok(step) => {
                prop_assert!(step.get() >= STEP.min && step.get() <= STEP.max);
                prop_assert!(step.as_ms() >= 1000);
            }
            Err(e) => prop_assert!(e.to_string().contains(&quote(&text)), "{e}"),
        }
        match parse_duration(&text, SILENCE) {
            Ok(d) => prop_assert!(d >= SILENCE.min && d <= SILENCE.max),
            Err(e) => prop_assert!(e.to_string().contains(&quote(&text)), "{e}"),
        }
    }

    #[test]
    fn parsing_a_count_never_panics(text in near_times(), min in 0u32..10, max in 10u32..100_000) {
        match parse_count(&text, min, max) {
            Ok(n) => prop_assert!((min..=max).contains(&n)),
            Err(e) => prop_assert!(e.to_string().contains(&quote(&text)), "{e}"),
        }
    }

    #[test]
    fn valid_times_round_trip(ms in EARLIEST_MS..=LATEST_MS) {
        let t = Timestamp::from_ms(ms).unwrap();
        prop_assert_eq!(Timestamp::parse(&t.to_rfc3339_ms(), NOW), Ok(t));
        prop_assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339_ms()), Ok(t));
        let seconds = ms / 1000;
        prop_assert_eq!(
            Timestamp::parse(&seconds.to_string(), NOW),
            Ok(Timestamp(seconds * 1000))
        );
        prop_assert_eq!(Timestamp::parse(&format_rfc3339_ms(ms), NOW), Ok(t));
    }

    #[test]
    fn relative_times_round_trip(ago in 0..=NOW.as_ms()) {
        prop_assert_eq!(
            Timestamp::parse(&format!("-{ago}ms"), NOW),
            Ok(Timestamp(NOW.as_ms() - ago))
        );
    }

    #[test]
    fn formatting_never_panics(ms in any::<i64>(), seconds in any::<f64>()) {
        let text = format_rfc3339_ms(ms);
        prop_assert_eq!(Timestamp::parse_rfc3339(&text), Ok(Timestamp::clamped(ms)));
        prop_assert!(Timestamp::parse_rfc3339(&format_rfc3339_seconds(seconds)).is_ok());
    }

    #[test]
    fn durations_and_counts_round_trip(ms in 1000u64..=31_557_600_000, n in 1u32..=100_000) {
        let d = Duration::from_millis(ms);
        let written = humantime::format_duration(d).to_string();
        prop_assert_eq!(Step::parse(&written).map(Step::get), Ok(d));
        prop_assert_eq!(parse_duration(&written, SILENCE), Ok(d));
        prop_assert_eq!(parse_count(&n.to_string(), 1, 100_000), Ok(n));
    }

    #[test]
    fn checked_arithmetic_stays_in_range(ms in any::<i64>(), d in any::<u64>()) {
        let t = Timestamp::clamped(ms);
        let d = Duration::from_millis(d);
        for r in [t.checked_add(d), t.checked_sub(d)].into_iter().flatten() {
            prop_assert!((EARLIEST_MS..=LATEST_MS).contains(&r.as_ms()));
        }
    }
}
