// Vercel's AI SDK with its default OpenAI provider (the Responses API), unmodified: a multi-step
// tool loop (step 2 refers to step 1's output through item_reference) and structured output
// from a zod schema (.int(), .min(), .email(), a nullable union).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, generateObject, stepCountIs, tool } from 'ai';
import { z } from 'zod';
import { scriptedServer, harmony, failedRequests, MODEL } from './scripted.mjs';

test('AI SDK: a multi-step tool loop through item_reference', async () => {
  const server = await scriptedServer([
    harmony.call('get_weather', '{"city":"Paris"}', 'Need the weather.'),
    harmony.answer('It is 21 degrees in Paris.'),
  ]);
  try {
    const openai = createOpenAI({ baseURL: server.baseURL, apiKey: 'not-needed' });
    const calls = [];
    const result = await generateText({
      model: openai(MODEL),
      prompt: 'What is the weather in Paris?',
      // The SDK knows OpenAI's model names; for any other reasoning model it takes this option.
      providerOptions: { openai: { forceReasoning: true, reasoningSummary: 'auto' } },
      tools: {
        get_weather: tool({
          description: 'The weather in a city',
          inputSchema: z.object({ city: z.string().min(1) }),
          execute: async ({ city }) => { calls.push(city); return { city, celsius: 21 }; },
        }),
      },
      stopWhen: stepCountIs(4),
    });
    assert.deepEqual(calls, ['Paris']);
    assert.equal(result.steps.length, 2);
    assert.equal(result.text, 'It is 21 degrees in Paris.');
    assert.deepEqual(result.steps.map((s) => s.reasoningText), ['Need the weather.', 'The result is in.']);
    assert.deepEqual(failedRequests(server.log()), []);
  } finally {
    await server.stop();
  }
});

test('AI SDK: generateObject with a zod schema', async () => {
  const person = { name: 'Ada', age: 36, email: 'ada@example.com', team: null };
  const server = await scriptedServer([
    harmony.answer(JSON.stringify(person), 'Fill the form.'),
  ]);
  try {
    const openai = createOpenAI({ baseURL: server.baseURL, apiKey: 'not-needed' });
    const { object } = await generateObject({
      model: openai(MODEL),
      prompt: 'Describe Ada.',
      schema: z.object({
        name: z.string().min(1),
        age: z.number().int().min(0).max(150),
        email: z.string().email(),
        team: z.string().nullable(),
      }),
    });
    assert.deepEqual(object, person);
    assert.deepEqual(failedRequests(server.log()), []);
  } finally {
    await server.stop();
  }
});
