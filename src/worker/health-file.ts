import { stat, writeFile } from 'node:fs/promises';

/*
 * The health file of a worker process (AGENT_PIPELINE_HEALTH_FILE): touched while the worker polls, its age read by a
 * container's health check (`agent-pipeline worker --health-check`).
 */

/**
 * The worker's health file (`AGENT_PIPELINE_HEALTH_FILE`), or undefined when it keeps none. Read here rather than
 * with the worker's other settings (env.ts): `worker --health-check`, which a container runs every 15 s, loads this
 * module alone, not the ~300 modules checking those settings loads (0.7 of its 1.2 CPU-s).
 */
export function healthFileFromEnv(env: NodeJS.ProcessEnv): string | undefined {
  return env.AGENT_PIPELINE_HEALTH_FILE || undefined;
}

/** How often the health file is touched while the worker polls. @unit milliseconds */
const HEALTH_INTERVAL_MS = 5_000;

/** Touches `file` while `healthy()` holds; a container health check reads its age (`agent-pipeline worker --health-check`). */
export function keepHealthFile(file: string, healthy: () => boolean): NodeJS.Timeout {
  const touch = (): void => {
    if (healthy()) void writeFile(file, `${new Date().toISOString()}\n`).catch(() => {});
  };
  touch();
  return setInterval(touch, HEALTH_INTERVAL_MS).unref();
}

/** How stale the health file may be before the worker counts as unhealthy. @unit milliseconds */
export const HEALTH_MAX_AGE_MS = 30_000;

/** Resolves to a problem description, or undefined when the worker touched its health file recently. */
export async function checkWorkerHealth(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  const healthFile = healthFileFromEnv(env);
  if (!healthFile) return 'AGENT_PIPELINE_HEALTH_FILE is not set, so the worker keeps no health file';
  const info = await stat(healthFile).catch(() => undefined);
  if (!info) return `no health file at ${healthFile}: the worker is not polling`;
  const age = Date.now() - info.mtimeMs;
  return age > HEALTH_MAX_AGE_MS ? `the health file ${healthFile} is ${Math.round(age / 1000)}s old: the worker stopped polling` : undefined;
}
