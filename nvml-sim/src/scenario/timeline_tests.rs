//! Tests of the timeline syntax and its checks.

use super::*;

#[test]
fn rejects_bad_shapes() {
    #[derive(Deserialize, Debug)]
    struct W {
        #[allow(dead_code)]
        v: TimelineSpec,
    }
    assert!(toml::from_str::<W>("v = { wobble = 3 }").is_err());
    assert!(toml::from_str::<W>("v = \"hot\"").is_err());
    let bad: W =
        toml::from_str("v = { sine = { min = 9, max = 1, period = \"1s\" } }").expect("parses");
    assert!(bad.v.validate().is_err());
}
