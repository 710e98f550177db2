// API key, CORS, logging hygiene, the loopback default and command-line errors.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { MODEL, modelDir, serverBinary, startServer } from './helpers.mjs';

const KEY = 'sk-test-Secret-Key-8d2f0c';

describe('API key and CORS', () => {
  let server;
  before(async () => {
    server = await startServer(['--api-key', KEY, '--cors', 'http://allowed.example,http://other.example']);
  });
  after(async () => server?.stop());

  test('listens on loopback by default', () => {
    assert.match(server.log(), /on http:\/\/127\.0\.0\.1:\d+\/v1 \(API key required\)/);
  });

  test('requests without the right key get 401; with it they work', async () => {
    for (const headers of [{}, { Authorization: 'Bearer wrong' }, { Authorization: `Bearer ${KEY}x` },
      { Authorization: KEY }, { Authorization: `Basic ${KEY}` }, { Authorization: 'Bearer ' }]) {
      const r = await fetch(`${server.url}/v1/models`, { headers });
      assert.equal(r.status, 401, JSON.stringify(headers));
      assert.equal(r.headers.get('www-authenticate'), 'Bearer');
      assert.equal((await r.json()).error.code, 'invalid_api_key');
    }
    await assert.rejects(server.client({ apiKey: 'nope' }).models.list(), (e) => e.status === 401);
    const ok = await server.client({ apiKey: KEY }).chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2,
    });
    assert.equal(ok.usage.completion_tokens, 2);
  });

  test('/health needs no key; /metrics does', async () => {
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    assert.equal((await fetch(`${server.url}/metrics`)).status, 401);
    const m = await fetch(`${server.url}/metrics`, { headers: { Authorization: `Bearer ${KEY}` } });
    assert.equal(m.status, 200);
  });

  test('CORS: allowed origins get the headers, others do not', async () => {
    const pre = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: { Origin: 'http://allowed.example', 'Access-Control-Request-Method': 'POST' },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), 'http://allowed.example');
    assert.match(pre.headers.get('access-control-allow-headers'), /Authorization/);
    assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
    const evil = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'OPTIONS', headers: { Origin: 'http://evil.example' },
    });
    assert.equal(evil.headers.get('access-control-allow-origin'), null);
    const real = await fetch(`${server.url}/v1/models`, {
      headers: { Origin: 'http://other.example', Authorization: `Bearer ${KEY}` },
    });
    assert.equal(real.headers.get('access-control-allow-origin'), 'http://other.example');
    // Error responses carry them too, so a page can read why it failed.
    const denied = await fetch(`${server.url}/v1/models`, { headers: { Origin: 'http://allowed.example' } });
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get('access-control-allow-origin'), 'http://allowed.example');
  });

  test('the log never contains the key', async () => {
    await fetch(`${server.url}/v1/models?key=${encodeURIComponent('not-logged-either')}`,
      { headers: { Authorization: `Bearer ${KEY}` } });
    await new Promise((r) => setTimeout(r, 200));
    const log = server.log();
    assert.match(log, /GET \/v1\/models 200/);
    assert.ok(!log.includes(KEY), log);
    assert.ok(!log.includes('Secret'), log);
  });
});

describe('command line', () => {
  const run = (args, env = {}) => spawnSync(serverBinary(), args, {
    encoding: 'utf8', timeout: 30000, env: { ...process.env, ...env },
  });

  test('a missing model folder, a bad store or bad options exit with a message', () => {
    const noModel = run(['--model', '/nonexistent/model', '--port', '0']);
    assert.notEqual(noModel.status, 0);
    assert.match(noModel.stderr, /nonexistent/);
    const badStore = run(['--model', modelDir(), '--store', '/nonexistent/experts.store', '--port', '0']);
    assert.notEqual(badStore.status, 0);
    assert.match(badStore.stderr, /experts\.store/);
    assert.notEqual(run(['--model', modelDir(), '--port', 'http']).status, 0);
    assert.notEqual(run(['--model', modelDir(), '--host', 'localhost:80']).status, 0);
    assert.notEqual(run(['--port', '0']).status, 0);
    assert.equal(run(['--help']).status, 0);
  });

  test('the key can come from a file or the environment', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neural-key-'));
    const file = path.join(dir, 'key');
    fs.writeFileSync(file, `${KEY}\n`);
    try {
      for (const [args, env] of [[['--api-key-file', file], {}], [[], { NEURAL_API_KEY: KEY }]]) {
        const s = await startServer(args.length ? args : [], env);
        try {
          assert.equal((await fetch(`${s.url}/v1/models`)).status, 401);
          const ok = await fetch(`${s.url}/v1/models`, { headers: { Authorization: `Bearer ${KEY}` } });
          assert.equal(ok.status, 200);
        } finally {
          await s.stop();
        }
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
