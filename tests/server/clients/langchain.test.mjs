// LangChain's ChatOpenAI (Chat Completions), unmodified: bindTools and withStructuredOutput
// with a zod schema.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';
import { scriptedServer, harmony, failedRequests, MODEL } from './scripted.mjs';

test('LangChain: bindTools and withStructuredOutput', async () => {
  const verdict = { answer: 'yes', confidence: 0.75, sources: 2 };
  const server = await scriptedServer([
    harmony.call('get_weather', '{"city":"Oslo"}', 'Look it up.'),
    harmony.answer(JSON.stringify(verdict), 'Decide.'),
  ]);
  try {
    const llm = new ChatOpenAI({
      model: MODEL, apiKey: 'not-needed', maxRetries: 0, configuration: { baseURL: server.baseURL },
    });
    const withTools = llm.bindTools([{
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'The weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    }]);
    const message = await withTools.invoke('Weather in Oslo?');
    assert.equal(message.tool_calls.length, 1);
    assert.equal(message.tool_calls[0].name, 'get_weather');
    assert.deepEqual(message.tool_calls[0].args, { city: 'Oslo' });

    const structured = llm.withStructuredOutput(z.object({
      answer: z.enum(['yes', 'no']),
      confidence: z.number().min(0).max(1),
      sources: z.number().int().min(0),
    }), { name: 'verdict' });
    assert.deepEqual(await structured.invoke('Is it raining?'), verdict);
    assert.deepEqual(failedRequests(server.log()), []);
  } finally {
    await server.stop();
  }
});
