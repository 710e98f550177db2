// Shared helpers of the end-to-end suite: start neural-server on the tiny fixture on a free
// loopback port, talk raw HTTP to it, read its memory use. All traffic goes to 127.0.0.1.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '..', '..', '..');

export const MODEL = 'tiny-gptoss-a';

export function serverBinary() {
  const bin = process.env.NEURAL_SERVER_BIN;
  if (!bin || !fs.existsSync(bin)) {
    throw new Error(`NEURAL_SERVER_BIN must name the built neural-server (got "${bin ?? ''}")`);
  }
  return bin;
}

export function modelDir() {
  const shared = process.env.NEURAL_SHARED_DIR || path.join(repoRoot, '..', 'shared');
  return path.join(shared, 'fixtures', MODEL);
}

// Starts a server; resolves once it printed its address. `args` are extra command-line options,
// `env` extra environment (a NEURAL_API_KEY of the calling shell is not passed on).
export async function startServer(args = [], env = {}) {
  const { NEURAL_API_KEY: _ignored, ...base } = process.env;
  const proc = spawn(serverBinary(), ['--model', modelDir(), '--port', '0', '--threads', '1', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...base, ...env },
  });
  let log = '';
  proc.stdout.on('data', (d) => { log += d.toString(); });
  proc.stderr.on('data', (d) => { log += d.toString(); });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 30000);
    const check = () => {
      const m = /serving '[^']*' on http:\/\/127\.0\.0\.1:(\d+)\/v1/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    proc.stdout.on('data', check);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${log}`));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    proc,
    port,
    url,
    log: () => log,
    alive: () => proc.exitCode === null && proc.signalCode === null,
    client: (options = {}) => new OpenAI({
      baseURL: `${url}/v1`, apiKey: 'not-needed', maxRetries: 0, timeout: 60000, ...options,
    }),
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// Sends raw bytes on a fresh connection and collects the reply until the server closes, `wait`
// ms pass, or a complete response with Content-Length has arrived.
export function rawRequest(port, chunks, { wait = 3000, halfClose = false, gapMs = 0 } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let closed = false;
    const done = (why) => {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ text: data.toString('latin1'), status: statusOf(data), why });
    };
    const timer = setTimeout(() => done('timeout'), wait);
    socket.on('data', (d) => {
      data = Buffer.concat([data, d]);
      const text = data.toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      const len = /content-length: (\d+)/i.exec(text);
      if (head >= 0 && len && data.length >= head + 4 + Number(len[1])) done('complete');
    });
    socket.on('close', () => done('closed'));
    socket.on('error', () => done('error'));
    socket.on('connect', async () => {
      for (const c of [].concat(chunks)) {
        if (closed) return;
        socket.write(c);
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
      if (halfClose) socket.end();
    });
  });
}

function statusOf(buf) {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(buf.toString('latin1'));
  return m ? Number(m[1]) : 0;
}

export function jsonBody(raw) {
  const i = raw.indexOf('\r\n\r\n');
  return JSON.parse(raw.slice(i + 4));
}

// Resident memory of a process in KiB (Linux).
export function rssKiB(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
}

export async function health(url) {
  const r = await fetch(`${url}/health`);
  return r.json();
}

// Polls /health until the engine is idle and nothing waits; returns the milliseconds it took.
export async function waitIdle(url, limitMs = 5000) {
  const t0 = Date.now();
  while (Date.now() - t0 < limitMs) {
    const h = await health(url);
    if (!h.busy && h.queue === 0) return Date.now() - t0;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`server still busy after ${limitMs} ms`);
}

export async function waitBusy(url, limitMs = 5000) {
  const t0 = Date.now();
  while (Date.now() - t0 < limitMs) {
    if ((await health(url)).busy) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('server never became busy');
}

export function postJson(url, route, body, headers = {}) {
  return fetch(`${url}${route}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

// Harmony output the test option makes the sampler emit.
export const forced = {
  answer: (reasoning, text) =>
    `<|channel|>analysis<|message|>${reasoning}<|end|><|start|>assistant<|channel|>final<|message|>${text}<|return|>`,
  final: (text) => `<|channel|>final<|message|>${text}<|return|>`,
  call: (reasoning, name, args) =>
    `<|channel|>analysis<|message|>${reasoning}<|end|><|start|>assistant<|channel|>commentary to=functions.${name} <|constrain|>json<|message|>${args}<|call|>`,
};

// Checks OpenAI's logprobs entries of `text`'s tokens: their bytes spell the text, each logprob
// is a log-probability, the alternatives are `top` many, most likely first, and the token is
// among them with the same logprob when it is likelier than the last of them.
export function checkLogprobs(entries, text, top) {
  assert.ok(entries.length > 0);
  assert.equal(Buffer.from(entries.flatMap((e) => e.bytes)).toString('utf8'), text);
  for (const e of entries) {
    assert.equal(Buffer.from(e.bytes).toString('utf8'), e.token);
    assert.ok(e.logprob <= 0 && Number.isFinite(e.logprob), JSON.stringify(e));
    assert.equal(e.top_logprobs.length, top);
    for (let i = 1; i < e.top_logprobs.length; i += 1)
      assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob, JSON.stringify(e));
    const same = e.top_logprobs.find((t) => t.token === e.token);
    if (same) assert.ok(Math.abs(same.logprob - e.logprob) < 1e-9, JSON.stringify(e));
    if (top > 0 && e.logprob > e.top_logprobs.at(-1).logprob) assert.ok(same, JSON.stringify(e));
  }
}
