import type { ApplicationFailure } from '@temporalio/common';
import { failureTypeForStatus, stageFailure } from '../../failures.js';
import type { CliEventReader, CliResultEvent } from './events.js';
import type { CliProcessResult } from './agent-process-options.js';

/*
 * Decides whether a finished `claude` run failed, and how, from its `result` event and exit status.
 * Neither alone is trusted (as measured with CLI 2.1.332): API errors keep `subtype: "success"` and only
 * set `is_error`, `api_error_status` and `api_error`; SIGINT exits 0 with no result at all; some
 * refusals exit 1 under a result that says success.
 */

/** What a failure needs to say about the run. */
export interface CliRunFacts {
  stageId: string;
  run: CliProcessResult;
  reader: CliEventReader;
  stallTimeoutMs: number;
  firstOutputTimeoutMs: number;
}

/** The catalogue failure of a run that did not succeed, or `undefined` when it did. */
export function classifyCliRun(facts: CliRunFacts): ApplicationFailure | undefined {
  const { stageId, run, reader } = facts;
  const final = reader.result;
  const details = {
    exitCode: run.exitCode,
    exitSignal: run.exitSignal,
    stderrTail: run.stderrTail.slice(-2_000),
    ...reader.progress(),
    ...(final ? resultFacts(final) : {}),
  };
  if (run.stoppedFor === 'stalled') {
    const [what, ms, option] = reader.sawOutput
      ? ['produced no output', facts.stallTimeoutMs, 'stallTimeout']
      : ['produced no first output', facts.firstOutputTimeoutMs, 'firstOutputTimeout'];
    return stageFailure({
      type: 'AGENT_STALLED',
      stageId,
      message: `the agent ${what} for ${formatSeconds(ms)} (${option}) and was stopped`,
      details,
    });
  }
  if (!final) {
    const how = run.exitSignal ? `was killed by ${run.exitSignal}` : `exited with code ${run.exitCode ?? 'unknown'}`;
    const said = lastLine(run.stderrTail);
    return stageFailure({ type: 'CLI_CRASHED', stageId, message: `the Claude Code CLI ${how} without a final result${said ? `: ${said}` : ''}`, details });
  }
  // A run that settled on its result (`settleOnResult`) has no exit code yet; its result alone decided.
  if (!final.is_error && (run.exitCode === 0 || run.exit !== undefined)) return undefined;
  const said = typeof final.result === 'string' && final.result ? final.result.slice(0, 500) : (final.errors ?? []).join('; ');
  if (final.subtype === 'error_max_budget_usd' || final.terminal_reason === 'budget_exhausted') {
    return stageFailure({ type: 'BUDGET_EXCEEDED', stageId, message: `the agent spent $${(final.total_cost_usd ?? 0).toFixed(4)} and reached its cap (${said})`, details });
  }
  if (final.startup_failure_reason === 'sandbox_required_unavailable') {
    // The packages are there (the worker checks them first) but the sandbox would not start: in a container, most often
    // no user namespaces.
    return stageFailure({ type: 'SANDBOX_UNAVAILABLE', stageId, message: `Claude Code refused to start without its sandbox: ${said}`, details });
  }
  if (typeof final.api_error_status === 'number') {
    const type = failureTypeForStatus(final.api_error_status, final.api_error_type);
    return stageFailure({
      type,
      stageId,
      message: `the model API answered ${final.api_error_status}${final.api_error_type ? ` ${final.api_error_type}` : ''}: ${said}`,
      details,
      // The CLI reports a 429's retry-after only when it retried itself (`api_retry`, CLAUDE_CODE_MAX_RETRIES > 0).
      nextRetryDelayMs: type === 'RATE_LIMITED' ? reader.rateLimitDelayMs : undefined,
    });
  }
  if (final.api_error === 'connection_failed' || final.api_error === 'stream_idle_timeout' || final.api_error === 'timeout') {
    return stageFailure({ type: 'CONNECTION_ERROR', stageId, message: `could not reach the model API (${final.api_error}): ${said}`, details });
  }
  const how = final.is_error ? `reported an error (${final.subtype}, ${final.terminal_reason ?? 'no reason'})` : `exited with code ${run.exitCode} after a successful result`;
  const stderr = lastLine(run.stderrTail);
  return stageFailure({ type: 'CLI_CRASHED', stageId, message: `the Claude Code CLI ${how}: ${said || stderr || 'no message'}`, details });
}

function resultFacts(final: CliResultEvent): Record<string, unknown> {
  return {
    subtype: final.subtype,
    terminalReason: final.terminal_reason,
    apiErrorStatus: final.api_error_status,
    apiErrorType: final.api_error_type,
    apiError: final.api_error,
    totalCostUsd: final.total_cost_usd,
  };
}

function lastLine(text: string): string {
  return text.trim().split('\n').pop()?.slice(0, 300) ?? '';
}

function formatSeconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)}s` : `${Math.round(ms / 1000)}s`;
}
