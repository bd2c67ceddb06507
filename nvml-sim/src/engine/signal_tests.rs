//! Tests of the compiled timelines: each shape's values, and random walks
//! read in any order.

use super::*;
use serde::Deserialize;

fn spec(src: &str) -> TimelineSpec {
    #[derive(Deserialize)]
    struct W {
        v: TimelineSpec,
    }
    let w: W = toml::from_str(&format!("v = {src}")).expect("valid timeline");
    w.v.validate().expect("valid parameters");
    w.v
}

fn at(src: &str, t: f64) -> f64 {
    Signal::new(&spec(src), 1).eval(t)
}

#[test]
fn constants() {
    assert_eq!(at("42", 100.0), 42.0);
    assert_eq!(at("{ const = 7.5 }", 3.0), 7.5);
}

#[test]
fn ramp() {
    let r = "{ ramp = { from = 10, to = 20, start = \"10s\", duration = \"10s\" } }";
    assert_eq!(at(r, 0.0), 10.0);
    assert_eq!(at(r, 15.0), 15.0);
    assert_eq!(at(r, 25.0), 20.0);
}

#[test]
fn step() {
    let s = "{ step = [[\"0s\", 10], [\"30s\", 90], [\"1m\", 50]] }";
    assert_eq!(at(s, 0.0), 10.0);
    assert_eq!(at(s, 29.9), 10.0);
    assert_eq!(at(s, 30.0), 90.0);
    assert_eq!(at(s, 600.0), 50.0);
}

#[test]
fn sine() {
    let s = "{ sine = { min = 0, max = 100, period = \"40s\" } }";
    assert!((at(s, 0.0) - 50.0).abs() < 1e-9);
    assert!((at(s, 10.0) - 100.0).abs() < 1e-9);
    assert!((at(s, 30.0) - 0.0).abs() < 1e-9);
}

#[test]
fn square() {
    let s = "{ square = { low = 5, high = 95, period = \"10s\", duty = 0.3 } }";
    assert_eq!(at(s, 1.0), 95.0);
    assert_eq!(at(s, 4.0), 5.0);
    assert_eq!(at(s, 12.0), 95.0);
}

#[test]
fn random_walk_is_deterministic_and_bounded() {
    let w = "{ random_walk = { start = 50, min = 40, max = 60, step = 5, every = \"1s\" } }";
    let a = Signal::new(&spec(w), 9);
    let b = Signal::new(&spec(w), 9);
    assert_eq!(a.eval(0.0), 50.0);
    // Evaluate b far ahead first, then backwards: same answers as a in order.
    let late = b.eval(5000.5);
    for i in 0..3000 {
        let t = i as f64 * 1.7;
        let v = a.eval(t);
        assert!((40.0..=60.0).contains(&v), "{v} out of bounds at {t}");
        assert_eq!(v, b.eval(t));
    }
    assert_eq!(late, a.eval(5000.5));
    assert_ne!(a.eval(100.0), Signal::new(&spec(w), 10).eval(100.0));
}

#[test]
fn a_walk_read_just_behind_its_newest_step_gives_the_same_values() {
    // The fast tier reads "now" (steps k and k + 1), the GPM integrator
    // whole seconds a few steps behind: both orders answer as one walk
    // read in order does, behind the newest step or far behind it.
    let w = "{ random_walk = { start = 50, min = 0, max = 100, step = 3, every = \"1s\" } }";
    let (in_order, mixed) = (Signal::new(&spec(w), 4), Signal::new(&spec(w), 4));
    let expected: Vec<f64> = (0..3000).map(|s| in_order.eval(s as f64)).collect();
    for now in 10..3000 {
        mixed.eval(now as f64 - 0.5);
        for behind in [1, 3, 7, 8, 9] {
            let s = now - behind;
            assert_eq!(mixed.eval(s as f64), expected[s], "step {s} read at {now}");
        }
    }
    assert_eq!(
        mixed.eval(12.0),
        expected[12],
        "far behind: from a checkpoint"
    );
    assert_eq!(mixed.eval(2999.0), expected[2999]);
}

#[test]
fn sum_adds_parts() {
    let s = "{ sum = [50, { square = { low = 0, high = 10, period = \"2s\" } }] }";
    assert_eq!(at(s, 0.5), 60.0);
    assert_eq!(at(s, 1.5), 50.0);
}
