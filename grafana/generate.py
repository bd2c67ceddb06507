#!/usr/bin/env python3
"""Generates the gpuwatch Grafana dashboards (grafana/dashboards/*.json).

The JSON files are what ships; this script only keeps their panels
consistent (datasource variable, units, name join, layout). Edit it, run
`python3 grafana/generate.py`, commit both. `cargo test --test grafana`
evaluates every query of the JSON against a real Prometheus.
"""

import json
import os

DS = {"type": "prometheus", "uid": "${datasource}"}
# Selector of the chosen nodes and GPUs, and the join that adds the GPU name.
SEL = 'instance=~"$instance", gpu=~"$gpu"'
NAME = ' * on(instance, gpu, uuid) group_left(name) gpuwatch_gpu_info{%s}' % SEL
GPU_LEGEND = "{{instance}} GPU {{gpu}} {{name}}"


class Layout:
    """Places panels left to right in a 24-column grid, rows below."""

    def __init__(self):
        self.y = 0
        self.x = 0
        self.row_h = 0
        self.next_id = 1
        self.panels = []

    def _id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def row(self, title):
        self.newline()
        self.panels.append(
            {
                "type": "row",
                "id": self._id(),
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
                "panels": [],
            }
        )
        self.y += 1

    def newline(self):
        if self.x:
            self.y += self.row_h
            self.x = 0
            self.row_h = 0

    def add(self, panel, w, h):
        if self.x + w > 24:
            self.newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        self.panels.append(panel)


def target(expr, legend="", ref="A", instant=False, table=False):
    t = {
        "datasource": DS,
        "refId": ref,
        "expr": expr,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "instant": instant,
    }
    if table:
        t["format"] = "table"
    return t


def targets(*items, instant=False, table=False):
    out = []
    for i, item in enumerate(items):
        expr, legend = item if isinstance(item, tuple) else (item, "")
        out.append(target(expr, legend, chr(ord("A") + i), instant, table))
    return out


def thresholds(*steps):
    """steps: (value or None, color) pairs."""
    return {
        "mode": "absolute",
        "steps": [{"color": c, "value": v} for v, c in steps],
    }


GREEN = thresholds((None, "green"))


def field_config(unit, mn=None, mx=None, th=None, mappings=None, custom=None, overrides=None, decimals=None):
    d = {"unit": unit, "thresholds": th or GREEN, "mappings": mappings or []}
    if mn is not None:
        d["min"] = mn
    if mx is not None:
        d["max"] = mx
    if decimals is not None:
        d["decimals"] = decimals
    if custom is not None:
        d["custom"] = custom
    d["color"] = {"mode": "palette-classic"} if custom is not None and "drawStyle" in custom else {"mode": "thresholds"}
    return {"defaults": d, "overrides": overrides or []}


def timeseries(title, tgts, unit, desc="", mn=None, mx=None, stack=False, overrides=None, th=None):
    custom = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 10 if stack else 0,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
        "thresholdsStyle": {"mode": "off"},
    }
    return {
        "type": "timeseries",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": field_config(unit, mn, mx, th=th, custom=custom, overrides=overrides),
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    }


def stat(title, tgts, unit, desc="", th=None, mappings=None, text_mode="auto", color_mode="value", decimals=None):
    return {
        "type": "stat",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": field_config(unit, th=th, mappings=mappings, decimals=decimals),
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": color_mode,
            "graphMode": "none",
            "justifyMode": "auto",
            "textMode": text_mode,
            "orientation": "auto",
        },
    }


def gauge(title, tgts, unit, desc="", mn=0, mx=1, th=None):
    return {
        "type": "gauge",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": field_config(unit, mn, mx, th=th),
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "showThresholdLabels": False,
            "showThresholdMarkers": True,
        },
    }


def bargauge(title, tgts, unit, desc="", mn=0, mx=None, th=None):
    return {
        "type": "bargauge",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": field_config(unit, mn, mx, th=th),
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "displayMode": "gradient",
            "orientation": "horizontal",
            "showUnfilled": True,
        },
    }


def state_timeline(title, tgts, desc="", mappings=None):
    return {
        "type": "state-timeline",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": field_config(
            "none",
            th=thresholds((None, "green"), (1, "orange")),
            mappings=mappings,
            custom={"fillOpacity": 70, "lineWidth": 0},
        ),
        "options": {
            "mergeValues": True,
            "showValue": "never",
            "rowHeight": 0.9,
            "alignValue": "left",
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "single", "sort": "none"},
        },
    }


def table(title, tgts, unit, columns, desc="", sort_by=None, exclude=("Time", "job", "__name__")):
    """columns: {field name: (display name, unit or None)}; tgts instant table queries."""
    overrides = []
    rename = {}
    for field, (display, col_unit) in columns.items():
        rename[field] = display
        if col_unit:
            overrides.append(
                {
                    "matcher": {"id": "byName", "options": display},
                    "properties": [{"id": "unit", "value": col_unit}],
                }
            )
    transformations = []
    if len(tgts) > 1:
        transformations.append({"id": "merge", "options": {}})
    transformations.append(
        {
            "id": "organize",
            "options": {
                "excludeByName": {name: True for name in exclude},
                "indexByName": {},
                "renameByName": rename,
            },
        }
    )
    panel = {
        "type": "table",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": field_config(unit, custom={"align": "auto", "filterable": True}, overrides=overrides),
        "options": {"showHeader": True, "cellHeight": "sm", "footer": {"show": False, "reducer": ["sum"]}},
        "transformations": transformations,
    }
    if sort_by:
        panel["options"]["sortBy"] = [{"displayName": sort_by, "desc": True}]
    return panel


def text(title, content):
    return {
        "type": "text",
        "title": title,
        "options": {"mode": "markdown", "content": content},
    }


def var_datasource():
    return {
        "type": "datasource",
        "name": "datasource",
        "label": "Data source",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
    }


def var_query(name, label, query, multi):
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1},
        "current": {},
        "hide": 0,
        "includeAll": multi,
        "allValue": ".*" if multi else None,
        "multi": multi,
        "options": [],
        "refresh": 2,
        "regex": "",
        "sort": 3 if name == "gpu" else 1,
    }


def variables(multi):
    v = [
        var_datasource(),
        var_query("instance", "Node", "label_values(gpuwatch_gpu_info, instance)", multi),
        var_query("gpu", "GPU", 'label_values(gpuwatch_gpu_info{instance=~"$instance"}, gpu)', multi),
    ]
    for item in v:
        if item.get("allValue") is None:
            item.pop("allValue", None)
    return v


def dashboard(uid, title, desc, layout, multi, tags):
    return {
        "uid": uid,
        "title": title,
        "description": desc,
        "tags": ["gpuwatch", "gpu", "nvidia"] + tags,
        "editable": True,
        "graphTooltip": 1,
        "id": None,
        "links": [
            {
                "type": "dashboards",
                "tags": ["gpuwatch"],
                "asDropdown": True,
                "title": "gpuwatch",
                "includeVars": True,
                "keepTime": True,
            }
        ],
        "panels": layout.panels,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "templating": {"list": variables(multi)},
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
    }


def s(extra=""):
    """The selector, with extra matchers."""
    return "{" + SEL + (", " + extra if extra else "") + "}"


def named(expr):
    """Adds the GPU's name label to a per-GPU expression."""
    return "(" + expr + ")" + NAME


TEMP_TH = thresholds((None, "green"), (75, "yellow"), (85, "red"))
RATIO_TH = thresholds((None, "green"), (0.8, "yellow"), (0.95, "red"))
BAD_TH = thresholds((None, "green"), (1, "red"))
UP_MAP = [{"type": "value", "options": {"0": {"text": "LOST", "color": "red"}, "1": {"text": "UP", "color": "green"}}}]
ONOFF_MAP = [{"type": "value", "options": {"0": {"text": "off"}, "1": {"text": "on"}}}]
ACTIVE_MAP = [{"type": "value", "options": {"0": {"text": "-", "color": "transparent"}, "1": {"text": "active", "color": "orange"}}}]
HEALTH_MAP = [{"type": "value", "options": {"0": {"text": "healthy", "color": "green"}, "1": {"text": "degraded", "color": "orange"},
                                            "2": {"text": "unhealthy", "color": "red"}}}]
REGISTERED_MAP = [{"type": "value", "options": {"0": {"text": "NOT REGISTERED", "color": "red"}, "1": {"text": "registered", "color": "green"}}}]
LINK_MAP = [{"type": "value", "options": {"0": {"text": "down", "color": "red"}, "1": {"text": "up", "color": "green"}}}]
HEALTH_DESC = ("The agent's health verdict (gpuwatch_gpu_health): healthy, degraded or unhealthy; "
               "the reasons and what to do are in the agent's /api/v1/health and web view.")


def verdict():
    """The verdict as a number per GPU: 0 healthy, 1 degraded, 2 unhealthy
    (gpuwatch_gpu_health has one series per state, the current one at 1)."""
    return ("max by (instance, gpu, uuid) ((gpuwatch_gpu_health%s == 1) * 0 or (gpuwatch_gpu_health%s == 1) * 1"
            " or (gpuwatch_gpu_health%s == 1) * 2)" % (s('state="healthy"'), s('state="degraded"'), s('state="unhealthy"')))


MISSING = 'gpuwatch_pci_gpus{instance=~"$instance"} - gpuwatch_gpus{instance=~"$instance"}'
MISSING_DESC = ("NVIDIA GPUs on the node's PCI bus that NVML does not list (gpuwatch_pci_gpus - gpuwatch_gpus): "
                "fallen off the bus or failed to initialise. Empty where the agent does not scan the bus.")


FLEET_RULES = (" Read from the recording rules of group gpuwatch.fleet (deploy/prometheus/gpuwatch-rules.yml), one series "
               "per node: the GPU choice does not apply.")


def node_rule(metric_ops, extra="", level="instance"):
    """A fleet recording rule (one series per node) of the selected nodes."""
    return '%s:gpuwatch_%s{instance=~"$instance"%s}' % (level, metric_ops, ", " + extra if extra else "")


def fleet():
    L = Layout()
    L.row("Overview")
    L.add(stat("Nodes", targets('count(count by (instance) (gpuwatch_gpu_info{instance=~"$instance"}))'), "short",
               "Nodes whose agent reports GPUs."), 3, 4)
    L.add(stat("GPUs", targets("count(gpuwatch_gpu_info%s)" % s()), "short", "GPUs enumerated by NVML, lost ones included."), 3, 4)
    L.add(stat("GPUs lost", targets("count(gpuwatch_gpu_up%s == 0) or vector(0)" % s()), "short",
               "GPUs that returned GPU_IS_LOST (gpuwatch_gpu_up == 0).", th=BAD_TH, color_mode="background"), 3, 4)
    L.add(stat("Stale agents", targets('count(gpuwatch_up{instance=~"$instance"} == 0) or vector(0)'), "short",
               "Agents whose snapshot is missing or stale (hung NVML).", th=BAD_TH, color_mode="background"), 3, 4)
    L.add(stat("Average utilization", targets("sum(%s * %s) / sum(%s)" % (node_rule("gpu_utilization_ratio:avg"),
                                                                        node_rule("gpu_utilization_ratio:count"),
                                                                        node_rule("gpu_utilization_ratio:count"))),
               "percentunit", "Over every GPU of the selected nodes." + FLEET_RULES), 3, 4)
    L.add(stat("Memory used", targets("sum(%s) / sum(%s)" % (node_rule("memory_used_bytes:sum"), node_rule("memory_total_bytes:sum"))),
               "percentunit", "Used over total framebuffer memory of every GPU of the selected nodes." + FLEET_RULES,
               th=RATIO_TH), 3, 4)
    L.add(stat("Power draw", targets("sum(%s)" % node_rule("power_usage_watts:sum")), "watt",
               "Of every GPU of the selected nodes." + FLEET_RULES), 3, 4)
    L.add(stat("Xid errors", targets("sum(gpuwatch_xid_errors_total%s) or vector(0)" % s()), "short",
               "Xid critical errors counted since each agent started.", th=BAD_TH, color_mode="background"), 3, 4)

    L.row("Alerts")
    L.add(stat("Firing alerts", targets('count(ALERTS{alertstate="firing", instance=~"$instance"}) or vector(0)'), "short",
               "Alerts of deploy/prometheus/gpuwatch-rules.yml (evaluated by Prometheus) now firing.", th=BAD_TH, color_mode="background"), 4, 6)
    L.add(table("Alerts pending and firing", targets(
        ('sum by (alertname, alertstate, severity, instance, gpu) (ALERTS{instance=~"$instance"})', ""),
        instant=True, table=True), "short", {
            "Value #A": ("Series", None),
        }, "Every pending or firing alert of the bundled Prometheus rules, per node and GPU.",
        exclude=("Time", "job", "__name__")), 20, 6)

    L.row("Health")
    L.add(stat("GPUs by health", targets(("sum by (state) (gpuwatch_gpu_health%s)" % s(), "{{state}}")), "short",
               HEALTH_DESC, text_mode="value_and_name"), 6, 4)
    L.add(stat("Missing from the driver", targets("sum(%s)" % MISSING), "short", MISSING_DESC, th=BAD_TH,
               color_mode="background"), 6, 4)
    L.add(stat("Not in the NVLink fabric", targets("count(gpuwatch_fabric_registered%s == 0) or vector(0)" % s()), "short",
               "GPUs whose NVLink fabric registration is not completed with success (NVSwitch systems): they cannot run "
               "multi-GPU jobs.", th=BAD_TH, color_mode="background"), 6, 4)
    L.add(stat("NVLink links down", targets("sum(gpuwatch_nvlink_links_down%s) or vector(0)" % s()), "short",
               "NVLink links reported down, over the selected GPUs (gpuwatch_nvlink_links_down, per GPU in the default "
               "/metrics; which links: the GPU dashboard, /api/v1/gpus or the agent's web view).", th=BAD_TH,
               color_mode="background"), 6, 4)
    L.add(state_timeline("Health verdict per GPU", targets((named(verdict()), GPU_LEGEND)), HEALTH_DESC,
                         mappings=HEALTH_MAP), 12, 8)
    L.add(timeseries("Xid errors by code", targets(
        ("sum by (xid) (increase(gpuwatch_xid_errors_total%s[$__rate_interval]))" % s(), "Xid {{xid}}")), "short",
        "Xid errors per interval over the selected GPUs, by code (NVIDIA's catalog says what each asks for: "
        "see the alert's action annotation or gpuwatch events).", mn=0), 12, 8)

    L.row("Utilization and memory")
    L.add(timeseries("Utilization per node", targets((node_rule("gpu_utilization_ratio:avg"), "{{instance}}")),
                     "percentunit", "Average over each node's GPUs." + FLEET_RULES, mn=0, mx=1), 12, 8)
    L.add(timeseries("Memory used per node", targets(("%s / %s" % (
        node_rule("memory_used_bytes:sum"), node_rule("memory_total_bytes:sum")), "{{instance}}")),
        "percentunit", "Used over total framebuffer memory of each node's GPUs." + FLEET_RULES, mn=0, mx=1), 12, 8)
    L.add(timeseries("GPU utilization", targets((named("gpuwatch_gpu_utilization_ratio%s" % s()), GPU_LEGEND)),
                     "percentunit", mn=0, mx=1), 12, 8)
    L.add(timeseries("Memory used", targets((named("gpuwatch_memory_used_bytes%s / gpuwatch_memory_total_bytes%s" % (s(), s())), GPU_LEGEND)),
                     "percentunit", "Framebuffer memory used over total.", mn=0, mx=1), 12, 8)

    L.row("Temperature and power")
    L.add(timeseries("GPU temperature", targets((named("gpuwatch_gpu_temperature_celsius%s" % s()), GPU_LEGEND)), "celsius"), 12, 8)
    L.add(timeseries("Power draw", targets((named("gpuwatch_power_usage_watts%s" % s()), GPU_LEGEND)), "watt"), 12, 8)
    L.add(bargauge("Power over limit", targets((named("gpuwatch_power_usage_watts%s / gpuwatch_power_limit_watts%s" % (s(), s())), GPU_LEGEND), instant=True),
                   "percentunit", "Power draw over the enforced power limit.", mx=1, th=RATIO_TH), 12, 8)
    L.add(bargauge("Temperature below slowdown",
                   targets((named('gpuwatch_temperature_threshold_celsius%s - ignoring(threshold) gpuwatch_gpu_temperature_celsius%s'
                                  % (s('threshold="slowdown"'), s())), GPU_LEGEND), instant=True),
                   "celsius", "Degrees left before the GPU's own slowdown threshold.",
                   th=thresholds((None, "red"), (5, "yellow"), (15, "green"))), 12, 8)

    L.row("Throttling and health")
    L.add(timeseries("GPUs per active clock-event reason",
                     targets(('sum by (reason) (gpuwatch_clock_event_active%s)' % s('reason!="gpu_idle"'), "{{reason}}")),
                     "short", "How many selected GPUs have each clock-event (throttle) reason active; idle excluded.", mn=0), 12, 8)
    L.add(timeseries("GPUs throttled per reason (fleet)",
                     targets(('sum by (reason) (%s)' % node_rule("clock_event_duration_seconds:rate5m", 'reason!="gpu_idle"',
                                                                  level="instance_reason"), "{{reason}}")),
                     "short", "GPU-seconds clock-limited per second over the selected nodes, per reason (NVML violation "
                     "counters): how many GPUs' worth were throttled on average over 5 minutes." + FLEET_RULES, mn=0), 12, 8)
    L.add(timeseries("Time throttled",
                     targets(('sum by (instance, gpu, reason) (rate(gpuwatch_clock_event_duration_seconds_total%s[$__rate_interval]))' % s(),
                              "{{instance}} GPU {{gpu}} {{reason}}")),
                     "percentunit", "Share of time each GPU spent clock-limited, per reason (NVML violation counters).", mn=0), 12, 8)
    L.add(timeseries("Xid errors",
                     targets(('sum by (instance, gpu, xid) (increase(gpuwatch_xid_errors_total%s[$__rate_interval]))' % s(),
                              "{{instance}} GPU {{gpu}} Xid {{xid}}")),
                     "short", "Xid critical errors per interval.", mn=0), 12, 8)
    L.add(table("GPU health", targets(
        ("sum by (instance, gpu) (gpuwatch_ecc_errors_total%s)" % s('type="uncorrected", counter="volatile"'), ""),
        ("sum by (instance, gpu) (gpuwatch_ecc_errors_total%s)" % s('type="corrected", counter="volatile"'), ""),
        ("sum by (instance, gpu) (gpuwatch_retired_pages%s)" % s(), ""),
        ("sum by (instance, gpu) (gpuwatch_remapped_rows_pending%s + gpuwatch_retired_pages_pending%s)" % (s(), s()), ""),
        ("sum by (instance, gpu) (gpuwatch_xid_errors_total%s)" % s(), ""),
        ("min by (instance, gpu) (gpuwatch_gpu_up%s)" % s(), ""),
        instant=True, table=True), "short", {
            "Value #A": ("Uncorrected ECC (volatile)", None),
            "Value #B": ("Corrected ECC (volatile)", None),
            "Value #C": ("Retired pages", None),
            "Value #D": ("Pending retire/remap", None),
            "Value #E": ("Xid errors", None),
            "Value #F": ("Up", None),
        }, "ECC, retired pages, pending remaps and Xid counts per GPU; a GPU without ECC has empty ECC cells."), 12, 8)

    L.row("Hottest and fullest GPUs")
    L.add(table("GPUs by temperature", targets(
        named("gpuwatch_gpu_temperature_celsius%s" % s()),
        named("gpuwatch_memory_used_bytes%s / gpuwatch_memory_total_bytes%s" % (s(), s())),
        named("gpuwatch_memory_used_bytes%s" % s()),
        named("gpuwatch_gpu_utilization_ratio%s" % s()),
        named("gpuwatch_power_usage_watts%s" % s()),
        instant=True, table=True), "celsius", {
            "Value #A": ("Temperature", "celsius"),
            "Value #B": ("Memory used %", "percentunit"),
            "Value #C": ("Memory used", "bytes"),
            "Value #D": ("Utilization", "percentunit"),
            "Value #E": ("Power", "watt"),
        }, "Every selected GPU, hottest first; sort by any column.", sort_by="Temperature",
        exclude=("Time", "job", "uuid", "__name__")), 16, 10)
    L.add(bargauge("Fullest GPUs", targets(
        ("topk(10, gpuwatch_memory_used_bytes%s / gpuwatch_memory_total_bytes%s)%s" % (s(), s(), NAME), GPU_LEGEND),
        instant=True), "percentunit", "The ten GPUs with the least free framebuffer memory.", mx=1, th=RATIO_TH), 8, 10)

    L.row("Workload depth (GPM)")
    gpm_desc = " From GPM (Hopper and newer); GPUs without GPM have no series."
    L.add(timeseries("SM active", targets((named("gpuwatch_gpm_sm_active_ratio%s" % s()), GPU_LEGEND)), "percentunit",
                     "Share of time the SMs had work, averaged over all SMs: unlike utilization, a small kernel reads small." + gpm_desc,
                     mn=0, mx=1), 12, 8)
    L.add(timeseries("SM occupancy", targets((named("gpuwatch_gpm_sm_occupancy_ratio%s" % s()), GPU_LEGEND)), "percentunit",
                     "Resident warps over the maximum." + gpm_desc, mn=0, mx=1), 12, 8)
    L.add(timeseries("Tensor active", targets((named("gpuwatch_gpm_tensor_active_ratio%s" % s()), GPU_LEGEND)), "percentunit",
                     "Share of time any tensor pipe was active." + gpm_desc, mn=0, mx=1), 12, 8)
    L.add(timeseries("DRAM bandwidth used", targets((named("gpuwatch_gpm_dram_active_ratio%s" % s()), GPU_LEGEND)), "percentunit",
                     "Share of the peak DRAM bandwidth." + gpm_desc, mn=0, mx=1), 12, 8)
    L.add(timeseries("PCIe traffic", targets(
        ('sum by (instance, gpu, direction) (gpuwatch_gpm_pcie_bytes_per_second%s)' % s(), "{{instance}} GPU {{gpu}} {{direction}}")),
        "Bps", "PCIe data sent (tx) and received (rx) by each GPU." + gpm_desc, mn=0), 12, 8)
    L.add(timeseries("NVLink traffic", targets(
        ('sum by (instance, gpu, direction) (gpuwatch_gpm_nvlink_bytes_per_second%s)' % s(), "{{instance}} GPU {{gpu}} {{direction}}")),
        "Bps", "NVLink data over all links of each GPU." + gpm_desc, mn=0), 12, 8)
    return dashboard("gpuwatch-fleet", "gpuwatch / Fleet",
                     "All nodes and GPUs watched by gpuwatch: load, memory, temperature, power, throttling, health.",
                     L, True, ["fleet"])


def detail():
    L = Layout()
    L.row("Identity and state")
    L.add(table("GPU", targets("gpuwatch_gpu_info%s" % s(), instant=True, table=True), "none", {
        "name": ("Name", None), "pci_bus_id": ("PCI bus", None), "driver_version": ("Driver", None),
        "cuda_version": ("CUDA", None), "serial": ("Serial", None), "uuid": ("UUID", None),
    }, "Identity from gpuwatch_gpu_info.", exclude=("Time", "job", "__name__", "Value", "instance", "gpu")), 12, 4)
    L.add(stat("State", targets("gpuwatch_gpu_up%s" % s()), "none", mappings=UP_MAP, color_mode="background"), 3, 4)
    L.add(stat("Performance state", targets("gpuwatch_performance_state%s" % s()), "prefix:P", "0 = P0, maximum performance."), 3, 4)
    L.add(stat("Compute mode", targets(("gpuwatch_compute_mode%s == 1" % s(), "{{mode}}")), "none", text_mode="name"), 3, 4)
    L.add(stat("MIG", targets("gpuwatch_mig_enabled%s" % s()), "none", mappings=ONOFF_MAP), 3, 4)
    L.add(stat("GPU lost", targets(("gpuwatch_gpu_lost%s" % s(), "{{reason}}")), "none",
               "Present only while the GPU is lost; the legend is NVML's reason.", text_mode="name", color_mode="background",
               th=thresholds((None, "red"))), 12, 3)
    L.add(stat("Collector groups failing", targets("count(gpuwatch_collector_success%s == 0) or 0 * count(gpuwatch_collector_success%s)"
                                                   % (s(), s())), "short",
               "Field groups whose NVML calls failed on their last read. Filled by detail set collector_groups "
               "([exporter] detail); empty at the default (NVML errors: the Agent row).", th=BAD_TH), 6, 3)
    L.add(stat("Processes", targets("gpuwatch_gpu_processes%s" % s()), "short"), 6, 3)

    L.row("Health")
    L.add(stat("Health verdict", targets(verdict()), "none", HEALTH_DESC, mappings=HEALTH_MAP,
               th=thresholds((None, "green"), (1, "orange"), (2, "red")), color_mode="background"), 4, 4)
    L.add(stat("Recovery action", targets(("gpuwatch_recovery_action%s == 1" % s(), "{{action}}")), "none",
               "What the driver says the GPU needs (NVML field 230): none, gpu_reset, node_reboot, drain_p2p, drain_and_reset.",
               text_mode="name"), 4, 4)
    L.add(stat("NVLink links down", targets("gpuwatch_nvlink_links_down%s" % s()), "short",
               "Links reported down (gpuwatch_nvlink_links_down); empty without NVLink. Which ones: the NVLink links "
               "panel (detail set nvlink_links), /api/v1/gpus or the agent's web view.", th=BAD_TH,
               color_mode="background"), 4, 4)
    L.add(stat("NVLink fabric", targets("gpuwatch_fabric_registered%s" % s()), "none",
               "Whether the GPU joined the NVSwitch fabric (registration completed with success); empty without a fabric. "
               "A GPU outside it cannot run multi-GPU jobs.", mappings=REGISTERED_MAP, color_mode="background"), 4, 4)
    L.add(stat("Fabric state and health", targets(
        ("gpuwatch_fabric_state%s == 1" % s(), "{{state}}"),
        ("gpuwatch_fabric_health%s == 1" % s(), "fabric {{health}}")), "none",
        "Registration progress (not_started, in_progress, completed) and the fabric's health summary.", text_mode="name"), 4, 4)
    L.add(stat("GPUs missing from the driver", targets(MISSING), "short", MISSING_DESC, th=BAD_TH,
               color_mode="background"), 4, 4)
    L.add(timeseries("Xid errors by code", targets(
        ("sum by (xid) (increase(gpuwatch_xid_errors_total%s[$__rate_interval]))" % s(), "Xid {{xid}}")), "short",
        "Xid errors per interval, by code.", mn=0), 8, 8)
    L.add(table("Xid: what to do", targets(("gpuwatch_xid_errors_total%s * on(instance, gpu, uuid, xid) "
                                             "group_left(mnemonic, action) gpuwatch_xid_info%s" % (s(), s()), ""),
                                            instant=True, table=True),
                "short", {"xid": ("Xid", None), "mnemonic": ("Mnemonic", None), "action": ("Do first", None),
                          "Value": ("Count", None)},
                "Each Xid counted on the GPU with NVIDIA's mnemonic and the action to take first (the Xid catalog).",
                exclude=("Time", "job", "__name__", "instance", "uuid")), 8, 8)
    L.add(timeseries("NVLink errors", targets(
        ("sum by (instance, gpu) (rate(gpuwatch_nvlink_gpu_errors_total%s[$__rate_interval]))" % s(), "all links"),
        ("sum by (type) (rate(gpuwatch_nvlink_errors_total%s[$__rate_interval]))" % s(), "{{type}}")), "short",
        "NVLink errors per second over all links; by type (replay, recovery, crc_flit, crc_data) with detail set "
        "nvlink_links.", mn=0), 8, 8)
    L.add(state_timeline("NVLink links (detail set nvlink_links)", targets(("gpuwatch_nvlink_up%s" % s(), "link {{link}}")),
                         "Each NVLink link up or down over time. Filled by detail set nvlink_links ([exporter] detail); "
                         "at the default, /api/v1/gpus and the agent's web view name the links down.",
                         mappings=LINK_MAP), 8, 8)

    L.row("Utilization")
    L.add(timeseries("Utilization", targets(
        ("gpuwatch_gpu_utilization_ratio%s" % s(), "GPU"),
        ("gpuwatch_memory_utilization_ratio%s" % s(), "memory controller"),
        ("gpuwatch_encoder_utilization_ratio%s" % s(), "encoder"),
        ("gpuwatch_decoder_utilization_ratio%s" % s(), "decoder")), "percentunit", mn=0, mx=1), 18, 8)
    L.add(gauge("GPU utilization", targets("gpuwatch_gpu_utilization_ratio%s" % s()), "percentunit", th=RATIO_TH), 6, 8)

    L.row("Memory")
    L.add(timeseries("Framebuffer memory", targets(
        ("gpuwatch_memory_used_bytes%s" % s(), "used"),
        ("gpuwatch_memory_free_bytes%s" % s(), "free"),
        ("gpuwatch_memory_reserved_bytes%s" % s(), "reserved"),
        ("gpuwatch_memory_total_bytes%s" % s(), "total")), "bytes", mn=0), 18, 8)
    L.add(gauge("Memory used", targets("gpuwatch_memory_used_bytes%s / gpuwatch_memory_total_bytes%s" % (s(), s())),
                "percentunit", th=RATIO_TH), 6, 8)

    L.row("Temperature")
    dashed = {"matcher": {"id": "byRegexp", "options": ".*threshold.*"},
              "properties": [{"id": "custom.lineStyle", "value": {"dash": [10, 10], "fill": "dash"}},
                             {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}}]}
    L.add(timeseries("Temperature and the GPU's thresholds", targets(
        ("gpuwatch_gpu_temperature_celsius%s" % s(), "GPU"),
        ("gpuwatch_memory_temperature_celsius%s" % s(), "memory"),
        ("gpuwatch_temperature_threshold_celsius%s" % s('threshold=~"slowdown|shutdown"'), "{{threshold}} threshold")),
        "celsius", "Dashed: this GPU's own slowdown and shutdown thresholds (gpuwatch_temperature_threshold_celsius).",
        overrides=[dashed]), 18, 8)
    L.add(table("Thresholds", targets(("gpuwatch_temperature_threshold_celsius%s" % s(), ""), instant=True, table=True),
                "celsius", {"threshold": ("Threshold", None), "Value": ("Temperature", "celsius")},
                exclude=("Time", "job", "__name__", "instance", "gpu", "uuid")), 6, 8)

    L.row("Power and energy")
    L.add(timeseries("Power", targets(
        ("gpuwatch_power_usage_watts%s" % s(), "draw"),
        ("rate(gpuwatch_energy_consumption_joules_total%s[$__rate_interval])" % s(), "draw (from energy counter)"),
        ("gpuwatch_power_limit_watts%s" % s(), "enforced limit"),
        ("gpuwatch_power_default_limit_watts%s" % s(), "default limit")), "watt", mn=0), 18, 8)
    L.add(stat("Energy in range", targets("increase(gpuwatch_energy_consumption_joules_total%s[$__range])" % s()), "joule",
               "Energy the GPU consumed over the dashboard's time range."), 6, 4)
    L.add(gauge("Power over limit", targets("gpuwatch_power_usage_watts%s / gpuwatch_power_limit_watts%s" % (s(), s())),
                "percentunit", th=RATIO_TH), 6, 4)

    L.row("Clocks and throttling")
    L.add(timeseries("Clocks vs max", targets(
        ("gpuwatch_clock_hertz%s" % s(), "{{clock}}"),
        ("gpuwatch_clock_max_hertz%s" % s(), "{{clock}} max")), "hertz", mn=0,
        overrides=[{"matcher": {"id": "byRegexp", "options": ".* max"},
                    "properties": [{"id": "custom.lineStyle", "value": {"dash": [10, 10], "fill": "dash"}}]}]), 12, 8)
    L.add(bargauge("Clock over max", targets(("gpuwatch_clock_hertz%s / gpuwatch_clock_max_hertz%s" % (s(), s()), "{{clock}}")),
                   "percentunit", mx=1), 12, 8)
    L.add(state_timeline("Clock-event reasons", targets(("gpuwatch_clock_event_active%s" % s(), "{{reason}}")),
                         "Each NVML clock-event (throttle) reason over time.", mappings=ACTIVE_MAP), 12, 9)
    L.add(timeseries("Time throttled per reason",
                     targets(("rate(gpuwatch_clock_event_duration_seconds_total%s[$__rate_interval])" % s(), "{{reason}}")),
                     "percentunit", "Share of time clock-limited, from NVML's violation counters.", mn=0), 12, 9)

    L.row("Processes")
    L.add(table("Processes", targets(("gpuwatch_process_memory_used_bytes%s" % s(), ""), instant=True, table=True), "bytes", {
        "pid": ("PID", None), "process_name": ("Process", None), "type": ("Type", None), "Value": ("GPU memory", "bytes"),
    }, "Filled by detail set processes ([exporter] detail); at the default, /api/v1/gpus and the agent's web view "
       "list the processes.", sort_by="GPU memory", exclude=("Time", "job", "__name__", "instance", "gpu", "uuid")), 12, 9)
    L.add(timeseries("Process memory", targets(
        ("sum by (process_name, pid) (gpuwatch_process_memory_used_bytes%s)" % s(), "{{process_name}} ({{pid}})")),
        "bytes", "Filled by detail set processes ([exporter] detail).", stack=True, mn=0), 12, 9)

    L.row("Reliability")
    L.add(timeseries("ECC errors", targets(("gpuwatch_ecc_errors_total%s" % s(), "{{type}} {{counter}}")), "short",
                     "Volatile counters reset at driver reload; aggregate ones persist.", mn=0), 8, 8)
    L.add(timeseries("Retired pages and remapped rows", targets(
        ("gpuwatch_retired_pages%s" % s(), "retired {{cause}}"),
        ("gpuwatch_retired_pages_pending%s" % s(), "retirement pending"),
        ("gpuwatch_remapped_rows%s" % s(), "remapped {{cause}}"),
        ("gpuwatch_remapped_rows_pending%s" % s(), "remap pending"),
        ("gpuwatch_remapped_rows_failure%s" % s(), "remap failed")), "short", mn=0), 8, 8)
    L.add(timeseries("Xid errors", targets(("gpuwatch_xid_errors_total%s" % s(), "Xid {{xid}}")), "short",
                     "Xid critical errors since the agent started.", mn=0), 8, 8)
    L.add(stat("ECC", targets("gpuwatch_ecc_enabled%s" % s()), "none", mappings=ONOFF_MAP), 4, 4)
    L.add(table("Last Xid", targets(("time() - gpuwatch_xid_last_seen_timestamp_seconds%s" % s(), ""), instant=True, table=True),
                "s", {"xid": ("Xid", None), "Value": ("Seen ago", "s")},
                exclude=("Time", "job", "__name__", "instance", "gpu", "uuid")), 8, 4)

    L.row("PCIe, fans and device")
    L.add(stat("PCIe link", targets(
        ("gpuwatch_pcie_link_generation%s" % s(), "generation"),
        ("gpuwatch_pcie_link_max_generation%s" % s(), "max generation"),
        ("gpuwatch_pcie_link_width%s" % s(), "width"),
        ("gpuwatch_pcie_link_max_width%s" % s(), "max width")), "none",
        "A link below its maximum generation or width throttles host transfers.", text_mode="value_and_name"), 12, 4)
    L.add(timeseries("Fan speed", targets(("gpuwatch_fan_speed_ratio%s" % s(), "fan {{fan}}")), "percentunit",
                     "Absent on passively cooled GPUs.", mn=0, mx=1), 12, 8)
    L.add(state_timeline("Collector groups", targets(("gpuwatch_collector_success%s" % s(), "{{group}}")),
                         "1 when the group's NVML calls succeeded on their last read. Filled by detail set "
                         "collector_groups ([exporter] detail).",
                         mappings=[{"type": "value", "options": {"0": {"text": "failing", "color": "red"},
                                                                 "1": {"text": "ok", "color": "green"}}}]), 12, 8)

    L.row("Agent")
    L.add(stat("Agent fresh", targets('gpuwatch_up{instance=~"$instance"}'), "none",
               mappings=[{"type": "value", "options": {"0": {"text": "STALE", "color": "red"}, "1": {"text": "fresh", "color": "green"}}}],
               color_mode="background"), 4, 4)
    L.add(stat("Agent version", targets(('gpuwatch_build_info{instance=~"$instance"}', "{{version}}")), "none", text_mode="name"), 4, 4)
    L.add(timeseries("Snapshot age and sample duration", targets(
        ('gpuwatch_snapshot_age_seconds{instance=~"$instance"}', "snapshot age"),
        ('gpuwatch_sample_duration_seconds{instance=~"$instance"}', "sample duration"),
        ('time() - gpuwatch_last_sample_timestamp_seconds{instance=~"$instance"}', "since last sample")), "s", mn=0), 8, 8)
    L.add(timeseries("NVML errors and samples", targets(
        ('sum by (function, error) (rate(gpuwatch_nvml_errors_total{instance=~"$instance"}[$__rate_interval]))', "{{function}} {{error}}"),
        ('rate(gpuwatch_samples_total{instance=~"$instance"}[$__rate_interval])', "samples")), "ops", mn=0), 8, 8)
    L.add(timeseries("Agent process", targets(
        ('process_resident_memory_bytes{instance=~"$instance"}', "resident memory")), "bytes", mn=0), 4, 4)
    L.add(timeseries("Agent CPU", targets(
        ('rate(process_cpu_seconds_total{instance=~"$instance"}[$__rate_interval])', "CPU")), "percentunit", mn=0), 4, 4)
    L.add(stat("GPUs on node", targets('gpuwatch_gpus{instance=~"$instance"}'), "short"), 4, 4)
    L.add(stat("Agent uptime", targets('time() - process_start_time_seconds{instance=~"$instance"}'), "s"), 4, 4)

    L.row("Workload depth (GPM)")
    gpm_desc = " From GPM (Hopper and newer): empty on GPUs without it."
    L.add(timeseries("SM activity", targets(
        ("gpuwatch_gpm_sm_active_ratio%s" % s(), "SM active"),
        ("gpuwatch_gpm_sm_occupancy_ratio%s" % s(), "SM occupancy"),
        ("gpuwatch_gpm_tensor_active_ratio%s" % s(), "tensor active"),
        ("gpuwatch_gpm_dram_active_ratio%s" % s(), "DRAM bandwidth"),
        ("gpuwatch_gpu_utilization_ratio%s" % s(), "utilization (nvidia-smi)")), "percentunit",
        "How much of the GPU the work uses, beside NVML's utilization (a kernel ran at all)." + gpm_desc, mn=0, mx=1), 18, 8)
    L.add(gauge("SM active", targets("gpuwatch_gpm_sm_active_ratio%s" % s()), "percentunit", th=RATIO_TH), 6, 8)
    L.add(timeseries("Pipes (detail set gpm_pipes)", targets(("gpuwatch_gpm_pipe_active_ratio%s" % s(), "{{pipe}}")), "percentunit",
                     "Tensor (HMMA, IMMA, DFMA), FP64/FP32/FP16 and integer pipes. Filled by detail set gpm_pipes "
                     "([exporter] detail); tensor activity over all pipes is in SM activity." + gpm_desc, mn=0, mx=1), 12, 8)
    L.add(timeseries("PCIe and NVLink traffic", targets(
        ("gpuwatch_gpm_pcie_bytes_per_second%s" % s(), "PCIe {{direction}}"),
        ("gpuwatch_gpm_nvlink_bytes_per_second%s" % s(), "NVLink {{direction}}")), "Bps", "Data sent (tx) and received (rx)." + gpm_desc, mn=0), 12, 8)
    L.add(timeseries("NVLink per link (detail set nvlink_links)", targets(("gpuwatch_gpm_nvlink_link_bytes_per_second%s" % s(), "link {{link}} {{direction}}")),
                     "Bps", "Per NVLink link. Filled by detail set nvlink_links ([exporter] detail); the GPU's total is in "
                     "PCIe and NVLink traffic." + gpm_desc, mn=0), 12, 8)
    L.add(timeseries("MIG instances: SM active", targets(("gpuwatch_gpm_mig_sm_active_ratio%s" % s(), "instance {{gpu_instance}}")),
                     "percentunit", "SM activity per MIG GPU instance: the utilization NVML does not give for MIG." + gpm_desc,
                     mn=0, mx=1), 12, 8)
    return dashboard("gpuwatch-gpu", "gpuwatch / GPU detail",
                     "Every metric gpuwatch exports for one GPU of one node.", L, False, ["detail"])


def capacity():
    L = Layout()
    L.row("Capacity")
    L.add(stat("Free memory", targets("sum(gpuwatch_memory_free_bytes%s)" % s()), "bytes",
               "Framebuffer memory free on the selected GPUs."), 6, 4)
    L.add(stat("Idle GPUs", targets("count(gpuwatch_gpu_utilization_ratio%s < 0.1) or vector(0)" % s()), "short",
               "GPUs below 10% utilization."), 6, 4)
    L.add(stat("GPUs without processes", targets("count(gpuwatch_gpu_processes%s == 0) or vector(0)" % s()), "short"), 6, 4)
    L.add(stat("Processes", targets("sum(gpuwatch_gpu_processes%s)" % s()), "short"), 6, 4)
    L.add(bargauge("Free memory per GPU", targets((named("gpuwatch_memory_free_bytes%s" % s()), GPU_LEGEND), instant=True),
                   "bytes", th=thresholds((None, "red"), (4 * 2**30, "yellow"), (16 * 2**30, "green"))), 12, 10)
    L.add(bargauge("Processes per GPU", targets((named("gpuwatch_gpu_processes%s" % s()), GPU_LEGEND), instant=True),
                   "short"), 12, 10)
    L.row("Headroom over time")
    L.add(timeseries("Memory headroom", targets((named("gpuwatch_memory_free_bytes%s / gpuwatch_memory_total_bytes%s" % (s(), s())), GPU_LEGEND)),
                     "percentunit", "Free over total framebuffer memory.", mn=0, mx=1), 12, 8)
    L.add(timeseries("Power headroom", targets((named("gpuwatch_power_limit_watts%s - gpuwatch_power_usage_watts%s" % (s(), s())), GPU_LEGEND)),
                     "watt", "Enforced power limit minus draw."), 12, 8)
    L.add(timeseries("Thermal headroom", targets((named('gpuwatch_temperature_threshold_celsius%s - ignoring(threshold) gpuwatch_gpu_temperature_celsius%s'
                                                        % (s('threshold="slowdown"'), s())), GPU_LEGEND)),
                     "celsius", "Degrees below the GPU's slowdown threshold."), 12, 8)
    L.add(timeseries("Processes per GPU", targets((named("gpuwatch_gpu_processes%s" % s()), GPU_LEGEND)), "short", mn=0), 12, 8)
    L.add(timeseries("Utilization per node", targets(('avg by (instance) (gpuwatch_gpu_utilization_ratio%s)' % s(), "{{instance}}")),
                     "percentunit", mn=0, mx=1), 12, 8)
    L.add(timeseries("Memory used per node", targets(('sum by (instance) (gpuwatch_memory_used_bytes%s)' % s(), "used {{instance}}"),
                                                     ('sum by (instance) (gpuwatch_memory_total_bytes%s)' % s(), "total {{instance}}")),
                     "bytes", mn=0), 12, 8)
    L.row("Placement")
    L.add(table("GPU capacity", targets(
        named("gpuwatch_memory_free_bytes%s" % s()),
        named("gpuwatch_gpu_processes%s" % s()),
        named("gpuwatch_gpu_utilization_ratio%s" % s()),
        named("gpuwatch_power_limit_watts%s - gpuwatch_power_usage_watts%s" % (s(), s())),
        instant=True, table=True), "short", {
            "Value #A": ("Free memory", "bytes"),
            "Value #B": ("Processes", "short"),
            "Value #C": ("Utilization", "percentunit"),
            "Value #D": ("Power headroom", "watt"),
        }, "Where a new job fits: most free memory first.", sort_by="Free memory",
        exclude=("Time", "job", "uuid", "__name__")), 12, 10)
    L.add(table("Largest processes", targets(("topk(20, gpuwatch_process_memory_used_bytes%s)" % s(), ""), instant=True, table=True),
                "bytes", {"pid": ("PID", None), "process_name": ("Process", None), "type": ("Type", None),
                          "Value": ("GPU memory", "bytes")}, "Filled by detail set processes ([exporter] detail).",
                sort_by="GPU memory", exclude=("Time", "job", "__name__", "uuid")), 12, 10)
    L.row("Workload profiles")
    L.add(bargauge("Instances that fit per GPU", targets((named("gpuwatch_gpu_capacity_fits%s" % s()), "{{instance}} GPU {{gpu}} {{profile}}"), instant=True),
                   "short", "How many more instances of each [[profiles]] entry fit on each GPU now: free memory minus the margin, "
                   "compute mode (exclusive and busy: 0), MIG instances, SM share.",
                   th=thresholds((None, "red"), (1, "yellow"), (3, "green"))), 12, 10)
    L.add(timeseries("Instances that fit per node", targets(('gpuwatch_node_capacity_fits{instance=~"$instance"}', "{{instance}} {{profile}}")),
                     "short", "Sum over the node's GPUs; 0 means the profile fits nowhere (alert GpuCapacityExhausted:<profile>).", mn=0), 12, 10)
    L.add(table("Who uses the GPUs", targets(("gpuwatch_process_info%s" % s(), ""), instant=True, table=True),
                "short", {"gpu": ("GPU", None), "pid": ("PID", None), "process_name": ("Process", None), "user": ("User", None),
                          "container_runtime": ("Runtime", None), "container_id": ("Container", None), "pod_uid": ("Pod UID", None),
                          "namespace": ("Namespace", None), "pod": ("Pod", None), "container": ("Container name", None),
                          "gpu_instance": ("MIG GI", None), "mps_client": ("MPS client", None), "command": ("Command", None)},
                "Top processes by memory per GPU, with their user, container (from /proc) and Kubernetes pod (from the kubelet). "
                "Filled by detail set processes ([exporter] detail).",
                exclude=("Time", "job", "__name__", "uuid", "Value", "type")), 24, 10)
    L.add(table("Kubernetes: who holds the GPUs", targets(("gpuwatch_gpu_pod_info%s" % s(), ""), instant=True, table=True),
                "short", {"gpu": ("GPU", None), "gpu_instance": ("MIG GI", None), "namespace": ("Namespace", None),
                          "pod": ("Pod", None), "container": ("Container", None), "resource": ("Resource", None)},
                "The containers the kubelet allocated each GPU (or MIG instance) to, from its pod-resources socket. "
                "Empty off Kubernetes.",
                exclude=("Time", "job", "__name__", "uuid", "Value")), 24, 8)
    L.add(bargauge("MIG instance memory used", targets((named("gpuwatch_mig_instance_memory_used_bytes%s / gpuwatch_mig_instance_memory_total_bytes%s" % (s(), s())),
                                                         "{{instance}} GPU {{gpu}} GI {{gpu_instance}}"), instant=True),
                   "percentunit", "Used over total memory of each MIG GPU instance.", mn=0, mx=1, th=RATIO_TH), 12, 8)
    L.add(timeseries("MPS clients", targets((named("gpuwatch_mps_clients%s" % s()), GPU_LEGEND)), "short",
                     "Clients of an MPS server per GPU.", mn=0), 12, 8)
    return dashboard("gpuwatch-capacity", "gpuwatch / Capacity",
                     "Free memory, processes and headroom per GPU: where the next job fits.", L, True, ["capacity"])


def main():
    from efficiency import efficiency  # imports this module's helpers

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboards")
    for name, board in (("gpuwatch-fleet.json", fleet()), ("gpuwatch-gpu.json", detail()), ("gpuwatch-capacity.json", capacity()),
                        ("gpuwatch-efficiency.json", efficiency())):
        with open(os.path.join(here, name), "w") as f:
            json.dump(board, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
