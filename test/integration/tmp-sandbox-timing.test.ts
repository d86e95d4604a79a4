import { test } from 'vitest';
import { createCliWorld, REPORT } from './claude-cli-world.js';
import { sandboxHostOnce } from '../../src/activities/backends/claude-cli/agent-settings.js';

test('timing', { timeout: 600_000 }, async () => {
  const world = await createCliWorld({
    rules: [
      { name: 'bash', match: 'Task: bash', turns: [{ tool: { name: 'Bash', input: { command: 'echo hi > out.txt && cat out.txt' } } }, { text: REPORT }] },
      { name: 'plain', match: 'Task: plain', turns: [{ text: REPORT }] },
    ],
  });
  const host = sandboxHostOnce(world.env);
  const results: Record<string, number[]> = {};
  const one = async (key: string, task: string, sandbox: 'required' | 'off', tools: string[]) => {
    const t0 = performance.now();
    const attempt = await world.start({ task, stage: { allowedTools: tools, bare: true }, options: { sandbox, sandboxHost: host, warmPool: undefined } });
    const outcome = await attempt.outcome;
    const ms = performance.now() - t0;
    if (!outcome.text.includes('done')) throw new Error('bad outcome');
    (results[key] ??= []).push(ms);
  };
  // warm-up
  await one('warmup', 'Task: bash', 'required', ['Bash']);
  await one('warmup', 'Task: bash', 'off', ['Bash']);
  for (let i = 0; i < 5; i++) {
    const order = i % 2 === 0 ? (['required', 'off'] as const) : (['off', 'required'] as const);
    for (const mode of order) await one(`bash-${mode}`, 'Task: bash', mode, ['Bash']);
    for (const mode of order) await one(`plain-${mode}`, 'Task: plain', mode, ['Read']);
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const [k, v] of Object.entries(results)) console.log(`TIMING ${k}: median ${med(v).toFixed(0)} ms; runs ${v.map((x) => x.toFixed(0)).join(', ')}`);
  await world.close();
});
