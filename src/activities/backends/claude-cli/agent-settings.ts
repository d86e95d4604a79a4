import { execa } from 'execa';
import { randomUUID } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ResolvedStage } from '../../../pipeline/stage-options.js';
import { stageMayUseBash } from '../../../pipeline/stage-tools.js';
import { stageFailure } from '../../failures.js';
import { findExecutable } from '../../process/find-executable.js';
import { SETTINGS_VARIABLE } from './agent-auth.js';
import { withDeniedRules } from './own-folder-rules.js';

/*
 * The one settings file an attempt's agent gets with `--settings`: the operator's `AGENT_PIPELINE_CLAUDE_SETTINGS`,
 * then the pipeline's `sandbox` options, then what the worker enforces, merged in that order so the later wins. It is
 * written with mode 0600 next to the stage's other files; neither it nor its content ever reaches the command line.
 */

/** `AGENT_PIPELINE_SANDBOX`: whether a worker insists on Claude Code's sandbox. */
export const SANDBOX_MODES = ['required', 'auto', 'off'] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];

/** The worker setting naming the sandbox mode. */
export const SANDBOX_VARIABLE = 'AGENT_PIPELINE_SANDBOX';

/** What the sandbox needs on Linux (Debian package names, which are also the command names). */
export const SANDBOX_PACKAGES = ['bubblewrap', 'socat'] as const;
/** How to install them on Debian or Ubuntu. */
export const SANDBOX_INSTALL = 'apt-get install -y bubblewrap socat';

/**
 * Reads `AGENT_PIPELINE_SANDBOX`. @default `auto`
 * @throws Error naming the variable, its value and what is allowed
 */
export function sandboxModeFromEnv(env: NodeJS.ProcessEnv): SandboxMode {
  const raw = (env[SANDBOX_VARIABLE] ?? '').trim().toLowerCase();
  if (raw === '') return 'auto';
  if ((SANDBOX_MODES as readonly string[]).includes(raw)) return raw as SandboxMode;
  throw new Error(`[CONFIG_INVALID] ${SANDBOX_VARIABLE}=${env[SANDBOX_VARIABLE]} is not one of ${SANDBOX_MODES.join(', ')}; unset it for the default (auto)`);
}

/** The sandbox's programs missing on this host (always none outside Linux: macOS has Seatbelt built in). */
export async function missingSandboxPackages(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): Promise<string[]> {
  if (platform !== 'linux') return [];
  const commands: Record<(typeof SANDBOX_PACKAGES)[number], string> = { bubblewrap: 'bwrap', socat: 'socat' };
  const found = await Promise.all(SANDBOX_PACKAGES.map(async (pkg) => ((await findExecutable(commands[pkg], env)) ? undefined : pkg)));
  return found.filter((pkg): pkg is (typeof SANDBOX_PACKAGES)[number] => pkg !== undefined);
}

/**
 * Whether bubblewrap can make the namespaces the sandbox needs on this host: a container's default seccomp profile, a
 * masked /proc or a kernel that restricts unprivileged user namespaces stops it even with the packages installed.
 * Resolves to what bubblewrap said when it could not, else undefined (also outside Linux).
 */
export async function probeSandbox(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): Promise<string | undefined> {
  if (platform !== 'linux') return undefined;
  const bwrap = await findExecutable('bwrap', env);
  if (!bwrap) return 'bubblewrap is not installed';
  const probe = await execa(bwrap, ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--unshare-all', '--die-with-parent', '--', 'true'], {
    reject: false,
    timeout: 10_000,
    stdin: 'ignore',
    env: { PATH: env.PATH ?? '' },
    extendEnv: false,
  });
  return probe.exitCode === 0 ? undefined : (String(probe.stderr).trim().split('\n').at(-1) ?? '') || `bwrap exited with code ${probe.exitCode}`;
}

/** What a host offers the sandbox: the packages it lacks, or why bubblewrap cannot make its namespaces there. */
export interface SandboxHost {
  missing: string[];
  refused?: string;
}

/** Checks a host: its packages, then (with them) whether bubblewrap can start there. */
export async function checkSandboxHost(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): Promise<SandboxHost> {
  const missing = await missingSandboxPackages(env, platform);
  if (missing.length > 0) return { missing };
  const refused = await probeSandbox(env, platform);
  return refused ? { missing, refused } : { missing };
}

/** A check of the host made once, when first asked, for a worker's life: the host does not change under it. */
export function sandboxHostOnce(env: NodeJS.ProcessEnv): () => Promise<SandboxHost> {
  let checked: Promise<SandboxHost> | undefined;
  return () => (checked ??= checkSandboxHost(env));
}

/** What the worker decided about one attempt's sandbox. */
export interface SandboxDecision {
  /** Whether the settings turn the sandbox on. */
  enabled: boolean;
  /** Said in the stage result (and so in `status`) when the stage runs with less than it asked for. */
  warnings: string[];
  /** With `required`: why the host cannot sandbox the stage, which fails it (`SANDBOX_UNAVAILABLE`). */
  unavailable?: { reason: string; missing: string[] };
}

/** Why a host cannot sandbox, in words, with what to do. */
function describeUnavailable(host: SandboxHost): string | undefined {
  if (host.missing.length > 0) return `${host.missing.join(' and ')} ${host.missing.length > 1 ? 'are' : 'is'} not installed on the worker`;
  if (host.refused) return `bubblewrap cannot create the sandbox's namespaces on the worker (${host.refused})`;
  return undefined;
}

/** Decides whether an attempt is sandboxed, from the worker's mode, the stage's option and the host. */
export function decideSandbox(stage: ResolvedStage, mode: SandboxMode, host: SandboxHost): SandboxDecision {
  const option = stage.sandbox;
  const asked = option === undefined ? stageMayUseBash(stage) : typeof option === 'boolean' ? option : option.enabled !== false;
  const unavailable = describeUnavailable(host);
  if (mode === 'off') return { enabled: false, warnings: [] };
  if (mode === 'required') {
    // A stage that cannot run Bash has nothing to sandbox: it is never failed for the host, and not slowed by the
    // sandbox's start-up (its proxy adds about 0.1 s to every agent's start) unless the pipeline asks for it.
    if (!stageMayUseBash(stage)) return { enabled: option !== undefined && asked && unavailable === undefined, warnings: [] };
    const warnings = asked ? [] : [`the worker requires the sandbox (${SANDBOX_VARIABLE}=required), so the stage's \`sandbox: false\` was overruled`];
    return { enabled: true, warnings, ...(unavailable ? { unavailable: { reason: unavailable, missing: host.missing } } : {}) };
  }
  if (!asked) return { enabled: false, warnings: [] };
  if (unavailable) {
    const fix = host.missing.length > 0 ? `install with \`${SANDBOX_INSTALL}\`` : 'see docs/deployment.md for containers';
    return {
      enabled: false,
      warnings: [`the agent's Bash ran WITHOUT Claude Code's sandbox: ${unavailable} (${fix}, or set ${SANDBOX_VARIABLE}=required to fail such stages instead)`],
    };
  }
  return { enabled: true, warnings: [] };
}

type Json = Record<string, unknown>;

/** The operator's settings (`AGENT_PIPELINE_CLAUDE_SETTINGS`: a file, or inline JSON), as an object. */
export async function readOperatorSettings(env: NodeJS.ProcessEnv): Promise<Json> {
  const raw = env[SETTINGS_VARIABLE]?.trim();
  if (!raw) return {};
  const inline = raw.startsWith('{');
  let parsed: unknown;
  try {
    parsed = JSON.parse(inline ? raw : await readFile(raw, 'utf8'));
  } catch (err) {
    const what = inline ? 'its inline JSON' : `the file ${raw}`;
    throw new Error(`${SETTINGS_VARIABLE}: cannot read ${what} as JSON (${(err as Error).message.split('\n')[0]}); give a settings file or a JSON object`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`${SETTINGS_VARIABLE} must hold a JSON object`);
  return parsed as Json;
}

const objectAt = (value: unknown): Json => (value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {});

/**
 * The merged settings: the operator's, then the pipeline's sandbox options, then the worker's rules. With the sandbox
 * on nothing below weakens it: no unsandboxed escape hatch, Bash still limited by `allowedTools` and the permission
 * mode unless the pipeline asks for `autoAllowBash`, and with `required` the CLI refuses to start without a sandbox.
 */
export function mergeAgentSettings(operator: Json, stage: ResolvedStage, decision: SandboxDecision, mode: SandboxMode): Json {
  const option = typeof stage.sandbox === 'object' ? stage.sandbox : {};
  const sandbox = objectAt(operator.sandbox);
  if (!decision.enabled) {
    // Off: the operator's own sandbox settings, if any, stay as they were (an operator may still run one).
    return mode === 'off' || Object.keys(sandbox).length === 0 ? operator : { ...operator, sandbox: { ...sandbox, enabled: false } };
  }
  const network = objectAt(sandbox.network);
  const operatorDomains = Array.isArray(network.allowedDomains) ? (network.allowedDomains as unknown[]).filter((d) => typeof d === 'string') : [];
  const allowedDomains = [...new Set([...operatorDomains, ...(option.allowedDomains ?? [])])];
  const enforced: Json = {
    ...sandbox,
    enabled: true,
    network: { ...network, allowedDomains },
    allowUnsandboxedCommands: false,
    autoAllowBashIfSandboxed: option.autoAllowBash === true,
    failIfUnavailable: mode === 'required',
  };
  if (mode === 'required') Object.assign(enforced, REQUIRED_OVERRIDES, { filesystem: { ...objectAt(sandbox.filesystem), disabled: false } });
  return { ...operator, sandbox: enforced };
}

/**
 * What `required` also turns off in the operator's sandbox settings, each a way around the sandbox the CLI itself names
 * as weakening: commands run outside it, the host's /proc shown inside it (the worker's environment with it), a looser
 * network lock. An operator who needs one (a container without user namespaces) runs with `auto` and says so.
 */
const REQUIRED_OVERRIDES = { excludedCommands: [], enableWeakerNestedSandbox: false, enableWeakerNetworkIsolation: false } as const;

/**
 * Writes the attempt's settings file in `stageDir` (mode 0600) and returns its path. A file that already holds the same
 * settings is left as it is, so an agent started ahead of time for the stage still matches it.
 */
export async function writeAgentSettings(stageDir: string, settings: Json): Promise<string> {
  const file = path.join(stageDir, 'settings.json');
  const text = `${JSON.stringify(settings, null, 2)}\n`;
  const current = await readFile(file, 'utf8').catch(() => undefined);
  if (current !== text) {
    await mkdir(stageDir, { recursive: true });
    // Created 0600 from the start (never readable by others, not even briefly), then renamed into place.
    const temp = `${file}.${randomUUID()}.tmp`;
    try {
      await writeFile(temp, text, { mode: 0o600 });
      await rename(temp, file);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
  }
  // An existing file may have been made by an earlier version, or touched by the agent: its mode is set either way.
  await chmod(file, 0o600);
  return file;
}

/** The attempt's settings file and what was decided about its sandbox. */
export interface AgentSettingsFile {
  file: string;
  sandbox: SandboxDecision;
}

/**
 * Decides the attempt's sandbox, merges its settings and writes them in `stageDir`, with the permission rules `denied`
 * (see own-folder-rules.ts) added to what the file tools may never do.
 * @throws the `SANDBOX_UNAVAILABLE` failure when the worker requires the sandbox and the host lacks its packages,
 * `CONFIG_INVALID` when the operator's settings cannot be read
 */
export async function prepareAgentSettings(
  stage: ResolvedStage,
  env: NodeJS.ProcessEnv,
  mode: SandboxMode,
  stageDir: string,
  host: () => Promise<SandboxHost> = () => checkSandboxHost(env),
  denied: string[] = [],
): Promise<AgentSettingsFile> {
  const sandbox = decideSandbox(stage, mode, mode === 'off' ? { missing: [] } : await host());
  if (sandbox.unavailable) {
    const { reason, missing } = sandbox.unavailable;
    const install = missing.length > 0 ? `install ${missing.join(' and ')} on the worker (\`apt-get install -y ${missing.join(' ')}\` on Debian or Ubuntu) and restart it` : 'give the worker user namespaces (in a container: docs/deployment.md)';
    throw stageFailure({
      type: 'SANDBOX_UNAVAILABLE',
      stageId: stage.id,
      message: `the worker requires Claude Code's sandbox (${SANDBOX_VARIABLE}=required), and ${reason}`,
      hint: `${install}, or, on a worker only you use, set ${SANDBOX_VARIABLE}=auto`,
      details: { missingPackages: missing },
    });
  }
  let operator: Json;
  try {
    operator = await readOperatorSettings(env);
  } catch (err) {
    throw stageFailure({ type: 'CONFIG_INVALID', stageId: stage.id, message: (err as Error).message, hint: `fix ${SETTINGS_VARIABLE} in the environment of the worker and restart it` });
  }
  const file = await writeAgentSettings(stageDir, withDeniedRules(mergeAgentSettings(operator, stage, sandbox, mode), denied));
  return { file, sandbox };
}
