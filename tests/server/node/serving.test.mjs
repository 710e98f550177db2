// Serving behaviour: one generation at a time with a FIFO queue, 503 beyond it, cancellation
// when a client disconnects (running or queued), and a bounded load run with stable memory.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { MODEL, health, postJson, rssKiB, startServer, waitBusy, waitIdle } from './helpers.mjs';

const user = (content) => ({ role: 'user', content });
// Long enough to still be running when the test acts (~3 ms a token on the tiny model).
const LONG = 20000;

async function waitFor(url, predicate, limitMs = 5000) {
  const t0 = Date.now();
  while (Date.now() - t0 < limitMs) {
    if (predicate(await health(url))) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('condition not reached');
}

function metric(text, name) {
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
}

describe('queue and cancellation', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer(['--queue', '4', '--enable-test-options']);
    client = server.client();
  });
  after(async () => server?.stop());

  test('two concurrent clients: the second waits, both are answered', async () => {
    let doneA = 0;
    let doneB = 0;
    const a = client.chat.completions.create({ model: MODEL, messages: [user('First')], max_tokens: 300, temperature: 0 })
      .then((r) => { doneA = performance.now(); return r; });
    await waitBusy(server.url);
    const b = client.chat.completions.create({ model: MODEL, messages: [user('Second')], max_tokens: 4 })
      .then((r) => { doneB = performance.now(); return r; });
    await waitFor(server.url, (h) => h.queue === 1);
    const [ra, rb] = await Promise.all([a, b]);
    assert.equal(ra.usage.completion_tokens, 300);
    assert.equal(rb.usage.completion_tokens, 4);
    assert.ok(doneB > doneA, 'the second request is served after the first');
    await waitIdle(server.url);
  });

  test('disconnecting mid-stream cancels the generation within a second', async () => {
    const before = metric(await (await fetch(`${server.url}/metrics`)).text(), 'neural_requests_cancelled_total');
    // The forced channel header makes every sampled token answer text, so content flows at once.
    const stream = await client.chat.completions.create({
      model: MODEL, messages: [user('Talk forever')], max_tokens: LONG, stream: true,
      neural_forced_output: '<|channel|>final<|message|>',
    });
    let contentChunks = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content) contentChunks += 1;
      if (contentChunks >= 5) break;
    }
    stream.controller.abort();
    const t0 = performance.now();
    await waitIdle(server.url, 5000);
    const ms = performance.now() - t0;
    assert.ok(ms < 1000, `idle after ${ms.toFixed(0)} ms`);
    const after = metric(await (await fetch(`${server.url}/metrics`)).text(), 'neural_requests_cancelled_total');
    assert.equal(after, before + 1);
  });

  test('a queued request whose client leaves is dropped from the queue', async () => {
    const post = (body, signal) => fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal,
    }).catch((e) => e);
    const running = new AbortController();
    const a = post({ model: MODEL, messages: [user('Long one')], max_tokens: LONG, stream: true }, running.signal);
    await waitBusy(server.url);
    const queued = new AbortController();
    const b = post({ model: MODEL, messages: [user('Waiting')], max_tokens: 4 }, queued.signal);
    await waitFor(server.url, (h) => h.queue === 1);
    queued.abort();
    await b;
    await waitFor(server.url, (h) => h.queue === 0 && h.busy, 1000);
    running.abort();
    await a;
    const ms = await waitIdle(server.url, 5000);
    assert.ok(ms < 1000, `idle after ${ms} ms`);
  });

  test('a full queue answers 503 with Retry-After; queued requests are still served', async () => {
    const longRun = await postJson(server.url, '/v1/chat/completions', {
      model: MODEL, messages: [user('Occupy the engine')], max_tokens: LONG, stream: true,
    });
    await waitBusy(server.url);
    const queued = [1, 2, 3, 4].map((i) => postJson(server.url, '/v1/chat/completions', {
      model: MODEL, messages: [user(`Queued ${i}`)], max_tokens: 2,
    }));
    await waitFor(server.url, (h) => h.queue === 4);
    const over = await Promise.all([5, 6].map((i) => postJson(server.url, '/v1/chat/completions', {
      model: MODEL, messages: [user(`Too many ${i}`)], max_tokens: 2,
    })));
    for (const r of over) {
      assert.equal(r.status, 503);
      assert.equal(r.headers.get('retry-after'), '1');
      const body = await r.json();
      assert.equal(body.error.code, 'server_overloaded');
      assert.equal(body.error.type, 'server_error');
    }
    await longRun.body.cancel();  // disconnect: the running generation stops
    const answered = await Promise.all(queued);
    for (const r of answered) {
      assert.equal(r.status, 200);
      assert.equal((await r.json()).usage.completion_tokens, 2);
    }
    await waitIdle(server.url);
  });
});

describe('bounded load run', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer(['--queue', '12']);
    client = server.client();
  });
  after(async () => server?.stop());

  // `total` requests from `concurrency` clients, half streamed through the SDK, half plain.
  async function load(total, concurrency) {
    const statuses = new Map();
    let next = 0;
    const worker = async () => {
      while (next < total) {
        const i = next++;
        let status;
        try {
          if (i % 2) {
            const stream = await client.chat.completions.create({
              model: MODEL, messages: [user(`Load ${i}`)], max_tokens: 3, temperature: 0, stream: true,
            });
            let finished = false;
            for await (const c of stream) finished ||= Boolean(c.choices[0]?.finish_reason);
            status = finished ? 200 : 'unfinished';
          } else {
            const r = await postJson(server.url, '/v1/chat/completions', {
              model: MODEL, messages: [user(`Load ${i}`)], max_tokens: 3, temperature: 0,
            });
            await r.arrayBuffer();
            status = r.status;
          }
        } catch (e) {
          status = e.status ?? `error: ${e.message}`;
        }
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        // A refused client backs off briefly, as Retry-After asks (shortened to keep it quick).
        if (status === 503) await new Promise((r) => setTimeout(r, 100));
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return statuses;
  }

  test('200 requests from 20 clients: all answered or 503, memory stable', { timeout: 90000 }, async (t) => {
    await load(40, 20);  // warm-up: caches, allocator pools
    const rss0 = rssKiB(server.proc.pid);
    const statuses = await load(200, 20);
    const rss1 = rssKiB(server.proc.pid);
    const count = [...statuses.values()].reduce((a, b) => a + b, 0);
    t.diagnostic(`statuses ${JSON.stringify([...statuses])}, RSS ${rss0} -> ${rss1} KiB`);
    assert.equal(count, 200);
    for (const status of statuses.keys()) assert.ok(status === 200 || status === 503, `got ${status}`);
    assert.ok((statuses.get(200) ?? 0) >= 20, `only ${statuses.get(200)} answered: ${[...statuses]}`);
    assert.ok(rss1 - rss0 < 32 * 1024, `RSS grew by ${rss1 - rss0} KiB`);
    assert.ok(server.alive());
    await waitIdle(server.url);
    const text = await (await fetch(`${server.url}/metrics`)).text();
    // Keep-alive pools of the SDK and of fetch: at most one connection per client each, plus this.
    const open = metric(text, 'neural_open_connections');
    t.diagnostic(`open connections after the run: ${open}`);
    assert.ok(open <= 41, `${open} connections still open`);
  });
});
