// gpuwatch web view: the Workloads table (who used the GPUs, and how well)
// and the links to it from the GPU rows. Loaded before app.js, which calls
// GpuwatchWorkloads with its helpers and renders what this returns.
// Reads /api/v1/workloads (running and recent, newest first).
// Every text from outside (ids, users, commands, namespaces) goes into the
// page as text nodes through el(), never as HTML.
'use strict';
window.GpuwatchWorkloads = function ({ el, $, num, getJSON, dateTime, ago }) {
  const RECENT = '-1d';
  const LIMIT = 200;
  // The GPU the table is filtered to (a link in a GPU row sets it), and the
  // workload that link named, highlighted.
  const state = { gpu: null, chosen: null, list: null };

  const keyOf = (w) => `${w.kind}:${w.id}`;
  // "0", "4.1" (MIG instance 1 of GPU 4) → the GPU index.
  const gpuOf = (device) => Number(String(device).split('.')[0]);
  const holds = (w, gpu) => (w.gpus || []).some((d) => gpuOf(d) === gpu);

  // Seconds as a person reads them: "40 s", "12.5 min", "3.25 h".
  function duration(s) {
    if (s < 120) return `${num(s)} s`;
    if (s < 7200) return `${num(s / 60, 1)} min`;
    return `${num(s / 3600, 2)} h`;
  }
  function energy(j) {
    if (j < 1e6) return `${num(j / 1000, 1)} kJ`;
    return `${num(j / 3.6e6, 2)} kWh`;
  }

  // Who: user, or namespace for a pod, then Slurm's account, then the command.
  function whoText(w) {
    return [w.kind === 'pod' ? w.namespace : w.user, w.account && `account ${w.account}`,
      w.partition && `partition ${w.partition}`].filter(Boolean).join(' · ');
  }

  function row(w) {
    const efficiency = w.efficiency;
    const low = efficiency !== null && efficiency !== undefined && efficiency < 0.2;
    return el('tr', { 'data-kind': w.kind, 'data-id': w.id, 'data-gpus': (w.gpus || []).join(','),
      class: state.chosen === keyOf(w) ? 'chosen' : '' },
      el('td', { 'data-field': 'kind' }, el('span', { class: 'badge' }, w.kind.replace('_', ' '))),
      el('td', { 'data-field': 'id' }, el('span', { class: 'id' }, w.id),
        w.command ? el('span', { class: 'muted command' }, ` ${w.command}`) : null),
      el('td', { 'data-field': 'user' }, whoText(w) || '–'),
      el('td', { 'data-field': 'gpus' }, (w.gpus || []).join(', ') || '–'),
      el('td', { 'data-field': 'state', title: `started ${dateTime(w.started)}` },
        w.ended === null || w.ended === undefined ? el('span', { class: 'badge ok' }, 'running')
          : `ended ${ago(w.ended)}`),
      el('td', { class: 'num', 'data-field': 'held', title: `${num(w.gpu_seconds, 1)} GPU-seconds` }, duration(w.gpu_seconds)),
      el('td', { class: `num ${low ? 'hot' : ''}`, 'data-field': 'efficiency',
        title: `${num(w.sm_active_seconds, 1)} SM-active GPU-seconds of ${num(w.gpu_seconds, 1)} held` },
      efficiency === null || efficiency === undefined ? '–' : `${num(efficiency * 100)} %`,
      efficiency === null || efficiency === undefined ? null
        : el('span', { class: `bar ${low ? 'hot' : ''}` }, el('span', { style: `width:${Math.min(100, efficiency * 100).toFixed(1)}%` }))),
      el('td', { class: 'num', 'data-field': 'energy', title: `${num(w.energy_joules)} J` }, energy(w.energy_joules)));
  }

  function render() {
    const box = $('#workloads');
    const note = $('#workload-filter');
    if (state.gpu === null) {
      note.hidden = true;
    } else {
      note.hidden = false;
      note.replaceChildren(`GPU ${state.gpu} only · `,
        el('button', { type: 'button', id: 'workload-all', onclick: () => show(null, null) }, 'show all'));
    }
    if (state.list === null) return;
    const list = state.gpu === null ? state.list : state.list.filter((w) => holds(w, state.gpu));
    if (list.length === 0) {
      box.replaceChildren(el('p', { class: 'muted' }, state.gpu === null
        ? 'No workload used a GPU in the last day.' : `No workload on GPU ${state.gpu} in the last day.`));
      return;
    }
    box.replaceChildren(el('table', { id: 'workload-table' },
      el('thead', {}, el('tr', {}, ['Kind', 'Id', 'Who', 'GPUs', 'State', 'Held', 'Efficiency', 'Energy'].map((h) => el('th', {}, h)))),
      el('tbody', {}, list.map(row))));
  }

  async function refresh() {
    const { workloads } = await getJSON(`/api/v1/workloads?from=${RECENT}&limit=${LIMIT}`);
    state.list = workloads;
    render();
  }

  // Filters the table to `gpu` (null: all), highlights `chosen` and brings
  // its row into view.
  function show(gpu, chosen) {
    state.gpu = gpu;
    state.chosen = chosen;
    render();
    const target = (chosen && [...document.querySelectorAll('#workload-table tbody tr')]
      .find((tr) => `${tr.dataset.kind}:${tr.dataset.id}` === chosen)) || $('#workloads-section');
    target.scrollIntoView({ block: 'center' });
  }

  // The GPU row's links to its running workloads (from /api/v1/gpus).
  function links(g) {
    const held = g.workloads || [];
    if (held.length === 0) return null;
    const seen = new Set();
    const unique = held.filter((w) => !seen.has(keyOf(w)) && seen.add(keyOf(w)));
    return el('span', {}, unique.flatMap((w, i) => [i ? ', ' : '', el('a', {
        href: '#workloads-section', class: 'workload-link', 'data-workload': keyOf(w),
        title: w.user ? `user ${w.user}` : null,
        onclick: (event) => {
          event.preventDefault();
          event.stopPropagation();
          show(g.index, keyOf(w));
        },
      }, `${w.kind.replace('_', ' ')} ${w.id}`)]));
  }

  return { refresh, links };
};
