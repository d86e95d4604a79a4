import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { runCli, type BenchStore } from '../lib/bench-store.js';
import type { BenchStack } from '../lib/stack.js';
import { round } from '../lib/stats.js';

/*
 * Issue 29's readers of a long run and its large input, through the CLI as a person runs it, with the store's settings:
 * `status --json` and `list --json` of the long run (its state is over the payload limit, so they resolve references
 * from the store), and a run started with a 20 MB `--input @file`, which must reach its stage.
 */

/** What the readers found. */
export interface ReaderCheck {
  what: string;
  ok: boolean;
  /** @unit milliseconds */
  ms: number;
  detail: string;
}

const first = (text: string): string => text.trim().split('\n')[0]?.slice(0, 300) ?? '';

/** `status ID --json` and `list --json` of the run `workflowId`, which should have completed `stages` stages. */
export async function readLongRun(env: NodeJS.ProcessEnv, workflowId: string, stages: number): Promise<ReaderCheck[]> {
  const status = await runCli(['status', workflowId, '--json'], env);
  let detail = status.exitCode === 0 ? '' : `exit ${status.exitCode}: ${first(status.stderr)}`;
  let ok = false;
  if (status.exitCode === 0) {
    const state = JSON.parse(status.stdout) as { status?: string; stages?: { status?: string }[] };
    const done = state.stages?.filter((s) => s.status === 'completed').length ?? 0;
    ok = state.status === 'completed' && done === stages;
    detail = `status ${state.status}, ${done} of ${state.stages?.length ?? 0} stages completed, ${round(status.stdout.length / 1024 / 1024, 2)} MB of JSON`;
  }
  const list = await runCli(['list', '--json', '--limit', '50'], env);
  const listed = list.exitCode === 0 ? ((JSON.parse(list.stdout) as { runs?: { id?: string; runId?: string; status?: string }[] }).runs ?? []) : [];
  const row = listed.find((r) => (r.id ?? r.runId) === workflowId);
  return [
    { what: 'status --json', ok, ms: status.ms, detail },
    { what: 'list --json', ok: row !== undefined, ms: list.ms, detail: row ? `lists the run (${row.status})` : `exit ${list.exitCode}, the run not listed: ${first(list.stderr)}` },
  ];
}

const INPUT_END = 'END-OF-THE-BIG-INPUT';
const INPUT_MB = 20;

/** `start FILE --input big=@FILE --wait` of a one-stage API pipeline with a 20 MB file; the model must get its end. */
export async function bigInputRun(stack: BenchStack, store: BenchStore, env: NodeJS.ProcessEnv): Promise<ReaderCheck> {
  const folder = await stack.folder('big-input');
  const file = path.join(folder, 'big-input.txt');
  await writeFile(file, `${'x'.repeat(INPUT_MB * 1024 * 1024)}\n${INPUT_END}\n`);
  const pipeline = await stack.writePipeline({
    name: 'big-input',
    inputs: { big: { required: true } },
    defaults: { backend: 'anthropic-api', model: 'haiku', maxTokens: 500, retries: 0 },
    // Every prompt lists the run's inputs: the template need not name it.
    stages: [{ id: 'read', prompt: 'Read the input.' }],
  });
  const seen = stack.modelServer.requests().length;
  const started = await runCli(['start', pipeline, '--input', `big=@${file}`, '--wait', '--json'], env);
  const reached = stack.modelServer
    .requests()
    .slice(seen)
    .some((request) => JSON.stringify(request.body).includes(INPUT_END));
  const detail =
    started.exitCode !== 0
      ? `exit ${started.exitCode}: ${first(started.stderr)}`
      : reached
        ? `the model got the input's last line (store: ${store.kind})`
        : 'the run ended, but no model request held the input\'s last line';
  return { what: `start --input big=@file (${INPUT_MB} MB) --wait`, ok: started.exitCode === 0 && reached, ms: started.ms, detail };
}
