// The zoomable, pannable timeline of the phase tree, drawn on a canvas.
//
// Phases come as columns (data.timeline) already laid out in rows by grademl: a phase sits
// below its parent and phases of one row never overlap. Drawing visits only the phases of
// the visible rows whose time range meets the view (binary search per row on start, with
// the row's longest duration as slack), and phases narrower than a pixel are merged into one
// pixel column, so a view over 100,000 phases draws a few thousand rectangles.
//
// Phases of imported traces on a track of their own (a GPU stream, a thread of the trace)
// lie in bands of rows (data.timeline.bands): each band is tinted over its time range and
// labelled with its track ("GPU 0 stream 7") where it starts.

import { el } from './dom.js';
import { BOUNDS, CRITICAL_COLOR, typeColor } from './labels.js';
import { fmtDuration, fmtTick, niceStep } from './format.js';

const ROW_H = 20;
const AXIS_H = 24;
const MAX_VIEW_H = 520;
const MIN_SPAN = 1e-6;  // one microsecond

export class Timeline {
  constructor(data, view) {
    this.t = data.timeline;
    this.view = view;
    this.n = this.t.id.length;
    this.end = data.run.duration_s || 0;
    for (let i = 0; i < this.n; ++i) if (this.t.end[i] > this.end) this.end = this.t.end[i];
    if (!(this.end > 0)) this.end = 1;
    this.criticalOnly = false;
    this.scrollY = 0;
    this.hover = -1;
    this.indexById = new Map();
    for (let i = 0; i < this.n; ++i) this.indexById.set(this.t.id[i], i);
    this.tracks = this.t.tracks || [];
    this.bands = this.t.bands || [];
    this.trackCol = this.t.track || [];
    this.buildRows();
    this.buildDom();
    view.set(0, this.end);
  }

  buildRows() {
    const rows = Math.max(1, this.t.rows);
    this.rows = Array.from({ length: rows }, () => []);
    this.rowMaxDur = new Float64Array(rows);
    for (let i = 0; i < this.n; ++i) {
      const r = this.t.row[i];
      this.rows[r].push(i);
      const d = this.t.end[i] - this.t.start[i];
      if (d > this.rowMaxDur[r]) this.rowMaxDur[r] = d;
    }
    const start = this.t.start;
    for (const row of this.rows) row.sort((a, b) => start[a] - start[b]);
    this.contentH = rows * ROW_H;
  }

  buildDom() {
    this.canvas = el('canvas', { class: 'timeline-canvas', tabindex: '0', 'aria-label': 'Timeline of the run\'s phases' });
    this.tooltip = el('div', { class: 'tooltip', role: 'tooltip', hidden: true });
    this.root = el('div', { class: 'timeline' }, this.canvas, this.tooltip);
    this.ctx = this.canvas.getContext('2d');
    let drag = null;
    this.canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      if (Math.abs(e.deltaX) > Math.abs(e.deltaY) || e.shiftKey) {
        const d = e.shiftKey ? e.deltaY : e.deltaX;
        this.panBy((d / this.width) * (this.view.t1 - this.view.t0));
      } else {
        const x = e.offsetX;
        this.zoomAt(this.xToT(x), Math.pow(1.0015, e.deltaY));
      }
    }, { passive: false });
    this.canvas.addEventListener('mousedown', (e) => {
      drag = { x: e.clientX, y: e.clientY, t0: this.view.t0, t1: this.view.t1, sy: this.scrollY, moved: false };
    });
    window.addEventListener('mousemove', (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 2) drag.moved = true;
      const dt = (dx / this.width) * (drag.t1 - drag.t0);
      this.view.set(drag.t0 - dt, drag.t1 - dt);
      this.setScroll(drag.sy - dy);
    });
    window.addEventListener('mouseup', () => { drag = null; });
    this.canvas.addEventListener('mousemove', (e) => this.onHover(e));
    this.canvas.addEventListener('mouseleave', () => { this.hover = -1; this.tooltip.hidden = true; this.draw(); });
    this.canvas.addEventListener('dblclick', (e) => {
      const i = this.phaseAt(e.offsetX, e.offsetY);
      if (i >= 0) this.zoomTo(i);
    });
    this.canvas.addEventListener('keydown', (e) => {
      const span = this.view.t1 - this.view.t0, mid = (this.view.t0 + this.view.t1) / 2;
      const keys = { w: () => this.zoomAt(mid, 0.8), s: () => this.zoomAt(mid, 1.25), a: () => this.panBy(-0.2 * span),
                     d: () => this.panBy(0.2 * span), '0': () => this.reset() };
      const f = keys[e.key.toLowerCase()];
      if (f) { f(); e.preventDefault(); }
    });
    new ResizeObserver(() => this.resize()).observe(this.root);
    this.view.listen(() => this.draw());
  }

  get viewH() { return Math.min(this.contentH, MAX_VIEW_H); }

  resize() {
    const w = Math.max(200, this.root.clientWidth);
    const h = AXIS_H + this.viewH;
    const dpr = window.devicePixelRatio || 1;
    this.width = w;
    this.height = h;
    this.canvas.width = Math.round(w * dpr);
    this.canvas.height = Math.round(h * dpr);
    this.canvas.style.width = `${w}px`;
    this.canvas.style.height = `${h}px`;
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.draw();
  }

  xToT(x) { return this.view.t0 + (x / this.width) * (this.view.t1 - this.view.t0); }
  tToX(t) { return ((t - this.view.t0) / (this.view.t1 - this.view.t0)) * this.width; }

  zoomAt(t, factor) {
    const { t0, t1 } = this.view;
    const span = Math.max(MIN_SPAN, (t1 - t0) * factor);
    const a = (t - t0) / (t1 - t0);
    this.view.set(t - a * span, t - a * span + span);
  }
  panBy(dt) { this.view.set(this.view.t0 + dt, this.view.t1 + dt); }
  reset() { this.setScroll(0); this.view.set(0, this.end); }
  zoomTo(i) {
    const s = this.t.start[i], e = this.t.end[i], pad = Math.max((e - s) * 0.05, MIN_SPAN);
    this.view.set(s - pad, e + pad);
  }
  // Zooms to phase `id`, scrolls its row into the canvas and marks it; false when not drawn.
  show(id) {
    const i = this.indexById.get(id);
    if (i === undefined) return false;
    this.scrollToRow(this.t.row[i]);
    this.hover = i;
    this.zoomTo(i);
    return true;
  }
  // Scrolls row r into the canvas (centred) when it is outside.
  scrollToRow(r) {
    const y = r * ROW_H;
    if (y < this.scrollY || y + ROW_H > this.scrollY + this.viewH) this.setScroll(y - this.viewH / 2);
  }
  setScroll(y) {
    this.scrollY = Math.max(0, Math.min(this.contentH - this.viewH, y));
    this.draw();
  }
  setCriticalOnly(on) { this.criticalOnly = on; this.draw(); }

  // The phase under canvas point (x, y), or -1; within 3 pixels for thin phases.
  phaseAt(x, y) {
    if (y < AXIS_H) return -1;
    const r = Math.floor((y - AXIS_H + this.scrollY) / ROW_H);
    if (r < 0 || r >= this.rows.length) return -1;
    const row = this.rows[r], start = this.t.start, end = this.t.end;
    const t = this.xToT(x), slack = (3 / this.width) * (this.view.t1 - this.view.t0);
    let lo = 0, hi = row.length;  // first phase starting after t + slack
    while (lo < hi) { const m = (lo + hi) >> 1; if (start[row[m]] <= t + slack) lo = m + 1; else hi = m; }
    let best = -1, bestD = Infinity;
    for (let k = lo - 1; k >= 0; --k) {
      const i = row[k];
      if (end[i] < t - slack - this.rowMaxDur[r]) break;
      const d = t < start[i] ? start[i] - t : t > end[i] ? t - end[i] : 0;
      if (d <= slack && d < bestD) { best = i; bestD = d; if (d === 0) break; }
    }
    return best;
  }

  // Where phase `id` is drawn, in client coordinates (scrolling it into the canvas first).
  phaseRect(id) {
    const i = this.indexById.get(id);
    if (i === undefined) return null;
    const y = this.t.row[i] * ROW_H;
    this.scrollToRow(this.t.row[i]);
    const box = this.canvas.getBoundingClientRect();
    const x0 = Math.max(0, this.tToX(this.t.start[i])), x1 = Math.min(this.width, this.tToX(this.t.end[i]));
    return { x: box.left + x0, y: box.top + AXIS_H + y - this.scrollY, width: Math.max(0, x1 - x0), height: ROW_H,
             visible: x1 > 0 && x0 < this.width };
  }

  onHover(e) {
    const i = this.phaseAt(e.offsetX, e.offsetY);
    if (i !== this.hover) { this.hover = i; this.draw(); }
    if (i < 0) { this.tooltip.hidden = true; return; }
    this.fillTooltip(i);
    this.tooltip.hidden = false;
    const tw = this.tooltip.offsetWidth, th = this.tooltip.offsetHeight;
    let x = e.offsetX + 14, y = e.offsetY + 14;
    if (x + tw > this.width) x = Math.max(0, e.offsetX - tw - 8);
    if (y + th > this.height + 200) y = Math.max(0, e.offsetY - th - 8);
    this.tooltip.style.left = `${x}px`;
    this.tooltip.style.top = `${y}px`;
  }

  fillTooltip(i) {
    const t = this.t, s = t.strings;
    const name = s[t.name[i]] || s[t.type[i]].split('/').pop();
    const dur = t.end[i] - t.start[i];
    const lines = [
      el('div', { class: 'tt-name' }, name),
      el('div', { class: 'tt-type' }, s[t.type[i]]),
      el('div', {}, `${fmtDuration(dur)}${t.open[i] ? ' (still running when recording stopped)' : ''}`,
         el('span', { class: 'muted' }, ` · ${fmtTick(t.start[i], 1e-3)} → ${fmtTick(t.end[i], 1e-3)}`)),
    ];
    const b = t.bound[i];
    if (b >= 0 && dur > 0) {
      const frac = t.bound_s[i] / dur;
      lines.push(el('div', {}, el('span', { class: 'swatch', style: { background: BOUNDS[b].color } }),
                    `mostly ${BOUNDS[b].label === 'waiting' ? 'waiting' : `${BOUNDS[b].label}-bound`}: ${fmtDuration(t.bound_s[i])} (${Math.round(frac * 100)}%)`));
    }
    const where = [s[t.host[i]] ? `host ${s[t.host[i]]}` : '', t.pid[i] ? `pid ${t.pid[i]}` : ''].filter(Boolean);
    const track = this.trackCol[i] >= 0 ? this.tracks[this.trackCol[i]] : null;
    if (track) where.push(track.rank !== null && track.rank !== undefined ? `${track.label} · rank ${track.rank}` : track.label);
    if (where.length) lines.push(el('div', { class: 'muted tt-where' }, where.join(' · ')));
    if (t.critical[i]) lines.push(el('div', { class: 'tt-critical' }, 'on the critical path'));
    if (t.collapsed[i]) lines.push(el('div', { class: 'muted' }, `${t.collapsed[i].toLocaleString('en-US')} child phases not drawn (level of detail)`));
    this.tooltip.replaceChildren(...lines);
  }

  draw() {
    if (!this.width) return;
    const ctx = this.ctx, t = this.t, W = this.width;
    const { t0, t1 } = this.view;
    const scale = W / (t1 - t0);
    ctx.clearRect(0, 0, W, this.height);
    this.drawAxis(ctx, t0, t1);
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, AXIS_H, W, this.viewH);
    ctx.clip();
    const firstRow = Math.floor(this.scrollY / ROW_H);
    const lastRow = Math.min(this.rows.length - 1, Math.floor((this.scrollY + this.viewH) / ROW_H));
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    this.drawBands(ctx, firstRow, lastRow, false);
    const strings = t.strings;
    let drawn = 0;
    for (let r = firstRow; r <= lastRow; ++r) {
      const row = this.rows[r];
      const y = AXIS_H + r * ROW_H - this.scrollY;
      // The first phase that can reach t0: starts at or after t0 - the row's longest.
      const from = t0 - this.rowMaxDur[r];
      let lo = 0, hi = row.length;
      while (lo < hi) { const m = (lo + hi) >> 1; if (t.start[row[m]] < from) lo = m + 1; else hi = m; }
      let lastPx = -1;
      for (let k = lo; k < row.length; ++k) {
        const i = row[k];
        const s = t.start[i];
        if (s > t1) break;
        const e = t.end[i];
        if (e < t0) continue;
        const x0 = (s - t0) * scale, x1 = (e - t0) * scale;
        const w = x1 - x0;
        const dim = this.criticalOnly && !t.critical[i];
        if (w < 1) {  // sub-pixel: one column per pixel
          const px = Math.floor(x0);
          if (px === lastPx) continue;
          lastPx = px;
          ctx.globalAlpha = dim ? 0.2 : 1;
          // Their type's colour: red columns would paint a busy level solid red.
          ctx.fillStyle = typeColor(strings[t.type[i]]);
          ctx.fillRect(px, y + 1, 1, ROW_H - 2);
          ++drawn;
          continue;
        }
        const cx0 = Math.max(x0, -2), cx1 = Math.min(x1, W + 2);
        ctx.globalAlpha = dim ? 0.2 : 1;
        ctx.fillStyle = typeColor(strings[t.type[i]]);
        ctx.fillRect(cx0, y + 1, cx1 - cx0, ROW_H - 2);
        if (t.collapsed[i]) {  // hatch: there is more inside than drawn
          ctx.fillStyle = 'rgba(0,0,0,0.08)';
          ctx.fillRect(cx0, y + ROW_H - 5, cx1 - cx0, 4);
        }
        if (t.critical[i]) {
          ctx.strokeStyle = CRITICAL_COLOR;
          ctx.lineWidth = 2;
          ctx.strokeRect(cx0 + 1, y + 2, Math.max(0, cx1 - cx0 - 2), ROW_H - 4);
        }
        if (i === this.hover) {
          ctx.strokeStyle = '#222';
          ctx.lineWidth = 1;
          ctx.strokeRect(cx0 + 0.5, y + 1.5, Math.max(0, cx1 - cx0 - 1), ROW_H - 3);
        }
        const vw = cx1 - cx0;
        if (vw > 28) {
          const label = strings[t.name[i]] || strings[t.type[i]].split('/').pop();
          const maxChars = Math.floor((vw - 8) / 6.2);
          const text = label.length > maxChars ? `${label.slice(0, Math.max(1, maxChars - 1))}…` : label;
          ctx.fillStyle = '#1b1b1b';
          ctx.fillText(text, Math.max(cx0, 0) + 4, y + ROW_H / 2 + 0.5);
        }
        lastPx = Math.floor(x1);
        ++drawn;
      }
    }
    ctx.globalAlpha = 1;
    this.drawEdges(ctx, t0, scale);
    this.drawBands(ctx, firstRow, lastRow, true);
    ctx.restore();
    this.lastDrawn = drawn;
  }

  // The bands of the tracks in rows [firstRow, lastRow] that meet the view: a tint over
  // their time range behind the phases (labels false), or each band's label where it starts
  // (at the canvas's left edge once the start is scrolled out) (labels true).
  drawBands(ctx, firstRow, lastRow, labels) {
    const { t0, t1 } = this.view;
    for (const b of this.bands) {
      if (b.row > lastRow || b.row + b.rows - 1 < firstRow || b.end < t0 || b.start > t1) continue;
      const track = this.tracks[b.track];
      const y = AXIS_H + b.row * ROW_H - this.scrollY;
      const x0 = Math.max(0, this.tToX(b.start)), x1 = Math.min(this.width, this.tToX(b.end));
      if (!labels) {
        ctx.fillStyle = track && track.kind === 'device' ? 'rgba(89,161,79,0.08)' : 'rgba(78,121,167,0.06)';
        ctx.fillRect(x0, y, Math.max(1, x1 - x0), b.rows * ROW_H);
        ctx.fillStyle = 'rgba(0,0,0,0.15)';
        ctx.fillRect(x0, y, Math.max(1, x1 - x0), 1);
        continue;
      }
      const text = track ? track.label : '';
      if (!text) continue;
      const shown = text.length > 40 ? `${text.slice(0, 39)}…` : text;
      const w = ctx.measureText(shown).width + 8;
      // Just left of the band's first phase (the phase keeps its name in sight), pushed right
      // by the canvas's left edge.
      const lx = Math.max(0, x0 - w - 2);
      ctx.fillStyle = 'rgba(255,255,255,0.85)';
      ctx.fillRect(lx, y + 1, w, ROW_H - 2);
      ctx.fillStyle = '#444';
      ctx.fillText(shown, lx + 4, y + ROW_H / 2 + 0.5);
    }
  }

  drawEdges(ctx, t0, scale) {
    const t = this.t;
    if (!t.edges.length || t.edges.length > 2000) return;
    ctx.strokeStyle = 'rgba(60,60,60,0.35)';
    ctx.lineWidth = 1;
    for (const [a, b] of t.edges) {
      const xa = (t.end[a] - t0) * scale, xb = (t.start[b] - t0) * scale;
      const ya = AXIS_H + t.row[a] * ROW_H + ROW_H / 2 - this.scrollY;
      const yb = AXIS_H + t.row[b] * ROW_H + ROW_H / 2 - this.scrollY;
      if (Math.max(xa, xb) < 0 || Math.min(xa, xb) > this.width) continue;
      ctx.beginPath();
      ctx.moveTo(xa, ya);
      ctx.bezierCurveTo(xa + 20, ya, xb - 20, yb, xb, yb);
      ctx.stroke();
      ctx.beginPath();
      ctx.moveTo(xb, yb);
      ctx.lineTo(xb - 5, yb - 3);
      ctx.lineTo(xb - 5, yb + 3);
      ctx.closePath();
      ctx.fillStyle = 'rgba(60,60,60,0.7)';
      ctx.fill();
    }
  }

  drawAxis(ctx, t0, t1) {
    const W = this.width;
    ctx.fillStyle = '#f7f7f7';
    ctx.fillRect(0, 0, W, AXIS_H);
    const step = niceStep(t1 - t0, W / 110);
    ctx.fillStyle = '#555';
    ctx.strokeStyle = '#e4e4e4';
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.lineWidth = 1;
    for (let v = Math.ceil(t0 / step) * step; v <= t1; v += step) {
      const x = Math.round(((v - t0) / (t1 - t0)) * W) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, AXIS_H - 6);
      ctx.lineTo(x, this.height);
      ctx.stroke();
      ctx.fillText(fmtTick(Math.abs(v) < step / 1e6 ? 0 : v, step), x + 3, AXIS_H / 2);
    }
  }
}
