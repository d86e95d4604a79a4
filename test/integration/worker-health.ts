import { setTimeout as sleep } from 'node:timers/promises';
import { checkWorkerHealth } from '../../src/worker/health-file.js';

/**
 * Waits until the worker started with `env` is polling: its health file (`AGENT_PIPELINE_HEALTH_FILE`) is fresh, as
 * `agent-pipeline worker --health-check` reads it (the same function, in process). Waiting with the command cost a
 * Node process of about 0.7 CPU-seconds every half second (issue 32); cli-worker.test.ts checks the command itself.
 * Fails naming the last problem (and what `output()` printed, when given) after `timeoutMs`.
 */
export async function waitForWorkerPolling(env: NodeJS.ProcessEnv, timeoutMs: number, what: string, output?: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let problem = await checkWorkerHealth(env);
  while (problem !== undefined) {
    if (Date.now() > deadline) throw new Error(`${what}: not polling within ${timeoutMs} ms (${problem})${output ? `\nworker output:\n${output().slice(-3_000)}` : ''}`);
    await sleep(100);
    problem = await checkWorkerHealth(env);
  }
}
