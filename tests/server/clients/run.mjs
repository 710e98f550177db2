// ctest entry point of the agent-client suite: runs every *.test.mjs here with node's test
// runner. Exits 77 (ctest: skipped) when this Node is older than the clients support or the
// pinned clients are not installed; scripts/setup.sh provides both (tools/node, npm install).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const major = Number(process.versions.node.split('.')[0]);
if (major < 22) {
  console.log(`SKIPPED: Node ${process.versions.node} is older than the pinned clients support `
    + '(>= 22); scripts/setup.sh installs one into tools/node');
  process.exit(77);
}
for (const pkg of ['@openai/agents', '@openai/codex', 'ai', '@langchain/openai']) {
  if (!fs.existsSync(path.join(here, 'node_modules', pkg, 'package.json'))) {
    console.log(`SKIPPED: ${pkg} is missing; run scripts/setup.sh (npm install in tests/server/clients)`);
    process.exit(77);
  }
}
if (!fs.existsSync(path.join(here, '..', 'node', 'node_modules', 'openai', 'package.json'))) {
  console.log('SKIPPED: the openai npm package is missing; run scripts/setup.sh');
  process.exit(77);
}
const files = fs.readdirSync(here).filter((f) => f.endsWith('.test.mjs')).sort()
  .map((f) => path.join(here, f));
const r = spawnSync(process.execPath,
  ['--test', '--test-concurrency=1', '--test-timeout=180000', '--test-reporter=spec', ...files],
  { stdio: 'inherit' });
process.exit(r.status ?? 1);
