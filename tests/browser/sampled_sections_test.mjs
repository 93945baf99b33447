// Browser test of the HTML report's "Fine phases" and "Operators" sections (docs/python.md:
// the overhead budget and --deep): runs a 200-iteration PyTorch loop (a 2-layer MLP, so 2
// addmm per iteration; tests/data/torch/mlp_200_iterations.py) under `grademl run --deep` with a recorded phase forced to cost 1 ms
// (GRADEML_TEST_PHASE_COST_NS: fine phases sampled after 20 warm-up iterations), writes the
// HTML report, opens it in Debian's headless Chromium and checks that
//  - the page loads with no console error, page error, dialog or request;
//  - "Fine phases" lists forward, loss, backward and optimizer_step with their exact count
//    (200 each; the profiled iterations record theirs too) and fewer recorded;
//  - "Operators" says how many of the 200 iterations were profiled and lists addmm at 2.0
//    calls per iteration with an interval.
// Usage: node sampled_sections_test.mjs --grademl BIN --web WEB_DIR --script PY --artifacts DIR [--chromium PATH]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { checkSelfContained, checker, finishTest, launchChromium, openReport, testArg } from './chromium.mjs';

const arg = testArg;
const grademl = resolve(arg('--grademl'));
const webDir = resolve(arg('--web'));
const script = resolve(arg('--script'));
const artifacts = resolve(arg('--artifacts', 'test-artifacts'));
const chromiumPath = arg('--chromium', '/usr/bin/chromium');

const { check, failures } = checker();

// Debian's python3-torch is needed; in CI (CI=true) its absence fails the test.
try {
  execFileSync('/usr/bin/python3', ['-c', 'import torch'], { stdio: 'ignore' });
} catch {
  if (process.env.CI === 'true') {
    console.error('sampled_sections_test: python3-torch is missing (apt-get install python3-torch)');
    process.exit(1);
  }
  console.log('SKIPPED: python3-torch is missing (apt-get install python3-torch)');
  process.exit(77);
}

const dir = mkdtempSync(join(tmpdir(), 'grademl-sampled-'));
const db = join(dir, 'runs.db');
const html = join(dir, 'report.html');
try {
  execFileSync(grademl, ['--db', db, 'run', '--no-report', '--deep', '--', '/usr/bin/python3', script],
               { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GRADEML_TEST_PHASE_COST_NS: '1000000' } });
  execFileSync(grademl, ['--db', db, 'report', '--html', html], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
} catch (e) {
  console.error(`grademl failed: ${e.stderr}`);
  process.exit(1);
}

let browser;
try {
  browser = await launchChromium(webDir, chromiumPath);
} catch (e) {
  console.error(`sampled_sections_test: ${e.message}`);
  process.exit(1);
}
try {
  const { page, errors, requests, dialogs } = await openReport(browser, html);
  const fine = await page.evaluate(() =>
    [...document.querySelectorAll('section#fine-phases table.fine tbody tr')].map((tr) => [...tr.cells].map((c) => c.textContent)));
  const byType = Object.fromEntries(fine.map((r) => [r[0], r]));
  for (const t of ['forward', 'loss', 'backward', 'optimizer_step']) {
    const r = byType[t];
    check(r && r[1] === '200', `${t}: exactly 200 (${JSON.stringify(r)})`);
    check(r && parseInt(r[3], 10) < 200 && parseInt(r[3], 10) >= 20, `${t}: fewer recorded, the warm-up at least (${r && r[3]})`);
  }
  check(byType.data_wait && byType.data_wait[1] === '201' && byType.data_wait[3].startsWith('201'),
        `data waits: all 201 recorded (${JSON.stringify(byType.data_wait)})`);
  const intro = await page.evaluate(() => document.querySelector('section#fine-phases')?.textContent || '');
  check(intro.includes('exact for all 200 iterations'), 'the counts are said to be exact');

  const heading = await page.evaluate(() => document.querySelector('section#operators h3')?.textContent || '');
  check(/^Sampled \d+ of 200 iterations \(train, /.test(heading), `the sample is said (${JSON.stringify(heading)})`);
  const ops = await page.evaluate(() =>
    [...document.querySelectorAll('section#operators table.deep tbody tr')].map((tr) => [...tr.cells].map((c) => c.textContent)));
  const addmm = ops.find((r) => r[0] === 'addmm');
  check(addmm && addmm[1] === '2.0' && addmm[2].includes('±'), `addmm: 2 calls per iteration, with an interval (${JSON.stringify(addmm)})`);
  const cost = await page.evaluate(() => document.querySelector('section#operators .deep-group p')?.textContent || '');
  check(cost.startsWith('Operator profiling added ') && cost.includes('removed from the figures below'),
        `the removed profiling cost is said (${JSON.stringify(cost.slice(0, 80))})`);

  mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: join(artifacts, 'sampled_sections.png'), fullPage: true });
  checkSelfContained(check, { errors, dialogs, requests });
} finally {
  await browser.close();
}
finishTest(failures(), dir);
