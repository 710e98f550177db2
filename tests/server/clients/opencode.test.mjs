// opencode (`opencode run`, the npm package's native binary), unmodified, with an opencode.json
// that adds neural-server as an OpenAI-compatible provider (Chat Completions, streamed, with
// its tools: bash, edit, read, ...). The turn (and opencode's title request) get the scripted
// answer. No network but loopback is used.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { scriptedServer, harmony, failedRequests, MODEL } from './scripted.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

function opencodeBinary() {
  const pkg = { x64: 'opencode-linux-x64', arm64: 'opencode-linux-arm64' }[process.arch];
  return pkg && path.join(here, 'node_modules', pkg, 'bin', 'opencode');
}

test('opencode: opencode run answers through the server', async (t) => {
  const bin = opencodeBinary();
  if (process.platform !== 'linux' || !bin || !fs.existsSync(bin)) {
    t.skip('no opencode binary for this platform');
    return;
  }
  const server = await scriptedServer([harmony.answer('Hello from neural-server.')]);
  try {
    const home = path.join(server.dir, 'home');
    const work = path.join(server.dir, 'work');
    fs.mkdirSync(home);
    fs.mkdirSync(work);
    // The user's configuration (~/.config/opencode/opencode.json), as opencode's docs add a
    // local OpenAI-compatible server.
    fs.mkdirSync(path.join(home, '.config', 'opencode'), { recursive: true });
    fs.writeFileSync(path.join(home, '.config', 'opencode', 'opencode.json'), JSON.stringify({
      $schema: 'https://opencode.ai/config.json',
      provider: {
        neural: {
          npm: '@ai-sdk/openai-compatible',
          name: 'neural',
          options: { baseURL: server.baseURL, apiKey: 'not-needed' },
          models: { [MODEL]: { name: 'gpt-oss (test fixture)' } },
        },
      },
    }));
    const env = {
      ...process.env, HOME: home, XDG_CONFIG_HOME: path.join(home, '.config'),
      XDG_DATA_HOME: path.join(home, '.data'), XDG_CACHE_HOME: path.join(home, '.cache'),
      OPENCODE_DISABLE_AUTOUPDATE: '1',
    };
    const { code, out } = await new Promise((resolve) => {
      const p = spawn(bin, ['run', '--print-logs', '-m', `neural/${MODEL}`, 'Say hello.'], { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      p.stdout.on('data', (d) => { text += d; });
      p.stderr.on('data', (d) => { text += d; });
      const timer = setTimeout(() => p.kill('SIGKILL'), 150000);
      p.on('exit', (c) => { clearTimeout(timer); resolve({ code: c, out: text }); });
    });
    assert.equal(code, 0, out);
    assert.match(out, /Hello from neural-server\./);
    assert.deepEqual(failedRequests(server.log()), []);
  } finally {
    await server.stop();
  }
});
