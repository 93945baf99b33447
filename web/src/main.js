// GradeML's HTML report: reads the run's data from the page (<script id="grademl-data">,
// schema grademl.html/1 written by src/report/html_report.cpp) and builds the report's
// sections. Everything is drawn in the browser from that data; nothing is fetched.

import { el, section } from './dom.js';
import { BOUNDS, CRITICAL_COLOR, typeColor } from './labels.js';
import { fmtBytes, fmtDuration, fmtPercent, fmtUsage } from './format.js';
import { Timeline } from './timeline.js';
import { makePlot } from './plots.js';

// The time range every view shows, in seconds since the run's start.
class View {
  constructor() { this.t0 = 0; this.t1 = 1; this.listeners = []; }
  set(t0, t1) {
    if (!(t1 > t0)) return;
    this.t0 = t0;
    this.t1 = t1;
    for (const f of this.listeners) f();
  }
  listen(f) { this.listeners.push(f); }
}

function header(data) {
  const run = data.run;
  const status = run.status || (run.complete ? 'ok' : 'incomplete');
  const started = run.start_ns ? new Date(run.start_ns / 1e6).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '';
  const facts = [
    ['Duration', fmtDuration(run.duration_s)],
    ['Status', status],
    ['Phases', run.phase_count.toLocaleString('en-US')],
    ['Host', run.host],
    ['Started', started],
  ];
  if (run.owner) facts.push(['Owner', run.owner]);
  return el('header', { class: 'run-header' },
    el('h1', {}, `GradeML report · run ${run.id}`),
    el('div', { class: 'command', title: run.cwd ? `in ${run.cwd}` : '' }, run.command_line),
    el('dl', { class: 'facts' }, ...facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
    run.error ? el('p', { class: 'error' }, run.error) : null,
    run.noisy ? el('p', { class: 'noisy' }, `Noisy run: ${run.noisy_reason}.`) : null,
    ...(run.other_processes || []).filter((o) => o.top.length).map((o) =>
      el('p', { class: 'outside' }, `Outside the run on ${o.host}: ${o.cpu_seconds.toFixed(2)} CPU-s (${o.avg_cores.toFixed(2)} cores on average); most CPU: ` +
        o.top.slice(0, 3).map((p) => `${p.command} (${p.user ? `user ${p.user}, ` : ''}pid ${p.pid}, ${p.cpu_seconds.toFixed(2)} s)`).join('; '))),
    sourcesList(run.sources || []));
}

// The traces imported into the run (grademl import, or stitched by grademl run): path,
// format, rank, the clock note, and what the import dropped and why.
function sourcesList(sources) {
  if (!sources.length) return null;
  return el('div', { class: 'sources' }, el('h3', {}, `Imported traces (${sources.length})`),
    el('ul', {}, sources.map((s) => el('li', {},
      el('code', {}, s.path), ` · ${s.format}`, s.rank !== null ? ` · rank ${s.rank}` : '',
      s.clock_note ? el('span', { class: 'noisy' }, ` · ${s.clock_note}`) : null,
      el('span', { class: 'muted' }, ` · ${ingestStatsLine(s)}`)))));
}

// The words `grademl import` and the text report print (report::IngestStatsLine): dropped
// (severity data_loss or error) and kept adjusted (info), each largest count first. Stats of a
// report written before severities were kept count as dropped, as they were then.
function ingestStatsLine(s) {
  const group = (words, dropped) => {
    const stats = s.dropped.filter((d) => d.count > 0 && (d.dropped === undefined ? true : d.dropped) === dropped);
    if (!stats.length) return null;
    const total = stats.reduce((sum, d) => sum + d.count, 0);
    return `${words} ${total.toLocaleString('en-US')}: ` +
      stats.map((d) => `${d.reason} ${d.count.toLocaleString('en-US')}`).join(', ');
  };
  const parts = [group('dropped', true), group('kept adjusted', false)].filter((p) => p);
  return parts.length ? parts.join('; ') : 'nothing dropped';
}

function issuesSection(data, showPhase) {
  const issues = data.issues;
  const duration = data.run.duration_s || 1;
  if (!issues.length) {
    return section('issues', 'Top issues', null,
                   el('p', {}, 'No issue would save more than 1% of the run: nothing stands out.'));
  }
  // A warning about the data (clock_causality) saves nothing: no figures.
  const saves = (i) => i.impact_s > 0 || i.change;
  const list = el('ol', { class: 'issues' }, issues.map((i) => el('li', {},
    el('div', { class: 'impact' },
       el('span', { class: 'impact-s' }, saves(i) ? `−${fmtDuration(i.impact_s)}` : '–'),
       saves(i) ? el('span', { class: 'impact-bar' }, el('span', { style: { width: `${Math.min(100, (i.impact_s / duration) * 100)}%` } })) : null,
       saves(i) ? el('span', { class: 'muted' }, fmtPercent(i.impact_fraction)) : null),
    el('div', { class: 'issue-text' }, i.text,
       i.phase !== null && showPhase ? el('button', { type: 'button', class: 'link', onclick: () => showPhase(i.phase) }, 'show on the timeline') : null),
    i.change ? el('code', { class: 'change', title: 'grademl whatif RUN CHANGE' }, i.change) : null)));
  return section('issues', 'Top issues', 'Ranked by the seconds fixing each would save, as simulated by the what-if engine.', list);
}

// The GPU analyses of imported traces (docs/gpu.md): per rank how the GPU's time split, the
// communication-computation overlap and what bound it; the kernel types over all ranks.
function gpuSection(data) {
  const g = data.gpu;
  if (!g || !g.temporal.length) return null;
  const pct = (v) => (v === null || v === undefined ? '–' : `${v.toFixed(1)}%`);
  const overlap = new Map(g.overlap.map((o) => [o.rank, o.comm_comp_overlap_pct]));
  const bound = new Map((g.ranks || []).map((r) => [r.rank, r.bound]));
  const rows = g.temporal.map((t) => el('tr', {},
    el('td', {}, `rank ${t.rank}`),
    el('td', { class: 'num' }, fmtDuration(t.kernel_us / 1e6)),
    el('td', { class: 'num' }, pct(t.idle_pct)),
    el('td', { class: 'num' }, pct(t.compute_pct)),
    el('td', { class: 'num' }, pct(t.non_compute_pct)),
    el('td', { class: 'num' }, pct(overlap.get(t.rank))),
    el('td', {}, bound.get(t.rank) || ''),
    el('td', { class: 'bar-cell' }, el('div', { class: 'stack' },
      el('span', { style: { width: `${t.compute_pct}%`, background: '#59a14f' }, title: `compute ${pct(t.compute_pct)}` }),
      el('span', { style: { width: `${t.non_compute_pct}%`, background: '#edc948' }, title: `non-compute ${pct(t.non_compute_pct)}` }),
      el('span', { style: { width: `${t.idle_pct}%`, background: '#bab0ac' }, title: `idle ${pct(t.idle_pct)}` })))));
  const types = g.kernel_types.filter((k) => k.us > 0).map((k) => el('tr', {},
    el('td', {}, k.type), el('td', { class: 'num' }, fmtDuration(k.us / 1e6)), el('td', { class: 'num' }, pct(k.pct))));
  return section('gpu', 'GPU (imported traces)',
    'Per rank, the time from the first kernel to the last split into compute, other kernels (communication, memory) and idle, and the share of communication that overlapped computation, as HolisticTraceAnalysis defines them.',
    el('table', { class: 'gpu' }, el('thead', {}, el('tr', {}, ['Rank', 'Span', 'Idle', 'Compute', 'Non-compute', 'Comm/comp overlap', 'Bound', ''].map((h) => el('th', {}, h)))),
       el('tbody', {}, rows)),
    types.length ? el('div', {}, el('h3', {}, 'Kernel time by type, all ranks'),
                      el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'Type'), el('th', {}, 'Time'), el('th', {}, 'Share'))), el('tbody', {}, types))) : null);
}

// The Spark applications of imported event logs (docs/engines.md): per application its jobs,
// stages and tasks, where the tasks' time went, and per stage attempt its time split, skew,
// bottleneck and advice. Names come from the log (untrusted): text nodes only, as everywhere.
function sparkSection(data, showPhase) {
  const sp = data.spark;
  if (!sp || !sp.applications.length) return null;
  const MAX_ROWS = 200;
  const share = (part, whole) => (whole > 0 && part !== null ? fmtPercent(part / whole) : '–');
  const apps = sp.applications.map((a) => {
    const facts = [
      ['Application', a.app_id], ['Spark', a.spark_version || '–'], ['Duration', fmtDuration(a.duration_s)],
      ['Jobs', `${a.jobs} (${a.failed_jobs} failed)`],
      ['Stage attempts', `${a.stages} (${a.failed_stages} failed, ${a.skipped_stages} skipped)`],
      ['Tasks', `${a.tasks} (${a.failed_tasks} failed, ${a.killed_tasks} killed, ${a.speculative_tasks} speculative)`],
      ['Executors', String(a.executors)],
      ['Task time', `${fmtDuration(a.task_s)}: CPU ${share(a.executor_cpu_s, a.task_s)}, GC ${share(a.gc_s, a.task_s)}, shuffle wait ${share(a.shuffle_fetch_wait_s, a.task_s)}, scheduler delay ${share(a.scheduler_delay_s, a.task_s)}`],
      ['Shuffle', `read ${fmtBytes(a.shuffle_read_bytes)}, written ${fmtBytes(a.shuffle_write_bytes)}`],
      ['Spilled', `${fmtBytes(a.disk_spill_bytes)} to disk`],
    ];
    const stages = a.stage_attempts.slice(0, MAX_ROWS);
    const rows = stages.map((st) => el('tr', { dataset: { phase: st.phase } },
      el('td', { class: 'spark-stage-name' }, showPhase
        ? el('button', { type: 'button', class: 'link', title: 'show on the timeline', onclick: () => showPhase(st.phase) }, st.name)
        : st.name),
      el('td', {}, st.status),
      el('td', { class: 'num' }, fmtDuration(st.duration_s)),
      el('td', { class: 'num' }, st.failed_tasks + st.killed_tasks > 0 ? `${st.tasks} (${st.failed_tasks} failed, ${st.killed_tasks} killed)` : String(st.tasks)),
      el('td', { class: 'num' }, share(st.gc_s, st.task_s)),
      el('td', { class: 'num' }, share(st.shuffle_fetch_wait_s, st.task_s)),
      el('td', { class: 'num' }, share(st.scheduler_delay_s, st.task_s)),
      el('td', { class: 'num' }, share(st.deserialize_s, st.task_s)),
      el('td', { class: 'num' }, st.median_task_s > 0 ? `${(st.max_task_s / st.median_task_s).toFixed(1)}x` : '–'),
      el('td', { class: 'spark-advice', title: st.advice || '' }, st.bottleneck ? el('strong', {}, st.bottleneck) : '–',
         st.advice ? el('span', { class: 'muted' }, ` ${st.advice}`) : null)));
    return el('div', { class: 'spark-app', dataset: { phase: a.phase } },
      el('h3', { class: 'spark-app-name' }, a.name),
      el('dl', { class: 'facts' }, ...facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
      el('div', { class: 'scroll-x' }, el('table', { class: 'spark-stages' },
        el('thead', {}, el('tr', {}, ['Stage', 'Status', 'Duration', 'Tasks', 'GC', 'Shuffle wait', 'Sched. delay', 'Deser.', 'Max/median', 'Bottleneck'].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows))),
      a.stage_attempts.length > MAX_ROWS ? el('p', { class: 'muted' }, `… and ${a.stage_attempts.length - MAX_ROWS} more stage attempts (grademl report --json has them all).`) : null);
  });
  return section('spark', 'Spark (imported event logs)',
    'Per application, its jobs, stage attempts and tasks; per stage the share of its tasks\' time spent in JVM garbage collection, waiting for shuffle blocks, in scheduler delay and deserialising, the slowest task against the median, and what limited it. Skewed tasks also show among the top issues (imbalance).',
    ...apps);
}

// Dask's tasks (docs/engines.md): per task prefix, the costliest first, and per worker.
// Keys, prefixes and addresses come from the program: text nodes only (dom.js).
const DASK_MAX_PREFIXES = 50;
function daskSection(data, showPhase) {
  const d = data.dask;
  if (!d) return null;
  const n = (v) => v.toLocaleString('en-US');
  const dur = (s) => (s > 0 ? fmtDuration(s) : '–');
  const erred = (x) => (x.erred ? ` (${n(x.erred)} erred)` : '') + (x.cancelled ? ` (${n(x.cancelled)} cancelled)` : '');
  const prefixRows = d.prefixes.slice(0, DASK_MAX_PREFIXES).map((p) => el('tr', {},
    el('td', {}, p.prefix || '(no prefix)'),
    el('td', { class: 'num' }, n(p.tasks) + erred(p)),
    el('td', { class: 'num' }, n(p.workers)),
    el('td', { class: 'num' }, dur(p.compute_s)),
    el('td', { class: 'num' }, dur(p.transfer_s)),
    el('td', { class: 'num' }, dur(p.disk_s)),
    el('td', { class: 'num' }, dur(p.deserialize_s)),
    el('td', { class: 'num' }, `${dur(p.max_task_s)} / ${dur(p.median_task_s)}`),
    el('td', { class: 'num' }, p.result_bytes > 0 ? fmtBytes(p.result_bytes) : '–'),
    el('td', {}, p.slowest_task !== null && showPhase
      ? el('button', { type: 'button', class: 'link', title: p.slowest_task_key || '', onclick: () => showPhase(p.slowest_task) }, 'show the slowest')
      : null)));
  const workerRows = d.workers.map((w) => el('tr', {},
    el('td', {}, w.worker),
    el('td', {}, w.host),
    el('td', { class: 'num' }, w.pid === null ? '–' : String(w.pid)),
    el('td', { class: 'num' }, n(w.tasks) + erred(w)),
    el('td', { class: 'num' }, dur(w.compute_s)),
    el('td', { class: 'num' }, dur(w.transfer_s)),
    el('td', { class: 'num' }, n(w.transfers_in) + (w.transfer_bytes_in > 0 ? ` (${fmtBytes(w.transfer_bytes_in)})` : '')),
    el('td', {}, w.process === null ? 'process not recorded' : '')));
  const head = (names) => el('thead', {}, el('tr', {}, names.map((h) => el('th', {}, h))));
  const more = d.prefixes.length > DASK_MAX_PREFIXES
    ? el('p', { class: 'muted' }, `… ${n(d.prefixes.length - DASK_MAX_PREFIXES)} more prefixes (grademl report --json: dask.prefixes).`)
    : null;
  const bytes = d.transfer_bytes > 0 ? ` (${fmtBytes(d.transfer_bytes)})` : '';
  const count = (v, one, many) => `${n(v)} ${v === 1 ? one : many}`;
  return section('dask', 'Dask tasks',
    `${count(d.tasks, 'task', 'tasks')}${erred(d)} on ${count(d.workers.length, 'worker', 'workers')}, ` +
      `${count(d.edges, 'dependency edge', 'dependency edges')}, ${count(d.transfers, 'transfer', 'transfers')}${bytes}. ` +
      'Each task is a phase under the worker process that ran it, its compute, transfer, disk and deserialisation as its children; task prefixes are compared across workers for stragglers.',
    el('table', { class: 'dask-prefixes' }, head(['Task prefix', 'Tasks', 'Workers', 'Compute', 'Transfer', 'Disk', 'Deserialize', 'Max / median task', 'Results', '']),
       el('tbody', {}, prefixRows)),
    more,
    el('h3', {}, 'Workers'),
    el('table', { class: 'dask-workers' }, head(['Worker', 'Host', 'Pid', 'Tasks', 'Compute', 'Transfer', 'Transfers in', '']),
       el('tbody', {}, workerRows)));
}

// The ranks of distributed jobs (docs/engines.md): per rank its time in collectives, how much
// of it overlapped computation and how much it waited for the last peer; the straggler.
function communicationSection(data, showPhase) {
  const ranks = data.communication || [];
  const summary = data.communication_summary;
  if (!ranks.length || !summary) return null;
  const secs = (v) => (v === null || v === undefined ? '–' : fmtDuration(v));
  // Ranks of imported traces are in the GPU section: only the jobs grademl recorded.
  const jobs = (summary.jobs || []).filter((job) => ranks.some((r) => r.job === job.job && r.source !== 'trace'));
  if (!jobs.length) return null;
  const tables = jobs.map((job) => {
    const rows = ranks.filter((r) => r.job === job.job).map((r) => el('tr', { class: r.straggler ? 'straggler' : '' },
      el('td', {}, r.process !== null && showPhase
        ? el('button', { type: 'button', class: 'link', title: 'show on the timeline', onclick: () => showPhase(r.process) }, `rank ${r.rank}`)
        : `rank ${r.rank}`, r.straggler ? el('span', { class: 'badge crit' }, 'straggler') : null),
      el('td', {}, `${r.host} ${r.pid !== null ? r.pid : ''}`),
      el('td', { class: 'num' }, r.ddp_buckets > 0 ? `${r.collectives} (${r.ddp_buckets} DDP buckets)` : `${r.collectives}`),
      el('td', { class: 'num' }, r.bytes > 0 ? fmtBytes(r.bytes) : '–'),
      el('td', { class: 'num' }, secs(r.comm_s)),
      el('td', { class: 'num' }, `${secs(r.overlapped_s)} (${r.overlap_pct.toFixed(1)}%)`),
      el('td', { class: 'num' }, secs(r.wait_s)),
      el('td', { class: 'num' }, secs(r.compute_s))));
    const title = job.id ? `Job ${job.id} (${job.world_size} ranks)` : `Job of ${job.world_size} ranks`;
    return el('div', {},
      jobs.length > 1 || job.id ? el('h3', {}, title) : null,
      el('table', { class: 'communication' },
        el('thead', {}, el('tr', {}, ['Rank', 'Host pid', 'Collectives', 'Bytes', 'In collectives', 'Overlapped', 'Waiting', 'Computing'].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows)),
      job.straggler_rank !== null
        ? el('p', { class: 'noisy' }, `Rank ${job.straggler_rank} was the straggler: the other ranks waited ${fmtDuration(job.straggler_cost_s)} on average for it to arrive (${fmtDuration(job.straggler_total_s)} in all).`)
        : null);
  });
  const kinds = (summary.kinds || []).map((k) => el('tr', {},
    el('td', {}, k.name), el('td', { class: 'num' }, k.ddp_buckets > 0 ? `${k.count} (${k.ddp_buckets} DDP buckets)` : `${k.count}`),
    el('td', { class: 'num' }, k.bytes > 0 ? fmtBytes(k.bytes) : '–'), el('td', { class: 'num' }, fmtDuration(k.total_s)),
    el('td', { class: 'num' }, fmtDuration(k.wait_s))));
  return section('communication', 'Communication between ranks',
    'Per rank of a distributed job: the time in collectives (DDP\'s gradient buckets included), how much of it overlapped the rank\'s computation, and how much it waited for the last peer to arrive (the k-th collective of a process group is the same operation on every rank).',
    ...tables,
    kinds.length ? el('div', {}, el('h3', {}, 'Collectives, all ranks'),
      el('table', {}, el('thead', {}, el('tr', {}, ['Collective', 'Count', 'Bytes', 'Time', 'Waiting'].map((h) => el('th', {}, h)))), el('tbody', {}, kinds))) : null);
}

// Reuse across runs (docs/reuse.md): the workflow steps restored from an earlier run's outputs
// (time saved, time restoring) and those that ran although an earlier run had their key
// (recomputed: what restoring would have saved is in the issues). Step names, paths and run
// uuids are untrusted: text only, as everywhere.
function reuseSection(data, showPhase) {
  const r = data.reuse;
  if (!r || !(r.reused > 0 || r.redundant > 0)) return null;
  const rows = r.steps.filter((s) => s.outcome === 'reused' || s.redundant).map((s) => el('tr', {},
    el('td', {}, showPhase
      ? el('button', { type: 'button', class: 'link', title: 'show on the timeline', onclick: () => showPhase(s.phase) }, s.step)
      : s.step,
    s.redundant ? el('span', { class: 'badge crit' }, 'recomputed') : el('span', { class: 'badge' }, 'restored')),
    el('td', { class: 'num' }, fmtDuration(s.cost_s)),
    el('td', { class: 'num' }, s.outcome === 'reused' ? fmtDuration(s.restore_s) : `~${fmtDuration(s.predicted_restore_s)}`),
    el('td', { class: 'num' }, fmtBytes(s.output_bytes)),
    el('td', { class: 'reuse-note' }, s.outcome === 'reused'
      ? `restored from run ${s.reused_from || '?'}`
      : `run ${s.earlier_run} had the same key (${s.outputs_identical ? 'same outputs' : 'other outputs: not deterministic'})${s.not_reusable ? `; reuse is off: ${s.not_reusable}` : ''}`)));
  const facts = [];
  if (r.reused > 0) facts.push(`${r.reused} step${r.reused === 1 ? '' : 's'} restored from earlier runs' outputs: ${fmtDuration(r.saved_s)} saved (${fmtDuration(r.saved_s + r.restore_s)} of computation, ${fmtDuration(r.restore_s)} restoring).`);
  if (r.redundant > 0) facts.push(`${r.redundant} step${r.redundant === 1 ? '' : 's'} recomputed what an earlier run had (the same key): ${fmtDuration(r.redundant_s)}; grademl run --reuse restores them.`);
  return section('reuse', 'Reuse across runs',
    'Workflow steps whose outputs were restored from an earlier run instead of running, and steps that ran although an earlier run had executed them with the same key (command, environment, inputs and parameters).',
    ...facts.map((f) => el('p', {}, f)),
    el('table', { class: 'reuse' },
      el('thead', {}, el('tr', {}, ['Step', 'Cost', 'Restore', 'Outputs', ''].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows)),
    rows.length && r.redundant > 0
      ? el('p', { class: 'muted' }, `~ predicted: the outputs' bytes at ${fmtBytes(r.read_bytes_per_s)}/s (${r.read_speed_measured ? 'as fast as this run\'s hashing read' : 'assumed: this run\'s hashing read too little to measure'}).`)
      : null);
}

// Fine phases recorded on a sample of the iterations under the overhead budget
// (analysis/fine_sampling.h): the exact counts and totals per type, how many were recorded,
// the budget and the instrumentation's measured cost.
function fineSamplingSection(data) {
  const f = data.fine_sampling;
  if (!f || !f.types) return null;
  const every = f.every_max <= 1 ? 'in every iteration'
    : f.every_min === f.every_max ? `in 1 of ${f.every_max} iterations` : `in 1 of ${f.every_min} to 1 of ${f.every_max} iterations`;
  const cost = [];
  if (f.budget !== null && f.budget !== undefined) cost.push(`budget ${fmtPercent(f.budget)} of the workload`);
  if (f.overhead_fraction !== null && f.overhead_fraction !== undefined) cost.push(`instrumentation measured at ${fmtPercent(f.overhead_fraction)}`);
  const over = f.budget !== null && f.overhead_fraction !== null && f.overhead_fraction > f.budget && f.every_max > 1
    ? el('p', { class: 'noisy' }, 'Over the budget even so: the iterations are too short for one phase each at this cost.') : null;
  const rows = f.types.filter((t) => t.total > 0).map((t) => el('tr', {},
    el('td', {}, t.type),
    el('td', { class: 'num' }, t.total.toLocaleString('en-US')),
    el('td', { class: 'num' }, fmtDuration(t.total_s)),
    el('td', { class: 'num' }, `${t.recorded.toLocaleString('en-US')} (${fmtPercent(t.total > 0 ? t.recorded / t.total : 0)})`)));
  return section('fine-phases', 'Fine phases',
    `Fine phases (forward, backward, loss, optimizer step) recorded ${every}${cost.length ? ` (${cost.join(', ')})` : ''}; the counts and totals below are exact for all ${f.iterations.toLocaleString('en-US')} iterations, ${f.recorded_iterations.toLocaleString('en-US')} of them recorded as phases. The timeline holds the recorded ones only.`,
    el('table', { class: 'fine' },
      el('thead', {}, el('tr', {}, ['Type', 'Count', 'Total', 'Recorded'].map((x) => el('th', {}, x)))),
      el('tbody', {}, rows)),
    over);
}

// Operators profiled on a sample of the iterations (grademl run --deep; analysis/deep_profile.h):
// per process and mode, the profiling cost measured against unprofiled iterations and removed,
// and each operator's time per iteration with its 95% interval, extrapolated to every iteration.
function deepProfileSection(data) {
  const d = data.deep_profile;
  if (!d || !d.groups || !d.groups.length) return null;
  const interval = (mean, half) => (half === null || half === undefined ? fmtDuration(mean) : `${fmtDuration(mean)} ± ${fmtDuration(half)}`);
  const groups = d.groups.map((g) => {
    const rows = g.operators.slice(0, 25).map((op) => el('tr', {},
      el('td', {}, op.name, op.data_wait ? el('span', { class: 'badge' }, 'data loading') : null),
      el('td', { class: 'num' }, op.calls_per_iteration.toFixed(1)),
      el('td', { class: 'num' }, interval(op.mean_s, op.half_interval_s)),
      el('td', { class: 'num' }, op.data_wait ? '–' : fmtPercent(op.share)),
      el('td', { class: 'num' }, interval(op.total_s, op.total_half_interval_s))));
    const who = `${g.mode || 'untagged'}, ${g.process_name || `pid ${g.pid}`}`;
    return el('div', { class: 'deep-group' },
      el('h3', {}, `Sampled ${g.profiled} of ${g.iterations} iterations (${who})`),
      el('p', {}, g.baseline_s !== null && g.baseline_s !== undefined
        ? `Operator profiling added ${fmtDuration(g.mean_cost_s)} to each profiled iteration (${fmtPercent(g.cost_fraction)} of the unprofiled median, ${fmtDuration(g.baseline_s)}); ${fmtDuration(g.removed_s)} removed from the figures below. Not in any operator: ${fmtDuration(g.unattributed_s)} per iteration.`
        : 'No unprofiled iteration to measure the profiling cost against: the figures include it.'),
      el('table', { class: 'deep' },
        el('thead', {}, el('tr', {}, ['Operator', 'Calls / iteration', 'Per iteration (95%)', 'Share', `All ${g.iterations} iterations`].map((x) => el('th', {}, x)))),
        el('tbody', {}, rows)),
      g.operators.length > 25 ? el('p', { class: 'muted' }, `… ${g.operators.length - 25} more operators (grademl report --json: deep_profile).`) : null);
  });
  return section('operators', 'Operators',
    'Operators were profiled in a few iterations only (grademl run --deep). Their cost was measured against the iterations that were not profiled, and removed (XSP\'s leveled experimentation); the breakdown is extrapolated to every iteration with 95% intervals.',
    ...groups);
}

// A run across hosts (docs/multi-host.md): each host's part of the run, the straggler host,
// and the edges between hosts that go backwards in time beyond the clocks' uncertainty. Host
// and phase names come from other machines: text only, as everywhere.
function clockText(h) {
  const c = h.clock;
  if (!c.estimates) return c.state;
  const off = c.median_offset_ns / 1e9;
  return `${off > 0 ? '+' : ''}${fmtDuration(off)} ± ${fmtDuration(c.max_uncertainty_ns / 1e9)} (${c.estimates})`;
}

function hostsSection(data, showPhase) {
  const m = data.multi_host;
  if (!m || !m.hosts || !m.hosts.length) return null;
  const t0 = data.run.start_ns || 0;
  const rel = (ns) => (ns - t0) / 1e9;
  const within = m.straggler && m.straggler.within_uncertainty;
  const rows = m.hosts.map((h) => el('tr', { class: h.straggler ? 'straggler' : '' },
    el('td', {}, h.name, h.reference ? el('span', { class: 'badge' }, 'reference clock') : null,
       h.straggler ? el('span', { class: 'badge crit' }, within ? 'straggler (within clock uncertainty)' : 'straggler') : null),
    el('td', { class: 'num' }, h.start_ns === null ? '–' : `${fmtDuration(rel(h.start_ns))} – ${fmtDuration(rel(h.end_ns))}${h.open ? '*' : ''}`),
    el('td', { class: 'num' }, h.span_s === null ? '–' : fmtDuration(h.span_s)),
    el('td', { class: 'num' }, h.cpu ? `${h.cpu.busy_s.toFixed(1)} CPU-s, ${fmtPercent(h.cpu.avg_busy)} of ${h.cpu.cores} core${h.cpu.cores === 1 ? '' : 's'}` : '–'),
    el('td', { class: 'num' }, String(h.processes)),
    el('td', { class: 'num' }, h.net ? `${fmtBytes(h.net.tx_bytes)} / ${fmtBytes(h.net.rx_bytes)}` : '–'),
    el('td', { class: 'num' }, clockText(h)),
    el('td', { class: 'num' }, h.critical_path_s > 0 ? fmtDuration(h.critical_path_s) : '–')));
  const s = m.straggler;
  const stragglerNote = s
    ? el('p', { class: 'noisy' }, `Host ${s.host}'s part ended last, ${fmtDuration(s.margin_s)} after the median end of the other hosts, ${fmtDuration(s.margin_s - s.threshold_s)} beyond the straggler threshold (${fmtDuration(s.threshold_s)}: 10% of the run, at least 1 s); finishing with them would end the run ${fmtDuration(s.saving_s)} sooner` +
        (s.within_uncertainty ? ` — within clock uncertainty (±${fmtDuration(s.uncertainty_ns / 1e9)} together).` : '.'))
    : null;
  const edges = m.cross_host_edges > 0
    ? el('p', {}, `${m.cross_host_edges} edge${m.cross_host_edges === 1 ? '' : 's'} between hosts` +
        (m.causality_violations === 0 && m.within_uncertainty_edges === 0
          ? ', all in causal order.'
          : `: ${m.causality_violations} backwards in time beyond the clocks' uncertainty, ${m.within_uncertainty_edges} within it.`))
    : null;
  const verb = { end_to_start: ['started', 'ended'], start_to_start: ['started', 'started'], start_to_end: ['ended', 'started'] };
  const phaseRef = (id, name) => (showPhase
    ? el('button', { type: 'button', class: 'link', title: 'show on the timeline', onclick: () => showPhase(id) }, name === null ? `#${id}` : name)
    : (name === null ? `#${id}` : name));
  const violations = m.violations.length
    ? el('table', { class: 'causality' },
      el('thead', {}, el('tr', {}, ['From', 'To', 'Kind', 'Reversed by', 'Allowed'].map((x) => el('th', {}, x)))),
      el('tbody', {}, m.violations.map((v) => el('tr', {},
        el('td', {}, phaseRef(v.from, v.from_name), ` (${v.from_host})`),
        el('td', {}, phaseRef(v.to, v.to_name), ` (${v.to_host})`),
        el('td', {}, v.kind),
        el('td', { class: 'num', title: `the second ${(verb[v.rule] || verb.start_to_end)[0]} before the first ${(verb[v.rule] || verb.start_to_end)[1]}` }, fmtDuration(v.gap_s)),
        el('td', { class: 'num' }, `${fmtDuration(v.tolerance_s)}${v.clocks_measured ? '' : ' (a clock not measured)'}`)))))
    : null;
  return section('hosts', 'Hosts',
    `A run across ${m.hosts.length} hosts (reference clock: ${m.reference_host}). Per host its part of the run (its phases, from the run's start), busy CPU, processes, network bytes sent / received, its clock's measured offset ± uncertainty (estimates), and the time of the critical path that ran on it.`,
    el('table', { class: 'hosts' },
      el('thead', {}, el('tr', {}, ['Host', 'Part', 'Span', 'CPU', 'Processes', 'Net sent / received', 'Clock offset', 'Critical path'].map((x) => el('th', {}, x)))),
      el('tbody', {}, rows)),
    stragglerNote, edges, violations,
    m.causality_violations > m.violations.length ? el('p', { class: 'muted' }, `… ${m.causality_violations - m.violations.length} more (grademl report --json: multi_host.violations).`) : null);
}

function legend() {
  return el('div', { class: 'legend' },
    BOUNDS.map((b) => el('span', {}, el('span', { class: 'swatch', style: { background: b.color } }), b.label)),
    el('span', {}, el('span', { class: 'swatch crit', style: { borderColor: CRITICAL_COLOR } }), 'critical path'));
}

function stackedBar(breakdown, total) {
  const bar = el('div', { class: 'stack' });
  for (const b of BOUNDS) {
    const s = breakdown[b.key] || 0;
    if (!(s > 0) || !(total > 0)) continue;
    const sat = breakdown.saturated ? breakdown.saturated[b.key] || 0 : 0;
    bar.append(el('span', { style: { width: `${(s / total) * 100}%`, background: b.color },
                            title: `${b.label}: ${fmtDuration(s)} (${fmtPercent(s / total)})${sat > 0 ? `, of which ${fmtDuration(sat)} with the machine's ${b.label} saturated` : ''}` }));
  }
  return bar;
}

function stepsSection(data, showPhase) {
  const steps = data.steps;
  if (!steps.length) return null;
  const rows = steps.map((s) => el('tr', { dataset: { phase: s.phase } },
    el('td', { class: 'name' }, el('button', { type: 'button', class: 'link', title: 'show on the timeline', onclick: () => showPhase(s.phase) }, s.name),
       s.critical ? el('span', { class: 'badge crit' }, 'critical') : null),
    el('td', { class: 'num' }, fmtDuration(s.duration_s)),
    el('td', { class: 'num' }, s.slack_s === null ? '' : fmtDuration(s.slack_s)),
    el('td', { class: 'bar-cell' }, stackedBar(s.bottlenecks, s.duration_s))));
  return section('bottlenecks', 'What limited each step',
    'The time of each step split by what bound it: a resource (CPU, memory, disk, network, GPU), waiting on nothing measured, or not covered by samples. Slack is how much later a step could have started without delaying the run.',
    legend(),
    el('table', { class: 'steps' }, el('thead', {}, el('tr', {}, el('th', {}, 'Step'), el('th', {}, 'Duration'), el('th', {}, 'Slack'), el('th', {}, 'Bound by'))),
       el('tbody', {}, rows)));
}

function whatifSection(data) {
  if (!data.whatif.length) return null;
  const rows = data.whatif.map((w) => el('tr', {},
    el('td', {}, el('code', {}, w.change)),
    el('td', { class: 'num' }, fmtDuration(w.makespan_s)),
    el('td', { class: 'num' }, fmtDuration(w.predicted_s)),
    el('td', { class: 'num good' }, `−${fmtDuration(w.saved_s)} (${fmtPercent(w.saved_fraction)})`)));
  return section('whatif', 'What if…', 'The top issues replayed by the what-if simulator: the run\'s duration now and with the change. Try others with `grademl whatif RUN CHANGE`.',
    el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 'Change'), el('th', {}, 'Now'), el('th', {}, 'Predicted'), el('th', {}, 'Saves'))),
       el('tbody', {}, rows)));
}

const METRIC_LABELS = {
  cpu: 'CPU', 'memory.rss': 'Memory (PSS)', 'io.read_bytes': 'Read', 'io.write_bytes': 'Written', 'disk.busy': 'Disk busy',
  'net.rx_bytes': 'Received', 'net.tx_bytes': 'Sent', 'gpu.utilization': 'GPU', 'gpu.memory_used': 'GPU memory',
};

function attributionSection(data) {
  const a = data.attribution;
  if (!a.rows.length || !a.metrics.length) return null;
  // Only the metrics some row used, under plain names.
  const metrics = a.metrics.filter((m) => a.rows.some((r) => r.usage[m.name] > 0));
  const head = el('tr', {}, el('th', {}, 'Phase'), el('th', {}, 'Duration'),
                  metrics.map((m) => el('th', { title: `${m.name}, in ${m.unit}` }, METRIC_LABELS[m.name] || m.name)));
  const rows = a.rows.map((r) => el('tr', {},
    el('td', { class: 'name', style: { paddingLeft: `${0.4 + r.depth * 1.1}em` } },
       el('span', { class: 'swatch', style: { background: typeColor(r.type) } }), r.name),
    el('td', { class: 'num' }, fmtDuration(r.duration_s)),
    metrics.map((m) => {
      const v = r.usage[m.name];
      const u = r.utilization[m.name];
      if (v === undefined || v === 0) return el('td', { class: 'num muted' }, '·');
      const text = m.name === 'cpu' && r.duration_s > 0 ? `${fmtUsage(v, m.unit)} (${(v / r.duration_s).toFixed(2)} cores)`
        : m.gauge && r.duration_s > 0 ? `${m.unit === 'byte-s' ? fmtBytes(v / r.duration_s) : fmtPercent(v / r.duration_s)} avg` : fmtUsage(v, m.unit);
      return el('td', { class: 'num', title: u !== undefined ? `used ${fmtPercent(u)} of what it could have had` : '' },
                text, u !== undefined ? el('span', { class: 'util' }, el('span', { style: { width: `${Math.min(100, u * 100)}%` } })) : null);
    })));
  return el('div', {}, el('h3', {}, 'Totals per phase'),
            el('div', { class: 'scroll-x' }, el('table', { class: 'attribution' }, el('thead', {}, head), el('tbody', {}, rows))));
}

function plotsGroups(container, data, view, plots) {
  const times = data.plots.t;
  // Hosts are open; each step's plots are folded (a run has many steps), drawn when opened.
  for (const g of data.plots.groups) {
    const isStep = g.phase !== undefined;
    const box = el('details', { class: 'plot-group', open: !isStep },
                   el('summary', {}, g.title, el('span', { class: 'muted' }, ` · ${g.charts.map((c) => c.title).join(', ')}`)));
    container.append(box);
    let drawn = false;
    const draw = () => {
      if (drawn || !box.open) return;
      drawn = true;
      for (const c of g.charts) plots.push(makePlot(box, view, times, c));
    };
    box.addEventListener('toggle', draw);
    draw();
  }
}

function main() {
  const t0 = performance.now();
  const app = document.getElementById('app');
  let data;
  try {
    data = JSON.parse(document.getElementById('grademl-data').textContent);
  } catch (e) {
    app.replaceChildren(el('p', { class: 'error' }, `This report's data could not be read: ${e.message}`));
    throw e;
  }
  const view = new View();
  const plots = [];
  app.append(header(data));
  const timeline = new Timeline(data, view);
  // Zooms the timeline to a phase (when drawn) and brings it into sight.
  const showPhase = (id) => {
    if (!timeline.show(id)) return;
    timeline.root.scrollIntoView({ behavior: 'smooth', block: 'center' });
  };
  app.append(issuesSection(data, showPhase));
  const gpu = gpuSection(data);
  if (gpu) app.append(gpu);
  const spark = sparkSection(data, showPhase);
  if (spark) app.append(spark);
  const dask = daskSection(data, showPhase);
  if (dask) app.append(dask);
  const communication = communicationSection(data, showPhase);
  if (communication) app.append(communication);
  const hosts = hostsSection(data, showPhase);
  if (hosts) app.append(hosts);
  const fine = fineSamplingSection(data);
  if (fine) app.append(fine);
  const deep = deepProfileSection(data);
  if (deep) app.append(deep);
  const reuse = reuseSection(data, showPhase);
  if (reuse) app.append(reuse);

  const tl = data.timeline;
  const lod = tl.shown_phases < tl.total_phases
    ? el('p', { class: 'note' }, `Level of detail: ${tl.shown_phases.toLocaleString('en-US')} of ${tl.total_phases.toLocaleString('en-US')} phases are drawn (the top ${tl.depth_limit + 1} levels of the tree in full, and the next level inside the longest phases of the last). Phases with a dark band at the bottom have more inside; \`grademl export --perfetto\` has them all.`)
    : null;
  const critToggle = el('input', { type: 'checkbox', id: 'critical-only' });
  critToggle.addEventListener('change', () => timeline.setCriticalOnly(critToggle.checked));
  const controls = el('div', { class: 'controls' },
    el('button', { type: 'button', id: 'zoom-in', onclick: () => timeline.zoomAt((view.t0 + view.t1) / 2, 0.5) }, 'Zoom in'),
    el('button', { type: 'button', id: 'zoom-out', onclick: () => timeline.zoomAt((view.t0 + view.t1) / 2, 2) }, 'Zoom out'),
    el('button', { type: 'button', id: 'zoom-reset', onclick: () => timeline.reset() }, 'Whole run'),
    el('label', {}, critToggle, ' highlight the critical path'),
    el('span', { class: 'muted hint' }, 'Wheel: zoom · drag: pan · double-click: zoom to a phase · W/S/A/D on the timeline'));
  app.append(section('timeline', 'Timeline',
    `Every phase of the run, nested under its parent; phases outlined in red are on the critical path (${fmtDuration(data.critical_path.makespan_s)} end to end). Hover for details.`,
    controls, legendTypes(data), lod, timeline.root));

  const plotBox = el('div', { class: 'plots' });
  app.append(section('resources', 'Resources over time', 'Per host and per step, on the timeline\'s time axis. Drag across a plot to zoom everything to that range.', plotBox));
  plotsGroups(plotBox, data, view, plots);
  if (!data.plots.groups.length) plotBox.append(el('p', { class: 'muted' }, 'No resource samples were recorded.'));

  const stackedBox = el('div', { class: 'plots' });
  for (const c of data.stacked) plots.push(makePlot(stackedBox, view, data.plots.t, c, { stacked: true }));
  const attribution = attributionSection(data);
  if (data.stacked.length || attribution) {
    app.append(section('attribution', 'Who used what', 'Each resource\'s use split over the phases that ran at the time (stacked), and each phase\'s totals. The bar under a value is how much of what the phase could have had it used.',
                       stackedBox, attribution));
  }
  const steps = stepsSection(data, showPhase);
  if (steps) app.append(steps);
  const whatif = whatifSection(data);
  if (whatif) app.append(whatif);
  app.append(el('footer', {}, `Written by GradeML ${data.run.grademl_version}. Data schema ${data.schema}.`));
  app.setAttribute('aria-busy', 'false');
  timeline.resize();
  view.set(0, timeline.end);

  // For tests and scripts: the report's state.
  window.grademl = { data, view, timeline, plots, readyMs: performance.now() - t0, readyAt: performance.now(), ready: true };
  document.documentElement.dataset.ready = 'true';
}

function legendTypes(data) {
  const t = data.timeline, seen = new Map();
  for (let i = 0; i < t.type.length && seen.size < 12; ++i) {
    const type = t.strings[t.type[i]];
    const leaf = type.split('/').pop();
    if (!seen.has(leaf)) seen.set(leaf, type);
  }
  return el('div', { class: 'legend' }, [...seen].map(([leaf, type]) =>
    el('span', {}, el('span', { class: 'swatch', style: { background: typeColor(type) } }), leaf)));
}

main();
