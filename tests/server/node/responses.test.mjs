// The Responses API through the official openai client (responses.create, responses.stream),
// structured output that the sampler enforces (text.format, response_format, strict tools) on the
// random-weight fixture, and the lenient request handling: unknown fields, random seeds, the
// Host allow-list, /v1/models' context length, SSE keep-alives and --log-file.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { MODEL, checkLogprobs, forced, postJson, rawRequest, startServer } from './helpers.mjs';

let server;
let client;
const logFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'neural-log-')), 'server.log');

before(async () => {
  server = await startServer(['--enable-test-options', '--log-file', logFile]);
  client = server.client();
});
after(async () => {
  await server?.stop();
});

const weather = {
  type: 'object',
  properties: {
    city: { type: 'string' },
    days: { type: 'integer' },
    unit: { enum: ['celsius', 'fahrenheit'] },
    hours: { type: 'array', items: { type: 'number' }, maxItems: 3 },
    where: {
      type: 'object',
      properties: { lat: { type: 'number' }, ok: { type: 'boolean' } },
      required: ['lat', 'ok'],
      additionalProperties: false,
    },
  },
  required: ['city', 'days', 'unit', 'where'],
  additionalProperties: false,
};

// The schema above, checked by hand (the test must not trust the server's recogniser).
function matchesWeather(v) {
  const keys = Object.keys(v);
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    && keys.every((k) => ['city', 'days', 'unit', 'hours', 'where'].includes(k))
    && typeof v.city === 'string' && Number.isInteger(v.days)
    && ['celsius', 'fahrenheit'].includes(v.unit)
    && (v.hours === undefined || (Array.isArray(v.hours) && v.hours.length <= 3
      && v.hours.every((h) => typeof h === 'number')))
    && typeof v.where === 'object' && v.where !== null && typeof v.where.lat === 'number'
    && typeof v.where.ok === 'boolean' && Object.keys(v.where).length === 2;
}

function parses(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

describe('responses', () => {
  test('create: string input, usage, incomplete at max_output_tokens', async () => {
    const r = await client.responses.create({
      model: MODEL, input: 'Hello!', instructions: 'Be brief.', max_output_tokens: 8, temperature: 0,
    });
    assert.equal(r.object, 'response');
    assert.match(r.id, /^resp_/);
    assert.equal(r.model, MODEL);
    assert.equal(r.status, 'incomplete');
    assert.equal(r.incomplete_details.reason, 'max_output_tokens');
    assert.equal(r.instructions, 'Be brief.');
    assert.equal(r.usage.output_tokens, 8);
    assert.ok(r.usage.input_tokens > 10);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + 8);
    assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
    assert.equal(typeof r.usage.output_tokens_details.reasoning_tokens, 'number');
  });

  test('create: reasoning item, answer and reasoning tokens', async () => {
    const r = await client.responses.create({
      model: MODEL, input: [{ role: 'user', content: '2+2?' }], max_output_tokens: 100,
      reasoning: { effort: 'low' },
      neural_forced_output: forced.answer('Simple sum.', 'It is 4.'),
    });
    assert.equal(r.status, 'completed');
    assert.equal(r.output_text, 'It is 4.');
    assert.equal(r.output[0].type, 'reasoning');
    assert.equal(r.output[0].content[0].text, 'Simple sum.');
    assert.equal(r.output[1].type, 'message');
    assert.equal(r.output[1].content[0].type, 'output_text');
    assert.equal(r.reasoning.effort, 'low');
    assert.ok(r.usage.output_tokens_details.reasoning_tokens >= 4);
    assert.ok(r.usage.output_tokens_details.reasoning_tokens < r.usage.output_tokens);
  });

  test('stream: the documented events, in order, and the final response', async () => {
    const stream = client.responses.stream({
      model: MODEL, input: 'Hi', max_output_tokens: 100,
      neural_forced_output: forced.answer('Thinking it over.', 'Hello there, my friend!'),
    });
    const types = [];
    let text = '';
    let reasoning = '';
    stream.on('response.output_text.delta', (e) => { text += e.delta; });
    stream.on('response.reasoning_text.delta', (e) => { reasoning += e.delta; });
    for await (const e of stream) types.push(e.type);
    const final = await stream.finalResponse();
    assert.equal(types[0], 'response.created');
    assert.equal(types[1], 'response.in_progress');
    assert.equal(types.at(-1), 'response.completed');
    for (const t of ['response.output_item.added', 'response.content_part.added',
      'response.reasoning_text.delta', 'response.reasoning_text.done',
      'response.output_text.delta', 'response.output_text.done', 'response.content_part.done',
      'response.output_item.done']) {
      assert.ok(types.includes(t), `missing ${t} in ${types.join(' ')}`);
    }
    assert.ok(types.filter((t) => t === 'response.output_text.delta').length > 1);
    assert.equal(text, 'Hello there, my friend!');
    assert.equal(reasoning, 'Thinking it over.');
    assert.equal(final.output_text, 'Hello there, my friend!');
    assert.equal(final.status, 'completed');
    assert.ok(final.usage.output_tokens > 5);
  });

  test('include message.output_text.logprobs: the output_text part and the deltas carry them', async () => {
    const answer = 'Hello there, my friend!';
    const body = {
      model: MODEL, input: 'Hi', max_output_tokens: 100, top_logprobs: 2,
      include: ['message.output_text.logprobs'],
      neural_forced_output: forced.answer('Thinking it over.', answer),
    };
    const r = await client.responses.create(body);
    const part = r.output.find((i) => i.type === 'message').content[0];
    assert.equal(part.text, answer);
    checkLogprobs(part.logprobs, answer, 2);
    const stream = client.responses.stream(body);
    const deltas = [];
    let done = null;
    stream.on('response.output_text.delta', (e) => { deltas.push(...e.logprobs); });
    stream.on('response.output_text.done', (e) => { done = e.logprobs; });
    for await (const e of stream) void e;
    assert.deepEqual(deltas, part.logprobs);
    assert.deepEqual(done, part.logprobs);
    // Without the include: empty lists; top_logprobs above 20 is refused.
    const plain = await client.responses.create({ ...body, include: [] });
    assert.deepEqual(plain.output.find((i) => i.type === 'message').content[0].logprobs, []);
    await assert.rejects(client.responses.create({ ...body, top_logprobs: 21 }),
      (e) => e.status === 400 && e.param === 'top_logprobs');
  });

  test('function call, then its output with previous_response_id reuses the prompt cache', async () => {
    const tools = [{
      type: 'function', name: 'get_weather', description: 'Weather of a city.',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    }];
    const first = await client.responses.create({
      model: MODEL, input: 'Weather in Oslo?', tools, max_output_tokens: 200,
      neural_forced_output: forced.call('Use the tool.', 'get_weather', '{"city":"Oslo"}'),
    });
    const call = first.output.find((o) => o.type === 'function_call');
    assert.ok(call, JSON.stringify(first.output));
    assert.equal(call.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.arguments), { city: 'Oslo' });
    assert.match(call.call_id, /^call_/);

    const second = await client.responses.create({
      model: MODEL, previous_response_id: first.id, tools, max_output_tokens: 100,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temp_c": 3}' }],
      neural_forced_output: forced.final('It is 3 degrees.'),
    });
    assert.equal(second.output_text, 'It is 3 degrees.');
    assert.equal(second.previous_response_id, first.id);
    assert.ok(second.usage.input_tokens > first.usage.input_tokens);
    assert.ok(second.usage.input_tokens_details.cached_tokens > first.usage.input_tokens / 2,
      `cached ${second.usage.input_tokens_details.cached_tokens} of ${second.usage.input_tokens}`);
  });

  test('streamed function call arguments', async () => {
    const stream = client.responses.stream({
      model: MODEL, input: 'Weather?', max_output_tokens: 200,
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object' } }],
      neural_forced_output: forced.call('Tool.', 'get_weather', '{"city":"Paris","days":[1,2]}'),
    });
    let args = '';
    let done = null;
    stream.on('response.function_call_arguments.delta', (e) => { args += e.delta; });
    stream.on('response.function_call_arguments.done', (e) => { done = e; });
    const final = await stream.finalResponse();
    assert.equal(args, '{"city":"Paris","days":[1,2]}');
    assert.equal(done.arguments, args);
    assert.equal(final.output.at(-1).type, 'function_call');
  });

  test('errors: unknown previous response, bad fields named', async () => {
    await assert.rejects(
      client.responses.create({ model: MODEL, input: 'x', previous_response_id: 'resp_nope' }),
      (e) => e.status === 400 && e.param === 'previous_response_id'
        && /not found/.test(e.message));
    await assert.rejects(
      client.responses.create({ model: MODEL, input: 'x', max_output_tokens: 0 }),
      (e) => e.status === 400 && e.param === 'max_output_tokens');
    await assert.rejects(
      client.responses.create({
        model: MODEL, input: 'x',
        text: { format: { type: 'json_schema', name: 'n', schema: { type: 'integer', minimum: 5, maximum: 1 } } },
      }),
      (e) => e.status === 400 && e.param === 'text.format.schema' && /no integer/.test(e.message));
    await assert.rejects(
      client.responses.create({ model: MODEL, input: [{ type: 'item_reference', id: 'rs_none' }] }),
      (e) => e.status === 404 && e.code === 'item_not_found' && /rs_none/.test(e.message));
    await assert.rejects(client.responses.create({ model: 'other', input: 'x' }),
      (e) => e.status === 404);
  });
});

describe('what agent clients send (once 400s)', () => {
  test('stored responses: GET, input_items, item_reference, DELETE', async () => {
    const first = await client.responses.create({
      model: MODEL, input: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
        { type: 'web_search' }, { type: 'file_search', vector_store_ids: ['vs_1'] }],
      reasoning: { effort: 'xhigh', summary: 'auto' },
      neural_forced_output: forced.call('Need the weather.', 'get_weather', '{"city":"Paris"}'),
    });
    assert.equal(first.status, 'completed');
    assert.equal(first.reasoning.effort, 'high');
    const [rs, fc] = first.output;
    assert.equal(rs.type, 'reasoning');
    assert.deepEqual(rs.summary, [{ type: 'summary_text', text: 'Need the weather.' }]);
    assert.equal(fc.type, 'function_call');
    const got = await client.responses.retrieve(first.id);
    assert.deepEqual(got.output, first.output);
    const items = await client.responses.inputItems.list(first.id);
    assert.equal(items.data.length, 1);
    assert.equal(items.data[0].role, 'user');
    // The AI SDK's second step: earlier output by reference.
    const second = await client.responses.create({
      model: MODEL,
      input: [{ role: 'user', content: 'Weather in Paris?' }, { type: 'item_reference', id: rs.id },
        { type: 'item_reference', id: fc.id },
        { type: 'function_call_output', call_id: fc.call_id, output: '{"celsius":21}' }],
      neural_forced_output: forced.final('21 degrees.'),
    });
    assert.equal(second.output_text, '21 degrees.');
    const listed = await client.responses.inputItems.list(second.id, { order: 'asc' });
    assert.deepEqual(listed.data.map((i) => i.type), ['message', 'reasoning', 'function_call', 'function_call_output']);
    const deleted = await client.responses.delete(first.id);
    assert.deepEqual(deleted, { id: first.id, object: 'response', deleted: true });
    await assert.rejects(client.responses.retrieve(first.id), (e) => e.status === 404);
    await client.responses.delete(second.id);  // its input items held the referenced ones too
    await assert.rejects(client.responses.create({ model: MODEL, input: [{ type: 'item_reference', id: rs.id }] }),
      (e) => e.status === 404 && e.code === 'item_not_found');
    const log = server.log();
    assert.equal(log.split("dropping tools of type 'web_search'").length - 1, 1, log);
  });

  test('reasoning summary events stream', async () => {
    const stream = client.responses.stream({
      model: MODEL, input: 'Hi', reasoning: { summary: 'detailed', effort: 'minimal' },
      neural_forced_output: forced.answer('Short thought.', 'Hello.'),
    });
    const kinds = [];
    let summary = '';
    for await (const e of stream) {
      kinds.push(e.type);
      if (e.type === 'response.reasoning_summary_text.delta') summary += e.delta;
    }
    assert.equal(summary, 'Short thought.');
    assert.ok(kinds.includes('response.reasoning_summary_part.added'), kinds.join(' '));
    assert.ok(kinds.includes('response.reasoning_summary_text.done'), kinds.join(' '));
    const final = await stream.finalResponse();
    assert.equal(final.output_text, 'Hello.');
  });

  test('chat completions: penalties, efforts, legacy functions, stream_options without a stream, //v1', async () => {
    const r = await postJson(server.url, '//v1/chat/completions', {
      model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 4,
      presence_penalty: 0.5, frequency_penalty: 0.4, repetition_penalty: 1.1,
      reasoning_effort: 'none', stream_options: { include_usage: true },
      functions: [{ name: 'f', parameters: { type: 'object' } }], function_call: 'auto',
    });
    assert.equal(r.status, 200, await r.clone().text());
    const body = await r.json();
    assert.equal(body.object, 'chat.completion');
    const bad = await postJson(server.url, '/v1/chat/completions', {
      model: MODEL, messages: [{ role: 'user', content: 'x' }], presence_penalty: 3,
    });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.param, 'presence_penalty');
  });

  test('Codex-style namespace and custom tools round-trip', async () => {
    const tools = [
      { type: 'namespace', name: 'multi_agent_v1', description: 'Sub-agents.', tools: [
        { type: 'function', name: 'spawn_agent', parameters: { type: 'object', properties: { task: { type: 'string' } } } }] },
      { type: 'custom', name: 'apply_patch', description: 'Patch files.', format: { type: 'grammar', syntax: 'lark', definition: 'start: /.+/' } },
    ];
    const a = await client.responses.create({
      model: MODEL, input: 'Spawn one.', tools,
      neural_forced_output: '<|channel|>commentary to=multi_agent_v1.spawn_agent <|constrain|>json<|message|>{"task":"t"}<|call|>',
    });
    assert.equal(a.output[0].type, 'function_call');
    assert.equal(a.output[0].namespace, 'multi_agent_v1');
    assert.equal(a.output[0].name, 'spawn_agent');
    const b = await client.responses.create({
      model: MODEL, previous_response_id: a.id, tools,
      input: [{ type: 'function_call_output', call_id: a.output[0].call_id, output: 'spawned' }],
      neural_forced_output: '<|channel|>commentary to=functions.apply_patch<|message|>*** Begin Patch\n*** End Patch<|call|>',
    });
    assert.equal(b.output[0].type, 'custom_tool_call');
    assert.equal(b.output[0].input, '*** Begin Patch\n*** End Patch');
    const c = await client.responses.create({
      model: MODEL, previous_response_id: b.id, tools,
      input: [{ type: 'custom_tool_call_output', call_id: b.output[0].call_id, output: 'Done!' },
        { type: 'local_shell_call', id: 'lsc_1', call_id: 'x', status: 'completed', action: { type: 'exec', command: ['ls'] } }],
      neural_forced_output: forced.final('Patched.'),
    });
    assert.equal(c.output_text, 'Patched.');
  });

  test("a freeform tool's Lark grammar is enforced on the random model's call text", async () => {
    // Codex CLI's apply_patch grammar (its format.definition); only the call header is forced.
    const definition = [
      'start: begin_patch hunk+ end_patch', 'begin_patch: "*** Begin Patch" LF',
      'end_patch: "*** End Patch" LF?', 'hunk: add_hunk | delete_hunk | update_hunk',
      'add_hunk: "*** Add File: " filename LF add_line+', 'delete_hunk: "*** Delete File: " filename LF',
      'update_hunk: "*** Update File: " filename LF change_move? change?', 'filename: /(.+)/',
      'add_line: "+" /(.*)/ LF -> line', 'change_move: "*** Move to: " filename LF',
      'change: (change_context | change_line)+ eof_line?', 'change_context: ("@@" | "@@ " /(.+)/) LF',
      'change_line: ("+" | "-" | " ") /(.*)/ LF', 'eof_line: "*** End of File" LF', '%import common.LF',
    ].join('\n');
    const r = await client.responses.create({
      model: MODEL, input: 'Fix it.', max_output_tokens: 60,
      tools: [{ type: 'custom', name: 'apply_patch', format: { type: 'grammar', syntax: 'lark', definition } }],
      neural_forced_output: '<|channel|>commentary to=functions.apply_patch<|message|>',
    });
    assert.equal(r.output[0].type, 'custom_tool_call');
    const input = r.output[0].input;
    assert.match(input, /^\*\*\* Begin Patch\n(\*\*\* (Add|Delete|Update) File: [^\n]+\n([-+ @][^\n]*\n|\*\*\* (Move to|End of File)[^\n]*\n)*)+\*\*\* End Patch\n?$/);
  });
});

describe('structured output on a random-weight model', () => {
  // The sampler is free after the forced final-channel header; only the constraint keeps the
  // answer valid.
  const header = '<|channel|>final<|message|>';

  test('chat completions json_schema: every answer parses and matches, unconstrained ones do not', async () => {
    for (const seed of [1]) {
      const ask = (extra) => client.chat.completions.create({
        model: MODEL, messages: [{ role: 'user', content: 'Weather as JSON' }], max_tokens: 75,
        temperature: 1, seed, neural_forced_output: header, ...extra,
      });
      const loose = await ask({});
      const v = parses(loose.choices[0].message.content);
      assert.ok(v === undefined || !matchesWeather(v), loose.choices[0].message.content);
      const r = await ask({
        response_format: { type: 'json_schema', json_schema: { name: 'weather', strict: true, schema: weather } },
      });
      const value = parses(r.choices[0].message.content);
      assert.ok(value && matchesWeather(value), r.choices[0].message.content);
      assert.equal(r.choices[0].finish_reason, 'stop');
    }
  });

  test('chat completions json_object', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 60,
      temperature: 1, seed: 4, neural_forced_output: header, response_format: { type: 'json_object' },
    });
    const value = parses(r.choices[0].message.content);
    assert.ok(value && typeof value === 'object' && !Array.isArray(value), r.choices[0].message.content);
  });

  test('responses text.format, streamed', async () => {
    const stream = client.responses.stream({
      model: MODEL, input: 'Weather as JSON', max_output_tokens: 75, temperature: 1,
      neural_forced_output: header,
      text: { format: { type: 'json_schema', name: 'weather', strict: true, schema: weather } },
    });
    const final = await stream.finalResponse();
    const value = parses(final.output_text);
    assert.ok(value && matchesWeather(value), final.output_text);
  });

  test('strict function tools: the arguments match the parameters', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 75, temperature: 1,
      seed: 5,
      tools: [{ type: 'function', function: { name: 'get_weather', strict: true, parameters: weather } }],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    const call = r.choices[0].message.tool_calls?.[0];
    assert.ok(call, JSON.stringify(r.choices[0].message));
    const value = parses(call.function.arguments);
    assert.ok(value && matchesWeather(value), call.function.arguments);
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
  });

  // No forced output: the model (random weights) writes its own headers, and only the framing
  // constraint (analysis / final / calls, the reasoning budget) gets it to the final channel.
  const schemas = {
    nested: [weather, matchesWeather],
    enum: [{ enum: ['red', 'green', 'blue'] }, (v) => ['red', 'green', 'blue'].includes(v)],
    array: [{ type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 4 },
      (v) => Array.isArray(v) && v.length >= 2 && v.length <= 4 && v.every(Number.isInteger)],
    required: [{
      type: 'object',
      properties: { id: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' } }, note: { type: 'string' } },
      required: ['id', 'tags'],
      additionalProperties: false,
    }, (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && Number.isInteger(v.id)
      && Array.isArray(v.tags) && v.tags.every((t) => typeof t === 'string')
      && Object.keys(v).every((k) => ['id', 'tags', 'note'].includes(k))
      && (v.note === undefined || typeof v.note === 'string')],
  };
  for (const [name, [schema, valid]] of Object.entries(schemas)) {
    test(`without forced output, ${name} schema: chat completions and responses parse and validate`, async () => {
      for (const seed of [1]) {
        const chat = await client.chat.completions.create({
          model: MODEL, messages: [{ role: 'user', content: 'Answer as JSON' }], max_tokens: 80,
          temperature: 1, seed,
          response_format: { type: 'json_schema', json_schema: { name, strict: true, schema } },
        });
        const content = chat.choices[0].message.content;
        const a = parses(content);
        assert.ok(a !== undefined && valid(a), `seed ${seed}: ${content}`);
        assert.equal(chat.choices[0].finish_reason, 'stop');
        const resp = await client.responses.create({
          model: MODEL, input: 'Answer as JSON', max_output_tokens: 80, temperature: 1, seed,
          text: { format: { type: 'json_schema', name, strict: true, schema } },
        });
        const b = parses(resp.output_text);
        assert.ok(b !== undefined && valid(b), `seed ${seed}: ${resp.output_text}`);
        assert.equal(resp.status, 'completed');
      }
    });
  }

  test('zod-style bounds and patterns are enforced; a pattern too large is logged once, a lookahead refused', async () => {
    const schema = {
      type: 'object',
      properties: {
        a: { type: 'string', format: 'email', minLength: 2, pattern: 'x{1001}|@' },
        p: { type: 'string', pattern: String.raw`^[a-z]{2}\d-\u00e9?$` },
        n: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
        k: { anyOf: [{ type: 'integer', minimum: 10, maximum: 20 }, { type: 'null' }] },
      },
      required: ['a', 'n', 'k', 'p'],
      additionalProperties: false,
    };
    for (let seed = 1; seed <= 2; seed += 1) {
      const r = await client.chat.completions.create({
        model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 80, seed,
        neural_forced_output: header,
        response_format: { type: 'json_schema', json_schema: { name: 'n', schema } },
      });
      const v = parses(r.choices[0].message.content);
      assert.ok(v, r.choices[0].message.content);
      assert.ok([...v.a].length >= 2, r.choices[0].message.content);
      assert.ok(Number.isSafeInteger(v.n), r.choices[0].message.content);
      assert.ok(v.k === null || (Number.isInteger(v.k) && v.k >= 10 && v.k <= 20), r.choices[0].message.content);
      assert.match(v.p, new RegExp(schema.properties.p.pattern), r.choices[0].message.content);
    }
    const log = server.log();
    const notice = 'not enforced while sampling: pattern with a repetition count above 1000 at offset 7 (at /properties/a/pattern)';
    assert.equal(log.split(notice).length - 1, 1, log);
    // A feature no automaton expresses (lookaround, backreferences) is a 400, never passed over.
    const refused = await postJson(server.url, '/v1/chat/completions', {
      model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 2,
      response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'string', pattern: '^(?!x)' } } },
    });
    assert.equal(refused.status, 400);
    const error = (await refused.json()).error;
    assert.equal(error.code, 'invalid_schema');
    assert.match(error.message, /the pattern uses a lookahead/);
  });

  test('zod string formats (.uuid(), .iso.datetime(), .iso.date(), .email()) yield values that validate', async () => {
    // What zod 4.6.7's z.toJSONSchema writes for z.object({ id: z.uuid(), at: z.iso.datetime(),
    // day: z.iso.date(), mail: z.email() }): each format with the regular expression zod checks
    // it by. The server enforces each format intersected with its pattern; the values must match
    // zod's own expressions.
    const date = String.raw`(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))`;
    const properties = {
      id: { type: 'string', format: 'uuid', pattern: '^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$' },
      at: { type: 'string', format: 'date-time', pattern: String.raw`^${date}T(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z))$` },
      day: { type: 'string', format: 'date', pattern: `^${date}$` },
      mail: { type: 'string', format: 'email', pattern: String.raw`^(?:[A-Za-z0-9_'+\-]+\.)*[A-Za-z0-9_'+\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$` },
    };
    const schema = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object', properties, required: ['id', 'at', 'day', 'mail'], additionalProperties: false,
    };
    for (let seed = 1; seed <= 3; seed += 1) {
      const r = await client.chat.completions.create({
        model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 200, seed, temperature: 1,
        neural_forced_output: header,
        response_format: { type: 'json_schema', json_schema: { name: 'f', strict: true, schema } },
      });
      const content = r.choices[0].message.content;
      const v = parses(content);
      assert.ok(v, content);
      for (const [key, p] of Object.entries(properties)) {
        assert.match(v[key], new RegExp(p.pattern), `seed ${seed}: ${key} in ${content}`);
      }
      assert.equal(r.choices[0].finish_reason, 'stop', content);
      const resp = await client.responses.create({
        model: MODEL, input: 'x', max_output_tokens: 200, seed, temperature: 1,
        neural_forced_output: header,
        text: { format: { type: 'json_schema', name: 'f', strict: true, schema } },
      });
      const w = parses(resp.output_text);
      assert.ok(w, resp.output_text);
      for (const [key, p] of Object.entries(properties)) {
        assert.match(w[key], new RegExp(p.pattern), `seed ${seed}: ${key} in ${resp.output_text}`);
      }
    }
  });
});

describe('lenient requests', () => {
  test('unknown fields are ignored and logged once per name', async () => {
    for (let i = 0; i < 2; i += 1) {
      const r = await postJson(server.url, '/v1/chat/completions', {
        model: MODEL, messages: [{ role: 'user', content: 'hi', surprise: i }], max_tokens: 2,
        frobnicate: true,
      });
      assert.equal(r.status, 200);
    }
    const log = server.log();
    assert.equal(log.split("unknown request field 'frobnicate'").length - 1, 1, log);
    assert.equal(log.split("unknown request field 'messages[].surprise'").length - 1, 1, log);
  });

  test('--default-max-tokens limits replies that set none (default: the rest of the context)', async () => {
    const capped = await startServer(['--default-max-tokens', '3']);
    try {
      const r = await postJson(capped.url, '/v1/chat/completions', {
        model: MODEL, messages: [{ role: 'user', content: 'hi' }],
      });
      assert.equal(r.status, 200);
      const body = await r.json();
      assert.equal(body.usage.completion_tokens, 3);
      assert.equal(body.choices[0].finish_reason, 'length');
    } finally {
      await capped.stop();
    }
  });

  test('--strict refuses unknown fields and schemas it cannot enforce', async () => {
    const strict = await startServer(['--strict']);
    try {
      const r = await postJson(strict.url, '/v1/chat/completions', {
        model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, frobnicate: true,
      });
      assert.equal(r.status, 400);
      assert.equal((await r.json()).error.param, 'frobnicate');
      const p = await postJson(strict.url, '/v1/chat/completions', {
        model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2,
        response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'string', pattern: '(a)\\1' } } },
      });
      assert.equal(p.status, 400);
      assert.match((await p.json()).error.message, /the pattern uses a backreference \\1 at offset 5/);
    } finally {
      await strict.stop();
    }
  });

  test('requests without a seed get a random one; a seed repeats', async () => {
    const ask = (extra) => client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 16,
      temperature: 1, ...extra,
    });
    const a = (await ask({})).choices[0].message.content;
    const b = (await ask({})).choices[0].message.content;
    assert.notEqual(a, b);
    assert.equal((await ask({ seed: 11 })).choices[0].message.content,
      (await ask({ seed: 11 })).choices[0].message.content);
  });

  test('usage.completion_tokens_details.reasoning_tokens', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: '2+2?' }], max_tokens: 100,
      neural_forced_output: forced.answer('Simple sum.', 'It is 4.'),
    });
    assert.ok(r.usage.completion_tokens_details.reasoning_tokens >= 4);
  });

  test('/v1/models carries the context length', async () => {
    const models = await client.models.list();
    assert.equal(models.data[0].context_length, 131072);
  });

  test('Host allow-list: loopback names and addresses pass, other names get 403', async () => {
    const get = (host) => rawRequest(server.port,
      `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    for (const host of ['localhost', `localhost:${server.port}`, '127.0.0.1', `[::1]:${server.port}`,
      '192.168.1.20:8080', 'app.localhost']) {
      assert.equal((await get(host)).status, 200, host);
    }
    const evil = await get('attacker.example:8080');
    assert.equal(evil.status, 403);
    assert.match(evil.text, /host_not_allowed/);
    // /health answers any host, as it needs no key.
    assert.equal((await rawRequest(server.port,
      'GET /health HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n')).status, 200);

    const allowing = await startServer(['--allowed-host', 'my-pc.lan']);
    try {
      const ok = await rawRequest(allowing.port,
        'GET /v1/models HTTP/1.1\r\nHost: my-pc.lan:8080\r\nConnection: close\r\n\r\n');
      assert.equal(ok.status, 200);
    } finally {
      await allowing.stop();
    }
    const keyed = await startServer([], { NEURAL_API_KEY: 'k' });
    try {
      const ok = await rawRequest(keyed.port,
        'GET /v1/models HTTP/1.1\r\nHost: attacker.example\r\nAuthorization: Bearer k\r\nConnection: close\r\n\r\n');
      assert.equal(ok.status, 200);
    } finally {
      await keyed.stop();
    }
  });

  test('--log-file gets the request log too', async () => {
    await client.models.list();
    const text = fs.readFileSync(logFile, 'utf8');
    assert.match(text, /GET \/v1\/models 200/);
    assert.match(text, /ignoring the unknown request field/);
  });

  test('SSE keep-alive comments while a long prompt runs', async () => {
    const quick = await startServer(['--sse-keepalive', '0.05']);
    try {
      const long = 'word '.repeat(4000);  // a prompt pass well over the 50 ms interval, also on the fast CPU path
      const r = await postJson(quick.url, '/v1/chat/completions', {
        model: MODEL, messages: [{ role: 'user', content: long }], max_tokens: 2, stream: true,
      });
      const body = await r.text();
      assert.match(body, /^: keep-alive$/m);
      assert.match(body, /data: \[DONE\]/);
    } finally {
      await quick.stop();
    }
  });
});
