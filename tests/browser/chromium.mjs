// Launches Debian's headless Chromium through playwright-core (from web/node_modules), with
// the flags this machine's closed network needs, for the browser test and the HTML report's
// opening-time benchmark.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

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
