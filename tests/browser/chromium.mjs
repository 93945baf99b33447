// Launches Debian's headless Chromium through playwright-core (from web/node_modules), with
// the flags this machine's closed network needs, for the browser test and the HTML report's
// opening-time benchmark.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
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
