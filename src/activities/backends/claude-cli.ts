import { randomUUID } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { failureTypeForStatus, stageFailure } from '../failures.js';
import type { AttemptProgress, BackendOutcome, BackendRequest } from './backend.js';
import { findClaudeBinary } from './claude-binary.js';
import { CliEventReader } from './cli-events.js';

/** Options of the Claude Code CLI backend, fixed per worker. */
export interface ClaudeCliOptions {
  /** The environment the worker got; only an allow-list of it reaches the agent. */
  env: NodeJS.ProcessEnv;
  /** Time between SIGTERM and SIGKILL when an attempt is cancelled. @unit milliseconds @default 10000 */
  killGraceMs?: number;
}

/** Variables passed through to the agent; everything else in the worker's environment stays out. */
const PASSED_ENV = [
  'PATH', 'HOME', 'USER', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR', 'TERM', 'SHELL',
  'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL', 'API_TIMEOUT_MS',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'NODE_EXTRA_CA_CERTS',
  'CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CODE_USE_VERTEX', 'IS_SANDBOX',
];

/** util-linux's setpriv lets the kernel kill the agent if the worker dies without cleaning up. */
const SETPRIV = '/usr/bin/setpriv';

/** Runs one stage attempt through `claude -p`, streaming its events as heartbeats. */
export async function runClaudeCli(request: BackendRequest, options: ClaudeCliOptions): Promise<BackendOutcome> {
  const { stage, workspace } = request;
  if (!options.env.ANTHROPIC_API_KEY && !options.env.ANTHROPIC_AUTH_TOKEN) {
    throw stageFailure({
      type: 'API_KEY_MISSING',
      stageId: stage.id,
      message: 'no ANTHROPIC_API_KEY in the worker environment; set it (or ANTHROPIC_AUTH_TOKEN) where the worker runs',
    });
  }
  const binary = await findClaudeBinary(options.env);
  const resumeSessionId = request.resumeSessionId && (await sessionExists(workspace.claudeConfigDir, request.resumeSessionId))
    ? request.resumeSessionId
    : undefined;
  const warnings: string[] = [];
  if (request.resumeSessionId && !resumeSessionId) {
    warnings.push(`session ${request.resumeSessionId} of the previous attempt could not be found; started a fresh session`);
  }
  const sessionId = resumeSessionId ?? randomUUID();
  const args = buildArgs(request, sessionId, Boolean(resumeSessionId));
  const stdin = resumeSessionId
    ? `Your previous attempt at this stage was interrupted (attempt ${request.attempt}). Continue the task where you left off; check the working directory for work already done.\n\n${request.prompt.user}`
    : request.prompt.user;

  await mkdir(path.dirname(request.transcriptPath), { recursive: true });
  const transcript = createWriteStream(request.transcriptPath, { flags: 'a' });
  const reader = new CliEventReader(sessionId);
  const started = Date.now();
  const [file, fileArgs] = existsSync(SETPRIV) ? [SETPRIV, ['--pdeathsig', 'KILL', '--', binary, ...args]] : [binary, args];

  const child = execa(file, fileArgs, {
    cwd: workspace.dir,
    input: stdin,
    env: agentEnvironment(options.env, workspace.claudeConfigDir),
    extendEnv: false,
    // Its own process group, so cancellation can signal the CLI and the tools it started together.
    detached: true,
    buffer: false,
    reject: false,
    stripFinalNewline: false,
  });

  let stalled = false;
  let cancelled = false;
  const killGroup = (signal: NodeJS.Signals): void => {
    try {
      if (child.pid) process.kill(-child.pid, signal);
    } catch {
      // Already gone.
    }
  };
  const terminate = (): void => {
    killGroup('SIGTERM');
    setTimeout(() => killGroup('SIGKILL'), options.killGraceMs ?? 10_000).unref();
  };
  const onAbort = (): void => {
    cancelled = true;
    terminate();
  };
  request.signal.addEventListener('abort', onAbort, { once: true });

  // Stall detection follows agent events, not the wall clock: a long but active stage is never killed.
  let stallTimer: NodeJS.Timeout | undefined;
  const armStallTimer = (): void => {
    clearTimeout(stallTimer);
    stallTimer = setTimeout(() => {
      stalled = true;
      terminate();
    }, stage.stallTimeoutMs);
  };
  armStallTimer();

  const stderrTail = collectTail(child.iterable({ from: 'stderr' }));
  try {
    for await (const line of child.iterable({ from: 'stdout' })) {
      transcript.write(`${line}\n`);
      if (reader.read(line)) {
        armStallTimer();
        request.heartbeat(reader.progress());
      }
    }
  } finally {
    clearTimeout(stallTimer);
    request.signal.removeEventListener('abort', onAbort);
  }
  const result = await child;
  const stderr = await stderrTail;
  await new Promise<void>((resolve) => transcript.end(resolve));
  const durationMs = Date.now() - started;

  if (cancelled && request.signal.reason instanceof Error) throw request.signal.reason;
  const facts = { exitCode: result.exitCode, signal: result.signal, stderr: stderr.slice(-2_000), sessionId: reader.sessionId };
  if (result.failed && (result.code === 'ENOENT' || (result.exitCode === 127 && !reader.sawEvents))) {
    throw stageFailure({
      type: 'CLI_NOT_INSTALLED',
      stageId: stage.id,
      message: `cannot run the Claude Code CLI (${binary}); run \`npm ci\` in the agent-pipeline folder or set CLAUDE_BIN to the claude binary`,
      details: facts,
    });
  }
  if (stalled) {
    throw stageFailure({
      type: 'AGENT_STALLED',
      stageId: stage.id,
      message: `the agent produced no output for ${Math.round(stage.stallTimeoutMs / 1000)}s and was stopped; raise stallTimeout if it needs longer silences`,
      details: { ...facts, ...reader.progress() },
    });
  }
  const final = reader.result;
  if (!final) {
    throw stageFailure({
      type: 'CLI_CRASHED',
      stageId: stage.id,
      message: `the CLI exited (code ${result.exitCode ?? 'none'}${result.signal ? `, signal ${result.signal}` : ''}) without a final result`,
      details: facts,
    });
  }
  if (final.is_error || result.exitCode !== 0) throw classifyErrorResult(stage.id, final, facts);

  return {
    text: final.result ?? reader.lastAssistantText,
    sessionId: final.session_id ?? reader.sessionId,
    usage: { inputTokens: final.usage?.input_tokens ?? 0, outputTokens: final.usage?.output_tokens ?? 0 },
    costUsd: final.total_cost_usd ?? null,
    numTurns: final.num_turns ?? reader.turns,
    durationMs: final.duration_ms ?? durationMs,
    warnings,
  };
}

function buildArgs(request: BackendRequest, sessionId: string, resume: boolean): string[] {
  const { stage } = request;
  const args = ['-p', '--output-format', 'stream-json', '--verbose', '--model', stage.model];
  args.push(...(resume ? ['--resume', sessionId] : ['--session-id', sessionId]));
  args.push('--permission-mode', stage.permissionMode ?? 'dontAsk');
  if (stage.allowedTools?.length) args.push('--allowedTools', ...stage.allowedTools);
  if (stage.disallowedTools?.length) args.push('--disallowedTools', ...stage.disallowedTools);
  if (stage.fallbackModel) args.push('--fallback-model', stage.fallbackModel);
  if (stage.maxBudgetUsd) args.push('--max-budget-usd', String(stage.maxBudgetUsd));
  if (request.prompt.system) args.push('--append-system-prompt', request.prompt.system);
  return args;
}

function agentEnvironment(env: NodeJS.ProcessEnv, claudeConfigDir: string): Record<string, string> {
  const passed = Object.fromEntries(PASSED_ENV.filter((k) => env[k] !== undefined).map((k) => [k, env[k] as string]));
  return {
    ...passed,
    CLAUDE_CONFIG_DIR: claudeConfigDir,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    // Temporal owns retries: they are durable and visible there, while the CLI's own loop waits up to 180 s unseen.
    CLAUDE_CODE_MAX_RETRIES: env.CLAUDE_CODE_MAX_RETRIES ?? '0',
  };
}

/** The CLI stores a session as `<config>/projects/<encoded cwd>/<id>.jsonl`. */
async function sessionExists(claudeConfigDir: string, sessionId: string): Promise<boolean> {
  const projects = path.join(claudeConfigDir, 'projects');
  try {
    for (const folder of await readdir(projects)) {
      if (existsSync(path.join(projects, folder, `${sessionId}.jsonl`))) return true;
    }
  } catch {
    // No sessions yet.
  }
  return false;
}

async function collectTail(lines: AsyncIterable<string>, maxChars = 8_000): Promise<string> {
  let tail = '';
  for await (const line of lines) tail = `${tail}${line}\n`.slice(-maxChars);
  return tail;
}

interface ResultFacts {
  exitCode?: number;
  signal?: string;
  stderr: string;
  sessionId?: string;
}

/** Maps a CLI `result` with `is_error` to the catalogue. The CLI's `subtype` stays "success" on API errors. */
function classifyErrorResult(stageId: string, final: NonNullable<CliEventReader['result']>, facts: ResultFacts) {
  const details = { ...facts, subtype: final.subtype, terminalReason: final.terminal_reason, apiErrorStatus: final.api_error_status, apiError: final.api_error };
  const said = typeof final.result === 'string' ? final.result.slice(0, 500) : (final.errors ?? []).join('; ');
  if (final.subtype === 'error_max_budget_usd') {
    return stageFailure({ type: 'BUDGET_EXCEEDED', stageId, message: `the stage spent its budget: ${said}`, details });
  }
  if (final.api_error_status) {
    return stageFailure({ type: failureTypeForStatus(final.api_error_status), stageId, message: `the model API failed: ${said}`, details });
  }
  if (final.api_error === 'connection_failed' || final.api_error === 'stream_idle_timeout') {
    return stageFailure({ type: 'CONNECTION_ERROR', stageId, message: `could not reach the model API: ${said}`, details });
  }
  return stageFailure({ type: 'CLI_CRASHED', stageId, message: `the CLI reported an error (${final.subtype}): ${said}`, details });
}

export type { AttemptProgress };
