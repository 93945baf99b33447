// Browser test of the HTML report's Dask section: imports a small Dask task log
// (tests/data/browser/dask_hostile.jsonl: two workers, two load tasks, a task whose key and
// prefix are markup) with `grademl import`, writes the HTML report, opens it in Debian's
// headless Chromium and checks that
//  - the page loads with no console error, page error, dialog or request;
//  - the Dask section lists the prefixes, costliest first, and both workers;
//  - the hostile key and prefix are shown as text, never run;
//  - "show the slowest" zooms the timeline to that task.
// Usage: node dask_section_test.mjs --grademl BIN --web WEB_DIR --log FILE --artifacts DIR [--chromium PATH]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync } from 'node:fs';
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

const dir = mkdtempSync(join(tmpdir(), 'grademl-dask-'));
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
const hostile = '<img src=x onerror="window.__pwned=1">';

let browser;
try {
  browser = await launchChromium(webDir, chromiumPath);
} catch (e) {
  console.error(`dask_section_test: ${e.message}`);
  process.exit(1);
}
try {
  const { page, errors, requests, dialogs } = await openReport(browser, html);
  const prefixes = await page.evaluate(() =>
    [...document.querySelectorAll('section#dask table.dask-prefixes tbody tr')].map((tr) => tr.cells[0].textContent));
  check(prefixes.length === 2 && prefixes[0] === 'load' && prefixes[1] === hostile,
        `the prefixes, costliest first (${JSON.stringify(prefixes)})`);
  const workers = await page.evaluate(() =>
    [...document.querySelectorAll('section#dask table.dask-workers tbody tr')].map((tr) => tr.cells[0].textContent));
  check(workers.length === 2 && workers.every((w) => w.startsWith('tcp://127.0.0.1:900')), `both workers (${JSON.stringify(workers)})`);
  const intro = await page.evaluate(() => document.querySelector('section#dask .intro').textContent);
  check(intro.startsWith('3 tasks on 2 workers, 2 dependency edges, 1 transfer (1.95 KiB)'), `the summary (${JSON.stringify(intro.slice(0, 80))})`);
  const injected = await page.evaluate(() => ({ pwned: window.__pwned === 1, imgs: document.querySelectorAll('img').length }));
  check(!injected.pwned && injected.imgs === 0, 'a key with markup is never run');

  // "show the slowest" of load (load-2, 1.4 s of compute): the view narrows around it.
  const before = await page.evaluate(() => [window.grademl.view.t0, window.grademl.view.t1]);
  await page.click('section#dask table.dask-prefixes tbody tr:first-child button.link');
  await page.waitForTimeout(300);
  const after = await page.evaluate(() => [window.grademl.view.t0, window.grademl.view.t1]);
  check(after[1] - after[0] < before[1] - before[0], `"show the slowest" zooms the timeline (${before} -> ${after})`);

  mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: join(artifacts, 'dask_section.png'), fullPage: true });
  checkSelfContained(check, { errors, dialogs, requests });
} finally {
  await browser.close();
}
finishTest(failures(), dir);
