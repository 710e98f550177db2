// A neural-server on the tiny fixture whose chat / responses generations emit a script of
// harmony texts (--test-script): the fixture's weights are random, so the script decides when
// the model calls a tool or answers; parsing, the API mapping and the clients run for real.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, MODEL } from '../node/helpers.mjs';

export { MODEL };

export const harmony = {
  call: (name, args, reasoning = 'I will use the tool.', ns = 'functions') =>
    `<|channel|>analysis<|message|>${reasoning}<|end|><|start|>assistant<|channel|>commentary to=${ns}.${name} <|constrain|>json<|message|>${args}<|call|>`,
  freeform: (name, input) =>
    `<|channel|>commentary to=functions.${name}<|message|>${input}<|call|>`,
  answer: (text, reasoning = 'The result is in.') =>
    `<|channel|>analysis<|message|>${reasoning}<|end|><|start|>assistant<|channel|>final<|message|>${text}<|return|>`,
};

// Starts a server that emits `script` in turn; returns the helpers' server object plus the
// base URL clients take.
export async function scriptedServer(script, args = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neural-clients-'));
  const file = path.join(dir, 'script.json');
  fs.writeFileSync(file, JSON.stringify(script));
  const server = await startServer(['--enable-test-options', '--test-script', file, ...args]);
  return { ...server, baseURL: `${server.url}/v1`, dir };
}

// The lines of the server log that report a request as refused or failed (4xx / 5xx).
export function failedRequests(log) {
  return log.split('\n').filter((l) => / (4\d\d|5\d\d) \d+ ms/.test(l) && !/ 499 /.test(l));
}
