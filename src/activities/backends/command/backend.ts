import { mkdir } from 'node:fs/promises';
import { constants } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { OUTPUT_CAPS } from '../../../pipeline/output-caps.js';
import { agentPipelineCommand, shellWord } from '../../../pipeline/shell-words.js';
import type { ResolvedStage } from '../../../pipeline/stage-options.js';
import { stageFailure } from '../../failures.js';
import { DEFAULT_KILL_GRACE_MS } from '../../process/stop.js';
import { StageGuard } from '../../process/stage-guard.js';
import { workerMarkerValue } from '../../process/orphan-watchdog.js';
import { currentSecretValues } from '../../secrets.js';
import { openStageFolder } from '../../workspace/run-workspace.js';
import { workerFolderOfRun } from '../../workspace/worker-folder.js';
import { workerSecretValues } from '../claude-cli/agent-auth.js';
import { readScopeOf } from '../claude-cli/agent-reads.js';
import { findClaudeBinary } from '../claude-cli/claude-binary.js';
import { ownFolderDenyRules } from '../claude-cli/own-folder-rules.js';
import type { SandboxHost } from '../claude-cli/sandbox-host.js';
import { DEFAULT_SANDBOX_MODE, type SandboxMode } from '../claude-cli/sandbox-mode.js';
import { TranscriptWriter } from '../claude-cli/transcript-writer.js';
import { quietHeartbeatIntervalMs, type BackendOutcome, type BackendRequest } from '../stage-backend.js';
import { commandEnvironment, launcherEnvironment, unsetPassEnvWarnings, type CommandPlace } from './command-env.js';
import { launchWithEnvFile } from './command-env-file.js';
import { runCommandProcess, type CommandRunResult } from './command-process.js';
import { prepareCommandSandbox } from '../claude-cli/command-sandbox.js';

/** Kept of a failed command's stderr, for its failure. @unit characters */
const STDERR_TAIL_CHARS = 4_000;

/**
 * Options of the command stages' backend, fixed per worker (see worker/activities.ts): the worker's environment and the same
 * sandbox settings its CLI agents get.
 */
export interface CommandOptions {
  /** The worker's environment: only `PATH`, `LANG` and the like reach a command, and what `passEnv` may pass. */
  env: NodeJS.ProcessEnv;
  /** The names a stage's `passEnv` may pass (`AGENT_PIPELINE_COMMAND_ENV`). */
  allowedEnv: ReadonlySet<string>;
  /** Between SIGTERM and SIGKILL when a command is stopped. @unit milliseconds @default 5000 */
  killGraceMs?: number;
  /** `AGENT_PIPELINE_SANDBOX`, as for the agents. @default required */
  sandbox?: SandboxMode;
  /** What this host offers the sandbox, as the worker last checked it. @default checked on every attempt */
  sandboxHost?: () => Promise<SandboxHost>;
  /** Whether the worker requires signed runs (then `permissive` honours `sandbox: false` only in signed runs). */
  signedRunsOnly?: boolean;
  /** The worker's workspaces root, whose other runs and reserved folder a command may not read. */
  workspacesRoot?: string;
}

/** The command as its stage gives it, for messages: a string as it is, a list as its words (quoted where needed). */
export function describeCommand(run: ResolvedStage['run']): string {
  if (run === undefined) return '';
  return typeof run === 'string' ? run : run.map(shellWord).join(' ');
}

/** The command's own argv: a string runs through `sh -c`, a list as it is (no shell). */
export function commandArgv(run: ResolvedStage['run']): string[] {
  if (run === undefined) return [];
  return typeof run === 'string' ? ['/bin/sh', '-c', run] : [...run];
}

/**
 * Runs one attempt of a command stage: stops what an earlier attempt left in the stage, starts the command in the
 * run's workspace (in the sandbox the worker's agents get, with its own minimal environment), records its output as the
 * attempt's transcript, and maps its exit to the outcome (its stdout is the answer) or to `COMMAND_FAILED`. On
 * cancellation the abort reason is rethrown once every process of the command is gone.
 */
export async function runCommand(request: BackendRequest, options: CommandOptions): Promise<BackendOutcome> {
  const { stage, workspace } = request;
  if (request.signal.aborted) throw request.signal.reason;
  const stageDir = await openStageFolder(workspace, stage.id);
  const killGraceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  const guard = await StageGuard.claim(stageDir, killGraceMs);
  try {
    const home = path.join(workspace.bookkeeping, 'home');
    await mkdir(home, { recursive: true });
    const place: CommandPlace = { home, markers: { stage: guard.marker, worker: workerMarkerValue(killGraceMs) } };
    const env = commandEnvironment(stage, options.env, options.allowedEnv, place);
    const { prefix, sandbox } = await prepareCommandSandbox(stage, {
      workerEnv: options.env,
      scope: readScopeOf(workspace, stage.id, undefined, options.workspacesRoot),
      attempt: { mode: options.sandbox ?? DEFAULT_SANDBOX_MODE, host: options.sandboxHost, signing: { required: options.signedRunsOnly === true, signedBy: request.runSignedBy } },
      writable: [home],
      denied: ownFolderDenyRules(workerFolderOfRun(workspace.bookkeeping)),
      claudeBinary: await findClaudeBinary(options.env),
    });
    const started = Date.now();
    const warnings = [...guard.warnings, ...sandbox.warnings, ...unsetPassEnvWarnings(stage, options.env)];
    const launchOnce = async (): Promise<CommandRunResult> => {
      // Sandboxed, the stage's variables go in only past the sandbox (command-env-file.ts); unsandboxed, there is no boundary.
      const inside = sandbox.enabled ? await launchWithEnvFile(home, env, commandArgv(stage.run)) : undefined;
      const launch = inside ? { argv: [...prefix, ...inside.argv], env: launcherEnvironment(options.env, place) } : { argv: commandArgv(stage.run), env };
      return runRecorded(request, options, { ...launch, killGraceMs, guard }).finally(() => inside?.cleanup());
    };
    const run = await launchThroughSandboxRace(launchOnce, warnings);
    if (run.cancelled) throw request.signal.reason ?? new Error('cancelled');
    failIfUnsuccessful(request, run);
    request.heartbeat({ turns: 0, costUsd: 0, lastEventAt: Date.now() });
    return {
      text: run.stdoutTail,
      usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
      costUsd: 0,
      numTurns: 0,
      durationMs: Date.now() - started,
      warnings,
    };
  } finally {
    // Whatever the command left running (a server started in the background) goes with the attempt.
    await guard.release();
  }
}

/**
 * A shell reports a child killed by signal N as exit code 128 + N, and a sandboxed command runs under shells (the
 * sandbox's own, the environment loader): 137 is SIGKILL, often the kernel's out-of-memory killer. Said in words.
 */
export function signalOfExitCode(code: number | undefined): string {
  if (code === undefined || code <= 128) return '';
  const name = Object.entries(constants.signals).find(([, number]) => number === code - 128)?.[0];
  return name ? ` (128 + ${code - 128}: killed by ${name}${name === 'SIGKILL' ? ', perhaps out of memory' : ''})` : '';
}

/** Launches of a command whose sandbox could not start for the race below, before its failure stands. */
const SANDBOX_RACE_LAUNCHES = 4;

/**
 * Whether the command never started because its sandbox could not: bubblewrap's only words, nothing on stdout. Each
 * `srt` binds the files no command may write (`.gitconfig`, `.bashrc`…); one that is absent gets an empty placeholder
 * that `srt` removes when its command exits. A second command in the same workspace that started meanwhile takes the
 * placeholder for a real file and asks bubblewrap to bind it, which fails once the first is gone ("Can't find source
 * path", "Can't get type of source", "Can't bind mount … Unable to find … in mount table", by when it goes
 * missing): two parallel stages in one workspace failed that way one run in two. bubblewrap says so only in text, so
 * the text is what is read: one line "Can't …" of its own, which it prints only when it fails before the command.
 */
function lostSandboxRace(run: CommandRunResult): boolean {
  return !run.cancelled && run.exitCode === 1 && run.stdoutTail === '' && /^bwrap: Can't [^\n]*\n?$/.test(run.stderrTail);
}

/** Launches the command again, a moment later, while it lost the race of {@link lostSandboxRace}; it never ran then. */
async function launchThroughSandboxRace(launch: () => Promise<CommandRunResult>, warnings: string[]): Promise<CommandRunResult> {
  for (let attempt = 1; ; attempt++) {
    const run = await launch();
    if (attempt >= SANDBOX_RACE_LAUNCHES || !lostSandboxRace(run)) return run;
    warnings.push(`the sandbox could not start (${run.stderrTail.trim()}: another sandbox in this workspace removed it meanwhile); the command was started again`);
    await sleep(100 * attempt + Math.random() * 100);
  }
}

/** Runs the command with its transcript open, closed whatever happens. */
async function runRecorded(request: BackendRequest, options: CommandOptions, launch: { argv: string[]; env: Record<string, string>; killGraceMs: number; guard: StageGuard }): Promise<CommandRunResult> {
  // Every secret the worker registered: a command given one through `passEnv` may print it.
  const transcript = await TranscriptWriter.open(request.transcriptPath, currentSecretValues() ?? workerSecretValues(options.env));
  try {
    return await runCommandProcess({
      argv: launch.argv,
      cwd: request.workspace.dir,
      env: launch.env,
      transcript,
      killGraceMs: launch.killGraceMs,
      heartbeatIntervalMs: quietHeartbeatIntervalMs(request.stage),
      stdoutTailChars: OUTPUT_CAPS.answerBytes,
      stderrTailChars: STDERR_TAIL_CHARS,
      signal: request.signal,
      heartbeat: () => request.heartbeat({ turns: 0, costUsd: 0, lastEventAt: Date.now() }),
      onSpawn: (pid) => launch.guard.lock(pid, request.attempt),
    });
  } finally {
    await transcript.close().catch(() => undefined);
  }
}

/** How much of the end of a failed command's stderr its failure's message carries (all of it is in `details`). @unit characters */
const MESSAGE_STDERR_CHARS = 1_500;

/**
 * @throws COMMAND_FAILED for a command that could not start, exited with a code other than 0, or was killed; its
 * message ends with the end of the command's stderr, so that `{{stages.ID.error}}` shows a later stage what failed
 */
function failIfUnsuccessful({ runId, stage }: BackendRequest, run: CommandRunResult): void {
  if (run.exitCode === 0 && !run.spawnError) return;
  const how = run.spawnError ? `could not start (${run.spawnError})` : run.exitSignal ? `was killed by ${run.exitSignal}` : `exited with code ${run.exitCode}${signalOfExitCode(run.exitCode)}`;
  const said = run.stderrTail.trimEnd().slice(-MESSAGE_STDERR_CHARS);
  const shown = describeCommand(stage.run).slice(0, 200);
  throw stageFailure({
    type: 'COMMAND_FAILED',
    stageId: stage.id,
    // stageFailure redacts the worker's secrets from both: a command given one through `passEnv` may print it.
    message: `the command ${JSON.stringify(shown)} ${how}${said ? `; the end of its stderr:\n${said}\n` : ' (no stderr)'}`,
    hint: `the command's output is in \`${agentPipelineCommand('logs', runId, ['--stage', shellWord(stage.id)])}\`; the attempt is retried while the stage has \`retries\` left (list COMMAND_FAILED in \`retry.nonRetryable\` to make a failure final)`,
    details: { exitCode: run.exitCode, signal: run.exitSignal, stderrTail: run.stderrTail },
  });
}
