// Opening time of HTML reports in Debian's headless Chromium: for each file, loads it
// ROUNDS times in a fresh page and reports the median time from navigation start until the
// report is drawn (window.grademl.ready, set after the timeline and every plot are built),
// plus the file's size, beside a blank page opened the same way (the peer). Goal: under 2 s for the example workflow's report (issue 6).
//
// Usage: node bench/html_open_bench.mjs --web WEB_DIR [--rounds N] [--screenshot PNG] FILE...
import { mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { launchChromium } from '../tests/browser/chromium.mjs';

const args = process.argv.slice(2);
const files = [];
let webDir = 'web', rounds = 5, screenshot = null;
for (let i = 0; i < args.length; ++i) {
  if (args[i] === '--web') webDir = args[++i];
  else if (args[i] === '--rounds') rounds = Number(args[++i]);
  else if (args[i] === '--screenshot') screenshot = args[++i];
  else files.push(args[i]);
}
// The peer: a blank page that declares itself ready at once, opened the same way, so that the
// browser's own cost of opening a file shows beside the report's.
const blank = join(mkdtempSync(join(tmpdir(), 'grademl-blank-')), 'blank.html');
writeFileSync(blank, '<!DOCTYPE html><title>blank</title><script>window.grademl = { ready: true, readyAt: performance.now(), ' +
  'readyMs: 0, data: { timeline: { shown_phases: 0, total_phases: 0 } }, timeline: { lastDrawn: 0 } };</script>');
files.unshift(blank);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

const browser = await launchChromium(webDir);
try {
  for (const file of files) {
    const url = pathToFileURL(resolve(file)).href;
    const ready = [], wall = [];
    let info = null;
    for (let r = 0; r < rounds; ++r) {
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      const t = Date.now();
      await page.goto(url);
      await page.waitForFunction(() => window.grademl && window.grademl.ready, null, { timeout: 120000 });
      wall.push(Date.now() - t);
      const m = await page.evaluate(() => ({ at: window.grademl.readyAt, main: window.grademl.readyMs,
                                             shown: window.grademl.data.timeline.shown_phases,
                                             total: window.grademl.data.timeline.total_phases,
                                             drawn: window.grademl.timeline.lastDrawn }));
      ready.push(m.at);
      info = m;
      if (errors.length) throw new Error(`${file}: page errors: ${errors.join('; ')}`);
      if (screenshot && r === 0 && file === files[1]) await page.screenshot({ path: screenshot, fullPage: true });
      await page.close();
    }
    const size = statSync(file).size;
    if (file === blank) {
      console.log(`blank page (peer): ready after ${(median(ready) / 1000).toFixed(3)} s median, goto-to-ready ${(median(wall) / 1000).toFixed(3)} s, ${rounds} rounds`);
      continue;
    }
    console.log(`${file}: ${(size / 1048576).toFixed(2)} MiB, ${info.total} phases (${info.shown} on the timeline, ` +
                `${info.drawn} rectangles drawn); ready after ${(median(ready) / 1000).toFixed(3)} s median ` +
                `(min ${(Math.min(...ready) / 1000).toFixed(3)}, max ${(Math.max(...ready) / 1000).toFixed(3)}; ` +
                `report script ${(info.main / 1000).toFixed(3)} s; goto-to-ready ${(median(wall) / 1000).toFixed(3)} s), ${rounds} rounds`);
  }
} finally {
  await browser.close();
}
