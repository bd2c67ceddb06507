"""The Efficiency dashboard (gpuwatch-efficiency.json): who held the GPUs and
how well they used them, by Kubernetes namespace, Slurm account, user and
workload, from the workload counters (gpuwatch_workload_*).

Panels over time read the recording rules of the `gpuwatch.efficiency` group
(deploy/prometheus/gpuwatch-rules.yml); totals over the dashboard's range take
increase() of the counters themselves (a rate recorded every interval cannot
give an exact total). A rate of GPU-seconds is GPUs held on average; of
SM-active seconds, GPUs' worth of SMs at work; of joules, watts.
Imported by generate.py.
"""

from generate import (Layout, bargauge, dashboard, gauge, stat, table, targets, thresholds,
                      timeseries, var_datasource, var_query)

I = 'instance=~"$instance"'
K = 'kind=~"$kind"'
# The labels that name a workload in tables (attributes ride along).
WHO = "instance, kind, workload, user, account, namespace"

HELD = "gpuwatch_workload_gpu_seconds_total"
ACTIVE = "gpuwatch_workload_sm_active_seconds_total"
ENERGY = "gpuwatch_workload_energy_joules_total"
PEAK = "gpuwatch_workload_peak_memory_bytes"
WASTED_RULE = "instance_workload:gpuwatch_workload_wasted_gpu_seconds:rate5m"

EFF_TH = thresholds((None, "red"), (0.3, "yellow"), (0.6, "green"))
GPUS = "short"
RULES_NOTE = " Recording rules of group gpuwatch.efficiency (deploy/prometheus/gpuwatch-rules.yml) over 5 minutes."


def rule(level, metric):
    return "%s:gpuwatch_workload_%s:rate5m" % (level, metric)


def team_rows(L, label, level, kind, title, empty):
    """Held vs SM-active over time, GPU-hours and efficiency over the range,
    for one team label (namespace of pods, account of Slurm jobs)."""
    L.row(title)
    held, active = rule(level, "gpu_seconds"), rule(level, "sm_active_seconds")
    L.add(timeseries("GPUs held and SM-active by %s" % label, targets(
        ("sum by (%s) (%s{%s})" % (label, held, I), "{{%s}} held" % label),
        ("sum by (%s) (%s{%s})" % (label, active, I), "{{%s}} SM active" % label)), GPUS,
        "GPUs held on average (a context on the GPU) and GPUs' worth of SMs at work, per %s. %s" % (label, empty)
        + RULES_NOTE, mn=0), 12, 8)
    L.add(bargauge("GPU-hours by %s" % label, targets(
        ("sum by (%s) (increase(%s{%s, kind=\"%s\"}[$__range])) / 3600" % (label, HELD, I, kind), "{{%s}} held" % label),
        ("sum by (%s) (increase(%s{%s, kind=\"%s\"}[$__range])) / 3600" % (label, ACTIVE, I, kind), "{{%s}} SM active" % label),
        instant=True), "h", "GPU-hours held and SM-active GPU-hours over the dashboard's time range. " + empty), 6, 8)
    L.add(bargauge("Efficiency by %s" % label, targets(
        ("sum by (%s) (%s{%s}) / sum by (%s) (%s{%s})" % (label, active, I, label, held, I), "{{%s}}" % label),
        instant=True), "percentunit", "SM-active seconds over GPU-seconds held, now." + RULES_NOTE, mx=1, th=EFF_TH), 6, 8)


def workload_table():
    def over_range(metric, fn="increase"):
        return "sum by (%s) (%s(%s{%s, %s}[$__range]))" % (WHO, fn, metric, I, K)

    return table("Efficiency per workload", targets(
        over_range(HELD) + " / 3600",
        over_range(ACTIVE) + " / 3600",
        over_range(ACTIVE) + " / " + over_range(HELD),
        over_range(ENERGY) + " / 3600000",
        "max by (%s) (max_over_time(%s{%s, %s}[$__range]))" % (WHO, PEAK, I, K),
        instant=True, table=True), "short", {
            "kind": ("Kind", None), "workload": ("Workload", None), "user": ("User", None),
            "account": ("Account", None), "namespace": ("Namespace", None), "instance": ("Node", None),
            "Value #A": ("GPU-hours held", "h"),
            "Value #B": ("SM-active GPU-hours", "h"),
            "Value #C": ("Efficiency", "percentunit"),
            "Value #D": ("Energy", "kwatth"),
            "Value #E": ("Peak memory", "bytes"),
        }, "Every workload of the chosen kinds seen in the time range, per node (a job on several nodes has a "
           "row per node): GPU-hours held, SM-active GPU-hours, efficiency (their ratio), energy and the most "
           "GPU memory it held. Sort by Efficiency for the worst first. Plain processes (kind process) come "
           "with the agent's detail set processes.", sort_by="GPU-hours held"), 24, 10


def efficiency():
    L = Layout()
    L.row("The chosen workloads now")
    held_now = 'sum(instance_kind_user:gpuwatch_workload_gpu_seconds:rate5m{%s, %s})' % (I, K)
    active_now = 'sum(instance_kind_user:gpuwatch_workload_sm_active_seconds:rate5m{%s, %s})' % (I, K)
    L.add(stat("GPUs held", targets(held_now), GPUS,
               "GPU-seconds held per second: GPUs the chosen workloads held on average." + RULES_NOTE, decimals=2), 4, 4)
    L.add(stat("GPUs' worth of SMs active", targets(active_now), GPUS,
               "SM-active seconds per second." + RULES_NOTE, decimals=2), 4, 4)
    L.add(gauge("Efficiency", targets("%s / %s" % (active_now, held_now)), "percentunit",
                "SM-active seconds over GPU-seconds held." + RULES_NOTE, th=EFF_TH), 4, 4)
    L.add(stat("GPUs held idle", targets("sum(%s{%s, %s})" % (WASTED_RULE, I, K)), GPUS,
               "Held × (1 − efficiency) = held − SM active, summed over the chosen workloads." + RULES_NOTE,
               decimals=2), 4, 4)
    L.add(stat("GPU-hours held (range)", targets("sum(increase(%s{%s, %s}[$__range])) / 3600" % (HELD, I, K)), "h",
               "GPU-hours held over the dashboard's time range.", decimals=1), 4, 4)
    L.add(stat("Workload power", targets("sum(rate(%s{%s, %s}[$__rate_interval]))" % (ENERGY, I, K)), "watt",
               "The chosen workloads' share of the GPUs' power."), 4, 4)

    team_rows(L, "namespace", "instance_namespace", "pod", "By Kubernetes namespace",
              "Pods only (kind pod); empty off Kubernetes.")
    team_rows(L, "account", "instance_account", "slurm_job", "By Slurm account",
              "Slurm jobs only (kind slurm_job); empty without Slurm.")

    L.row("By user")
    held_u, active_u = rule("instance_kind_user", "gpu_seconds"), rule("instance_kind_user", "sm_active_seconds")
    L.add(timeseries("GPUs held and SM-active by user", targets(
        ("sum by (kind, user) (%s{%s, %s})" % (held_u, I, K), "{{user}} ({{kind}}) held"),
        ("sum by (kind, user) (%s{%s, %s})" % (active_u, I, K), "{{user}} ({{kind}}) SM active")), GPUS,
        "Per user and workload kind (a Slurm job's user, else the process owner)." + RULES_NOTE, mn=0), 12, 8)
    L.add(bargauge("GPU-hours by user", targets(
        ("sum by (kind, user) (increase(%s{%s, %s}[$__range])) / 3600" % (HELD, I, K), "{{user}} ({{kind}}) held"),
        ("sum by (kind, user) (increase(%s{%s, %s}[$__range])) / 3600" % (ACTIVE, I, K), "{{user}} ({{kind}}) SM active"),
        instant=True), "h", "GPU-hours held and SM-active GPU-hours over the dashboard's time range."), 6, 8)
    L.add(bargauge("Efficiency by user", targets(
        ("sum by (kind, user) (%s{%s, %s}) / sum by (kind, user) (%s{%s, %s})" % (active_u, I, K, held_u, I, K),
         "{{user}} ({{kind}})"), instant=True), "percentunit",
        "SM-active seconds over GPU-seconds held, now." + RULES_NOTE, mx=1, th=EFF_TH), 6, 8)

    L.row("Workloads and top wasters")
    panel, w, h = workload_table()
    L.add(panel, w, h)
    wasted_by = "sum by (kind, workload, user) (%s{%s, %s})" % (WASTED_RULE, I, K)
    L.add(bargauge("Top wasters now", targets(("topk(10, %s)" % wasted_by, "{{kind}} {{workload}} ({{user}})"),
                                              instant=True), GPUS,
                   "The ten workloads holding the most GPUs without SM activity: held × (1 − efficiency), in GPUs."
                   + RULES_NOTE, th=thresholds((None, "green"), (0.5, "yellow"), (1, "red"))), 8, 10)
    L.add(table("Top wasters over the range", targets(
        ("topk(10, sum by (kind, workload, user) (increase(%s{%s, %s}[$__range]) - increase(%s{%s, %s}[$__range]))) / 3600"
         % (HELD, I, K, ACTIVE, I, K), ""), instant=True, table=True), "h", {
            "kind": ("Kind", None), "workload": ("Workload", None), "user": ("User", None),
            "Value": ("Idle GPU-hours", "h"),
        }, "GPU-hours held without SM activity over the dashboard's time range, the ten largest.",
        sort_by="Idle GPU-hours"), 8, 10)
    L.add(timeseries("Top wasters over time", targets(("topk(10, %s)" % wasted_by, "{{kind}} {{workload}} ({{user}})")),
                     GPUS, "GPUs held idle per workload, the ten largest at each step." + RULES_NOTE, mn=0), 8, 10)

    L.row("Energy by team")
    for label, level in (("namespace", "instance_namespace"), ("account", "instance_account")):
        L.add(timeseries("Power by %s" % label, targets(
            ("sum by (%s) (%s{%s})" % (label, rule(level, "energy_joules"), I), "{{%s}}" % label)), "watt",
            "The %s's share of the GPUs' power (energy per second)." % label + RULES_NOTE, mn=0, stack=True), 8, 8)
    L.add(bargauge("Energy by team (range)", targets(
        ('sum by (namespace) (increase(%s{%s, kind="pod"}[$__range])) / 3600000' % (ENERGY, I), "namespace {{namespace}}"),
        ('sum by (account) (increase(%s{%s, kind="slurm_job"}[$__range])) / 3600000' % (ENERGY, I), "account {{account}}"),
        instant=True), "kwatth", "Energy over the dashboard's time range, by Kubernetes namespace and Slurm account. "
                                 "A GPU shared by workloads splits its energy by SM time (idle power equally)."), 8, 8)

    board = dashboard("gpuwatch-efficiency", "gpuwatch / Efficiency",
                      "Who held the GPUs and how well they used them: GPU-hours held vs SM-active by namespace, "
                      "Slurm account and user, efficiency per workload, top wasters, energy by team.",
                      L, True, ["efficiency", "workloads"])
    board["templating"]["list"] = [
        var_datasource(),
        var_query("instance", "Node", "label_values(gpuwatch_gpu_info, instance)", True),
        var_query("kind", "Workload kind", 'label_values(%s{%s}, kind)' % (HELD, I), True),
    ]
    return board

