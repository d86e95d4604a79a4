import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { toMilliseconds } from '../../../pipeline/duration.js';
import { durationSchema } from '../../../pipeline/schema.js';
import { openStageFolder, type RunWorkspace } from '../../workspace/run-workspace.js';
import { readEndedMarker } from '../../workspace/remove-workspace.js';
import type { BackendRequest, PrewarmTarget } from '../stage-backend.js';
import { agentEnvironment, buildCliArgs } from './args.js';
import type { AttemptSandbox } from './agent-settings.js';
import { writeAgentFiles } from './agent-files.js';
import { workerMarkerValue } from '../../process/orphan-watchdog.js';
import type { WarmPool } from './warm-pool.js';
import { PROJECT_SETTINGS_FILES } from './project-settings.js';
import { STARTUP_MEMORY_FILES } from './memory-links.js';

/*
 * How the CLI backend uses the warm pool: which stage a waiting process is for (`warmKey`), how it is launched
 * (exactly as `runClaudeCli` launches that stage's first attempt), and which files it read at start-up.
 */

/** Warm start settings of a worker. */
export interface WarmStartSettings {
  /** `AGENT_PIPELINE_PREWARM=on|off`. @default on */
  enabled: boolean;
  /** `AGENT_PIPELINE_PREWARM_TTL`: how long a process may wait for its stage. @unit milliseconds @default 120s */
  ttlMs: number;
}

/**
 * Reads the warm start settings, once, when the worker starts (it makes its pool from them).
 * @throws Error naming the variable, its value and what is allowed
 */
export function warmStartSettings(env: NodeJS.ProcessEnv): WarmStartSettings {
  const prewarm = (env.AGENT_PIPELINE_PREWARM ?? 'on').trim().toLowerCase();
  if (prewarm !== 'on' && prewarm !== 'off') {
    throw new Error(`[CONFIG_INVALID] AGENT_PIPELINE_PREWARM=${env.AGENT_PIPELINE_PREWARM} is not on or off; unset it for the default (on)`);
  }
  const ttl = (env.AGENT_PIPELINE_PREWARM_TTL || '120s').trim();
  if (!durationSchema.safeParse(ttl).success) {
    throw new Error(`[CONFIG_INVALID] AGENT_PIPELINE_PREWARM_TTL=${ttl} is not a duration; write it like 120s or 5m`);
  }
  return { enabled: prewarm === 'on', ttlMs: toMilliseconds(ttl) };
}

/** A waiting process serves one stage of one run, never another (runs that share a `workspace.dir` included). */
export function warmKey(workspace: RunWorkspace, stageId: string): string {
  return `${workspace.claudeConfigDir}\0${workspace.dir}\0${stageId}`;
}

/**
 * Files `claude` reads once at start-up in `cwd` with `CLAUDE_CONFIG_DIR`: memory (CLAUDE.md), settings and MCP
 * configuration, plus the files the command line names. Any change after a warm spawn discards the process.
 */
export function startupFiles(cwd: string, claudeConfigDir: string, named: (string | undefined)[]): string[] {
  const inCwd = [...STARTUP_MEMORY_FILES, ...PROJECT_SETTINGS_FILES, '.mcp.json'];
  const inConfig = ['CLAUDE.md', 'settings.json', 'settings.local.json'];
  return [...inCwd.map((f) => path.join(cwd, f)), ...inConfig.map((f) => path.join(claudeConfigDir, f)), ...named.filter((f): f is string => !!f)];
}

/**
 * Whether a waiting process's stage may still start here: not once an attempt of the stage started (on another
 * worker: its transcript `attempt-N.jsonl` appeared in the stage's folders, which the workers share), nor once the run
 * ended (the ended marker in its bookkeeping). The attempt that adopts the process takes it out of the pool before it writes
 * its transcript, so it never sees its own.
 */
async function stageNotStartedYet(stageDir: string, bookkeeping: string): Promise<() => Promise<boolean>> {
  // A stage attempt's transcript is `attempt-N.jsonl` in the stage folder or in one of its execution folders.
  const transcripts = async (): Promise<string[]> => {
    const entries = await readdir(stageDir, { withFileTypes: true }).catch(() => []);
    const inside = await Promise.all(entries.filter((e) => e.isDirectory()).map(async (e) => (await readdir(path.join(stageDir, e.name)).catch(() => [])).map((f) => `${e.name}/${f}`)));
    return [...entries.map((e) => e.name), ...inside.flat()].filter((f) => /(^|\/)attempt-\d+\.jsonl$/.test(f));
  };
  const before = new Set(await transcripts());
  return async () => {
    if ((await transcripts()).some((f) => !before.has(f))) return false;
    return (await readEndedMarker(bookkeeping)) === undefined;
  };
}

/** What the attempt that spawned the waiting processes shares with them. */
export interface PrewarmContext {
  binary: string;
  workerEnv: NodeJS.ProcessEnv;
  /** The worker's kill grace: part of the agent's environment (the watchdog marker), so it must match. @unit milliseconds */
  killGraceMs: number;
  workspace: RunWorkspace;
  mcpServers?: BackendRequest['mcpServers'];
  /** The worker's sandbox mode and host, and the run's signature: the waiting process gets the settings file its stage's attempt will write. */
  sandbox: AttemptSandbox;
  /** The worker's workspaces root (see `ClaudeCliOptions.workspacesRoot`): part of the read limits in the settings file. */
  workspacesRoot?: string;
}

/**
 * Spawns a waiting process for each target, launched exactly as `runClaudeCli` will launch the target's first
 * attempt: a fresh session, its system prompt and MCP config files in its own stage folder. A stage whose folder
 * holds a lock (an earlier attempt's agent) is left alone: its attempt sweeps that folder first.
 */
export async function prewarmStages(pool: WarmPool, targets: PrewarmTarget[], ctx: PrewarmContext): Promise<string[]> {
  const spawned: string[] = [];
  for (const target of targets) {
    const { stage } = target;
    const key = warmKey(ctx.workspace, stage.id);
    if (pool.peek(key) || existsSync(path.join(ctx.workspace.stageDir(stage.id), 'agent.lock'))) continue;
    const stageDir = await openStageFolder(ctx.workspace, stage.id);
    const marker = `${stageDir}#${randomUUID()}`;
    const env = agentEnvironment(ctx.workerEnv, ctx.workspace.claudeConfigDir, { stage: marker, worker: workerMarkerValue(ctx.killGraceMs) });
    // A stage that cannot start (its sandbox unavailable or its `sandbox: false` refused) is not started ahead of time:
    // its attempt reports why.
    const written = await writeAgentFiles({
      stage, workspace: ctx.workspace, stageDir, agentEnv: env, binary: ctx.binary, workerEnv: ctx.workerEnv, sandbox: ctx.sandbox,
      workspacesRoot: ctx.workspacesRoot, addDirs: target.addDirs, mcpServers: ctx.mcpServers, system: target.system,
    }).catch(() => undefined);
    if (!written) continue;
    const sessionId = randomUUID();
    const request = { stage, maxBudgetUsd: target.maxBudgetUsd, addDirs: target.addDirs } as BackendRequest;
    const args = buildCliArgs(request, { sessionId, resume: false, stdin: '', warnings: [] }, { ...written.files, streamInput: true });
    const watched = startupFiles(ctx.workspace.dir, ctx.workspace.claudeConfigDir, [written.files.mcpConfig, written.files.systemPrompt, written.files.settings]);
    const wanted = await stageNotStartedYet(stageDir, ctx.workspace.bookkeeping);
    if (await pool.spawn(key, { binary: ctx.binary, args, cwd: ctx.workspace.dir, env, sessionId, marker }, watched, wanted)) spawned.push(key);
  }
  return spawned;
}
