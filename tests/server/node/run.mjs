// ctest entry point of the end-to-end suite: runs every *.test.mjs here, one file at a time (the
// machine may have 2 cores; the files start their own servers). Exits 77 (ctest: skipped) when
// the openai package is not installed; scripts/setup.sh installs it.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
if (!fs.existsSync(path.join(here, 'node_modules', 'openai', 'package.json'))) {
  console.log('SKIPPED: the openai npm package is missing; run scripts/setup.sh '
    + '(npm install in tests/server/node)');
  process.exit(77);
}
const files = fs.readdirSync(here).filter((f) => f.endsWith('.test.mjs')).sort()
  .map((f) => path.join(here, f));
const r = spawnSync(process.execPath,
  ['--test', '--test-concurrency=1', '--test-timeout=120000', '--test-reporter=spec', ...files],
  { stdio: 'inherit' });
process.exit(r.status ?? 1);
