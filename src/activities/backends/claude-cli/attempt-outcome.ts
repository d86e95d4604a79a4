import { Context } from '@temporalio/activity';
import { stageFailure } from '../../failures.js';
import { currentRedaction, redactSecrets } from '../../secrets.js';
import type { AttemptProgress, BackendOutcome, BackendRequest } from '../stage-backend.js';
import { CliEventReader } from './events.js';
import { classifyCliRun } from './failure.js';
import type { CliProcessResult } from './agent-process-options.js';
import type { ClaudeCliOptions } from './backend-options.js';
import type { AgentLaunch } from './agent-launch.js';

/** How the agent's run ended, as far as the attempt waits for it. */
export interface AgentRunEnd {
  run: CliProcessResult;
  reader: CliEventReader;
  durationMs: number;
  /** The keys of the processes this attempt started ahead of time for the stages after it. */
  prewarming?: Promise<string[]>;
}

/** Maps how the agent's run ended to the attempt's outcome, or throws its failure (or the cancellation). */
export async function attemptOutcome(request: BackendRequest, options: ClaudeCliOptions, launch: AgentLaunch, ended: AgentRunEnd): Promise<BackendOutcome> {
  const { stage } = request;
  const { run, reader } = ended;
  request.heartbeat(reader.progress());
  const failure = run.stoppedFor === 'cancelled' || run.stoppedFor === 'decided' || run.spawnError ? undefined : classifyCliRun({ stageId: stage.id, run, reader, stallTimeoutMs: stage.stallTimeoutMs, firstOutputTimeoutMs: stage.firstOutputTimeoutMs });
  if (options.warmPool && ended.prewarming && (run.stoppedFor || run.spawnError || failure)) {
    // The stages after this one will not start now: their waiting agents go at once instead of at their TTL.
    await options.warmPool.discardAll(await ended.prewarming);
  }
  if (run.stoppedFor === 'cancelled') throw request.signal.reason ?? new Error('cancelled');
  if (run.spawnError) {
    throw stageFailure({ type: 'CLI_NOT_INSTALLED', stageId: stage.id, message: `cannot start the Claude Code CLI ${launch.binary} (${run.spawnError})`, details: { binary: launch.binary } });
  }
  if (run.stoppedFor === 'decided' && run.decided) throw stageFailure({ type: run.decided.type, stageId: stage.id, message: `${run.decided.message}; the agent was stopped` });
  if (failure) throw failure;
  const warnings = [...launch.guard.warnings, ...launch.session.warnings, ...launch.warnings];
  return { ...toOutcome(reader, run, ended.durationMs, warnings), warmStart: launch.adopted !== undefined };
}

/** CLI permission modes whose exit code can still turn a successful result into a failure (auto mode's classifier). */
const EXIT_CODE_DECIDES = new Set(['auto', 'plan']);

/**
 * Whether the attempt may complete on the agent's successful result instead of waiting for the process to exit. The
 * CLI then spends about 20 ms on session bookkeeping in its config folder and on its teardown; with stages to follow,
 * that overlaps their scheduling. Only under `bare`, where no SessionEnd hook can still act on the workspace, and not in
 * the permission modes whose exit code decides. The next agent of the run on this worker waits for the exit.
 */
export function settlesOnResult(request: BackendRequest): boolean {
  return request.stagesFollow === true && request.stage.bare === true && !EXIT_CODE_DECIDES.has(request.stage.permissionMode ?? 'dontAsk');
}

/** Waits for an agent that settled on its result to exit; an exit that would have failed it is logged, since the stage completed. */
export async function followToExit(stageId: string, exit: Promise<CliProcessResult>, warn: (message: string) => void): Promise<void> {
  try {
    const ended = await exit;
    if (ended.exitCode === 0 && !ended.stoppedFor) return;
    const how = ended.stoppedFor ? `was stopped (${ended.stoppedFor})` : ended.exitSignal ? `was killed by ${ended.exitSignal}` : `exited with code ${ended.exitCode}`;
    const said = ended.stderrTail.trim().split('\n').at(-1);
    warn(`the agent of stage ${stageId} ${how} after its successful result, on which the stage had already completed${said ? `: ${said}` : ''}`);
  } catch (err) {
    warn(`the agent of stage ${stageId} could not be followed to its exit after its result: ${(err as Error).message}`);
  }
}

/**
 * The attempt's logger, taken while the activity runs: its agent may be followed to its exit after the activity
 * completed. Outside an activity (the backend called directly) warnings go to stderr. Either way every message is
 * redacted with the worker's secrets, taken now too: the agent's last stderr line may hold one.
 */
export function attemptWarn(): (message: string) => void {
  const redact = currentRedaction();
  try {
    const { log } = Context.current();
    return (message) => log.warn(redact(message));
  } catch {
    return (message) => process.stderr.write(`${redact(message)}\n`);
  }
}

/** The outcome of a run whose result reported success. */
function toOutcome(reader: CliEventReader, run: CliProcessResult, durationMs: number, earlier: string[]): BackendOutcome {
  const final = reader.result;
  const progress: AttemptProgress = reader.progress();
  const warnings = [...earlier];
  if (reader.failedMcpServers.length > 0) {
    warnings.push(`MCP server(s) ${reader.failedMcpServers.join(', ')} failed to start; the agent ran without them (check their command, args and env)`);
  }
  if (reader.fallback) {
    warnings.push(`the CLI switched from model ${reader.fallback.from} to the fallback ${reader.fallback.to} (${reader.fallback.trigger})`);
  }
  if (run.truncatedAnswerBytes > 0) {
    warnings.push(`the agent's answer came in a ${run.truncatedAnswerBytes}-byte event; only the end of its text was kept for the report (the transcript has all of it)`);
  }
  return redactSecrets({
    text: final?.result ?? reader.lastAssistantText,
    sessionId: final?.session_id ?? reader.sessionId,
    usage: final?.usage
      ? {
          inputTokens: final.usage.input_tokens ?? 0,
          outputTokens: final.usage.output_tokens ?? 0,
          cacheReadTokens: final.usage.cache_read_input_tokens ?? 0,
          cacheWriteTokens: final.usage.cache_creation_input_tokens ?? 0,
        }
      : progress.usage ?? { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
    costUsd: final?.total_cost_usd ?? progress.costUsd,
    numTurns: final?.num_turns ?? progress.turns,
    durationMs: final?.duration_ms ?? durationMs,
    warnings,
    permissionDenials: (final?.permission_denials ?? []).map((d) => ({ tool: d.tool_name, input: d.tool_input })),
  });
}
