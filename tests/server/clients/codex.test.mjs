// Codex CLI (`codex exec`, the npm package's native binary), unmodified, with a config.toml that
// points it at neural-server: its first request carries namespace, hosted (web_search) and
// function tools; the turn runs a shell command through exec_command and answers after the
// result. No network but loopback is used.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { scriptedServer, harmony, failedRequests, MODEL } from './scripted.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const codex = path.join(here, 'node_modules', '@openai', 'codex', 'bin', 'codex.js');

function runCodex(args, { cwd, env }) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [codex, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), 150000);
    p.on('exit', (code) => { clearTimeout(timer); resolve({ code, out }); });
  });
}

test('Codex CLI: codex exec runs a shell tool and answers', async () => {
  const server = await scriptedServer([
    harmony.call('exec_command', '{"cmd":"echo codex > codex-was-here.txt"}', 'Write the file.'),
    harmony.answer('I created codex-was-here.txt.'),
  ]);
  try {
    const home = path.join(server.dir, 'codex-home');
    const work = path.join(server.dir, 'work');
    fs.mkdirSync(home);
    fs.mkdirSync(work);
    fs.writeFileSync(path.join(home, 'config.toml'), [
      `model = "${MODEL}"`,
      'model_provider = "neural"',
      '',
      '[model_providers.neural]',
      'name = "neural"',
      `base_url = "${server.baseURL}"`,
      'wire_api = "responses"',
      '',
    ].join('\n'));
    const { code, out } = await runCodex(
      ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox',
        'Create the file codex-was-here.txt'],
      { cwd: work, env: { ...process.env, CODEX_HOME: home, HOME: home, OPENAI_API_KEY: 'not-needed' } });
    assert.equal(code, 0, out);
    assert.match(out, /I created codex-was-here\.txt\./);
    assert.equal(fs.readFileSync(path.join(work, 'codex-was-here.txt'), 'utf8').trim(), 'codex');
    assert.deepEqual(failedRequests(server.log()), []);
  } finally {
    await server.stop();
  }
});
