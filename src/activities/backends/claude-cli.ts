import path from 'node:path';
import { agentTelemetryEnv } from '../../telemetry/agent-env.js';
import { stageFailure } from '../failures.js';
import { redactSecrets, registerSecrets } from '../secrets.js';
import { writeFileAtomic } from '../workspace.js';
import type { AttemptProgress, BackendOutcome, BackendRequest } from './backend.js';
import { describeClaudeLookup, findClaudeBinary } from './claude-binary.js';
import { agentEnvironment, buildCliArgs } from './cli-args.js';
import { CliEventReader } from './cli-events.js';
import { classifyCliRun } from './cli-failure.js';
import { runCliProcess, type CliProcessResult } from './cli-process.js';
import { planSession } from './cli-session.js';
import { writeMcpConfig } from './mcp-config.js';
import { loadModelCatalog, type ModelCatalog } from './models.js';
import { workerMarkerValue } from './orphan-watchdog.js';
import { StageGuard } from './stage-guard.js';
import { TranscriptWriter } from './transcript-writer.js';

/** Options of the Claude Code CLI backend, fixed per worker. */
export interface ClaudeCliOptions {
  /** The environment the worker got; only an allow-list of it reaches the agent. */
  env: NodeJS.ProcessEnv;
  /** Time between SIGTERM and SIGKILL when an attempt is cancelled or stalls. @unit milliseconds @default 10000 */
  killGraceMs?: number;
  /** Prices for the cost reported while the agent runs. @default `loadModelCatalog(env)` */
  models?: ModelCatalog;
}

/**
 * Runs one stage attempt through `claude -p`: stops whatever an earlier attempt left in the stage,
 * resumes the earlier session when there is one, streams events into heartbeats and the transcript,
 * stops a stalled or cancelled agent, and maps the result to the outcome or to a catalogue failure.
 * On cancellation the abort reason is rethrown once the agent is gone; partial work stays.
 */
export async function runClaudeCli(request: BackendRequest, options: ClaudeCliOptions): Promise<BackendOutcome> {
  const { stage, workspace } = request;
  const secrets = [options.env.ANTHROPIC_API_KEY, options.env.ANTHROPIC_AUTH_TOKEN];
  registerSecrets(secrets);
  if (!options.env.ANTHROPIC_API_KEY && !options.env.ANTHROPIC_AUTH_TOKEN) {
    throw stageFailure({ type: 'API_KEY_MISSING', stageId: stage.id, message: 'the worker has no ANTHROPIC_API_KEY (nor ANTHROPIC_AUTH_TOKEN) to give the Claude Code CLI' });
  }
  const binary = await findClaudeBinary(options.env);
  if (!binary) {
    throw stageFailure({ type: 'CLI_NOT_INSTALLED', stageId: stage.id, message: `the Claude Code CLI was not found (looked for ${describeClaudeLookup(options.env)})`, details: { claudeBin: options.env.CLAUDE_BIN } });
  }
  if (request.signal.aborted) throw request.signal.reason;

  const stageDir = workspace.stageDir(stage.id);
  const guard = await StageGuard.claim(stageDir);
  const env = {
    ...agentEnvironment(options.env, workspace.claudeConfigDir, { stage: guard.marker, worker: workerMarkerValue() }),
    // The attempt span's TRACEPARENT, and Claude Code's own telemetry when AGENT_PIPELINE_AGENT_TELEMETRY=1.
    ...agentTelemetryEnv(options.env, { stage: stage.id, attempt: request.attempt }),
  };
  const mcpConfig = await writeMcpConfig({
    stageId: stage.id,
    pipelineServers: request.mcpServers,
    stageServers: stage.mcpServers,
    dir: stageDir,
    cwd: workspace.dir,
    env,
  });
  const systemPrompt = request.prompt.system ? path.join(stageDir, 'system-prompt.md') : undefined;
  if (systemPrompt) await writeFileAtomic(systemPrompt, request.prompt.system);
  const session = await planSession(request);
  const reader = new CliEventReader(session.sessionId, options.models ?? loadModelCatalog(options.env), request.claimFile);
  const transcript = await TranscriptWriter.open(request.transcriptPath, secrets);
  const started = Date.now();
  let run: CliProcessResult;
  try {
    run = await runCliProcess({
      binary,
      args: buildCliArgs(request, session, { mcpConfig, systemPrompt }),
      stdin: session.stdin,
      cwd: workspace.dir,
      env,
      reader,
      transcript,
      stallTimeoutMs: stage.stallTimeoutMs,
      firstOutputTimeoutMs: stage.firstOutputTimeoutMs,
      killGraceMs: options.killGraceMs ?? 10_000,
      heartbeatIntervalMs: Math.max(1_000, Math.floor(stage.heartbeatTimeoutMs / 4)),
      signal: request.signal,
      heartbeat: request.heartbeat,
      onSpawn: (pid) => guard.lock(pid, request.attempt),
    });
  } catch (err) {
    // Only the attempt's own records can fail here: the transcript, or the lock file once the agent started.
    throw stageFailure({ type: 'WORKSPACE_ERROR', stageId: stage.id, message: `could not record the attempt in ${stageDir} (${(err as Error).message}); the agent was stopped`, cause: err as Error });
  } finally {
    await transcript.close().catch(() => undefined);
    // Whatever the agent left running (a background server a tool started) goes with the attempt.
    await guard.release();
  }
  const durationMs = Date.now() - started;
  request.heartbeat(reader.progress());

  if (run.stoppedFor === 'cancelled') throw request.signal.reason ?? new Error('cancelled');
  if (run.spawnError) {
    throw stageFailure({ type: 'CLI_NOT_INSTALLED', stageId: stage.id, message: `cannot start the Claude Code CLI ${binary} (${run.spawnError})`, details: { binary } });
  }
  const failure = classifyCliRun({ stageId: stage.id, run, reader, stallTimeoutMs: stage.stallTimeoutMs, firstOutputTimeoutMs: stage.firstOutputTimeoutMs });
  if (failure) throw failure;
  return toOutcome(reader, run, durationMs, [...guard.warnings, ...session.warnings]);
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
      ? { inputTokens: final.usage.input_tokens ?? 0, outputTokens: final.usage.output_tokens ?? 0 }
      : progress.usage ?? { inputTokens: 0, outputTokens: 0 },
    costUsd: final?.total_cost_usd ?? progress.costUsd,
    numTurns: final?.num_turns ?? progress.turns,
    durationMs: final?.duration_ms ?? durationMs,
    warnings,
    permissionDenials: (final?.permission_denials ?? []).map((d) => ({ tool: d.tool_name, input: d.tool_input })),
  });
}
