// The adversarial pass of issue 44 as a script (docs/RELIABILITY.md "Hostile clients, third
// round"): neural-server on the tiny fixture, 127.0.0.1 only (slow clients also from 127.0.0.2 and
// 127.0.0.3, still loopback), every wait bounded. Each scenario prints one JSON line: what was
// tried, what came back, RSS before/after and the time until the server served others again.
// Exit status 1 when a scenario did not hold.
//   NEURAL_SERVER_BIN=build/server/neural-server NEURAL_NEURAL_BIN=build/engine/cli/neural \
//     node tests/server/node/adversarial.mjs [scenario ...]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { MODEL, modelDir, rssKiB, startServer } from './helpers.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const failures = [];
const report = (name, fields, ok) => {
  console.log(JSON.stringify({ scenario: name, ok, ...fields }));
  if (!ok) failures.push(name);
};

// One raw HTTP exchange: sends `head` (+ body), resolves with the status and text received
// until the server closes or `waitMs` passes.
function exchange(port, bytes, { waitMs = 10000, localAddress, halfClose = false } = {}) {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress });
    let text = '';
    const done = () => {
      clearTimeout(timer);
      s.destroy();
      const m = /^HTTP\/1\.1 (\d+)/.exec(text);
      resolve({ status: m ? Number(m[1]) : 0, text });
    };
    const timer = setTimeout(done, waitMs);
    s.on('data', (d) => {
      text += d.toString('latin1');
      const m = /Content-Length: (\d+)\r\n/i.exec(text);
      const end = text.indexOf('\r\n\r\n');
      if (m && end >= 0 && text.length >= end + 4 + Number(m[1])) done();
    });
    s.on('error', done);
    s.on('close', done);
    s.on('connect', () => {
      s.write(bytes);
      if (halfClose) s.end();
    });
  });
}

const chatBody = (maxTokens, stream, extra = {}) => JSON.stringify({
  model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens, stream, ...extra,
});
const post = (route, body, host = '127.0.0.1') =>
  `POST ${route} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

async function timed(f) {
  const t0 = Date.now();
  const r = await f();
  return { ...r, ms: Date.now() - t0 };
}

// 1. A stream whose client stops reading.
async function stalledStream() {
  const server = await startServer(['--write-timeout', '3', '--sse-keepalive', '0']);
  try {
    const rssBefore = rssKiB(server.proc.pid);
    const stuck = net.connect({ port: server.port, host: '127.0.0.1' });
    await new Promise((r) => stuck.once('connect', r));
    stuck.write(post('/v1/chat/completions', chatBody(60000, true)));
    await new Promise((r) => stuck.once('data', r));
    stuck.pause();  // never reads again
    const other = await timed(() => exchange(server.port, post('/v1/chat/completions', chatBody(2, false)), { waitMs: 60000 }));
    const rssAfter = rssKiB(server.proc.pid);
    stuck.destroy();
    const generated = /499 [^\n]*generated=(\d+)/.exec(server.log());
    report('stalled_stream', {
      requests: 2, other_status: other.status, seconds_until_other_served: other.ms / 1000,
      stalled_generated_tokens: generated ? Number(generated[1]) : null,
      rss_kib_before: rssBefore, rss_kib_after: rssAfter,
    }, other.status === 200 && /client stopped reading/.test(server.log()));
  } finally { await server.stop(); }
}

// 2. The store rewritten in place, then truncated in place, under a running server.
async function storeChanged(neural) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neural-adv-'));
  const store = path.join(dir, 'tiny.nstore');
  const r = spawnSync(neural, ['repack', '--checkpoint', modelDir(), '--out', store, '--format', 'raw'], { encoding: 'utf8' });
  if (r.status !== 0) { report('store_changed', { error: r.stderr }, false); return; }
  const server = await startServer(['--store', store]);
  try {
    const rssBefore = rssKiB(server.proc.pid);
    const first = await exchange(server.port, post('/v1/chat/completions', chatBody(2, false)), { waitMs: 60000 });
    const size = fs.statSync(store).size;
    const fd = fs.openSync(store, 'r+');  // the same inode, other bytes in the last record
    fs.writeSync(fd, Buffer.alloc(4096, 0x55), 0, 4096, size - 8192);
    fs.closeSync(fd);
    const rewritten = await exchange(server.port, post('/v1/chat/completions', chatBody(2, false)), { waitMs: 60000 });
    fs.truncateSync(store, Math.floor(size / 2));
    const truncated = await exchange(server.port, post('/v1/chat/completions', chatBody(2, false)), { waitMs: 60000 });
    const health = await exchange(server.port, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    report('store_changed', {
      requests: 4, before: first.status, rewritten: rewritten.status, truncated: truncated.status,
      health: health.status, alive: server.alive(), rss_kib_before: rssBefore, rss_kib_after: rssKiB(server.proc.pid),
    }, first.status === 200 && rewritten.status === 503 && truncated.status === 503 && server.alive() &&
      /the store changed on disk/.test(rewritten.text) && !rewritten.text.includes(dir));
  } finally {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// 3. Output paths that are not regular files: repack --out a FIFO, and through a link.
async function outputPaths(neural) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neural-adv-'));
  try {
    const fifo = path.join(dir, 'fifo');
    spawnSync('mkfifo', [fifo]);
    const t0 = Date.now();
    const r = spawnSync(neural, ['repack', '--checkpoint', modelDir(), '--out', fifo, '--format', 'raw'], { encoding: 'utf8', timeout: 60000 });
    const target = path.join(dir, 'target.nstore');
    fs.writeFileSync(target, 'old');
    fs.symlinkSync(target, path.join(dir, 'link.nstore'));
    const l = spawnSync(neural, ['repack', '--checkpoint', modelDir(), '--out', path.join(dir, 'link.nstore'), '--format', 'raw'], { encoding: 'utf8', timeout: 60000 });
    const fifoKept = fs.lstatSync(fifo).isFIFO();
    const linkKept = fs.lstatSync(path.join(dir, 'link.nstore')).isSymbolicLink();
    report('output_paths', {
      fifo_exit: r.status, fifo_message: (r.stderr || '').trim().split('\n').pop(), seconds: (Date.now() - t0) / 1000,
      fifo_kept: fifoKept, link_exit: l.status, link_kept: linkKept, target_bytes: fs.statSync(target).size,
    }, r.status !== 0 && fifoKept && l.status === 0 && linkKept && fs.statSync(target).size > 3);
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
}

// 4. Slow bodies from one address against newcomers from another, at --max-connections 16.
async function slowBodies() {
  const server = await startServer(['--max-connections', '16']);
  const slow = [];
  try {
    const rssBefore = rssKiB(server.proc.pid);
    for (let i = 0; i < 24; i++) {
      const s = net.connect({ port: server.port, host: '127.0.0.1', localAddress: '127.0.0.2' });
      s.on('error', () => {});
      s.on('connect', () => s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{'));
      slow.push(s);
    }
    const drip = setInterval(() => { for (const s of slow) if (!s.destroyed) s.write(' '); }, 1000);
    await sleep(1000);
    const t0 = Date.now();
    const statuses = {};
    for (let i = 0; i < 66; i++) {
      const r = await exchange(server.port, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', { localAddress: '127.0.0.3', waitMs: 5000 });
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    }
    clearInterval(drip);
    report('slow_bodies', {
      requests: 90, slow_connections: 24, newcomers: 66, newcomer_statuses: statuses,
      seconds: (Date.now() - t0) / 1000, rss_kib_before: rssBefore, rss_kib_after: rssKiB(server.proc.pid),
    }, (statuses[200] ?? 0) === 66);
  } finally {
    for (const s of slow) s.destroy();
    await server.stop();
  }
}

// 5. A prompt over the context is refused before any work.
async function longPrompt() {
  const server = await startServer([]);
  try {
    const rssBefore = rssKiB(server.proc.pid);
    const models = await exchange(server.port, 'GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    const context = Number(/"context_length":(\d+)/.exec(models.text)?.[1] ?? 0);
    const ids = Array.from({ length: context + 1 }, (_, i) => 1000 + (i % 5000));
    const body = JSON.stringify({ model: MODEL, prompt: ids, max_tokens: 1 });
    const r = await timed(() => exchange(server.port, post('/v1/completions', body), { waitMs: 60000 }));
    report('long_prompt', {
      requests: 1, prompt_tokens: ids.length, context, status: r.status, seconds: r.ms / 1000,
      rss_kib_before: rssBefore, rss_kib_after: rssKiB(server.proc.pid),
    }, r.status === 400 && /context_length_exceeded/.test(r.text));
  } finally { await server.stop(); }
}

// 6. SIGTERM with a stream running and a request queued.
async function sigterm() {
  const server = await startServer(['--shutdown-timeout', '5']);
  const running = net.connect({ port: server.port, host: '127.0.0.1' });
  let streamText = '';
  running.on('data', (d) => { streamText += d.toString('latin1'); });
  running.on('error', () => {});
  await new Promise((r) => running.once('connect', r));
  running.write(post('/v1/chat/completions', chatBody(20000, true)));
  while (!streamText.includes('\r\n\r\n')) await sleep(20);
  const queued = exchange(server.port, post('/v1/chat/completions', chatBody(2, false)), { waitMs: 15000 });
  await sleep(300);
  const t0 = Date.now();
  server.proc.kill('SIGTERM');
  const q = await queued;
  const code = await new Promise((r) => {
    if (server.proc.exitCode !== null) r(server.proc.exitCode);
    else server.proc.once('exit', (c) => r(c));
  });
  const seconds = (Date.now() - t0) / 1000;
  report('sigterm', {
    requests: 2, queued_status: q.status, stream_error_event: streamText.includes('server_shutting_down'),
    stream_done: streamText.includes('data: [DONE]'), stream_terminated: streamText.endsWith('0\r\n\r\n'),
    exit_code: code, seconds_to_exit: seconds,
  }, q.status === 503 && streamText.includes('server_shutting_down') && streamText.endsWith('0\r\n\r\n') && code === 0 && seconds < 6);
}

// 7. HTTP/1.1 rules.
async function httpRules() {
  const server = await startServer([]);
  try {
    const cases = {
      no_host: ['GET /health HTTP/1.1\r\n\r\n', 400],
      empty_host: ['GET /health HTTP/1.1\r\nHost:\r\n\r\n', 400],
      two_hosts: ['GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n', 400],
      absolute_other_host: ['GET http://evil.example/v1/models HTTP/1.1\r\nHost: evil.example\r\n\r\n', 400],
      absolute_this_host: ['GET http://127.0.0.1/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', 200],
    };
    const got = {};
    let ok = true;
    for (const [name, [bytes, want]] of Object.entries(cases)) {
      got[name] = (await exchange(server.port, bytes)).status;
      ok = ok && got[name] === want;
    }
    const id = 'resp_' + 'x'.repeat(1 << 20);
    const r = await exchange(server.port, post('/v1/responses', JSON.stringify({ model: MODEL, input: 'hi', previous_response_id: id })), { waitMs: 30000 });
    got.long_id_status = r.status;
    got.long_id_response_bytes = r.text.length;
    ok = ok && r.status === 400 && r.text.length < 2000;
    report('http_rules', { requests: Object.keys(cases).length + 1, ...got }, ok);
  } finally { await server.stop(); }
}

const scenarios = { stalledStream, storeChanged, outputPaths, slowBodies, longPrompt, sigterm, httpRules };
const neural = process.env.NEURAL_NEURAL_BIN;
const chosen = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(scenarios);
for (const name of chosen) {
  if (!scenarios[name]) throw new Error(`unknown scenario ${name} (${Object.keys(scenarios).join(', ')})`);
  if ((name === 'storeChanged' || name === 'outputPaths') && !neural) {
    console.log(JSON.stringify({ scenario: name, skipped: 'NEURAL_NEURAL_BIN not set' }));
    continue;
  }
  try {
    await scenarios[name](neural);
  } catch (e) {
    report(name, { error: String(e?.stack ?? e) }, false);
  }
}
process.exit(failures.length ? 1 : 0);
