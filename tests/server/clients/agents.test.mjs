// The OpenAI Agents SDK (Responses API), unmodified: a handoff, a strict tool whose zod schema
// uses .int() / .min() (the SDK's default strict mode), and a structured outputType.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import {
  Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled,
} from '@openai/agents';
import { z } from 'zod';
import { scriptedServer, harmony, failedRequests, MODEL } from './scripted.mjs';

test('Agents SDK: handoff, strict tool loop and outputType', async () => {
  const server = await scriptedServer([
    harmony.call('transfer_to_Math', '{}', 'A sum: the math agent.'),
    harmony.call('add', '{"a":2,"b":3}', 'Add them.'),
    harmony.answer('{"sum":5}', 'Two plus three.'),
  ]);
  try {
    setTracingDisabled(true);
    setOpenAIAPI('responses');
    setDefaultOpenAIClient(new OpenAI({ baseURL: server.baseURL, apiKey: 'not-needed', maxRetries: 0 }));
    const added = [];
    const add = tool({
      name: 'add',
      description: 'Adds two whole numbers.',
      parameters: z.object({ a: z.number().int().min(0), b: z.number().int().min(0) }),
      execute: async ({ a, b }) => { added.push([a, b]); return String(a + b); },
    });
    const math = new Agent({
      name: 'Math',
      instructions: 'You add numbers.',
      model: MODEL,
      tools: [add],
      outputType: z.object({ sum: z.number().int() }),
    });
    const triage = new Agent({
      name: 'Triage', instructions: 'Route math to the math agent.', model: MODEL, handoffs: [math],
    });
    const result = await run(triage, 'What is 2 + 3?');
    assert.deepEqual(added, [[2, 3]]);
    assert.equal(result.lastAgent.name, 'Math');
    assert.deepEqual(result.finalOutput, { sum: 5 });
    assert.deepEqual(failedRequests(server.log()), []);
  } finally {
    await server.stop();
  }
});
