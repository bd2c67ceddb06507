//! GPM through nvml-wrapper, as the agent will call it: device support,
//! samples of a GPU and of MIG instances, exact metrics between samples
//! taken at set times, per-metric NOT_SUPPORTED, pre-Hopper absence,
//! refused sample pairs, struct version checks and streaming.

mod common;

use common::{call_count, open, scenario_file, set_time};
use nvml_wrapper::enums::gpm::GpmMetricId::{self, *};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::{gpm_metrics_get, GpmSample};
use nvml_wrapper::Nvml;
use nvml_wrapper_sys::bindings::*;

/// GPU 0: Hopper with stepped GPM and 4 NVLinks (link 1 down 40-70 s);
/// GPU 1: Ampere (no GPM); GPU 2: Hopper in MIG mode, lost from 500 s.
const SCENARIO: &str = r#"
name = "gpm-test"
[[gpu]]
mig = false
[gpu.metrics]
utilization_gpu = { step = [["0s", 0], ["60s", 100]] }
utilization_memory = 40
[gpu.gpm]
sm_active = { step = [["0s", 0], ["60s", 90]] }
sm_occupancy = 30
tensor_active = { step = [["0s", 10], ["60s", 70]] }
imma_active = 5
pcie_tx_mib_s = 1024
pcie_rx_mib_s = { step = [["0s", 0], ["30s", 4096]] }
nvjpg_engines = 2
unsupported = [13]
[gpu.nvlink]
links = 4
tx_mib_s = 1000
rx_mib_s = { step = [["0s", 0], ["60s", 2400]] }

[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
pci_device_id = 0x20B210DE

[[gpu]]
mig = true
[gpu.gpm]
sm_active = 50
[[gpu.mig_instances]]
id = 1
profile = "3g.40gb"
memory_mib = 40192
[gpu.mig_instances.gpm]
sm_active = 80
tensor_active = 60
[[gpu.mig_instances]]
id = 2
profile = "3g.40gb"
memory_mib = 40192

[[fault]]
at = "40s"
until = "70s"
gpu = 0
kind = "nvlink_down"
link = 1

[[fault]]
at = "500s"
gpu = 2
kind = "lost"
"#;

/// The metrics `ids` between `a` and `b`, each a value or its error.
fn metrics(
    nvml: &Nvml,
    a: &GpmSample,
    b: &GpmSample,
    ids: &[GpmMetricId],
) -> Vec<Result<f64, NvmlError>> {
    gpm_metrics_get(nvml, a, b, ids)
        .expect("metrics")
        .into_iter()
        .map(|r| r.map(|m| m.value))
        .collect()
}

fn one(nvml: &Nvml, a: &GpmSample, b: &GpmSample, id: GpmMetricId) -> Result<f64, NvmlError> {
    metrics(nvml, a, b, &[id]).remove(0)
}

fn whole_gpu(nvml: &Nvml) {
    let d0 = nvml.device_by_index(0).expect("gpu 0");
    assert!(d0.gpm_support().expect("support"));
    let early = d0.gpm_sample().expect("sample at 30 s");
    set_time(90.0);
    let late = d0.gpm_sample().expect("sample at 90 s");
    let ids = [
        GraphicsUtil,
        SmUtil,
        SmOccupancy,
        AnyTensorUtil,
        HmmaTensorUtil,
        ImmaTensorUtil,
        DramBwUtil,
        PcieTxPerSec,
        PcieRxPerSec,
        Nvjpg1Util,
        NvlinkTotalRxPerSec,
        NvlinkTotalTxPerSec,
        NvlinkL1TxPerSec,
        NvlinkL1RxPerSec,
    ];
    let got: Vec<f64> = metrics(nvml, &early, &late, &ids)
        .into_iter()
        .map(|r| r.expect("metric"))
        .collect();
    // Time-averages over 30-90 s: steps at 60 s count half.
    assert_eq!(
        got,
        [
            50.0, 45.0, 30.0, 40.0, 35.0, 5.0, 40.0, 1024.0, 4096.0, 0.0, 4400.0, 3500.0, 500.0,
            800.0
        ]
    );
    // Per metric NOT_SUPPORTED: switched off (FP16), beyond the engines
    // (NVJPG 2) and the links (link 5); the others still answer.
    let mixed = metrics(
        nvml,
        &early,
        &late,
        &[Fp16Util, SmUtil, Nvjpg2Util, NvlinkL5RxPerSec],
    );
    assert!(matches!(mixed[0], Err(NvmlError::NotSupported)));
    assert_eq!(mixed[1].as_ref().ok(), Some(&45.0));
    assert!(matches!(mixed[2], Err(NvmlError::NotSupported)));
    assert!(matches!(mixed[3], Err(NvmlError::NotSupported)));
    // Names and units come back with each value.
    let named = gpm_metrics_get(nvml, &early, &late, &[SmUtil, PcieRxPerSec]).expect("named");
    let sm = named[0].as_ref().expect("sm");
    assert_eq!(
        (
            sm.metric_id,
            sm.metric_info.short_name.as_str(),
            sm.metric_info.unit.as_str()
        ),
        (SmUtil, "sm_util", "%")
    );
    assert_eq!(named[1].as_ref().expect("pcie").metric_info.unit, "MiB/sec");
    // Two samples at the same time give the rate then; newest first is refused.
    assert_eq!(one(nvml, &late, &late, SmUtil).expect("same time"), 90.0);
    assert!(matches!(
        gpm_metrics_get(nvml, &late, &early, &[SmUtil]),
        Err(NvmlError::InvalidArg)
    ));
    raw_checks(nvml, &early, &late);
    // Streaming is off until switched on.
    assert!(!d0.gpm_streaming_enabled().expect("streaming"));
    d0.set_gpm_streaming_enabled(true).expect("switch on");
    assert!(d0.gpm_streaming_enabled().expect("streaming"));
}

/// What nvml-wrapper cannot send: wrong struct versions, freed samples.
fn raw_checks(nvml: &Nvml, early: &GpmSample, late: &GpmSample) {
    let lib = nvml.lib();
    let mut request: nvmlGpmMetricsGet_t = unsafe { std::mem::zeroed() };
    request.version = NVML_GPM_METRICS_GET_VERSION + 1;
    request.numMetrics = 1;
    request.sample1 = unsafe { early.handle() };
    request.sample2 = unsafe { late.handle() };
    request.metrics[0].metricId = nvmlGpmMetricId_t_NVML_GPM_METRIC_SM_UTIL;
    let get = lib.nvmlGpmMetricsGet.as_ref().expect("nvmlGpmMetricsGet");
    assert_eq!(
        unsafe { get(&mut request) },
        nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    );
    request.version = NVML_GPM_METRICS_GET_VERSION;
    request.numMetrics = nvmlGpmMetricId_t_NVML_GPM_METRIC_MAX + 1;
    assert_eq!(
        unsafe { get(&mut request) },
        nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
    );
    request.numMetrics = 1;
    assert_eq!(unsafe { get(&mut request) }, nvmlReturn_enum_NVML_SUCCESS);
    assert_eq!(request.metrics[0].value, 45.0);

    let device = nvml.device_by_index(0).expect("gpu 0");
    let mut support = nvmlGpmSupport_t {
        version: NVML_GPM_SUPPORT_VERSION + 1,
        isSupportedDevice: 7,
    };
    let query = lib
        .nvmlGpmQueryDeviceSupport
        .as_ref()
        .expect("support symbol");
    assert_eq!(
        unsafe { query(device.handle(), &mut support) },
        nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    );

    // A freed sample is refused, and so is freeing it twice.
    let doomed = device.gpm_sample().expect("sample").into_handle();
    let free = lib.nvmlGpmSampleFree.as_ref().expect("free symbol");
    assert_eq!(unsafe { free(doomed) }, nvmlReturn_enum_NVML_SUCCESS);
    assert_eq!(
        unsafe { free(doomed) },
        nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
    );
    request.sample2 = doomed;
    assert_eq!(
        unsafe { get(&mut request) },
        nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
    );
    // An allocated sample never filled is refused too.
    let empty = GpmSampleHandle::alloc(nvml);
    request.sample2 = empty.0;
    assert_eq!(
        unsafe { get(&mut request) },
        nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT
    );
}

/// A raw sample buffer, freed on drop.
struct GpmSampleHandle<'a>(nvmlGpmSample_t, &'a Nvml);

impl<'a> GpmSampleHandle<'a> {
    fn alloc(nvml: &'a Nvml) -> Self {
        let alloc = nvml
            .lib()
            .nvmlGpmSampleAlloc
            .as_ref()
            .expect("alloc symbol");
        let mut sample: nvmlGpmSample_t = std::ptr::null_mut();
        assert_eq!(unsafe { alloc(&mut sample) }, nvmlReturn_enum_NVML_SUCCESS);
        GpmSampleHandle(sample, nvml)
    }
}

impl Drop for GpmSampleHandle<'_> {
    fn drop(&mut self) {
        if let Ok(free) = self.1.lib().nvmlGpmSampleFree.as_ref() {
            unsafe { free(self.0) };
        }
    }
}

fn pre_hopper(nvml: &Nvml) {
    let ampere = nvml.device_by_index(1).expect("gpu 1");
    assert!(!ampere.gpm_support().expect("support query answers"));
    assert!(matches!(ampere.gpm_sample(), Err(NvmlError::NotSupported)));
    assert!(matches!(
        ampere.gpm_mig_sample(1),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        ampere.gpm_streaming_enabled(),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        ampere.set_gpm_streaming_enabled(true),
        Err(NvmlError::NotSupported)
    ));
}

fn mig_instances(nvml: &Nvml) {
    set_time(100.0);
    let d2 = nvml.device_by_index(2).expect("gpu 2");
    let (one_a, two_a, gpu_a) = (
        d2.gpm_mig_sample(1).expect("instance 1"),
        d2.gpm_mig_sample(2).expect("instance 2"),
        d2.gpm_sample().expect("whole GPU"),
    );
    set_time(160.0);
    let (one_b, two_b, gpu_b) = (
        d2.gpm_mig_sample(1).expect("instance 1"),
        d2.gpm_mig_sample(2).expect("instance 2"),
        d2.gpm_sample().expect("whole GPU"),
    );
    let per_instance = metrics(
        nvml,
        &one_a,
        &one_b,
        &[SmUtil, AnyTensorUtil, SmOccupancy, PcieTxPerSec],
    );
    assert_eq!(
        per_instance[..3]
            .iter()
            .map(|r| *r.as_ref().expect("metric"))
            .collect::<Vec<_>>(),
        [80.0, 60.0, 40.0]
    );
    assert!(
        matches!(per_instance[3], Err(NvmlError::NotSupported)),
        "no PCIe per instance"
    );
    assert_eq!(one(nvml, &two_a, &two_b, SmUtil).expect("instance 2"), 0.0);
    assert_eq!(one(nvml, &gpu_a, &gpu_b, SmUtil).expect("whole GPU"), 50.0);
    // Samples of different instances, or of an instance and the GPU, do not pair.
    assert!(matches!(
        gpm_metrics_get(nvml, &one_a, &two_b, &[SmUtil]),
        Err(NvmlError::InvalidArg)
    ));
    assert!(matches!(
        gpm_metrics_get(nvml, &gpu_a, &one_b, &[SmUtil]),
        Err(NvmlError::InvalidArg)
    ));
    // Nor do samples of different GPUs.
    let d0 = nvml.device_by_index(0).expect("gpu 0");
    let other = d0.gpm_sample().expect("gpu 0 sample");
    assert!(matches!(
        gpm_metrics_get(nvml, &other, &gpu_b, &[SmUtil]),
        Err(NvmlError::InvalidArg)
    ));
    // No such instance; no MIG on GPU 0.
    assert!(matches!(d2.gpm_mig_sample(9), Err(NvmlError::InvalidArg)));
    assert!(matches!(d0.gpm_mig_sample(1), Err(NvmlError::NotSupported)));
    // A lost GPU answers GPU_IS_LOST.
    set_time(500.0);
    assert!(matches!(d2.gpm_sample(), Err(NvmlError::GpuLost)));
    assert!(matches!(d2.gpm_support(), Err(NvmlError::GpuLost)));
}

#[test]
fn gpm_through_nvml_wrapper() {
    let path = scenario_file("gpm.toml", SCENARIO);
    let nvml = open(path.to_str().expect("utf-8"), Some("30")).expect("init");
    whole_gpu(&nvml);
    pre_hopper(&nvml);
    mig_instances(&nvml);
    assert!(call_count(c"nvmlGpmSampleGet") >= 8);
    assert!(call_count(c"nvmlGpmMetricsGet") >= 10);
    drop(nvml);
    // The golden fixture's GPU 0 answers its round numbers at a frozen time.
    let golden = open("builtin:golden", Some("10")).expect("golden");
    let d0 = golden.device_by_index(0).expect("gpu 0");
    let s = d0.gpm_sample().expect("sample");
    let got: Vec<f64> = metrics(
        &golden,
        &s,
        &s,
        &[
            GraphicsUtil,
            SmUtil,
            SmOccupancy,
            AnyTensorUtil,
            DramBwUtil,
            PcieTxPerSec,
            PcieRxPerSec,
        ],
    )
    .into_iter()
    .map(|r| r.expect("metric"))
    .collect();
    assert_eq!(got, [75.0, 60.0, 30.0, 40.0, 40.0, 100.0, 200.0]);
    assert!(!golden
        .device_by_index(1)
        .expect("gpu 1")
        .gpm_support()
        .expect("support"));
}
