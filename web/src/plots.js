// Resource plots (uPlot) on the timeline's time axis: every plot follows the shared view,
// and selecting a range in a plot zooms everything to it.

import uPlot from 'uplot';
import { el } from './dom.js';
import { fmtTick, fmtValue, niceStep } from './format.js';
import { SERIES_COLORS } from './labels.js';

const PLOT_H = 130;

function axisValues(unit) {
  return (u, splits) => splits.map((v) => (v === null ? '' : fmtValue(v, unit).replace(' cores', '')));
}

// One plot. `stacked`: series are layers drawn on top of each other (values are cumulated
// here; the legend shows each layer's own value).
export function makePlot(container, view, times, chart, { stacked = false } = {}) {
  const raw = chart.series.map((s) => s.values);
  let shown = raw;
  if (stacked) {
    const cum = [];
    let acc = new Array(times.length).fill(0);
    for (const v of raw) {
      acc = acc.map((a, k) => a + (v[k] || 0));
      cum.push(acc);
    }
    shown = cum.slice().reverse();  // the total first, so that lower layers paint over it
  }
  const order = stacked ? raw.map((_, k) => raw.length - 1 - k) : raw.map((_, k) => k);
  const series = [{ label: 'time', value: (u, v) => (v === null ? '–' : fmtTick(v, 1e-3)) }];
  order.forEach((k) => {
    const color = SERIES_COLORS[k % SERIES_COLORS.length];
    series.push({
      label: chart.series[k].label,
      stroke: color,
      width: 1.25,
      fill: stacked ? `${color}cc` : `${color}22`,
      points: { show: false },
      value: (u, v, si, idx) => (idx === null || idx === undefined ? '–' : fmtValue(raw[k][idx], chart.unit)),
    });
  });
  const box = el('div', { class: 'plot' });
  container.append(box);
  const opts = {
    width: Math.max(300, container.clientWidth || 800),
    height: PLOT_H,
    title: chart.title,
    cursor: { sync: { key: 'grademl' }, drag: { x: true, y: false, setScale: false } },
    scales: {
      x: { time: false, auto: false, range: () => [view.t0, view.t1] },
      y: { auto: true, range: (u, min, max) => [0, Math.max(chart.max && !stacked ? Math.min(chart.max, max * 1.1) : max * 1.1, 1e-9)] },
    },
    axes: [
      { values: (u, splits) => { const step = splits.length > 1 ? splits[1] - splits[0] : 1; return splits.map((v) => fmtTick(v, step)); },
        splits: (u, ai, min, max) => { const step = niceStep(max - min, u.width / 110); const out = []; for (let v = Math.ceil(min / step) * step; v <= max; v += step) out.push(v); return out; } },
      { values: axisValues(chart.unit), size: 86 },
    ],
    series,
    legend: { live: true },
    hooks: {
      setSelect: [(u) => {
        if (u.select.width > 2) {
          const a = u.posToVal(u.select.left, 'x'), b = u.posToVal(u.select.left + u.select.width, 'x');
          view.set(a, b);
        }
        u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
      }],
    },
  };
  const plot = new uPlot(opts, [times, ...shown], box);
  plot.grademlUnit = chart.unit;
  view.listen(() => plot.setScale('x', { min: view.t0, max: view.t1 }));
  new ResizeObserver(() => {
    const w = Math.max(300, container.clientWidth);
    if (Math.abs(w - plot.width) > 1) plot.setSize({ width: w, height: PLOT_H });
  }).observe(container);
  return plot;
}
