/**
 * Starts a pipeline and approves the approval gates of the stages a rule allows, as they come; any other wait is
 * left for a person (the script prints the command that would move it on) and the script stops following.
 *
 *   node auto-approve.ts [PIPELINE.yaml] [STAGE_REGEX]
 *
 * Without PIPELINE.yaml it runs release.yaml from its own folder: copy the two together.
 */
import { fileURLToPath } from 'node:url';
import { PipelineClient, type RunEvent } from 'agent-pipeline';

// Next to this file, not the current folder: the script runs from wherever it was copied to.
const file = process.argv[2] ?? fileURLToPath(new URL('release.yaml', import.meta.url));
/** The rule: approval gates of stages whose id matches are approved. */
const approvable = new RegExp(process.argv[3] ?? '^release$');

function shouldApprove(event: Extract<RunEvent, { type: 'stage_waiting' }>): boolean {
  return event.waitingFor.kind === 'approval' && approvable.test(event.stage);
}

const client = await PipelineClient.connect();
try {
  const run = await client.start(file);
  console.log(`started ${run.id}`);
  for await (const event of run.events()) {
    if (event.type !== 'stage_waiting') {
      if (event.type === 'run_ended') console.log(`run ended: ${event.status}`);
      continue;
    }
    if (shouldApprove(event)) {
      await run.approve({ stage: event.stage, comment: `auto-approved: stage matches ${approvable}` });
      console.log(`approved ${event.stage}`);
    } else {
      console.log(`${event.stage} waits for a person: ${event.waitingFor.commands.join(' | ')}`);
      break;
    }
  }
  const { state } = await run.status();
  console.log(`status: ${state.status}`);
  process.exitCode = state.status === 'completed' ? 0 : 1;
} finally {
  await client.close();
}
