#!/usr/bin/env node
// Saves a run's event history for the replay tests:
//   node test/replay/record-history.mjs <workflowId> <name>
// reads it with the Temporal CLI (`temporal workflow show --output json`, the format the SDK replays) from
// TEMPORAL_ADDRESS (default localhost:7233) and TEMPORAL_NAMESPACE (default "default"), and writes
// test/replay/histories/<name>.json. `record-all.mjs` re-records every committed history.
import { execa } from 'execa';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findTemporalCli } from '../../dist/dev/temporal-cli.js';

export const HISTORIES_DIR = fileURLToPath(new URL('./histories/', import.meta.url));

/**
 * Fetches the history of a finished run and writes it as `<name>.json`: its latest execution, or with `runId` that
 * execution (one that continued as new, say).
 * @param {{ address: string, namespace?: string }} server
 * @param {string} workflowId
 * @param {string} name
 * @param {string} [runId]
 * @returns {Promise<string>} the file written
 */
export async function recordHistory(server, workflowId, name, runId) {
  const cli = await findTemporalCli();
  const common = ['--address', server.address, '--namespace', server.namespace ?? 'default', '--workflow-id', workflowId, ...(runId ? ['--run-id', runId] : [])];
  const { stdout: description } = await execa(cli, ['workflow', 'describe', ...common, '--output', 'json']);
  const status = JSON.parse(description).workflowExecutionInfo?.status;
  if (status === 'WORKFLOW_EXECUTION_STATUS_RUNNING') throw new Error(`run ${workflowId} is still running; record its history once it has ended`);
  const { stdout: history } = await execa(cli, ['workflow', 'show', ...common, '--output', 'json']);
  await mkdir(HISTORIES_DIR, { recursive: true });
  const file = path.join(HISTORIES_DIR, `${name}.json`);
  await writeFile(file, `${history.trim()}\n`);
  return file;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [workflowId, name] = process.argv.slice(2);
  if (!workflowId || !name || !/^[a-z0-9-]+$/.test(name)) {
    console.error('usage: node test/replay/record-history.mjs <workflowId> <name>   (name: lowercase letters, digits and "-")');
    process.exit(2);
  }
  const server = { address: process.env.TEMPORAL_ADDRESS || 'localhost:7233', namespace: process.env.TEMPORAL_NAMESPACE || 'default' };
  console.log(`wrote ${await recordHistory(server, workflowId, name)}`);
}
