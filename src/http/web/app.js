// gpuwatch web view: plain JavaScript, no framework, no build step.
// Reads the agent's JSON API (same origin, so TLS and basic auth carry over):
//   /api/v1/gpus            live table and processes, every LIVE_MS
//   /api/v1/alerts          active alerts, every ALERTS_MS (when alerting is on)
//   /api/v1/history         charts of the selected GPU, every CHARTS_MS (when history is on)
//   /api/v1/events          Xid / lost / recovered marks on the charts
//   /api/v1/alerts/history  alert marks on the charts and the alert history list
//   /api/v1/workloads       the Workloads table, every WORKLOADS_MS (workloads.js)
'use strict';
(function () {
  const LIVE_MS = 2000;
  const ALERTS_MS = 5000;
  const WORKLOADS_MS = 5000;
  const CHARTS_MS = 15000;
  const RANGES = ['15m', '1h', '6h', '24h', '7d'];
  const GIB = 1024 * 1024 * 1024;
  const METRICS = [
    { metric: 'utilization', title: 'Utilization', unit: '%', scale: 1, color: '#2563eb',
      thresholds: () => [] },
    { metric: 'memory_used', title: 'Memory used', unit: 'GiB', scale: 1 / 1024, color: '#7c3aed',
      thresholds: (g) => g.memory_total_bytes ? [{ value: g.memory_total_bytes / GIB, label: 'total', color: '#6b7280' }] : [] },
    { metric: 'temperature', title: 'Temperature', unit: '°C', scale: 1, color: '#ea580c',
      thresholds: (g) => [
        g.temperature_slowdown_celsius && { value: g.temperature_slowdown_celsius, label: 'slowdown', color: '#c2410c' },
        g.temperature_shutdown_celsius && { value: g.temperature_shutdown_celsius, label: 'shutdown', color: '#b91c1c' },
      ].filter(Boolean) },
    { metric: 'power', title: 'Power', unit: 'W', scale: 1, color: '#059669',
      thresholds: (g) => g.power_limit_watts ? [{ value: g.power_limit_watts, label: 'limit', color: '#b91c1c' }] : [] },
    // GPM (Hopper and newer): charted only for GPUs that have it.
    { metric: 'sm_active', title: 'SM active', unit: '%', scale: 1, color: '#0891b2', gpm: true,
      thresholds: () => [] },
    { metric: 'sm_occupancy', title: 'SM occupancy', unit: '%', scale: 1, color: '#4f46e5', gpm: true,
      thresholds: () => [] },
    { metric: 'tensor_active', title: 'Tensor active', unit: '%', scale: 1, color: '#db2777', gpm: true,
      thresholds: () => [] },
    { metric: 'dram_active', title: 'DRAM bandwidth', unit: '%', scale: 1, color: '#65a30d', gpm: true,
      thresholds: () => [] },
  ];
  const metricsFor = (g) => METRICS.filter((m) => !m.gpm || g.gpm_supported === true);
  const MARK_COLORS = { xid: '#b91c1c', gpu_lost: '#b91c1c', gpu_recovered: '#15803d', firing: '#ea580c', resolved: '#15803d' };

  const view = { doc: null, gpu: 0, range: '1h', charts: [], chartsKey: '', silences: false };

  // ---- small helpers ----
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key === 'style') node.style.cssText = value;
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }
  const $ = (selector) => document.querySelector(selector);
  const num = (v, digits = 0) => (v === null || v === undefined ? '–' : Number(v).toFixed(digits));
  const time = (t) => new Date(t * 1000).toLocaleTimeString();
  const dateTime = (t) => new Date(t * 1000).toLocaleString();
  function ago(t) {
    const s = Math.max(0, Date.now() / 1000 - t);
    if (s < 90) return `${Math.round(s)} s ago`;
    if (s < 5400) return `${Math.round(s / 60)} min ago`;
    return `${(s / 3600).toFixed(1)} h ago`;
  }

  // Paths are resolved against the origin, not the page's URL: a page opened
  // as http://user:password@host/ must not put the password in each request
  // (fetch refuses such URLs); the browser sends its cached credentials.
  const api = (path) => new URL(path, location.origin);

  async function getJSON(url) {
    const response = await fetch(api(url), { headers: { Accept: 'application/json' } });
    if (!response.ok) throw new Error(`${url} answered ${response.status}`);
    return response.json();
  }

  // Runs fn now and again `ms` after each run ends (no overlapping requests).
  function every(ms, fn) {
    const run = async () => {
      try { await fn(); } catch (error) { console.warn(error); }
      setTimeout(run, ms);
    };
    run();
  }

  // ---- URL state: #gpu=1&range=6h ----
  function readHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    if (params.has('gpu')) view.gpu = Number(params.get('gpu')) || 0;
    if (RANGES.includes(params.get('range'))) view.range = params.get('range');
  }
  function writeHash() {
    history.replaceState(null, '', `#gpu=${view.gpu}&range=${view.range}`);
  }

  // ---- live table ----
  async function refreshLive() {
    let doc;
    try {
      doc = await getJSON('/api/v1/gpus');
    } catch (error) {
      setStatus('unreachable', 'critical', String(error.message));
      throw error;
    }
    const first = view.doc === null;
    view.doc = doc;
    $('#host').textContent = [doc.hostname, doc.driver_version && `driver ${doc.driver_version}`,
      doc.cuda_driver_version && `CUDA ${doc.cuda_driver_version}`].filter(Boolean).join(' · ');
    if (doc.ready) setStatus('ready', 'ok', '');
    else setStatus('not ready', 'warning', doc.not_ready_reason || '');
    $('#updated').textContent = doc.taken_at ? `sample ${ago(doc.taken_at)}` : '';
    renderTable(doc);
    renderProcesses(doc);
    renderGpuSelect(doc);
    if (first) {
      startCharts(doc);
      every(WORKLOADS_MS, workloads.refresh);
      every(ALERTS_MS, refreshAlerts);
      every(CHARTS_MS, refreshAlertHistory);
    }
  }

  function setStatus(text, kind, title) {
    const badge = $('#status');
    badge.textContent = text;
    badge.className = `badge ${kind}`;
    badge.title = title;
  }

  // Badge colour of each health state.
  const HEALTH_BADGE = { healthy: 'ok', degraded: 'warning', unhealthy: 'critical' };

  function renderTable(doc) {
    const firingByGpu = view.firingByGpu || {};
    const rows = doc.gpus.map((g) => {
      const memRatio = g.memory_total_bytes ? g.memory_used_bytes / g.memory_total_bytes : null;
      const slowdown = g.temperature_slowdown_celsius;
      const tempClass = g.temperature_celsius === null || !slowdown ? ''
        : g.temperature_celsius >= slowdown ? 'crit' : g.temperature_celsius >= slowdown - 5 ? 'hot' : '';
      const powerClass = g.power_watts !== null && g.power_limit_watts && g.power_watts >= 0.98 * g.power_limit_watts ? 'hot' : '';
      // Codes past the GPU's bound on unknown codes come together as "other".
      const xids = g.xid_other ? g.xid_errors.concat([{ code: 'other', ...g.xid_other }]) : g.xid_errors;
      const xidCount = xids.reduce((sum, x) => sum + x.count, 0);
      const alerts = firingByGpu[String(g.index)] || 0;
      // The verdict as /api/v1/health gives it (worst reason first).
      const verdict = g.health || { state: g.status === 'up' ? 'healthy' : 'unhealthy', reasons: [] };
      return el('tr', { 'data-gpu': g.index, class: g.index === view.gpu ? 'selected' : '', onclick: () => selectGpu(g.index) },
        el('td', { 'data-field': 'index' }, g.index),
        el('td', { 'data-field': 'name', title: g.uuid }, g.name || '?',
          (g.pods || []).length ? el('div', { class: 'muted', 'data-field': 'pods' }, podsText(g.pods)) : null),
        el('td', { 'data-field': 'health', title: verdict.reasons.map((r) => `${r.text}. What to do: ${r.action}`).concat(nvlinkErrors(g)).join('\n') },
          el('span', { class: `badge ${HEALTH_BADGE[verdict.state] || ''}` }, verdict.state),
          alerts ? el('span', { class: 'badge firing', style: 'margin-left:.4em' }, `${alerts} alert${alerts > 1 ? 's' : ''}`) : null,
          verdict.reasons.length ? el('div', { class: 'muted', 'data-field': 'health_reason' }, verdict.reasons[0].text) : null),
        el('td', { class: 'num', 'data-field': 'utilization' }, g.utilization_percent === null ? '–' : `${num(g.utilization_percent)} %`),
        el('td', { class: 'num', 'data-field': 'sm_active', title: g.gpm_supported === false ? 'no GPM on this GPU (Hopper and newer)' : 'share of time the SMs had work (GPM)' },
          g.sm_active_percent === null || g.sm_active_percent === undefined ? '–' : `${num(g.sm_active_percent)} %`),
        el('td', { class: 'num', 'data-field': 'memory' },
          g.memory_total_bytes === null ? '–' : `${num(g.memory_used_bytes / GIB, 1)} / ${num(g.memory_total_bytes / GIB, 1)} GiB`,
          memRatio === null ? null : el('span', { class: `bar ${memRatio > 0.95 ? 'hot' : ''}`, title: `${num(memRatio * 100)} %` },
            el('span', { style: `width:${Math.min(100, memRatio * 100).toFixed(1)}%` }))),
        el('td', { class: `num ${tempClass}`, 'data-field': 'temperature' },
          g.temperature_celsius === null ? '–' : `${num(g.temperature_celsius)} °C`,
          slowdown ? el('span', { class: 'muted' }, ` / ${num(slowdown)} °C`) : null),
        el('td', { class: `num ${powerClass}`, 'data-field': 'power' },
          g.power_watts === null ? '–' : `${num(g.power_watts)} W`,
          g.power_limit_watts ? el('span', { class: 'muted' }, ` / ${num(g.power_limit_watts)} W`) : null),
        el('td', { 'data-field': 'clock_events' }, g.clock_event_reasons.length === 0 ? el('span', { class: 'muted' }, 'none')
          : g.clock_event_reasons.map((r) => el('span', { class: `reason ${r.name === 'gpu_idle' ? 'quiet' : ''}`, title: r.description }, r.name.replace(/_/g, ' ')))),
        el('td', { class: 'num', 'data-field': 'processes' }, g.process_count),
        el('td', { 'data-field': 'workloads' }, workloads.links(g) || el('span', { class: 'muted' }, '–')),
        el('td', { class: `num ${xidCount ? 'crit' : ''}`, 'data-field': 'xid',
          title: xids.map((x) => `Xid ${x.code}: ${x.count}, last ${dateTime(x.last_seen)}`).join('\n') },
          xidCount ? xids.map((x) => `${x.code}×${x.count}`).join(' ') : '0'),
        el('td', { class: `num ${g.ecc_uncorrected_volatile ? 'crit' : ''}`, 'data-field': 'ecc' },
          g.ecc_enabled === false ? 'off' : g.ecc_corrected_volatile === null && g.ecc_uncorrected_volatile === null ? 'n/a'
            : `${num(g.ecc_corrected_volatile)} / ${num(g.ecc_uncorrected_volatile)}`));
    });
    $('#gpus tbody').replaceChildren(...rows);
  }

  // The links that counted NVLink errors, by type (from /api/v1/gpus: the
  // default /metrics has only the GPU's total).
  function nvlinkErrors(g) {
    return ((g.nvlink && g.nvlink.errors) || []).map((l) =>
      `NVLink link ${l.link} errors: ${Object.entries(l.errors).filter(([, n]) => n > 0).map(([t, n]) => `${t} ${n}`).join(', ')}`);
  }

  // "docker 3f2a9c1b7e0d", plus the Kubernetes pod UID when there is one.
  function containerText(c) {
    if (c === null || c === undefined) return '–';
    const id = `${c.runtime ? `${c.runtime} ` : ''}${String(c.id).slice(0, 12)}`;
    return c.pod_uid ? `${id} (pod ${c.pod_uid})` : id;
  }

  // "namespace/pod · container" of a Kubernetes container (the container
  // left out when the agent could not tell which one).
  function podText(k) {
    return `${k.namespace}/${k.pod}${k.container ? ` · ${k.container}` : ''}`;
  }

  // Who the kubelet gave the GPU (or its MIG instances) to.
  function podsText(pods) {
    return pods.map((a) => `${a.gpu_instance_id === null ? '' : `gi ${a.gpu_instance_id}: `}${podText(a.owner)}`).join(', ');
  }

  function renderProcesses(doc) {
    // user, command and container come from /proc (the snapshot's `host`).
    const list = doc.gpus.flatMap((g) => g.processes.map((p) => ({
      gpu: g.index, ...p, user: p.host?.user, container: p.host?.container,
    })));
    if (list.length === 0) {
      $('#processes').replaceChildren(el('p', { class: 'muted' }, 'No process is using a GPU.'));
      return;
    }
    // Optional columns appear only when the agent reports them.
    const has = (field) => list.some((p) => p[field] !== undefined && p[field] !== null);
    const columns = [
      ['GPU', (p) => p.gpu],
      ['PID', (p) => p.pid],
      ['Name', (p) => p.name || '?'],
      has('user') && ['User', (p) => p.user ?? '–'],
      has('container') && ['Container', (p) => containerText(p.container)],
      has('pod') && ['Pod', (p) => (p.pod ? podText(p.pod) : '–')],
      has('sm_utilization_ratio') && ['SM share', (p) => (p.sm_utilization_ratio === null || p.sm_utilization_ratio === undefined
        ? '–' : `${num(p.sm_utilization_ratio * 100)} %`)],
      ['Memory', (p) => (p.used_memory_bytes === null || p.used_memory_bytes === undefined ? '–'
        : p.used_memory_bytes < GIB ? `${num(p.used_memory_bytes / 1048576)} MiB` : `${num(p.used_memory_bytes / GIB, 2)} GiB`)],
      ['Type', (p) => p.kind || ''],
    ].filter(Boolean);
    list.sort((a, b) => a.gpu - b.gpu || (b.used_memory_bytes || 0) - (a.used_memory_bytes || 0));
    $('#processes').replaceChildren(el('table', { id: 'process-table' },
      el('thead', {}, el('tr', {}, columns.map(([title]) => el('th', {}, title)))),
      el('tbody', {}, list.map((p) => el('tr', { 'data-gpu': p.gpu }, columns.map(([, cell]) => el('td', {}, cell(p))))))));
  }

  function renderGpuSelect(doc) {
    const select = $('#gpu-select');
    const wanted = doc.gpus.map((g) => String(g.index)).join(',');
    if (select.dataset.gpus !== wanted) {
      select.dataset.gpus = wanted;
      select.replaceChildren(...doc.gpus.map((g) => el('option', { value: g.index }, `${g.index}: ${g.name || g.uuid}`)));
    }
    select.value = String(view.gpu);
  }

  function selectGpu(index) {
    if (view.gpu === index) return;
    view.gpu = index;
    writeHash();
    for (const row of document.querySelectorAll('#gpus tbody tr')) row.classList.toggle('selected', Number(row.dataset.gpu) === index);
    $('#gpu-select').value = String(index);
    refreshCharts().catch((error) => console.warn(error));
  }

  // ---- alerts ----
  async function refreshAlerts() {
    if (!view.doc || !view.doc.features.alerting) {
      if (view.doc) $('#alerts').replaceChildren(el('p', { class: 'muted' }, 'Alerting is off on this agent (no rules).'));
      return;
    }
    const { alerts } = await getJSON('/api/v1/alerts');
    const active = alerts.filter((a) => a.state === 'firing' || a.state === 'pending');
    const firingByGpu = {};
    for (const a of active) if (a.state === 'firing' && a.labels.gpu !== undefined) firingByGpu[a.labels.gpu] = (firingByGpu[a.labels.gpu] || 0) + 1;
    view.firingByGpu = firingByGpu;
    renderTable(view.doc);
    if (active.length === 0) {
      $('#alerts').replaceChildren(el('p', { class: 'muted', id: 'no-alerts' }, 'No alert is pending or firing.'));
      return;
    }
    const order = { critical: 0, warning: 1, info: 2 };
    active.sort((a, b) => (a.state === b.state ? 0 : a.state === 'firing' ? -1 : 1)
      || (order[a.labels.severity] ?? 3) - (order[b.labels.severity] ?? 3));
    $('#alerts').replaceChildren(...active.map((a) => el('div', { class: 'alert', 'data-alertname': a.alertname, 'data-state': a.state },
      el('span', { class: `badge ${a.state}` }, a.state),
      el('span', { class: `badge ${a.labels.severity || ''}` }, a.labels.severity || 'no severity'),
      el('strong', {}, a.alertname),
      a.labels.gpu !== undefined ? el('span', {}, `GPU ${a.labels.gpu}`) : null,
      el('span', {}, (a.annotations && a.annotations.summary) || ''),
      el('span', { class: 'muted' }, a.active_since ? `since ${ago(a.active_since)}` : ''),
      silenceLink(a))));
  }

  // Silences hook, kept apart on purpose: silences are another part of
  // gpuwatch. When GET /api/v1/silences answers 200, each active alert gets a
  // link to its silences; until then nothing is shown.
  async function probeSilences() {
    try {
      view.silences = (await fetch(api('/api/v1/silences'), { headers: { Accept: 'application/json' } })).ok;
    } catch (error) {
      view.silences = false;
    }
  }
  function silenceLink(alert) {
    if (!view.silences) return null;
    const query = new URLSearchParams({ alertname: alert.alertname });
    if (alert.labels.gpu !== undefined) query.set('gpu', alert.labels.gpu);
    return el('a', { class: 'silence', href: `/api/v1/silences?${query}` }, 'silences');
  }

  async function refreshAlertHistory() {
    if (!view.doc) return;
    if (!view.doc.features.history) {
      $('#alert-history').replaceChildren(el('p', { class: 'muted' }, 'The alert history is kept in the history database, which is off on this agent.'));
      return;
    }
    const { transitions } = await getJSON('/api/v1/alerts/history?from=-7d&limit=50');
    if (transitions.length === 0) {
      $('#alert-history').replaceChildren(el('p', { class: 'muted' }, 'No alert changed state in the last 7 days.'));
      return;
    }
    $('#alert-history').replaceChildren(el('table', {},
      el('thead', {}, el('tr', {}, ['When', 'Alert', 'GPU', 'Change', 'Value', 'Summary'].map((h) => el('th', {}, h)))),
      el('tbody', {}, transitions.map((t) => el('tr', {},
        el('td', { title: dateTime(t.t) }, `${time(t.t)} (${ago(t.t)})`),
        el('td', {}, el('strong', {}, t.alertname), ' ', el('span', { class: `badge ${t.severity || ''}` }, t.severity || '')),
        el('td', {}, t.labels && t.labels.gpu !== undefined ? t.labels.gpu : t.target),
        el('td', {}, `${t.from} → `, el('span', { class: `badge ${t.to}` }, t.to)),
        el('td', { class: 'num' }, t.value === null ? '–' : num(t.value, 1)),
        el('td', {}, (t.annotations && t.annotations.summary) || ''))))));
  }

  // ---- history charts ----
  function startCharts(doc) {
    if (!doc.gpus.some((g) => g.index === view.gpu) && doc.gpus.length) view.gpu = doc.gpus[0].index;
    $('#ranges').replaceChildren(...RANGES.map((r) => el('button', {
      type: 'button', 'data-range': r, class: r === view.range ? 'active' : '',
      onclick: () => {
        view.range = r;
        writeHash();
        for (const b of document.querySelectorAll('#ranges button')) b.classList.toggle('active', b.dataset.range === r);
        refreshCharts().catch((error) => console.warn(error));
      },
    }, r)));
    $('#gpu-select').addEventListener('change', (event) => selectGpu(Number(event.target.value)));
    if (!doc.features.history) {
      $('#history-off').hidden = false;
      $('#ranges').hidden = true;
      $('#chart-legend').hidden = true;
      $('#history-section h2').firstChild.textContent = 'History ';
      $('#gpu-select').hidden = true;
      return;
    }
    every(CHARTS_MS, refreshCharts);
  }

  // Draws threshold lines and event marks over a chart.
  function overlayPlugin(overlay) {
    return {
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          const { left, top, width, height } = u.bbox;
          const px = window.devicePixelRatio || 1;
          ctx.save();
          ctx.lineWidth = 1.5 * px;
          ctx.font = `${11 * px}px sans-serif`;
          ctx.textAlign = 'right';
          let lastLabel = -Infinity;
          for (const t of [...overlay.thresholds].sort((a, b) => b.value - a.value)) {
            const y = u.valToPos(t.value, 'y', true);
            if (y < top || y > top + height) continue;
            ctx.strokeStyle = t.color;
            ctx.fillStyle = t.color;
            ctx.setLineDash([6 * px, 4 * px]);
            ctx.beginPath();
            ctx.moveTo(left, y);
            ctx.lineTo(left + width, y);
            ctx.stroke();
            // Labels at the right end; one too close to the label above goes under its line.
            const below = y - lastLabel < 14 * px;
            ctx.textBaseline = below ? 'top' : 'bottom';
            ctx.fillText(`${t.label} ${num(t.value, t.value < 10 ? 1 : 0)}`, left + width - 4 * px, below ? y + 3 * px : y - 3 * px);
            lastLabel = y;
          }
          ctx.setLineDash([]);
          for (const m of overlay.marks) {
            const x = u.valToPos(m.t, 'x', true);
            if (x < left || x > left + width) continue;
            ctx.strokeStyle = m.color;
            ctx.fillStyle = m.color;
            ctx.beginPath();
            ctx.moveTo(x, top);
            ctx.lineTo(x, top + height);
            ctx.stroke();
            ctx.beginPath();
            ctx.moveTo(x - 5 * px, top + height);
            ctx.lineTo(x + 5 * px, top + height);
            ctx.lineTo(x, top + height - 8 * px);
            ctx.fill();
          }
          ctx.restore();
        }],
      },
    };
  }

  async function marksFor(gpu) {
    const range = encodeURIComponent(`-${view.range}`);
    const [events, alerts] = await Promise.all([
      getJSON(`/api/v1/events?from=${range}&gpu=${gpu.index}&limit=2000`),
      getJSON(`/api/v1/alerts/history?from=${range}&limit=2000`),
    ]);
    const marks = [];
    for (const e of events.events) {
      if (!['xid', 'gpu_lost', 'gpu_recovered'].includes(e.kind)) continue;
      const xid = () => `Xid ${e.code}${e.action ? ` ${e.action}: ${e.description}` : ''}${e.detail ? ` (${e.detail})` : ''}`;
      const what = e.kind === 'xid' ? xid() : e.kind === 'gpu_lost' ? `GPU lost (${e.detail || '?'})` : 'GPU recovered';
      marks.push({ t: e.t, color: MARK_COLORS[e.kind], text: what });
    }
    for (const t of alerts.transitions) {
      const mine = (t.labels && t.labels.gpu === String(gpu.index)) || t.target === gpu.uuid;
      if (!mine || !(t.to === 'firing' || t.to === 'resolved')) continue;
      marks.push({ t: t.t, color: MARK_COLORS[t.to], text: `${t.alertname} ${t.to}` });
    }
    return marks.sort((a, b) => a.t - b.t);
  }

  async function refreshCharts() {
    const gpu = view.doc && view.doc.gpus.find((g) => g.index === view.gpu);
    if (!gpu) return;
    const key = `${gpu.index}/${view.range}`;
    const [series, marks] = await Promise.all([
      Promise.all(metricsFor(gpu).map((m) => getJSON(`/api/v1/history?gpu=${gpu.index}&metric=${m.metric}&from=-${view.range}`))),
      marksFor(gpu),
    ]);
    if (key !== `${view.gpu}/${view.range}`) return; // the selection changed meanwhile
    if (view.chartsKey !== key) {
      for (const c of view.charts) c.plot.destroy();
      view.charts = [];
      view.chartsKey = key;
      $('#charts').replaceChildren();
    }
    metricsFor(gpu).forEach((m, i) => drawChart(i, m, gpu, series[i], marks));
    $('#events').replaceChildren(...marks.slice(-20).reverse().map((m) => el('li', {},
      el('span', { class: 'mark', style: `border-color:${m.color}` }, time(m.t)), m.text)));
  }

  function xRangeStart(overlay, xs) {
    if (xs.length < 2 || xs[0] <= overlay.from) return overlay.from;
    return Math.max(overlay.from, xs[0] - 0.05 * (overlay.to - xs[0]));
  }

  function drawChart(i, m, gpu, s, marks) {
    const xs = s.points.map((p) => p.t);
    const ys = s.points.map((p) => { const v = p.avg ?? p.last; return v === null ? null : v * m.scale; });
    const thresholds = m.thresholds(gpu);
    let chart = view.charts[i];
    if (!chart) {
      const box = el('div', { class: 'chart', 'data-metric': m.metric },
        el('h3', {}, `${m.title} (${m.unit})`), el('p', { class: 'empty' }));
      $('#charts').append(box);
      const overlay = { thresholds, marks, from: s.from, to: s.to };
      chart = view.charts[i] = { box, overlay, xs: [...xs], ys };
      const top = () => Math.max(...ys.filter((v) => v !== null), ...overlay.thresholds.map((t) => t.value), m.unit === '%' ? 100 : 1);
      const plot = new uPlot({
        width: Math.max(300, box.clientWidth - 10),
        height: 180,
        legend: { show: true },
        cursor: { drag: { x: false, y: false } },
        scales: {
          // The whole range; while the data covers only its end (the agent
          // started recently), just the part with data.
          x: { time: true, range: () => [xRangeStart(overlay, chart.xs), overlay.to] },
          y: { range: () => [0, top() * 1.12] },
        },
        axes: [{}, { size: 50 }],
        series: [{}, { label: m.title, stroke: m.color, width: 1.5, fill: `${m.color}18`,
          value: (u, v) => (v === null ? '–' : `${num(v, m.unit === 'GiB' ? 1 : 0)} ${m.unit}`) }],
        plugins: [overlayPlugin(overlay)],
      }, [chart.xs, ys], box);
      chart.plot = plot;
    } else {
      Object.assign(chart.overlay, { thresholds, marks, from: s.from, to: s.to });
      chart.xs.splice(0, chart.xs.length, ...xs);
      chart.ys.splice(0, chart.ys.length, ...ys);
      chart.plot.setData([xs, ys]);
    }
    chart.box.dataset.points = String(xs.length);
    chart.box.querySelector('.empty').textContent = xs.length ? '' : 'No samples in this range yet (history is written in batches, every 10 s by default).';
  }

  window.addEventListener('resize', () => {
    for (const c of view.charts) c.plot.setSize({ width: Math.max(300, c.box.clientWidth - 10), height: 180 });
  });

  // ---- start ----
  const workloads = window.GpuwatchWorkloads({ el, $, num, getJSON, dateTime, ago });
  readHash();
  probeSilences().finally(() => every(LIVE_MS, refreshLive));
})();
