// Browser test of the HTML report's "Fine phases" and "Operators" sections (docs/python.md:
// the overhead budget and --deep): runs a 200-iteration PyTorch loop (a 2-layer MLP, so 2
// addmm per iteration) under `grademl run --deep` with a recorded phase forced to cost 1 ms
// (GRADEML_TEST_PHASE_COST_NS: fine phases sampled after 20 warm-up iterations), writes the
// HTML report, opens it in Debian's headless Chromium and checks that
//  - the page loads with no console error, page error, dialog or request;
//  - "Fine phases" lists forward, loss, backward and optimizer_step with their exact count
//    (200 each; the profiled iterations record theirs too) and fewer recorded;
//  - "Operators" says how many of the 200 iterations were profiled and lists addmm at 2.0
//    calls per iteration with an interval.
// Usage: node sampled_sections_test.mjs --grademl BIN --web WEB_DIR --artifacts DIR [--chromium PATH]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { launchChromium, openReport } from './chromium.mjs';

const args = process.argv.slice(2);
const arg = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const grademl = resolve(arg('--grademl'));
const webDir = resolve(arg('--web'));
const artifacts = resolve(arg('--artifacts', 'test-artifacts'));
const chromiumPath = arg('--chromium', '/usr/bin/chromium');

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
}

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
writeFileSync(join(dir, 'train.py'), `import torch
torch.manual_seed(0)
torch.set_num_threads(1)
data = torch.utils.data.TensorDataset(torch.randn(1600, 16), torch.randint(0, 4, (1600,)))
loader = torch.utils.data.DataLoader(data, batch_size=8)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
lossf = torch.nn.CrossEntropyLoss()
for x, y in loader:
    opt.zero_grad()
    lossf(model(x), y).backward()
    opt.step()
`);
try {
  execFileSync(grademl, ['--db', db, 'run', '--no-report', '--deep', '--', '/usr/bin/python3', 'train.py'],
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
  check(errors.length === 0, `no console or page errors${errors.length ? `: ${errors.join(' / ')}` : ''}`);
  check(dialogs.length === 0, `no dialogs${dialogs.length ? `: ${dialogs.join(' / ')}` : ''}`);
  check(requests.length === 0, `no network requests${requests.length ? `: ${requests.join(' ')}` : ''}`);
} finally {
  await browser.close();
}
if (failures === 0) rmSync(dir, { recursive: true, force: true });
else console.log(`(kept ${dir} for inspection)`);
console.log(failures === 0 ? 'PASS' : `${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
