// Browser test of the HTML report's Hosts section (a run across hosts, docs/multi-host.md):
// imports a Dask task log whose two workers are on different hosts, one of them named like
// markup (tests/data/browser/dask_two_hosts.jsonl; the dependency load-2 -> sum-1 goes
// backwards in time by 0.18 s across the hosts, and neither host's clock was measured),
// writes the HTML report, opens it in Debian's headless Chromium and checks that
//  - the page loads with no console error, page error, dialog or request;
//  - the Hosts section has one row per host, the hostile name shown as text, never run;
//  - the edges between hosts that go backwards are listed, and "show on the timeline" of
//    one zooms the timeline to that phase;
//  - the clock warning is among the issues, without a saving.
// Usage: node hosts_section_test.mjs --grademl BIN --web WEB_DIR --log FILE --artifacts DIR [--chromium PATH]
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

const dir = mkdtempSync(join(tmpdir(), 'grademl-hosts-'));
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
const hostile = '<img src=x onerror=window.__pwned=1>';

let browser;
try {
  browser = await launchChromium(webDir, chromiumPath);
} catch (e) {
  console.error(`hosts_section_test: ${e.message}`);
  process.exit(1);
}
try {
  const { page, errors, requests, dialogs } = await openReport(browser, html);
  const hosts = await page.evaluate(() =>
    [...document.querySelectorAll('section#hosts table.hosts tbody tr')].map((tr) => [...tr.cells].map((c) => c.textContent)));
  check(hosts.length === 2, `one row per host (${JSON.stringify(hosts)})`);
  check(hosts.length === 2 && hosts[0][0] === '10.0.0.7' && hosts[1][0] === hostile, 'the hosts by name, the hostile one as text');
  check(hosts.length === 2 && hosts.every((h) => h[6] === 'not measured'), 'neither clock was measured');
  const injected = await page.evaluate(() => ({ pwned: window.__pwned === 1, imgs: document.querySelectorAll('img').length }));
  check(!injected.pwned && injected.imgs === 0, 'a host name with markup is never run');
  const edges = await page.evaluate(() => [...document.querySelectorAll('section#hosts p')].map((p) => p.textContent).join(' | '));
  check(edges.includes('2 edges between hosts: 2 backwards in time beyond the clocks\' uncertainty, 0 within it'),
        `the edges between hosts (${JSON.stringify(edges)})`);
  const violations = await page.evaluate(() =>
    [...document.querySelectorAll('section#hosts table.causality tbody tr')].map((tr) => [...tr.cells].map((c) => c.textContent)));
  check(violations.length === 2 && violations[0][0] === `load-2 (${hostile})` && violations[0][1] === 'sum-1 (10.0.0.7)' &&
        violations[0][2] === 'dask' && violations[0][4].includes('a clock not measured'),
        `the edges that go backwards (${JSON.stringify(violations)})`);
  const issue = await page.evaluate(() => [...document.querySelectorAll('section#issues li')].map((li) => li.textContent)
    .find((t) => t.includes('edges between hosts go backwards')) || '');
  check(issue.startsWith('–'), `the clock warning is an issue without a saving (${JSON.stringify(issue.slice(0, 60))})`);

  // "show on the timeline" of sum-1 narrows the view around it.
  const before = await page.evaluate(() => [window.grademl.view.t0, window.grademl.view.t1]);
  await page.click('section#hosts table.causality tbody tr:first-child td:nth-child(2) button.link');
  await page.waitForTimeout(300);
  const after = await page.evaluate(() => [window.grademl.view.t0, window.grademl.view.t1]);
  check(after[1] - after[0] < before[1] - before[0], `"show on the timeline" zooms the timeline (${before} -> ${after})`);

  mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: join(artifacts, 'hosts_section.png'), fullPage: true });
  checkSelfContained(check, { errors, dialogs, requests });
} finally {
  await browser.close();
}
finishTest(failures(), dir);
