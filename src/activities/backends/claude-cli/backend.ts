import type { BackendOutcome, BackendRequest } from '../stage-backend.js';
import type { ClaudeCliOptions } from './backend-options.js';
import { checkCanStart, prepareLaunch } from './agent-launch.js';
import { runAgent } from './agent-run.js';
import { attemptOutcome } from './attempt-outcome.js';

/**
 * Runs one stage attempt through `claude -p`: stops whatever an earlier attempt left in the stage,
 * resumes the earlier session when there is one, streams events into heartbeats and the transcript,
 * stops a stalled or cancelled agent, and maps the result to the outcome or to a catalogue failure.
 * On cancellation the abort reason is rethrown once the agent is gone; partial work stays.
 */
export async function runClaudeCli(request: BackendRequest, options: ClaudeCliOptions): Promise<BackendOutcome> {
  const binary = await checkCanStart(request, options);
  // An agent of this run that completed its stage may still be shutting down: it may hold this stage's lock, or be
  // writing the session this attempt resumes.
  await options.exitingAgents.exited(request.workspace.claudeConfigDir);
  const launch = await prepareLaunch(request, options, binary);
  const ended = await runAgent(request, options, launch);
  return await attemptOutcome(request, options, launch, ended);
}
