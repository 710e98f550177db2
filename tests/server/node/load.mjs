// Loopback load test of neural-server on the tiny fixture (docs/RELIABILITY.md).
//   node load.mjs [--requests 1000] [--clients 32] [--seed 1] [--queue 8] [--retry-ms 1000]
//                 [--warmup 400] [--json OUT]
// Starts neural-server (NEURAL_SERVER_BIN) on 127.0.0.1, warms it up, then C concurrent clients
// send N requests in total, a seeded mix of streaming and non-streaming chat and completions,
// streams the client abandons mid-way (disconnect = cancel), and malformed requests (bad JSON,
// wrong types, wrong content type, unknown model, nesting too deep, bad HTTP framing). Every
// request must get a valid response for its kind or a 503 with Retry-After; the server must
// not crash; its RSS after the run must be within 5% of the RSS after warm-up.
// Queue wait: neural-server sends a stream's headers when the engine takes the request, so
// for streaming requests the time to the response headers is the time spent queued (plus
// parsing); p50/p99 of it are reported (queue_wait_ms). The server measures it too, from
// enqueue to the engine taking the job, for every generation (server_queue_wait_ms: its
// /metrics summary neural_queue_wait_seconds -- p50/p99 over its last 4096 jobs, warm-up
// included when the run is shorter -- and the run's own mean from the sum/count deltas).
// Exit 0 on success, 1 on any violation, 77 (skip) when there is no server binary.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, fallback) => {
  const i = process.argv.lastIndexOf(`--${name}`);  // the last one wins (scripts add defaults first)
  return i > 0 ? process.argv[i + 1] : fallback;
};
const REQUESTS = Number(arg('requests', 1000));
const CLIENTS = Number(arg('clients', 32));
const SEED = Number(arg('seed', 1));
const QUEUE = Number(arg('queue', 8));
const JSON_OUT = arg('json', '');
const RETRY_MS = Number(arg('retry-ms', 1000));  // the server's Retry-After is 1 s
const WARMUP = Number(arg('warmup', 400));  // warm-up requests (same mix), before the RSS baseline
const MODEL = 'tiny-gptoss-a';

const bin = process.env.NEURAL_SERVER_BIN;
if (!bin || !fs.existsSync(bin)) {
  console.log(`SKIPPED: NEURAL_SERVER_BIN must name the built neural-server (got "${bin ?? ''}")`);
  process.exit(77);
}
const shared = process.env.NEURAL_SHARED_DIR || path.join(here, '..', '..', '..', '..', 'shared');
const modelDir = path.join(shared, 'fixtures', MODEL);

// mulberry32: a small seeded PRNG, so a failing mix can be replayed with --seed.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rssKiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
const pct = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function startServer() {
  const { NEURAL_API_KEY: _ignored, ...env } = process.env;
  const proc = spawn(bin, ['--model', modelDir, '--port', '0', '--threads', '1',
    '--queue', String(QUEUE), '--default-max-tokens', '16', ...(process.env.NEURAL_LOAD_SERVER_ARGS || '').split(' ').filter(Boolean)], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; if (log.length > 1e6) log = log.slice(-5e5); });
  proc.stderr.on('data', (d) => { log += d; if (log.length > 1e6) log = log.slice(-5e5); });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 60000);
    const check = () => {
      const m = /serving '[^']*' on http:\/\/127\.0\.0\.1:(\d+)\/v1/.exec(log);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    };
    proc.stdout.on('data', check);
    proc.once('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited with ${code}:\n${log}`)); });
  });
  return { proc, port, url: `http://127.0.0.1:${port}`, log: () => log };
}

// ---- request kinds -------------------------------------------------------------------------

const words = ['alpha', 'beta', 'gamma', 'delta', 'tiny', 'model', 'load', 'test', 'queue', 'cache'];
function prompt(r) {
  const n = 1 + Math.floor(r() * 12);
  return Array.from({ length: n }, () => words[Math.floor(r() * words.length)]).join(' ');
}
function chatBody(r, stream) {
  const messages = [{ role: 'user', content: prompt(r) }];
  if (r() < 0.3) messages.unshift({ role: 'system', content: 'Be brief.' });
  if (r() < 0.3) messages.push({ role: 'assistant', content: prompt(r) }, { role: 'user', content: prompt(r) });
  return { model: MODEL, messages, stream, max_tokens: 1 + Math.floor(r() * 8), temperature: r() < 0.5 ? 0 : 0.8, seed: 7 };
}
function completionBody(r, stream) {
  return { model: MODEL, prompt: `<|start|>user<|message|>${prompt(r)}<|end|><|start|>assistant`, stream, max_tokens: 1 + Math.floor(r() * 8) };
}

// Malformed requests: [name, expected statuses, send(url, port) -> {status, body}].
const malformed = [
  ['bad-json', [400], (u) => post(u, '/v1/chat/completions', '{"model": "tiny-gptoss-a", "messages": [')],
  ['wrong-type', [400], (u) => post(u, '/v1/chat/completions', JSON.stringify({ model: MODEL, messages: 'hi' }))],
  ['unknown-field', [400], (u) => post(u, '/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], n: 3 }))],
  ['unknown-model', [404], (u) => post(u, '/v1/completions', JSON.stringify({ model: 'gpt-5', prompt: 'x' }))],
  ['content-type', [415], (u) => post(u, '/v1/chat/completions', '{}', 'text/plain')],
  ['too-deep', [400], (u) => post(u, '/v1/chat/completions', '['.repeat(5000) + ']'.repeat(5000))],
  ['bad-utf8', [400], (u) => post(u, '/v1/chat/completions', Buffer.concat([Buffer.from('{"model":"tiny-gptoss-a","messages":[{"role":"user","content":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]))],
  ['huge-number', [400], (u) => post(u, '/v1/chat/completions', '{"model":"tiny-gptoss-a","messages":[{"role":"user","content":"x"}],"temperature":1e999}')],
  ['no-route', [404], (u) => post(u, '/v1/nothing', '{}')],
  ['bad-method', [405], (_u, port) => raw(port, 'BREW /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n')],
  ['chunked', [411], (_u, port) => raw(port, 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n')],
  ['bad-header', [400], (_u, port) => raw(port, 'GET /health HTTP/1.1\r\nHo st: x\r\n\r\n')],
  ['too-large', [413], (_u, port) => raw(port, `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${64 << 20}\r\n\r\n`)],
];

async function post(url, route, body, contentType = 'application/json') {
  const res = await fetch(`${url}${route}`, { method: 'POST', headers: { 'Content-Type': contentType }, body });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

function raw(port, text) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    const done = () => {
      socket.destroy();
      const s = data.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(s);
      const i = s.indexOf('\r\n\r\n');
      resolve({ status: m ? Number(m[1]) : 0, body: i >= 0 ? s.slice(i + 4) : '' });
    };
    const timer = setTimeout(done, 10000);
    socket.on('data', (d) => { data = Buffer.concat([data, d]); });
    socket.on('close', () => { clearTimeout(timer); done(); });
    socket.on('error', () => {});
    socket.on('connect', () => socket.write(text));
  });
}

function isErrorBody(text) {
  try {
    const j = JSON.parse(text);
    return typeof j.error?.message === 'string' && typeof j.error?.type === 'string';
  } catch { return false; }
}

// ---- one request ---------------------------------------------------------------------------

async function oneRequest(r, url, port, stats) {
  const x = r();
  const kind = x < 0.35 ? 'stream' : x < 0.65 ? 'plain' : x < 0.80 ? 'cancel' : 'malformed';
  const chat = r() < 0.7;
  const route = chat ? '/v1/chat/completions' : '/v1/completions';
  const t0 = performance.now();
  const fail = (why) => stats.failures.push(`${kind}${chat ? ' chat' : ' completion'}: ${why}`);
  const count = (status) => { stats.status[status] = (stats.status[status] ?? 0) + 1; };
  const check503 = (status, headers, body) => {
    if (status !== 503) return false;
    if (headers && headers.get('retry-after') === null) fail('503 without Retry-After');
    if (!isErrorBody(body)) fail(`503 without an error body: ${body.slice(0, 200)}`);
    stats.rejected++;
    return true;
  };
  stats.kinds[kind] = (stats.kinds[kind] ?? 0) + 1;

  if (kind === 'malformed') {
    const [name, expect, send] = malformed[Math.floor(r() * malformed.length)];
    const res = await send(url, port);
    count(res.status);
    if (check503(res.status, res.headers, res.body)) return;
    if (!expect.includes(res.status)) fail(`${name}: status ${res.status}, expected ${expect}`);
    else if (!isErrorBody(res.body)) fail(`${name}: no OpenAI error body: ${res.body.slice(0, 200)}`);
    return;
  }

  const stream = kind !== 'plain';
  const body = chat ? chatBody(r, stream) : completionBody(r, stream);
  const controller = new AbortController();
  let res;
  try {
    res = await fetch(`${url}${route}`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body), signal: controller.signal,
    });
  } catch (e) {
    fail(`request failed: ${e.message}`);
    return;
  }
  const headersMs = performance.now() - t0;
  count(res.status);
  if (res.status === 503) {
    check503(503, res.headers, await res.text());
    return;
  }
  if (res.status !== 200) {
    fail(`status ${res.status}: ${(await res.text()).slice(0, 200)}`);
    return;
  }
  if (!stream) {
    let j;
    try { j = JSON.parse(await res.text()); } catch (e) { fail(`bad JSON: ${e.message}`); return; }
    const c = j.choices?.[0];
    const ok = chat ? (j.object === 'chat.completion' && c?.message?.role === 'assistant')
      : (j.object === 'text_completion' && typeof c?.text === 'string');
    if (!ok || typeof c?.finish_reason !== 'string' || typeof j.usage?.completion_tokens !== 'number') {
      fail(`malformed completion: ${JSON.stringify(j).slice(0, 300)}`);
    }
    stats.latencyMs.push(performance.now() - t0);
    return;
  }
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    fail(`stream with content-type ${res.headers.get('content-type')}`);
  }
  stats.queueWaitMs.push(headersMs);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (kind === 'cancel' && text.includes('\n\n')) {
        controller.abort();  // the client goes away mid-stream: the server must cancel
        stats.cancelled++;
        return;
      }
    }
  } catch (e) {
    if (kind === 'cancel') { stats.cancelled++; return; }
    fail(`stream broke: ${e.message}`);
    return;
  }
  // The stream ended before the client could cancel (short answers): still a valid stream.
  const events = text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
  if (events.at(-1) !== '[DONE]') fail(`stream without [DONE]: ${text.slice(-200)}`);
  let finish = null;
  for (const e of events.slice(0, -1)) {
    let j;
    try { j = JSON.parse(e); } catch { fail(`bad SSE event: ${e.slice(0, 200)}`); return; }
    if (j.error) { fail(`error event: ${e.slice(0, 200)}`); return; }
    finish = j.choices?.[0]?.finish_reason ?? finish;
  }
  if (!finish) fail('stream without finish_reason');
  stats.latencyMs.push(performance.now() - t0);
}

// ---- main ----------------------------------------------------------------------------------

const server = await startServer();
const { proc, url, port } = server;
let exitInfo = null;
proc.once('exit', (code, signal) => { exitInfo = { code, signal }; });
const waitIdle = async () => {
  for (let i = 0; i < 3000; i++) {
    const h = await (await fetch(`${url}/health`)).json();
    if (!h.busy && h.queue === 0) return;
    await sleep(20);
  }
  throw new Error('server still busy after 60 s');
};

// C clients share `total` requests; each client has its own seeded generator.
async function phase(total, seedBase, stats) {
  let next = 0;
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    const r = rng(seedBase + c);
    while (next < total && exitInfo === null) {
      next++;
      const before = stats.rejected;
      await oneRequest(r, url, port, stats);
      // After a 503 the client waits as Retry-After says (1 s), with jitter.
      if (stats.rejected > before) await sleep(RETRY_MS * (0.5 + r()));
    }
  }));
}
const newStats = () => ({ failures: [], status: {}, kinds: {}, rejected: 0, cancelled: 0, latencyMs: [], queueWaitMs: [] });

// Warm-up: the same mix, so the heap, Qt's connection buffers and the KV caches reach their
// working size before the baseline RSS is taken (measured: RSS plateaus after a few hundred
// requests; the growth before that is the allocator's high-water mark, not a leak).
const warmStats = newStats();
await phase(WARMUP, SEED * 7919, warmStats);
await waitIdle();
await sleep(200);
const rssWarm = rssKiB(proc.pid);

// The server's own queue-wait summary (sum and count before the run: the run's mean).
const metricsText = async () => (await fetch(`${url}/metrics`)).text();
const metricOf = (text, name) => Number(new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
const before = exitInfo === null ? await metricsText() : '';
const stats = newStats();
const t0 = performance.now();
await phase(REQUESTS, SEED * 1000, stats);
const seconds = (performance.now() - t0) / 1000;
let rssAfter = null;
if (exitInfo === null) {
  await waitIdle();
  await sleep(200);
  rssAfter = rssKiB(proc.pid);
}
const metrics = exitInfo === null ? await metricsText() : '';
const metric = (name) => metricOf(metrics, name);
const waitCount = metric('neural_queue_wait_seconds_count') - metricOf(before, 'neural_queue_wait_seconds_count');
const waitSum = metric('neural_queue_wait_seconds_sum') - metricOf(before, 'neural_queue_wait_seconds_sum');
const serverWait = {
  p50: metric('neural_queue_wait_seconds{quantile="0.5"}') * 1000,
  p99: metric('neural_queue_wait_seconds{quantile="0.99"}') * 1000,
  window: Math.min(metric('neural_queue_wait_seconds_count'), 4096),
  run_mean: waitCount > 0 ? (waitSum / waitCount) * 1000 : null,
  run_n: waitCount,
};

const failures = [...warmStats.failures.map((f) => `warm-up: ${f}`), ...stats.failures];
if (exitInfo !== null) failures.push(`server exited during the run: ${JSON.stringify(exitInfo)}\n${server.log().slice(-2000)}`);
const growth = rssAfter === null ? null : (rssAfter - rssWarm) / rssWarm;
if (exitInfo === null && !(Number.isFinite(serverWait.p50) && Number.isFinite(serverWait.p99) && serverWait.p99 >= serverWait.p50)) {
  failures.push(`server queue-wait summary missing or inconsistent in /metrics: ${JSON.stringify(serverWait)}`);
}
if (exitInfo === null && !(waitCount >= stats.latencyMs.length)) {
  failures.push(`server counted ${waitCount} started jobs, fewer than the ${stats.latencyMs.length} completed requests`);
}
if (growth !== null && Math.abs(growth) > 0.05) failures.push(`RSS ${rssWarm} KiB after warm-up, ${rssAfter} KiB after the run (${(growth * 100).toFixed(1)}%)`);
const summary = {
  requests: REQUESTS, clients: CLIENTS, seed: SEED, queue: QUEUE, seconds: Number(seconds.toFixed(1)),
  kinds: stats.kinds, status: stats.status, rejected503: stats.rejected, cancelled: stats.cancelled,
  queue_wait_ms: { p50: pct(stats.queueWaitMs, 50), p99: pct(stats.queueWaitMs, 99), n: stats.queueWaitMs.length },
  server_queue_wait_ms: serverWait,
  latency_ms: { p50: pct(stats.latencyMs, 50), p99: pct(stats.latencyMs, 99), n: stats.latencyMs.length },
  rss_kib: { warm: rssWarm, after: rssAfter, growth_pct: growth === null ? null : Number((growth * 100).toFixed(2)) },
  server_metrics: { generations: metric('neural_generations_total'), rejected: metric('neural_requests_rejected_total'), cancelled: metric('neural_requests_cancelled_total') },
  failures: failures.length,
};
for (const k of ['queue_wait_ms', 'latency_ms', 'server_queue_wait_ms']) {
  for (const p of ['p50', 'p99', 'run_mean']) if (summary[k][p] != null) summary[k][p] = Number(summary[k][p].toFixed(1));
}
console.log(`queue wait, client side (streaming, time to headers): p50 ${summary.queue_wait_ms.p50} ms, p99 ${summary.queue_wait_ms.p99} ms (n = ${summary.queue_wait_ms.n})`);
console.log(`queue wait, server side (enqueue to engine start): p50 ${summary.server_queue_wait_ms.p50} ms, p99 ${summary.server_queue_wait_ms.p99} ms over the last ${summary.server_queue_wait_ms.window} jobs; this run's mean ${summary.server_queue_wait_ms.run_mean} ms (n = ${waitCount})`);
console.log(JSON.stringify(summary, null, 1));
if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify(summary, null, 1));
for (const f of failures.slice(0, 20)) console.log(`FAIL ${f}`);
if (exitInfo === null) {
  const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 10000);
  const how = await exited;
  clearTimeout(timer);
  if (how.code !== 0) { console.log(`FAIL server did not exit cleanly on SIGTERM: ${JSON.stringify(how)}`); process.exit(1); }
}
process.exit(failures.length ? 1 : 0);
