/**
 * A worker with a third backend next to claude-cli and anthropic-api, and a run that uses it.
 *
 *   node custom-backend.ts [PIPELINE.yaml]
 *
 * Without PIPELINE.yaml it runs shout.yaml from its own folder: copy the two together.
 *
 * The `shout` backend calls no model: it writes the stage's prompt in capitals to SHOUT.txt in the run's workspace
 * and reports it. A real one might call another model provider or an internal service. Stages select it with
 * `backend: shout`; the client is told the name so validation accepts it.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PipelineClient } from 'agent-pipeline';
import { createPipelineWorker, type StageBackend } from 'agent-pipeline/worker';

// Next to this file, not the current folder: the script runs from wherever it was copied to.
const file = process.argv[2] ?? fileURLToPath(new URL('shout.yaml', import.meta.url));

/** A backend gets the stage, its rendered prompt and the workspace; it returns the agent's final text and accounting. */
const shout: StageBackend = async (request) => {
  const started = Date.now();
  const text = request.prompt.user.toUpperCase();
  request.claimFile('SHOUT.txt');
  await writeFile(path.join(request.workspace.dir, 'SHOUT.txt'), `${text}\n`);
  request.heartbeat({ turns: 1, costUsd: 0, lastEventAt: Date.now() });
  // The output contract: a fenced JSON block with success, summary and outputs.
  const report = { success: true, summary: `Shouted ${text.length} characters.`, outputs: { file: 'SHOUT.txt' } };
  return {
    text: `\`\`\`json\n${JSON.stringify(report)}\n\`\`\``,
    usage: { inputTokens: 0, outputTokens: 0 },
    costUsd: 0,
    numTurns: 1,
    durationMs: Date.now() - started,
    warnings: [],
  };
};

const worker = await createPipelineWorker({ backends: { shout } });
const running = worker.run();
const client = await PipelineClient.connect({ backends: ['shout'], taskQueue: worker.options.taskQueue });
try {
  const run = await client.start(file);
  const state = await run.result();
  const stage = state.stages[0];
  console.log(`run ${run.id} completed; ${stage.id} on ${stage.backend}: ${stage.result?.summary} (${stage.result?.artifacts.map((a) => a.path).join(', ')})`);
  console.log(`workspace: ${state.workspace}`);
} finally {
  await client.close();
  worker.shutdown();
  await running;
  await worker.connection?.close();
}
