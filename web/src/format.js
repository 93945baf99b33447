// Number formatting for the report: durations, bytes, rates, percentages.

export function fmtDuration(s) {
  if (s === null || s === undefined || !isFinite(s)) return '–';
  const a = Math.abs(s);
  if (a === 0) return '0 s';
  if (a < 1e-3) return `${(s * 1e6).toFixed(a < 1e-5 ? 1 : 0)} µs`;
  if (a < 1) return `${(s * 1e3).toFixed(a < 0.01 ? 2 : a < 0.1 ? 1 : 0)} ms`;
  if (a < 60) return `${s.toFixed(a < 10 ? 2 : 1)} s`;
  if (a < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
export function fmtBytes(b) {
  if (!isFinite(b)) return '–';
  let v = Math.abs(b), u = 0;
  while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; ++u; }
  const digits = u === 0 ? 0 : v < 10 ? 2 : v < 100 ? 1 : 0;
  return `${b < 0 ? '-' : ''}${v.toFixed(digits)} ${UNITS[u]}`;
}

export function fmtPercent(f) {
  if (!isFinite(f)) return '–';
  const p = f * 100;
  return `${Math.abs(p) < 10 && p !== 0 ? p.toFixed(1) : Math.round(p)}%`;
}

export function fmtNumber(v, digits = 3) {
  if (!isFinite(v)) return '–';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e4) return Math.round(v).toLocaleString('en-US');
  return Number(v.toPrecision(digits)).toString();
}

// A value in a plot's unit.
export function fmtValue(v, unit) {
  if (v === null || v === undefined || !isFinite(v)) return '–';
  switch (unit) {
    case 'bytes': return fmtBytes(v);
    case 'bytes/s': return `${fmtBytes(v)}/s`;
    case 'fraction': return fmtPercent(v);
    case 'cores': return `${fmtNumber(v)} cores`;
    default: return `${fmtNumber(v)} ${unit}`;
  }
}

// A total of an attributed metric (core-s, bytes, byte-s, disk-s, GPU-s).
export function fmtUsage(v, unit) {
  switch (unit) {
    case 'bytes': return fmtBytes(v);
    case 'byte-s': return `${fmtBytes(v)}·s`;
    default: return `${fmtNumber(v)} ${unit}`;
  }
}

// Tick step for an axis spanning `span` seconds with about `count` ticks: 1, 2 or 5 x 10^k.
export function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// A time-axis label: seconds since the run's start.
export function fmtTick(t, step) {
  if (step >= 60 && Math.abs(t) >= 60) {
    const m = Math.floor(t / 60), s = t - m * 60;
    return s === 0 ? `${m} min` : `${m}:${String(Math.round(s)).padStart(2, '0')}`;
  }
  const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
  return `${t.toFixed(decimals)} s`;
}
