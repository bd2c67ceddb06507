#!/usr/bin/env python3
"""Dumps what the real NVIDIA driver answers to every NVML query gpuwatch
makes (and a few it may make later), as JSON, with each call's latency.

Its purpose is to keep the simulator honest: run it on a machine with a GPU
(`scripts/real_gpu_check.py` does), compare with what `nvml-sim` returns, and
teach the simulator what it does not model. Needs the `nvidia-ml-py` package
(module `pynvml`). Usage: nvml_probe.py [--label idle] > probe.json
"""
import argparse
import ctypes
import json
import statistics
import sys
import time

import pynvml as N

# Field ids gpuwatch reads in batches (src/gpu/nvml.rs), with their names.
FIELDS = {
    186: "POWER_INSTANT", 83: "TOTAL_ENERGY", 82: "MEMORY_TEMP", 94: "PCIE_REPLAY",
    3: "ECC_SBE_VOL", 4: "ECC_DBE_VOL", 5: "ECC_SBE_AGG", 6: "ECC_DBE_AGG",
    29: "RETIRED_SBE", 30: "RETIRED_DBE", 31: "RETIRED_PENDING",
    142: "REMAPPED_COR", 143: "REMAPPED_UNC", 144: "REMAPPED_PENDING", 145: "REMAPPED_FAILURE",
    # The five violation counters of the fast tier (ns of throttling).
    74: "POWER_VIOLATION", 76: "SYNC_BOOST_VIOLATION",
    251: "CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN", 252: "CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN",
    253: "CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN",
    # The same three counters' ids from driver 580.82 on (CUDA 13.0 Update 1).
    269: "CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN_V13U1",
    270: "CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN_V13U1",
    271: "CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN_V13U1",
}


def plain(value):
    """Makes a pynvml answer JSON-friendly."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "_fields_"):
        return {name: plain(getattr(value, name)) for name, *_ in value._fields_}
    if hasattr(value, "__dict__"):
        return {k: plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return repr(value)


def call(fn, *args, repeat=5):
    """Runs one query `repeat` times; returns its value or error and the median latency."""
    times, value, error = [], None, None
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            value = fn(*args)
            error = None
        except N.NVMLError as e:
            error = str(e)
        except Exception as e:  # a binding without this function, say
            error = f"{type(e).__name__}: {e}"
        times.append(time.perf_counter() - start)
    result = {"us": round(statistics.median(times) * 1e6, 1)}
    if error is not None:
        result["error"] = error
    else:
        result["value"] = plain(value)
    return result


class FabricInfoV3(ctypes.Structure):
    """nvmlGpuFabricInfo_v3_t (nvml.h), declared here so the probe does not
    depend on the pynvml version's own declaration."""
    _fields_ = [
        ("version", ctypes.c_uint), ("clusterUuid", ctypes.c_ubyte * 16), ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint), ("state", ctypes.c_ubyte), ("healthMask", ctypes.c_uint),
        ("healthSummary", ctypes.c_ubyte),
    ]


class FabricInfoV2(ctypes.Structure):
    """nvmlGpuFabricInfo_v2_t: v3 without healthSummary."""
    _fields_ = FabricInfoV3._fields_[:-1]


def fabric_info(h):
    """nvmlDeviceGetGpuFabricInfoV as gpuwatch calls it (src/gpu/nvml/fabric.rs):
    v3, then v2 on ARGUMENT_VERSION_MISMATCH (25)."""
    fn = N._nvmlGetFunctionPointer("nvmlDeviceGetGpuFabricInfoV")
    for struct, number in ((FabricInfoV3, 3), (FabricInfoV2, 2)):
        info = struct()
        info.version = ctypes.sizeof(struct) | (number << 24)
        code = fn(h, ctypes.byref(info))
        if code == 25 and number == 3:
            continue
        if code != 0:
            raise N.NVMLError(code)
        out = plain(info)
        out["clusterUuid"] = bytes(info.clusterUuid).hex()
        out["struct"] = f"v{number}"
        return out
    raise N.NVMLError(25)


def probe_device(i):
    h = N.nvmlDeviceGetHandleByIndex(i)
    d = {}
    q = lambda name, fn, *a, **k: d.__setitem__(name, call(fn, h, *a, **k))
    q("name", N.nvmlDeviceGetName)
    q("uuid", N.nvmlDeviceGetUUID)
    q("serial", N.nvmlDeviceGetSerial)
    q("index", N.nvmlDeviceGetIndex)
    q("pci", N.nvmlDeviceGetPciInfo)
    q("utilization", N.nvmlDeviceGetUtilizationRates)
    q("encoder", N.nvmlDeviceGetEncoderUtilization)
    q("decoder", N.nvmlDeviceGetDecoderUtilization)
    q("memory", N.nvmlDeviceGetMemoryInfo)
    q("memory_v2", N.nvmlDeviceGetMemoryInfo, N.nvmlMemory_v2)
    q("temperature_gpu", N.nvmlDeviceGetTemperature, N.NVML_TEMPERATURE_GPU)
    for t in range(0, 8):
        q(f"temperature_threshold_{t}", N.nvmlDeviceGetTemperatureThreshold, t)
    q("power_usage_mw", N.nvmlDeviceGetPowerUsage)
    q("power_limit_mw", N.nvmlDeviceGetPowerManagementLimit)
    q("power_default_limit_mw", N.nvmlDeviceGetPowerManagementDefaultLimit)
    q("power_enforced_limit_mw", N.nvmlDeviceGetEnforcedPowerLimit)
    q("power_limit_constraints_mw", N.nvmlDeviceGetPowerManagementLimitConstraints)
    q("energy_mj", N.nvmlDeviceGetTotalEnergyConsumption)
    for c, cname in [(0, "graphics"), (1, "sm"), (2, "mem"), (3, "video")]:
        q(f"clock_{cname}_mhz", N.nvmlDeviceGetClockInfo, c)
        q(f"clock_max_{cname}_mhz", N.nvmlDeviceGetMaxClockInfo, c)
    q("pstate", N.nvmlDeviceGetPerformanceState)
    q("clock_events_current", N.nvmlDeviceGetCurrentClocksThrottleReasons)
    q("clock_events_supported", N.nvmlDeviceGetSupportedClocksThrottleReasons)
    for p, pname in [(0, "power"), (1, "thermal"), (2, "sync_boost"), (3, "board_limit"),
                     (4, "low_utilization"), (5, "reliability"), (10, "total_app_clocks"),
                     (11, "total_base_clocks")]:
        q(f"violation_{pname}", N.nvmlDeviceGetViolationStatus, p)
    q("num_fans", N.nvmlDeviceGetNumFans)
    q("fan_speed", N.nvmlDeviceGetFanSpeed)
    q("pcie_gen", N.nvmlDeviceGetCurrPcieLinkGeneration)
    q("pcie_width", N.nvmlDeviceGetCurrPcieLinkWidth)
    q("pcie_max_gen", N.nvmlDeviceGetMaxPcieLinkGeneration)
    q("pcie_max_width", N.nvmlDeviceGetMaxPcieLinkWidth)
    q("pcie_tx_kbps", N.nvmlDeviceGetPcieThroughput, 0)
    q("pcie_rx_kbps", N.nvmlDeviceGetPcieThroughput, 1)
    q("pcie_replay", N.nvmlDeviceGetPcieReplayCounter)
    q("ecc_mode", N.nvmlDeviceGetEccMode)
    for err, ename in [(0, "corrected"), (1, "uncorrected")]:
        for cnt, cname in [(0, "volatile"), (1, "aggregate")]:
            q(f"ecc_{ename}_{cname}", N.nvmlDeviceGetTotalEccErrors, err, cnt)
    q("retired_pages_sbe", N.nvmlDeviceGetRetiredPages, 0)
    q("retired_pages_dbe", N.nvmlDeviceGetRetiredPages, 1)
    q("retired_pages_pending", N.nvmlDeviceGetRetiredPagesPendingStatus)
    q("remapped_rows", N.nvmlDeviceGetRemappedRows)
    q("compute_mode", N.nvmlDeviceGetComputeMode)
    q("mig_mode", N.nvmlDeviceGetMigMode)
    q("persistence_mode", N.nvmlDeviceGetPersistenceMode)
    q("accounting_mode", N.nvmlDeviceGetAccountingMode)
    q("supported_event_types", N.nvmlDeviceGetSupportedEventTypes)
    q("processes_compute", N.nvmlDeviceGetComputeRunningProcesses)
    q("processes_graphics", N.nvmlDeviceGetGraphicsRunningProcesses)
    q("processes_mps", N.nvmlDeviceGetMPSComputeRunningProcesses)
    q("process_utilization", N.nvmlDeviceGetProcessUtilization, 0)
    q("nvlink_state_0", N.nvmlDeviceGetNvLinkState, 0)
    q("nvlink_state_17", N.nvmlDeviceGetNvLinkState, 17)
    q("fabric_info_v", fabric_info)
    q("bar1_memory", N.nvmlDeviceGetBAR1MemoryInfo)
    q("architecture", N.nvmlDeviceGetArchitecture)
    q("cuda_capability", N.nvmlDeviceGetCudaComputeCapability)
    q("vbios", N.nvmlDeviceGetVbiosVersion)
    q("board_part", N.nvmlDeviceGetBoardPartNumber)
    # Field values: one batch, as the agent reads them, each with its own status.
    start = time.perf_counter()
    try:
        values = N.nvmlDeviceGetFieldValues(h, list(FIELDS))
        batch = {}
        for fid, v in zip(FIELDS, values):
            entry = {"status": int(v.nvmlReturn), "type": int(v.valueType)}
            if v.nvmlReturn == 0:
                entry["value"] = {0: v.value.dVal, 1: v.value.uiVal, 2: v.value.ulVal,
                                  3: v.value.ullVal, 4: v.value.sllVal,
                                  5: v.value.siVal}.get(int(v.valueType), None)
                entry["timestamp_us"] = int(v.timestamp)
                entry["latency_us"] = int(v.latencyUsec)
            batch[f"{fid}_{FIELDS[fid]}"] = entry
        d["field_values"] = {"us": round((time.perf_counter() - start) * 1e6, 1), "value": batch}
    except Exception as e:
        d["field_values"] = {"error": str(e)}
    return d


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", default="probe")
    args = parser.parse_args()
    start = time.perf_counter()
    N.nvmlInit()
    report = {"label": args.label, "init_us": round((time.perf_counter() - start) * 1e6, 1)}
    report["driver"] = call(N.nvmlSystemGetDriverVersion, repeat=1)
    report["nvml"] = call(N.nvmlSystemGetNVMLVersion, repeat=1)
    report["cuda"] = call(N.nvmlSystemGetCudaDriverVersion_v2, repeat=1)
    count = N.nvmlDeviceGetCount()
    report["devices"] = [probe_device(i) for i in range(count)]
    # Event support: does registering for Xid events work here?
    try:
        es = N.nvmlEventSetCreate()
        h = N.nvmlDeviceGetHandleByIndex(0)
        N.nvmlDeviceRegisterEvents(h, N.nvmlEventTypeXidCriticalError, es)
        try:
            N.nvmlEventSetWait_v2(es, 100)
            report["xid_events"] = "registered; an event arrived"
        except N.NVMLError as e:
            report["xid_events"] = f"registered; wait 100 ms: {e}"
        N.nvmlEventSetFree(es)
    except N.NVMLError as e:
        report["xid_events"] = f"error: {e}"
    N.nvmlShutdown()
    json.dump(report, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
