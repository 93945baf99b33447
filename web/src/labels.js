// Names and colours of what limited a phase; the codes match src/report/html_report.cpp.

export const BOUNDS = [
  { key: 'cpu', label: 'CPU', color: '#4e79a7' },
  { key: 'memory', label: 'memory', color: '#f28e2b' },
  { key: 'disk', label: 'disk', color: '#edc948' },
  { key: 'network', label: 'network', color: '#76b7b2' },
  { key: 'gpu', label: 'GPU', color: '#59a14f' },
  { key: 'waiting', label: 'waiting', color: '#bab0ac' },
  { key: 'unknown', label: 'not measured', color: '#e3e3e3' },
];

export const CRITICAL_COLOR = '#d62728';

const PALETTE = ['#8cb4d9', '#f6b26b', '#93c47d', '#c9a0dc', '#76c7c0', '#e6a8a8', '#b4a7d6', '#ffd966',
                 '#a4c2f4', '#b6d7a8', '#d5a6bd', '#9fc5e8', '#f9cb9c', '#d9d2e9', '#a2c4c9', '#ead1dc'];

// Fixed colours for the well-known types, so that a run reads the same in every report.
const KNOWN = { run: '#d3d7dd', step: '#8fb8de', process: '#c9dcef', epoch: '#b4a7d6', iteration: '#b6d7a8',
                data_wait: '#d9d9d9', forward: '#f9cb9c', loss: '#ea9999', backward: '#f6b26b',
                optimizer_step: '#ffd966', module: '#a2c4c9', op: '#cfe2f3', task: '#a4c2f4', stage: '#9fc5e8',
                // Imported traces (docs/import.md): GPU work and what launched it.
                kernel: '#59a14f', memcpy: '#edc948', memset: '#f1ce63', sync: '#e15759', runtime: '#d4a6c8',
                annotation: '#bcbddc', python: '#c6dbef' };
const colorCache = new Map();
// A stable colour per phase type, by the type's last element ("forward", "process").
export function typeColor(type) {
  let c = colorCache.get(type);
  if (c) return c;
  const leaf = type.slice(type.lastIndexOf('/') + 1);
  if (KNOWN[leaf]) { colorCache.set(type, KNOWN[leaf]); return KNOWN[leaf]; }
  let h = 2166136261;
  for (let i = 0; i < leaf.length; ++i) h = Math.imul(h ^ leaf.charCodeAt(i), 16777619);
  c = PALETTE[(h >>> 0) % PALETTE.length];
  colorCache.set(type, c);
  return c;
}

export const SERIES_COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
                              '#ff9da7', '#9c755f', '#bab0ac'];
