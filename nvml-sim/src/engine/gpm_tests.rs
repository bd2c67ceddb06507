//! GPM model tests: exact time-averages, defaults, MIG instances and the
//! workloads the shipped scenarios carry.

use super::*;
use crate::scenario::schema::ProcessKind;
use crate::{builtin, Scenario};

fn engine(src: &str) -> Engine {
    Engine::new(Scenario::parse(src, "test").expect("valid scenario"))
}

const STEPS: &str = r#"
[[gpu]]
mig = true
[gpu.metrics]
utilization_gpu = { step = [["0s", 0], ["60s", 100]] }
utilization_memory = 40
decoder_percent = 12
[gpu.gpm]
sm_active = { step = [["0s", 0], ["60s", 90]] }
tensor_active = { step = [["0s", 10], ["60s", 70]] }
imma_active = 5
pcie_rx_mib_s = { step = [["0s", 0], ["30s", 4096]] }
nvjpg_engines = 2
unsupported = [13]
[gpu.nvlink]
links = 4
tx_mib_s = 1000
rx_mib_s = { step = [["0s", 0], ["60s", 2400]] }
[[gpu.mig_instances]]
id = 1
memory_mib = 40192
[gpu.mig_instances.gpm]
sm_active = 80
[[gpu.mig_instances]]
id = 2
memory_mib = 40192
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
[[fault]]
at = "40s"
until = "70s"
gpu = 0
kind = "nvlink_down"
link = 1
"#;

#[test]
fn metrics_are_the_exact_time_average_of_the_timelines() {
    let e = engine(STEPS);
    let g = e.gpu(0).expect("gpu 0");
    let w = g.gpm_window(None, 30.0, 90.0).expect("window");
    // Stepped 0 → 90 at 60 s: half the window each.
    assert_eq!(w.metric(2), Ok(45.0));
    // Defaults: occupancy = SM / 2, graphics = utilization, DRAM = memory utilization.
    assert_eq!(w.metric(3), Ok(22.5));
    assert_eq!(w.metric(1), Ok(50.0));
    assert_eq!(w.metric(10), Ok(40.0));
    // Tensor 10 → 70; HMMA defaults to tensor − IMMA.
    assert_eq!(w.metric(5), Ok(40.0));
    assert_eq!(w.metric(7), Ok(35.0));
    assert_eq!(w.metric(9), Ok(5.0));
    assert_eq!(w.metric(20), Ok(0.0));
    assert_eq!(w.metric(21), Ok(4096.0));
    // NVDEC follows decoder_percent; NVJPG 2 does not exist; FP16 is switched off.
    assert_eq!(w.metric(30), Ok(12.0));
    assert_eq!(w.metric(41), Ok(0.0));
    assert_eq!(w.metric(42), Err(Unavailable::NotSupported));
    assert_eq!(w.metric(13), Err(Unavailable::NotSupported));
    // NVLink: link 1 is down 40-70 s; RX steps 0 → 2400 at 60 s.
    assert_eq!(w.metric(62), Ok(1200.0)); // link 0 RX
    assert_eq!(w.metric(65), Ok(500.0)); // link 1 TX: up 30 of 60 s
    assert_eq!(w.metric(64), Ok(800.0)); // link 1 RX: up (and busy) 70-90 s
    assert_eq!(w.metric(60), Ok(4400.0)); // total RX
    assert_eq!(w.metric(61), Ok(3500.0)); // total TX
    assert_eq!(w.metric(70), Err(Unavailable::NotSupported)); // link 4 RX
                                                              // Not ids at all, and ids the simulator does not model.
    assert_eq!(w.metric(8), Err(Unavailable::InvalidArgument));
    assert_eq!(w.metric(210), Err(Unavailable::InvalidArgument));
    assert_eq!(w.metric(100), Err(Unavailable::NotSupported));
}

#[test]
fn fractional_windows_zero_width_windows_and_reversed_samples() {
    let e = engine(STEPS);
    let g = e.gpu(0).expect("gpu 0");
    let w = g.gpm_window(None, 30.5, 90.5).expect("window");
    assert_eq!(w.metric(2), Ok(45.75));
    let at = |t| g.gpm_window(None, t, t).expect("window").metric(2);
    assert_eq!(
        (at(59.0), at(60.0), at(600.0)),
        (Ok(0.0), Ok(90.0), Ok(90.0))
    );
    assert_eq!(
        g.gpm_window(None, 90.0, 30.0),
        Err(Unavailable::InvalidArgument)
    );
}

#[test]
fn mig_instances_have_their_own_metrics_and_no_links() {
    let e = engine(STEPS);
    let g = e.gpu(0).expect("gpu 0");
    assert_eq!(g.gpm_sample_check(Some(1), 5.0), Ok(()));
    assert_eq!(
        g.gpm_sample_check(Some(9), 5.0),
        Err(Unavailable::InvalidArgument)
    );
    let one = g.gpm_window(Some(1), 0.0, 100.0).expect("instance 1");
    assert_eq!((one.metric(2), one.metric(3)), (Ok(80.0), Ok(40.0)));
    // No defaults from the whole GPU's readings; no PCIe or NVLink metrics.
    assert_eq!(one.metric(1), Ok(0.0));
    assert_eq!(one.metric(21), Err(Unavailable::NotSupported));
    assert_eq!(one.metric(60), Err(Unavailable::NotSupported));
    let two = g.gpm_window(Some(2), 0.0, 100.0).expect("instance 2");
    assert_eq!(two.metric(2), Ok(0.0));
}

#[test]
fn gpus_without_gpm_refuse_samples() {
    let e = engine(STEPS);
    let ampere = e.gpu(1).expect("gpu 1");
    assert!(!ampere.gpm_supported());
    assert_eq!(
        ampere.gpm_sample_check(None, 1.0),
        Err(Unavailable::NotSupported)
    );
    assert_eq!(
        ampere.gpm_window(None, 0.0, 1.0),
        Err(Unavailable::NotSupported)
    );
    // MIG samples need MIG mode on.
    let no_mig = engine("[[gpu]]\nmig = false\n[gpu.gpm]\n");
    let g = no_mig.gpu(0).expect("gpu");
    assert_eq!(
        g.gpm_sample_check(Some(1), 1.0),
        Err(Unavailable::NotSupported)
    );
    assert_eq!(g.gpm_sample_check(None, 1.0), Ok(()));
}

fn average(e: &Engine, gpu: usize, metric: u32) -> f64 {
    let w = e
        .gpu(gpu)
        .expect("gpu")
        .gpm_window(None, 0.0, 600.0)
        .expect("window");
    w.metric(metric).expect("metric")
}

const SM: u32 = 2;
const OCCUPANCY: u32 = 3;
const TENSOR: u32 = 5;

#[test]
fn shipped_scenarios_carry_the_four_workloads() {
    // Training: tensor 60-80 %, SM ~90 %.
    for (name, gpu) in [("demo", 1), ("h100x8", 0), ("h200", 0), ("workloads", 0)] {
        let e = engine(builtin::get(name).expect("scenario"));
        let (t1, t2) = if name == "h200" {
            (60.0, 600.0)
        } else {
            (0.0, 600.0)
        };
        let w = e
            .gpu(gpu)
            .expect("gpu")
            .gpm_window(None, t1, t2)
            .expect("window");
        let (sm, tensor) = (w.metric(SM).expect("sm"), w.metric(TENSOR).expect("tensor"));
        assert!((85.0..=97.0).contains(&sm), "{name} training SM {sm}");
        assert!(
            (60.0..=80.0).contains(&tensor),
            "{name} training tensor {tensor}"
        );
    }
    // Inference: occupancy 10-20 %, SM ~30 %.
    for (name, gpu) in [("demo", 0), ("workloads", 1)] {
        let e = engine(builtin::get(name).expect("scenario"));
        let (sm, occ) = (average(&e, gpu, SM), average(&e, gpu, OCCUPANCY));
        assert!((25.0..=35.0).contains(&sm), "{name} inference SM {sm}");
        assert!(
            (10.0..=20.0).contains(&occ),
            "{name} inference occupancy {occ}"
        );
    }
    // Starved: utilization ≥ 90 % while SM active < 20 % (h100x8's GPU 5
    // keeps the training GPUs' utilization walk, 88-100 %: mostly ≥ 90 %).
    for (name, gpu, seconds) in [("h100x8", 5, 480), ("workloads", 2, 600)] {
        let e = engine(builtin::get(name).expect("scenario"));
        let g = e.gpu(gpu).expect("gpu");
        let util = (0..600).map(|t| g.utilization(f64::from(t)).expect("util").0);
        let busy = util.filter(|u| *u >= 90).count();
        assert!(busy >= seconds, "{name} GPU {gpu} busy {busy} of 600 s");
        assert!(average(&e, gpu, SM) < 20.0, "{name} starved SM");
    }
    // Allocated idle: a process holds memory, SM active ≈ 0.
    let e = engine(builtin::get("workloads").expect("scenario"));
    let idle = e.gpu(3).expect("gpu 3");
    let held: u64 = idle
        .processes(ProcessKind::Compute, 10.0)
        .expect("processes")
        .iter()
        .map(|p| p.used_bytes)
        .sum();
    assert_eq!(held, 30720 << 20);
    assert_eq!(average(&e, 3, SM), 0.0);
    // The golden fixture: GPU 0 with round GPM figures, GPU 1 without.
    let golden = engine(builtin::get("golden").expect("golden"));
    let w = golden
        .gpu(0)
        .expect("gpu 0")
        .gpm_window(None, 10.0, 10.0)
        .expect("window");
    assert_eq!(
        (w.metric(1), w.metric(SM), w.metric(TENSOR)),
        (Ok(75.0), Ok(60.0), Ok(40.0))
    );
    assert!(!golden.gpu(1).expect("gpu 1").gpm_supported());
    assert!(!engine(builtin::get("desktop-rtx3090").expect("rtx"))
        .gpu(0)
        .expect("gpu")
        .gpm_supported());
}
