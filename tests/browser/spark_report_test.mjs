// Browser test of the HTML report's Spark section: imports the Spark fixture log
// (tests/data/importer/spark/fixture_app.log, whose application is named
// "<script>alert('XSS')</script>") with `grademl import`, writes the run's HTML report, opens
// it in Debian's headless Chromium and checks that
//  - the page loads with no console error, page error, dialog or request;
//  - the Spark section renders: the application's name as text, its 4 stage attempts with
//    their bottlenecks (gc, shuffle_wait, skew, scheduler_delay) and advice;
//  - the application's name is inert: no script of it ran, no element came of it;
//  - a stage's name shows it on the timeline when clicked;
//  - the executors' tasks lie on their tracks ("async executor 1", "async executor 2").
// A screenshot is kept in the artifacts folder.
//
// Usage: node spark_report_test.mjs --grademl BIN --web WEB_DIR --log FILE --artifacts DIR [--chromium PATH]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { checkSelfContained, checker, finishTest, launchChromium, openReport, testArg } from './chromium.mjs';

const arg = testArg;
const grademl = resolve(arg('--grademl'));
const webDir = resolve(arg('--web'));
const log = resolve(arg('--log'));
const artifacts = resolve(arg('--artifacts', 'test-artifacts'));
const chromiumPath = arg('--chromium', '/usr/bin/chromium');

const { check, failures } = checker();

const dir = mkdtempSync(join(tmpdir(), 'grademl-spark-'));
const db = join(dir, 'runs.db');
const html = join(dir, 'report.html');
const run = (...a) => execFileSync(grademl, ['--db', db, ...a], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
try {
  run('import', log);
  run('report', '--html', html);
} catch (e) {
  console.error(`grademl failed: ${e.stderr}`);
  process.exit(1);
}
const appName = "<script>alert('XSS')</script>";

let browser;
try {
  browser = await launchChromium(webDir, chromiumPath);
} catch (e) {
  console.error(`spark_report_test: ${e.message}`);
  process.exit(1);
}
try {
  const { page, errors, requests, dialogs } = await openReport(browser, html);

  const section = await page.$('section#spark');
  check(section !== null, 'the Spark section is there');
  const name = await page.evaluate(() => document.querySelector('section#spark .spark-app-name')?.textContent);
  check(name === appName, `the application's name is shown as text (${JSON.stringify(name)})`);
  const injected = await page.evaluate(() => ({
    scripts: [...document.querySelectorAll('script')].filter((s) => s.textContent.includes("alert('XSS')") && s.id !== 'grademl-data').length,
    inSection: document.querySelectorAll('section#spark script').length,
  }));
  check(injected.scripts === 0 && injected.inSection === 0, 'no script element came of the name');
  check(dialogs.length === 0, `no alert ran${dialogs.length ? `: ${dialogs.join(' / ')}` : ''}`);

  const rows = await page.evaluate(() => [...document.querySelectorAll('section#spark table.spark-stages tbody tr')]
    .map((tr) => [...tr.children].map((td) => td.textContent)));
  check(rows.length === 4, `4 stage attempts (${rows.length})`);
  const bottlenecks = rows.map((r) => r[r.length - 1].split(' ')[0]);
  check(JSON.stringify(bottlenecks) === JSON.stringify(['gc', 'shuffle_wait', 'skew', 'scheduler_delay']),
        `their bottlenecks (${JSON.stringify(bottlenecks)})`);
  check(rows.length > 0 && rows[0][0].startsWith('stage 0: map at fixture.py:10') && rows[0][4] === '50%',
        `stage 0's row: name and GC share (${JSON.stringify(rows[0])})`);
  check(rows.length > 2 && rows[2][8] === '10.0x', `stage 2's skew, max/median (${rows.length > 2 ? rows[2][8] : ''})`);
  check(rows.length > 0 && rows[0][rows[0].length - 1].includes('garbage collection'), 'stage 0 has its advice');
  const facts = await page.evaluate(() => document.querySelector('section#spark .facts')?.textContent || '');
  check(facts.includes('16 (1 failed, 1 killed, 1 speculative)'), `the application's task counts (${JSON.stringify(facts.slice(0, 300))})`);

  // The stage's name zooms the timeline to it.
  const before = await page.evaluate(() => [window.grademl.view.t0, window.grademl.view.t1]);
  await page.click('section#spark table.spark-stages tbody tr:nth-child(2) button.link');
  await page.waitForTimeout(800);
  const after = await page.evaluate(() => [window.grademl.view.t0, window.grademl.view.t1]);
  check(after[1] - after[0] < before[1] - before[0], `clicking a stage zooms the timeline to it (${before} -> ${after})`);

  const labels = await page.evaluate(() => window.grademl.data.timeline.tracks.map((t) => t.label));
  check(labels.includes('async executor 1') && labels.includes('async executor 2'), `the executors are tracks (${JSON.stringify(labels)})`);

  mkdirSync(artifacts, { recursive: true });
  const shot = join(artifacts, 'spark_report.png');
  await page.screenshot({ path: shot, fullPage: true });
  check(statSync(shot).size > 10000, `screenshot kept: ${shot}`);
  checkSelfContained(check, { errors, requests });
} finally {
  await browser.close();
}
finishTest(failures(), dir);
