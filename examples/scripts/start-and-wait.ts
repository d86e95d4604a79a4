/**
 * Starts a pipeline, prints each thing that happens in the run, and waits for its result.
 *
 *   node start-and-wait.ts [PIPELINE.yaml] [who]
 *
 * Without PIPELINE.yaml it runs hello.yaml from its own folder: copy the two together.
 *
 * Connects like the CLI does (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, temporal.toml profiles). Exit code 0 when the
 * run completed, 1 when it failed or was cancelled.
 */
import { fileURLToPath } from 'node:url';
import { PipelineClient, RunFailedError, type RunEvent, type RunState } from 'agent-pipeline';

// Next to this file, not the current folder: the script runs from wherever it was copied to.
const file = process.argv[2] ?? fileURLToPath(new URL('hello.yaml', import.meta.url));
const who = process.argv[3] ?? 'TypeScript';

/** One line per event. */
function describe(event: RunEvent): string {
  switch (event.type) {
    case 'stage_started':
      return `▶ ${event.stage} started (attempt ${event.attempt})`;
    case 'stage_completed':
      return `✔ ${event.stage} completed: ${event.result?.summary ?? ''}`;
    case 'stage_failed':
      return `✘ ${event.stage} failed: ${event.error?.message ?? ''}`;
    case 'stage_waiting':
      return `… ${event.stage} waits: ${event.waitingFor.message}`;
    case 'stage_skipped':
      return `↷ ${event.stage} skipped`;
    case 'stage_cancelled':
      return `■ ${event.stage} cancelled`;
    case 'stage_progress': {
      // What the agent is doing, from its heartbeats: its latest tool call, else its latest text.
      const { agent, usage } = event.progress;
      const doing = agent?.tool ? `${agent.tool.name} ${agent.tool.input}` : (agent?.text ?? '');
      return `  ${event.stage}: ${doing} (${(usage?.inputTokens ?? 0) + (usage?.outputTokens ?? 0)} tokens)`;
    }
    case 'run_ended':
      return `run ended: ${event.status}`;
  }
}

const client = await PipelineClient.connect();
try {
  const run = await client.start(file, { inputs: { who } });
  console.log(`started ${run.id}`);
  for await (const event of run.events()) console.log(describe(event));
  const state: RunState = await run.result();
  const artifacts = state.stages.flatMap((s) => s.result?.artifacts ?? []).map((a) => a.path);
  console.log(`completed · $${state.costUsd.toFixed(4)} · artifacts: ${artifacts.join(', ') || '(none)'}`);
} catch (err) {
  if (!(err instanceof RunFailedError)) throw err;
  console.error(`${err.code}: the run ${err.type}; ${err.state.error?.message ?? ''}`);
  process.exitCode = 1;
} finally {
  await client.close();
}
