// The API through the official openai client: chat (plain, streaming, usage, cached tokens,
// stop sequences, token limits), tool calls, raw completions, models, errors, metrics, and the
// SSE framing on the wire (curl).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';

import { MODEL, checkLogprobs, forced, postJson, startServer } from './helpers.mjs';

let server;
let client;

before(async () => {
  server = await startServer(['--enable-test-options']);
  client = server.client();
});
after(async () => {
  await server?.stop();
});

const user = (content) => ({ role: 'user', content });

async function collect(stream) {
  const out = { chunks: [], content: '', reasoning: '', contentChunks: 0, toolCalls: [], finish: null, usage: null };
  for await (const chunk of stream) {
    out.chunks.push(chunk);
    if (chunk.usage) out.usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    const d = choice.delta ?? {};
    if (d.content) {
      out.content += d.content;
      out.contentChunks += 1;
    }
    if (d.reasoning_content) out.reasoning += d.reasoning_content;
    for (const tc of d.tool_calls ?? []) {
      out.toolCalls[tc.index] ??= { id: '', name: '', arguments: '' };
      const t = out.toolCalls[tc.index];
      if (tc.id) t.id = tc.id;
      if (tc.function?.name) t.name += tc.function.name;
      if (tc.function?.arguments) t.arguments += tc.function.arguments;
    }
    if (choice.finish_reason) out.finish = choice.finish_reason;
  }
  return out;
}

describe('models and health', () => {
  test('lists the served model', async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), [MODEL]);
    const one = await client.models.retrieve(MODEL);
    assert.equal(one.id, MODEL);
    await assert.rejects(client.models.retrieve('nope'), (e) => e.status === 404);
  });

  test('health', async () => {
    const h = await (await fetch(`${server.url}/health`)).json();
    assert.equal(h.status, 'ok');
    assert.equal(h.model, MODEL);
    // server-side queue wait of the jobs started so far (none need have run yet)
    assert.ok(Number.isInteger(h.queue_wait.count) && h.queue_wait.count >= 0);
    assert.ok(h.queue_wait.p50_ms >= 0 && h.queue_wait.p99_ms >= h.queue_wait.p50_ms);
  });
});

describe('chat completions', () => {
  test('non-streaming reply with usage', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [user('Hello!')], max_tokens: 8, temperature: 0,
    });
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.model, MODEL);
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 8);
    assert.ok(r.usage.prompt_tokens > 10);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 8);
    assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
    // llama-server's timings object (docs/API.md), passed through by the client as it is
    const t = r.timings;
    assert.equal(t.predicted_n, 8);
    assert.equal(t.prompt_n, r.usage.prompt_tokens - r.usage.prompt_tokens_details.cached_tokens);
    assert.ok(t.prompt_ms > 0 && t.predicted_ms > 0);
    assert.ok(Math.abs(t.predicted_per_second - 8000 / t.predicted_ms) < 1e-6 * t.predicted_per_second);
  });

  test('chat_template_kwargs carries the reasoning effort as llama-server takes it', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [user('Hello!')], max_tokens: 4, temperature: 0,
      chat_template_kwargs: { reasoning_effort: 'low' }, reasoning_effort: 'low',
    });
    assert.equal(r.usage.completion_tokens, 4);
    await assert.rejects(client.chat.completions.create({
      model: MODEL, messages: [user('Hello!')], max_tokens: 4,
      chat_template_kwargs: { reasoning_effort: 'low' }, reasoning_effort: 'high',
    }), (e) => e.status === 400 && /disagree/.test(e.message));
  });

  test('greedy and seeded sampling are reproducible', async () => {
    const ask = (extra) => client.chat.completions.create({
      model: MODEL, messages: [user('Tell me a story.')], max_tokens: 12, ...extra,
    });
    assert.equal((await ask({ temperature: 0 })).choices[0].message.content,
      (await ask({ temperature: 0 })).choices[0].message.content);
    assert.equal((await ask({ seed: 7, temperature: 1 })).choices[0].message.content,
      (await ask({ seed: 7, temperature: 1 })).choices[0].message.content);
  });

  test('reasoning and answer, non-streaming', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [user('2+2?')], max_tokens: 100,
      neural_forced_output: forced.answer('Simple sum.', 'It is 4.'),
    });
    const m = r.choices[0].message;
    assert.equal(m.content, 'It is 4.');
    assert.equal(m.reasoning_content, 'Simple sum.');
    assert.equal(m.reasoning, 'Simple sum.');
    assert.equal(r.choices[0].finish_reason, 'stop');
  });

  test('streaming: role first, reasoning and content deltas, finish, usage, [DONE]', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL, messages: [user('Hi')], max_tokens: 100, stream: true,
      stream_options: { include_usage: true },
      neural_forced_output: forced.answer('Thinking it over.', 'Hello there, my friend!'),
    });
    const out = await collect(stream);
    assert.equal(out.chunks[0].choices[0].delta.role, 'assistant');
    assert.equal(out.chunks[0].object, 'chat.completion.chunk');
    assert.equal(out.reasoning, 'Thinking it over.');
    assert.equal(out.content, 'Hello there, my friend!');
    assert.ok(out.contentChunks > 1, 'content arrives in several deltas');
    assert.equal(out.finish, 'stop');
    assert.ok(out.usage, 'usage chunk');
    assert.equal(out.chunks.at(-1).choices.length, 0);
    assert.ok(out.usage.completion_tokens > 5);
    // Without include_usage there is no usage chunk.
    const plain = await collect(await client.chat.completions.create({
      model: MODEL, messages: [user('Hi')], max_tokens: 3, stream: true,
    }));
    assert.equal(plain.usage, null);
    assert.equal(plain.finish, 'length');
  });

  test('a follow-up reuses the cached prompt', async () => {
    const history = [{ role: 'system', content: 'You are terse.' }, user('What is the sea?')];
    const first = await client.chat.completions.create({ model: MODEL, messages: history, max_tokens: 6, temperature: 0 });
    const second = await client.chat.completions.create({
      model: MODEL,
      messages: [...history, { role: 'assistant', content: first.choices[0].message.content }, user('And the sky?')],
      max_tokens: 6,
      temperature: 0,
    });
    assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
    assert.ok(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens,
      `cached ${second.usage.prompt_tokens_details.cached_tokens} of ${second.usage.prompt_tokens}, first prompt ${first.usage.prompt_tokens}`);
  });

  test('stop sequences end the answer before them', async () => {
    const body = {
      model: MODEL, messages: [user('Count')], max_tokens: 100, stop: ['STOP', 'never'],
      neural_forced_output: forced.final('alpha beta STOP gamma delta'),
    };
    const r = await client.chat.completions.create(body);
    assert.equal(r.choices[0].message.content, 'alpha beta ');
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(r.usage.completion_tokens < 10);
    const s = await collect(await client.chat.completions.create({ ...body, stream: true }));
    assert.equal(s.content, 'alpha beta ');
    assert.equal(s.finish, 'stop');
  });

  test('max_tokens and max_completion_tokens limit the reply', async () => {
    const a = await client.chat.completions.create({ model: MODEL, messages: [user('Go on')], max_tokens: 5 });
    assert.equal(a.usage.completion_tokens, 5);
    assert.equal(a.choices[0].finish_reason, 'length');
    const b = await client.chat.completions.create({ model: MODEL, messages: [user('Go on')], max_completion_tokens: 3 });
    assert.equal(b.usage.completion_tokens, 3);
    const forcedLong = await client.chat.completions.create({
      model: MODEL, messages: [user('Go on')], max_tokens: 4,
      neural_forced_output: forced.final('one two three four five six seven eight'),
    });
    assert.equal(forcedLong.choices[0].finish_reason, 'length');
    assert.ok(forcedLong.choices[0].message.content.length < 'one two three four five six seven eight'.length);
  });
});

describe('tool calls', () => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather of a city.',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  }];

  test('round trip: call out, result in, final answer', async () => {
    const messages = [{ role: 'system', content: 'You help with weather.' }, user('Weather in Paris?')];
    const first = await client.chat.completions.create({
      model: MODEL, messages, tools, max_tokens: 200,
      neural_forced_output: forced.call('Need the weather.', 'get_weather', '{"city":"Paris"}'),
    });
    const call = first.choices[0];
    assert.equal(call.finish_reason, 'tool_calls');
    assert.equal(call.message.content, null);
    assert.equal(call.message.reasoning_content, 'Need the weather.');
    assert.equal(call.message.tool_calls.length, 1);
    const tc = call.message.tool_calls[0];
    assert.equal(tc.type, 'function');
    assert.equal(tc.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(tc.function.arguments), { city: 'Paris' });
    assert.match(tc.id, /^call_/);

    const second = await client.chat.completions.create({
      model: MODEL,
      messages: [...messages, call.message, { role: 'tool', tool_call_id: tc.id, content: '{"temp_c": 21}' }],
      tools,
      max_tokens: 200,
      neural_forced_output: forced.answer('Tool says 21.', 'It is 21 °C in Paris.'),
    });
    assert.equal(second.choices[0].finish_reason, 'stop');
    assert.equal(second.choices[0].message.content, 'It is 21 °C in Paris.');
    assert.equal(second.choices[0].message.tool_calls, undefined);
    // The system, developer and user messages of the first request are reused.
    assert.ok(second.usage.prompt_tokens_details.cached_tokens > first.usage.prompt_tokens / 2);
  });

  test('streamed tool call: name first, arguments in pieces', async () => {
    const out = await collect(await client.chat.completions.create({
      model: MODEL, messages: [user('Weather in Oslo?')], tools, max_tokens: 200, stream: true,
      neural_forced_output: forced.call('Look it up.', 'get_weather', '{"city": "Oslo", "days": [1, 2, 3]}'),
    }));
    assert.equal(out.finish, 'tool_calls');
    assert.equal(out.toolCalls.length, 1);
    assert.equal(out.toolCalls[0].name, 'get_weather');
    assert.deepEqual(JSON.parse(out.toolCalls[0].arguments), { city: 'Oslo', days: [1, 2, 3] });
    assert.match(out.toolCalls[0].id, /^call_/);
    const argChunks = out.chunks.filter((c) => c.choices[0]?.delta?.tool_calls?.[0]?.function?.arguments);
    assert.ok(argChunks.length > 1, 'arguments stream in several pieces');
  });

  test('a named tool_choice makes the reply a call of that tool', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [user('Anything')], tools, max_tokens: 16,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    assert.equal(r.choices[0].message.tool_calls?.[0]?.function.name, 'get_weather');
  });

  test('tool_choice none hides the tools', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [user('Anything')], tools, tool_choice: 'none', max_tokens: 2,
    });
    const withTools = await client.chat.completions.create({
      model: MODEL, messages: [user('Anything')], tools, max_tokens: 2,
    });
    assert.ok(r.usage.prompt_tokens < withTools.usage.prompt_tokens);
  });
});

describe('completions (raw prompt)', () => {
  test('plain and streamed give the same greedy text', async () => {
    const prompt = '<|start|>user<|message|>Once upon a time<|end|><|start|>assistant';
    const r = await client.completions.create({ model: MODEL, prompt, max_tokens: 6, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 6);
    assert.equal(typeof r.choices[0].text, 'string');
    let text = '';
    let finish = null;
    let usage = null;
    const stream = await client.completions.create({
      model: MODEL, prompt, max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    for await (const c of stream) {
      if (c.usage) usage = c.usage;
      if (c.choices[0]) {
        text += c.choices[0].text;
        finish = c.choices[0].finish_reason ?? finish;
      }
    }
    assert.equal(text, r.choices[0].text);
    assert.equal(finish, 'length');
    assert.equal(usage.completion_tokens, 6);
    // The same prompt again is served from the cache.
    assert.ok(usage.prompt_tokens_details.cached_tokens >= r.usage.prompt_tokens - 1);
  });

  test('logprobs in the legacy format, plain and streamed', async () => {
    const prompt = '<|start|>user<|message|>Count to three<|end|><|start|>assistant';
    const body = { model: MODEL, prompt, max_tokens: 5, temperature: 0, logprobs: 2 };
    const r = await client.completions.create(body);
    const lp = r.choices[0].logprobs;
    assert.ok(lp, 'choices[0].logprobs');
    assert.equal(lp.tokens.length, r.usage.completion_tokens);
    assert.equal(lp.token_logprobs.length, lp.tokens.length);
    assert.equal(lp.top_logprobs.length, lp.tokens.length);
    assert.equal(lp.text_offset.length, lp.tokens.length);
    assert.equal(lp.text_offset[0], 0);
    for (let i = 0; i < lp.tokens.length; ++i) {
      assert.ok(lp.token_logprobs[i] <= 0);
      const top = lp.top_logprobs[i];
      assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= 3, JSON.stringify(top));
      // Greedy: the chosen token is the most likely one.
      assert.equal(Math.max(...Object.values(top)), lp.token_logprobs[i]);
    }
    if (lp.tokens.every((t) => !t.startsWith('bytes:'))) assert.equal(lp.tokens.join(''), r.choices[0].text);
    const streamed = { tokens: [], token_logprobs: [], text_offset: [] };
    for await (const c of await client.completions.create({ ...body, stream: true })) {
      const l = c.choices[0]?.logprobs;
      if (!l) continue;
      streamed.tokens.push(...l.tokens);
      streamed.token_logprobs.push(...l.token_logprobs);
      streamed.text_offset.push(...l.text_offset);
    }
    assert.deepEqual(streamed.tokens, lp.tokens);
    assert.deepEqual(streamed.text_offset, lp.text_offset);
    assert.equal(streamed.token_logprobs.length, lp.token_logprobs.length);
    streamed.token_logprobs.forEach((v, i) => assert.ok(Math.abs(v - lp.token_logprobs[i]) < 1e-4));
    // Without the field: null; out of range: a 400 naming it.
    const plain = await client.completions.create({ model: MODEL, prompt, max_tokens: 2 });
    assert.equal(plain.choices[0].logprobs, null);
    await assert.rejects(client.completions.create({ ...body, logprobs: 6 }),
      (e) => e.status === 400 && e.param === 'logprobs');
  });

  test('token-id prompts', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: [200006, 1428, 200008, 13225], max_tokens: 2 });
    assert.equal(r.usage.prompt_tokens, 4);
    await assert.rejects(client.completions.create({ model: MODEL, prompt: [999999999], max_tokens: 2 }),
      (e) => e.status === 400);
  });
});

describe('errors', () => {
  const bad = async (body, status, check = () => true) => {
    await assert.rejects(client.chat.completions.create(body), (e) => {
      assert.ok(e instanceof OpenAI.APIError, String(e));
      assert.equal(e.status, status, e.message);
      assert.equal(typeof e.error?.message, 'string');
      return check(e);
    });
  };

  test('invalid requests are 400 with the parameter named', async () => {
    await bad({ model: MODEL }, 400, (e) => e.param === 'messages');
    await bad({ model: MODEL, messages: [] }, 400);
    await bad({ model: MODEL, messages: [{ role: 'wizard', content: 'x' }] }, 400, (e) => e.param === 'messages[0].role');
    await bad({ model: MODEL, messages: 'hi' }, 400, (e) => e.param === 'messages');
    await bad({ model: MODEL, messages: [user('x')], n: 2 }, 400, (e) => e.param === 'n');
    await bad({ model: MODEL, messages: [user('x')], temperature: 'warm' }, 400, (e) => e.param === 'temperature');
    await bad({ model: MODEL, messages: [user('x')], max_tokens: 0 }, 400, (e) => e.param === 'max_tokens');
    await bad({ model: MODEL, messages: [user('x')], logprobs: true, top_logprobs: 21 }, 400,
      (e) => e.param === 'top_logprobs' && /between 0 and 20/.test(e.message));
    await bad({ model: MODEL, messages: [user('x')], top_logprobs: 2 }, 400, (e) => e.param === 'top_logprobs');
    // Unknown fields are ignored unless --strict (responses.test.mjs, "lenient requests").
    const lenient = await client.chat.completions.create({ model: MODEL, messages: [user('x')], max_tokens: 1, frobnicate: 1 });
    assert.equal(lenient.usage.completion_tokens, 1);
    await bad({ model: MODEL, messages: [user('x')], max_tokens: 10000000 }, 400, (e) => e.code === 'context_length_exceeded');
  });

  test('unknown model is 404', async () => {
    await bad({ model: 'gpt-17', messages: [user('x')] }, 404, (e) => e.code === 'model_not_found');
  });

  test('engine failure is 500 and the server stays up', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: [user('x')], max_tokens: 2 },
        { headers: { 'X-Neural-Test-Engine-Error': '1' } }),
      (e) => e.status === 500 && e.error?.type === 'server_error');
    const ok = await client.chat.completions.create({ model: MODEL, messages: [user('x')], max_tokens: 2 });
    assert.equal(ok.usage.completion_tokens, 2);
  });

  test('routes, methods, bodies and content types', async () => {
    const notFound = await fetch(`${server.url}/v2/anything`);
    assert.equal(notFound.status, 404);
    assert.equal((await notFound.json()).error.code, 'not_found');
    const wrongMethod = await fetch(`${server.url}/v1/chat/completions`);
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.get('allow'), 'POST, OPTIONS');
    const badJson = await postJson(server.url, '/v1/chat/completions', '{"model": ');
    assert.equal(badJson.status, 400);
    assert.equal((await badJson.json()).error.code, 'invalid_json');
    const text = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: '{}',
    });
    assert.equal(text.status, 415);
    // No CORS unless configured.
    const h = await fetch(`${server.url}/health`, { headers: { Origin: 'http://evil.example' } });
    assert.equal(h.headers.get('access-control-allow-origin'), null);
  });
});

describe('metrics', () => {
  test('Prometheus text with requests, tokens, speed, queue and cache hits', async () => {
    const r = await fetch(`${server.url}/metrics`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/plain/);
    const text = await r.text();
    const value = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    assert.match(text, /^neural_requests_total\{route="chat",status="200"\} \d+$/m);
    assert.ok(value('neural_generated_tokens_total') > 0);
    assert.ok(value('neural_prompt_cache_hits_total') > 0);
    assert.ok(value('neural_decode_tokens_per_second') > 0);
    assert.equal(value('neural_queue_length'), 0);
    // server-side queue wait (enqueue to engine start), a summary over the generations so far
    assert.match(text, /^# TYPE neural_queue_wait_seconds summary$/m);
    assert.ok(value('neural_queue_wait_seconds_count') >= value('neural_generations_total'));
    const q = (p) => Number(new RegExp(`^neural_queue_wait_seconds\\{quantile="${p}"\\} (\\S+)$`, 'm').exec(text)?.[1]);
    assert.ok(q('0.5') >= 0 && q('0.99') >= q('0.5'));
    assert.match(text, /^# TYPE neural_generated_tokens_total counter$/m);
    // Per-token gauges from the engine's telemetry ring (read while the engine writes it).
    assert.ok(value('neural_engine_tokens_total') > 0);
    assert.ok(value('neural_token_ms') > 0);
    assert.ok(value('neural_token_experts_missed') > 0);
    assert.ok(value('neural_token_cpu_expert_bytes') > 0);
    // Major faults: counted on Linux (a warm fixture reads nothing from disk: >= 0).
    assert.match(text, /^# TYPE neural_token_major_page_faults gauge$/m);
    assert.ok(value('neural_token_major_page_faults') >= 0);
  });
});

describe('SSE on the wire (curl)', () => {
  test('chunked transfer encoding framing and event format', (t) => {
    const curl = spawnSync('curl', ['--version']);
    if (curl.error) {
      t.skip('curl is not installed (scripts/setup.sh installs it)');
      return;
    }
    const body = JSON.stringify({
      model: MODEL, messages: [user('Hi')], max_tokens: 100, stream: true,
      neural_forced_output: forced.final('Streaming over the wire.'),
    });
    const r = spawnSync('curl', ['-sS', '-i', '--raw', '--max-time', '20', '-H', 'Content-Type: application/json',
      '--data-binary', body, `${server.url}/v1/chat/completions`], { encoding: 'latin1' });
    assert.equal(r.status, 0, r.stderr);
    const raw = r.stdout;
    const split = raw.indexOf('\r\n\r\n');
    const head = raw.slice(0, split);
    assert.match(head, /^HTTP\/1\.1 200 OK/);
    assert.match(head, /\r\ntransfer-encoding: chunked/i);
    assert.match(head, /\r\ncontent-type: text\/event-stream/i);
    assert.match(head, /\r\ncache-control: no-cache/i);
    // Decode the chunked body by hand: hex size, CRLF, data, CRLF ... 0 CRLF CRLF.
    let rest = raw.slice(split + 4);
    let payload = '';
    let chunks = 0;
    for (;;) {
      const eol = rest.indexOf('\r\n');
      assert.ok(eol > 0, 'chunk size line');
      const size = parseInt(rest.slice(0, eol), 16);
      assert.ok(Number.isInteger(size));
      if (size === 0) {
        assert.equal(rest.slice(eol), '\r\n\r\n', 'last chunk ends the body');
        break;
      }
      payload += rest.slice(eol + 2, eol + 2 + size);
      assert.equal(rest.slice(eol + 2 + size, eol + 4 + size), '\r\n');
      rest = rest.slice(eol + 4 + size);
      chunks += 1;
    }
    assert.ok(chunks > 3);
    const events = payload.split('\n\n');
    assert.equal(events.pop(), '', 'every event ends with a blank line');
    assert.equal(events.at(-1), 'data: [DONE]');
    let content = '';
    for (const e of events.slice(0, -1)) {
      assert.match(e, /^data: \{/);
      const j = JSON.parse(Buffer.from(e.slice(6), 'latin1').toString('utf8'));
      content += j.choices[0]?.delta?.content ?? '';
    }
    assert.equal(content, 'Streaming over the wire.');
  });
});

describe('logprobs', () => {
  const answer = 'Hello there, my friend!';
  test('chat: choices[].logprobs.content for the answer tokens, non-streaming and streaming', async () => {
    const body = {
      model: MODEL, messages: [user('Hi')], max_tokens: 60, logprobs: true, top_logprobs: 3,
      neural_forced_output: forced.answer('Thinking it over.', answer),
    };
    const r = await client.chat.completions.create(body);
    assert.equal(r.choices[0].message.content, answer);
    checkLogprobs(r.choices[0].logprobs.content, answer, 3);
    const s = await collect(await client.chat.completions.create({ ...body, stream: true }));
    assert.equal(s.content, answer);
    const streamed = s.chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
    assert.deepEqual(streamed, r.choices[0].logprobs.content);
    // Sampled text: every generated answer token has an entry.
    const free = await client.chat.completions.create({
      model: MODEL, messages: [user('Hi')], max_tokens: 12, logprobs: true, seed: 3,
      neural_forced_output: '<|channel|>final<|message|>',
    });
    const content = free.choices[0].message.content;
    const entries = free.choices[0].logprobs.content;
    if (!content.includes('\uFFFD')) checkLogprobs(entries, content, 0);
    assert.ok(entries.length >= 1 && entries.length <= 9, JSON.stringify(free.usage));
    // Without logprobs: null, as OpenAI writes it.
    const plain = await client.chat.completions.create({ ...body, logprobs: false, top_logprobs: undefined });
    assert.equal(plain.choices[0].logprobs, null);
  });
});
