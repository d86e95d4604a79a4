import { createRequire } from 'node:module';
import path from 'node:path';
import type { ResolvedStage } from '../../../pipeline/stage-options.js';
import { buildAgentSettings, writeAgentSettings, type AttemptSandbox } from './agent-settings.js';
import type { AgentReadScope } from './agent-reads.js';
import type { SandboxDecision } from './sandbox-decision.js';
import { type Json, objectAt, stringsAt } from './settings-json.js';

/*
 * The sandbox around a command a run chooses (a command stage's command, a pipeline's stdio MCP server): the one Claude
 * Code puts around its agents' Bash, from the same merged settings (the operator's, the stage's `sandbox` option, what
 * the worker enforces, the read limits), applied by Anthropic's `@anthropic-ai/sandbox-runtime` (the library Claude
 * Code's sandbox is built on) through its `srt` command.
 *
 * One `srt` process per command, started in the command's workspace, rather than the library's `SandboxManager` in the
 * worker: the manager is one per process (one network allow list for every stage running at once), and it computes the
 * files no command may write (`.bashrc`, `.git/hooks`, `.vscode`…) from `process.cwd()`, which in a worker is not the
 * workspace. `srt` in the workspace is what Claude Code itself is to its Bash: one sandbox per agent, there.
 */

/** The `srt` command of the installed package: run by this worker's node. */
function srtCli(): string {
  const require = createRequire(import.meta.url);
  return path.join(path.dirname(require.resolve('@anthropic-ai/sandbox-runtime/package.json')), 'dist', 'cli.js');
}

/** How the command is started: with the sandbox's prefix (`srt --settings FILE --`), or without one. */
export interface CommandLaunchPrefix {
  /** The argv placed before the command's own (empty when it runs unsandboxed). */
  prefix: string[];
  sandbox: SandboxDecision;
}

/** What the sandbox of a command needs besides its stage. */
export interface CommandSandboxOptions {
  workerEnv: NodeJS.ProcessEnv;
  scope: AgentReadScope;
  attempt: AttemptSandbox;
  /** Folders the command writes besides its workspace: its home. */
  writable: string[];
  /** Permission rules of the worker's own folders, as agents get them. */
  denied: string[];
  /** The Claude Code binary, whose bundled ripgrep the sandbox uses to find files no command may write. */
  claudeBinary?: string;
  /** The sandbox's settings file in the stage's folder. @default 'command-sandbox.json' */
  settingsFile?: string;
}

/**
 * Decides the command's sandbox as an agent's Bash's is decided (a command stage counts as one that runs Bash), and,
 * when it is on, writes the sandbox's settings (mode 0600) in the stage's folder and returns the `srt` prefix.
 * @throws the failures of `buildAgentSettings`: SANDBOX_OPT_OUT_REFUSED, SANDBOX_UNAVAILABLE, CONFIG_INVALID
 */
export async function prepareCommandSandbox(stage: ResolvedStage, options: CommandSandboxOptions): Promise<CommandLaunchPrefix> {
  // A command is Bash by another name: decided as a stage whose agent may run it, so `sandbox: false` is an opt-out.
  const asBash: ResolvedStage = { ...stage, allowedTools: ['Bash'], disallowedTools: [], permissionMode: 'dontAsk' };
  const { settings, sandbox } = await buildAgentSettings(asBash, options.workerEnv, options.scope, options.attempt, options.denied);
  if (!sandbox.enabled) return { prefix: [], sandbox };
  const config = runtimeConfig(objectAt(settings.sandbox), [options.scope.workspaceDir, ...options.writable], options.claudeBinary);
  const file = await writeAgentSettings(options.scope.stageDir, config, options.settingsFile ?? 'command-sandbox.json');
  return { prefix: [process.execPath, srtCli(), '--settings', file, '--'], sandbox };
}

/**
 * The sandbox runtime's configuration from Claude Code's `sandbox` settings (the runtime reads the same field names):
 * the network's hosts, what may be read and written. Reads and writes: the workspace and the command's own folders (its
 * home lies in the run's bookkeeping, which is hidden), plus what the operator's settings allow.
 */
export function runtimeConfig(sandbox: Json, writable: string[], claudeBinary: string | undefined): Json {
  const network = objectAt(sandbox.network);
  const filesystem = objectAt(sandbox.filesystem);
  return {
    network: {
      allowedDomains: stringsAt(network.allowedDomains),
      deniedDomains: stringsAt(network.deniedDomains),
      ...(network.allowUnixSockets === undefined ? {} : { allowUnixSockets: stringsAt(network.allowUnixSockets) }),
      ...(typeof network.allowLocalBinding === 'boolean' ? { allowLocalBinding: network.allowLocalBinding } : {}),
    },
    filesystem: {
      denyRead: stringsAt(filesystem.denyRead),
      allowRead: [...new Set([...stringsAt(filesystem.allowRead), ...writable])],
      allowWrite: [...new Set([...writable, ...stringsAt(filesystem.allowWrite)])],
      denyWrite: stringsAt(filesystem.denyWrite),
    },
    ...(sandbox.enableWeakerNestedSandbox === true ? { enableWeakerNestedSandbox: true } : {}),
    // Claude Code's binary is also ripgrep when started under that name, as Claude Code itself runs it.
    ...(claudeBinary ? { ripgrep: { command: claudeBinary, argv0: 'rg' } } : {}),
  };
}

/**
 * The prefix of a stage's stdio MCP servers (mcp-config.ts), computed when it has one: the stage's sandbox decided as
 * for a command, since an MCP server is a command the pipeline chose, run on the worker.
 */
export function mcpServersSandbox(stage: ResolvedStage, options: Omit<CommandSandboxOptions, 'writable' | 'settingsFile'>): () => Promise<string[]> {
  return async () => (await prepareCommandSandbox(stage, { ...options, writable: [], settingsFile: 'mcp-sandbox.json' })).prefix;
}
