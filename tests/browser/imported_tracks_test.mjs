// Browser test of an imported trace on the HTML report's timeline: imports a small Kineto
// trace (tests/data/browser/imported_gpu.trace.json: a CPU thread launching a kernel on GPU 0
// stream 7, a kernel with a hostile name on stream 20, a memcpy) with `grademl import`, writes
// the run's HTML report, opens it in Debian's headless Chromium and checks that
//  - the page loads with no console error, page error, dialog or request;
//  - each GPU stream is a band of its own, labelled "GPU 0 stream 7" / "GPU 0 stream 20";
//  - the kernel is drawn on its stream's band, and its tooltip names the stream;
//  - the hostile kernel name is data, shown as text, never run;
//  - the header lists the imported trace, and the GPU section has rank 0's row.
// A screenshot is kept in the artifacts folder.
//
// Usage: node imported_tracks_test.mjs --grademl BIN --web WEB_DIR --trace FILE --artifacts DIR [--chromium PATH]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { checkSelfContained, checker, finishTest, launchChromium, openReport, testArg } from './chromium.mjs';

const arg = testArg;
const grademl = resolve(arg('--grademl'));
const webDir = resolve(arg('--web'));
const trace = resolve(arg('--trace'));
const artifacts = resolve(arg('--artifacts', 'test-artifacts'));
const chromiumPath = arg('--chromium', '/usr/bin/chromium');

const { check, failures } = checker();

const dir = mkdtempSync(join(tmpdir(), 'grademl-tracks-'));
const db = join(dir, 'runs.db');
const html = join(dir, 'report.html');
const run = (...a) => execFileSync(grademl, ['--db', db, ...a], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
try {
  run('import', trace);
  run('report', '--html', html);
} catch (e) {
  console.error(`grademl failed: ${e.stderr}`);
  process.exit(1);
}
const hostile = '<img src=x onerror="window.__pwned=1">';
const gemm = 'sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8';

let browser;
try {
  browser = await launchChromium(webDir, chromiumPath);
} catch (e) {
  console.error(`imported_tracks_test: ${e.message}`);
  process.exit(1);
}
try {
  const { page, errors, requests, dialogs } = await openReport(browser, html);

  const t = await page.evaluate(() => window.grademl.data.timeline);
  const labels = t.tracks.map((k) => k.label);
  check(labels.includes('GPU 0 stream 7') && labels.includes('GPU 0 stream 20'),
        `the streams are tracks of the timeline (${JSON.stringify(labels)})`);
  const bandRows = (label) => t.bands.filter((b) => t.tracks[b.track].label === label).map((b) => b.row);
  const s7 = bandRows('GPU 0 stream 7'), s20 = bandRows('GPU 0 stream 20');
  check(s7.length === 1 && s20.length === 1 && s7[0] !== s20[0], `each stream has a band of its own (rows ${s7} and ${s20})`);

  const index = (name) => t.name.findIndex((n) => t.strings[n] === name);
  const k = index(gemm);
  check(k >= 0 && t.row[k] === s7[0], `the gemm kernel lies on stream 7's band (row ${t.row[k]})`);
  const id = t.id[k];
  const rect = await page.evaluate((i) => window.grademl.timeline.phaseRect(i), id);
  check(rect && rect.visible && rect.width >= 1, `the kernel is drawn (${rect && rect.width.toFixed(1)} px wide)`);
  if (rect) {
    await page.mouse.move(rect.x + Math.min(rect.width / 2, 40), rect.y + rect.height / 2);
    const tip = await page.waitForSelector('.tooltip:not([hidden])', { timeout: 2000 }).catch(() => null);
    const text = tip ? await tip.textContent() : '';
    check(text.includes(gemm) && text.includes('GPU 0 stream 7'), `its tooltip names the kernel and its stream (${JSON.stringify(text.slice(0, 160))})`);
    await page.mouse.move(5, 5);
  }
  check(index(hostile) >= 0, 'the hostile kernel name survives as data');
  const injected = await page.evaluate(() => ({ pwned: window.__pwned === 1, imgs: document.querySelectorAll('img').length }));
  check(!injected.pwned && injected.imgs === 0, 'a kernel name with markup is never run');

  const sources = await page.evaluate(() => [...document.querySelectorAll('.sources li')].map((li) => li.textContent));
  check(sources.length === 1 && sources[0].includes('imported_gpu.trace.json'), `the header lists the imported trace (${JSON.stringify(sources)})`);

  const gpuRows = await page.evaluate(() => [...document.querySelectorAll('section#gpu table.gpu tbody tr')].map((tr) => tr.textContent));
  check(gpuRows.length === 1 && gpuRows[0].startsWith('rank 0'), `the GPU section has a row for rank 0 (${JSON.stringify(gpuRows)})`);

  mkdirSync(artifacts, { recursive: true });
  const shot = join(artifacts, 'imported_tracks.png');
  await page.screenshot({ path: shot, fullPage: true });
  check(statSync(shot).size > 10000, `screenshot kept: ${shot}`);
  checkSelfContained(check, { errors, dialogs, requests });
} finally {
  await browser.close();
}
finishTest(failures(), dir);
