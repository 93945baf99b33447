// Launches Debian's headless Chromium through playwright-core (from web/node_modules), with
// the flags this machine's closed network needs, for the browser test and the HTML report's
// opening-time benchmark.
import { createRequire } from 'node:module';
import { existsSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

export async function launchChromium(webDir, executablePath = '/usr/bin/chromium') {
  if (!existsSync(executablePath)) {
    throw new Error(`${executablePath} not found; install Debian's chromium (scripts/bootstrap does)`);
  }
  const require = createRequire(join(resolve(webDir), 'package.json'));
  const { chromium } = require('playwright-core');
  return chromium.launch({
    executablePath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
}

// Opens a GradeML HTML report from disk in a new page and waits until it says it is ready.
// Returns the page and what it did that a self-contained report must not: console errors and
// warnings, page errors, dialogs (dismissed), and requests for anything but file: and data:.
export async function openReport(browser, htmlPath) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [], requests = [], dialogs = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') errors.push(`console.${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.on('dialog', async (d) => { dialogs.push(d.message()); await d.dismiss(); });
  page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) requests.push(r.url()); });
  await page.goto(pathToFileURL(htmlPath).href);
  await page.waitForFunction(() => window.grademl && window.grademl.ready, null, { timeout: 10000 });
  return { page, errors, requests, dialogs };
}

// What every browser test shares: its flags (`--name value`), a check that prints "ok" or
// "FAIL" and counts failures, the checks every page must pass (no console or page error, no
// dialog, no request: a self-contained report), and its end (the temporary folder removed,
// or kept for inspection when a check failed; exit 0 or 1).
export function testArg(name, dflt) {
  const args = process.argv.slice(2);
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
}

export function checker() {
  let failures = 0;
  const check = (ok, what) => {
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
    if (!ok) failures++;
  };
  return { check, failures: () => failures };
}

export function checkSelfContained(check, { errors, dialogs, requests }, requestsLabel = 'no network requests') {
  check(errors.length === 0, `no console or page errors${errors.length ? `: ${errors.join(' / ')}` : ''}`);
  if (dialogs) check(dialogs.length === 0, `no dialogs${dialogs.length ? `: ${dialogs.join(' / ')}` : ''}`);
  check(requests.length === 0, `${requestsLabel}${requests.length ? `: ${requests.join(' ')}` : ''}`);
}

export function finishTest(failures, dir) {
  if (failures === 0) rmSync(dir, { recursive: true, force: true });
  else console.log(`(kept ${dir} for inspection)`);
  console.log(failures === 0 ? 'PASS' : `${failures} check(s) failed`);
  process.exit(failures === 0 ? 0 : 1);
}
