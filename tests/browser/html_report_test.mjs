// Browser test of the HTML report: records a real three-step workflow with grademl, writes
// its HTML report, opens the file in Debian's headless Chromium (driven by playwright-core
// from web/node_modules) and checks that
//  - the page loads from disk with no console error, no page error, no dialog and no
//    request beyond the file itself (it works offline);
//  - every step of the workflow is drawn on the timeline, and hovering it shows its tooltip;
//  - a hostile step name is shown as text, never run as markup;
//  - wheel zoom narrows the view and the resource plots follow; "Whole run" restores it;
//    dragging pans;
//  - the sections are there (issues, resources, who used what, steps, what-if).
// A screenshot of the whole page is kept in the artifacts folder.
//
// Usage: node html_report_test.mjs --grademl BIN --web WEB_DIR --artifacts DIR [--chromium PATH]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, mkdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { checkSelfContained, checker, finishTest, launchChromium, openReport, testArg } from './chromium.mjs';

const arg = testArg;
const grademl = resolve(arg('--grademl'));
const webDir = resolve(arg('--web'));
const artifacts = resolve(arg('--artifacts', 'test-artifacts'));
const chromiumPath = arg('--chromium', '/usr/bin/chromium');

const { check, failures } = checker();


// 1. A real workflow: three steps, one burning CPU, one writing a file, one named to inject markup.
const dir = mkdtempSync(join(tmpdir(), 'grademl-html-'));
const hostile = '<img src=x onerror="window.__pwned=1">&amp;';
writeFileSync(join(dir, 'burn.py'), `import sys, time
t = time.time()
while time.time() - t < float(sys.argv[1]):
    pass
if len(sys.argv) > 2:
    open(sys.argv[2], 'wb').write(b'x' * (4 << 20))
`);
const workflow = `name: browser-test
steps:
  prepare:
    cmd: /usr/bin/python3 burn.py 0.6 data.bin
    outs: [data.bin]
  train:
    cmd: /usr/bin/python3 burn.py 0.8
    deps: [data.bin]
  '${hostile}':
    cmd: sleep 0.3
    deps: [data.bin]
`;
writeFileSync(join(dir, 'workflow.yaml'), workflow);
const db = join(dir, 'runs.db');
const run = (...a) => execFileSync(grademl, ['--db', db, ...a], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
try {
  run('run', 'workflow.yaml');
} catch (e) {
  console.error(`grademl run failed: ${e.stderr}`);
  process.exit(1);
}
const html = join(dir, 'report.html');
run('report', '--html', html);
check(statSync(html).size > 0, `report written (${statSync(html).size} bytes)`);

// 2. Open it.
let browser;
try {
  browser = await launchChromium(webDir, chromiumPath);
} catch (e) {
  console.error(`html_report_test: ${e.message}`);
  process.exit(1);
}
try {
  const { page, errors, requests, dialogs } = await openReport(browser, html);

  const data = await page.evaluate(() => window.grademl.data);
  const stepNames = data.steps.map((s) => s.name);
  check(stepNames.length === 3, `three steps in the data (${JSON.stringify(stepNames)})`);
  check(stepNames.includes(hostile), 'the hostile step name survives as data');

  // Every step on the timeline, with a tooltip on hover.
  for (const step of data.steps) {
    const rect = await page.evaluate((id) => window.grademl.timeline.phaseRect(id), step.phase);
    check(rect && rect.visible && rect.width >= 1, `step ${JSON.stringify(step.name)} is drawn (${rect && rect.width.toFixed(1)} px wide)`);
    if (!rect) continue;
    await page.mouse.move(rect.x + Math.min(rect.width / 2, 40), rect.y + rect.height / 2);
    const tip = await page.waitForSelector('.tooltip:not([hidden])', { timeout: 2000 }).catch(() => null);
    const text = tip ? await tip.textContent() : '';
    check(text.includes(step.name), `hovering ${JSON.stringify(step.name)} shows its tooltip (${JSON.stringify(text.slice(0, 80))})`);
  }
  await page.mouse.move(5, 5);

  // The hostile name is text: no element was injected, no script ran.
  const injected = await page.evaluate(() => ({ pwned: window.__pwned === 1, imgs: document.querySelectorAll('img').length }));
  check(!injected.pwned && injected.imgs === 0, 'a step name with markup is shown as text');
  const cellText = await page.evaluate(() => [...document.querySelectorAll('#bottlenecks td.name')].map((td) => td.textContent).join('|'));
  check(cellText.includes(hostile), 'the hostile name is printed literally in the steps table');

  // Zoom with the wheel; the plots follow.
  const before = await page.evaluate(() => ({ t0: window.grademl.view.t0, t1: window.grademl.view.t1 }));
  const box = await (await page.$('.timeline-canvas')).boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + 40);
  await page.mouse.wheel(0, -600);
  await page.waitForTimeout(100);
  const after = await page.evaluate(() => {
    const g = window.grademl;
    const p = g.plots[0];
    return { t0: g.view.t0, t1: g.view.t1, plotMin: p ? p.scales.x.min : null, plotMax: p ? p.scales.x.max : null, plots: g.plots.length };
  });
  const spanBefore = before.t1 - before.t0, spanAfter = after.t1 - after.t0;
  check(spanAfter < spanBefore * 0.8, `wheel zoom narrows the view (${spanBefore.toFixed(3)} s -> ${spanAfter.toFixed(3)} s)`);
  check(after.plots > 0, `resource plots drawn (${after.plots})`);
  check(after.plots > 0 && Math.abs(after.plotMin - after.t0) < 1e-9 && Math.abs(after.plotMax - after.t1) < 1e-9,
        'the resource plots follow the zoom');
  // Drag pans.
  await page.mouse.move(box.x + box.width / 2, box.y + 40);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width / 2 - 200, box.y + 40, { steps: 5 });
  await page.mouse.up();
  const panned = await page.evaluate(() => window.grademl.view.t0);
  check(panned > after.t0, `dragging left pans later in time (${after.t0.toFixed(3)} -> ${panned.toFixed(3)})`);
  await page.click('#zoom-reset');
  const reset = await page.evaluate(() => window.grademl.view.t1 - window.grademl.view.t0);
  check(Math.abs(reset - spanBefore) < 1e-9, '"Whole run" restores the view');

  // A step's name in the steps table zooms the timeline to it.
  const train = data.steps.find((st) => st.name === 'train');
  await page.click('#bottlenecks td.name >> text=train');
  await page.waitForTimeout(50);
  const fit = await page.evaluate(() => ({ t0: window.grademl.view.t0, t1: window.grademl.view.t1 }));
  const trainEnd = train.start_s + train.duration_s;
  check(fit.t0 <= train.start_s && fit.t1 >= trainEnd && fit.t1 - fit.t0 < train.duration_s * 1.2,
        `clicking step train in the table zooms to it (${fit.t0.toFixed(3)}..${fit.t1.toFixed(3)} s for ${train.start_s.toFixed(3)}..${trainEnd.toFixed(3)} s)`);
  await page.click('#zoom-reset');

  // Sections and the critical path.
  for (const id of ['issues', 'timeline', 'resources', 'attribution', 'bottlenecks']) {
    check(await page.$(`section#${id}`) !== null, `section #${id} is present`);
  }
  check(data.timeline.critical.some((c) => c === 1), 'phases on the critical path are marked');
  await page.check('#critical-only');
  await page.waitForTimeout(50);

  mkdirSync(artifacts, { recursive: true });
  const shot = join(artifacts, 'html_report.png');
  await page.screenshot({ path: shot, fullPage: true });
  check(statSync(shot).size > 10000, `screenshot kept: ${shot}`);

  checkSelfContained(check, { errors, dialogs, requests }, 'no network requests (works offline)');
} finally {
  await browser.close();
}
finishTest(failures(), dir);
