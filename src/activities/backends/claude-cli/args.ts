import { agentAuthVariables, extraAgentVariables } from './agent-auth.js';
import type { BackendRequest } from '../stage-backend.js';
import type { SessionPlan } from './session.js';
import { STAGE_MARKER, WORKER_MARKER } from '../../process/sweep.js';

/** Variables passed through to the agent; everything else in the worker's environment stays out. */
const PASSED_ENV = [
  'PATH', 'HOME', 'USER', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR', 'TERM', 'SHELL',
  'ANTHROPIC_BASE_URL', 'API_TIMEOUT_MS',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'NODE_EXTRA_CA_CERTS',
  'IS_SANDBOX',
];

/** Files written for the command line. */
export interface CliFiles {
  /** `--mcp-config`. */
  mcpConfig?: string;
  /** `--append-system-prompt-file`: a file, because one argument is limited to 128 KiB on Linux. */
  systemPrompt?: string;
  /**
   * `--settings`: the attempt's settings file (agent-settings.ts), merging the operator's `AGENT_PIPELINE_CLAUDE_SETTINGS`
   * (e.g. an `apiKeyHelper`), the pipeline's sandbox options and the worker's rules. A path, never JSON: argv is public.
   */
  settings?: string;
  /**
   * `--input-format stream-json`: the prompt comes as a JSON user message. A warm process needs it: with plain
   * stdin the CLI gives up after 3 s without data, while with stream-json it waits for its message as long as it takes.
   */
  streamInput?: boolean;
}

/** The prompt as the one user message `--input-format stream-json` reads, ending the line. */
export function streamJsonPrompt(prompt: string): string {
  return `${JSON.stringify({ type: 'user', message: { role: 'user', content: prompt } })}\n`;
}

/**
 * `--name=value` for each value. Values come from pipeline files and from people approving tools: joined to their flag
 * with `=`, a value such as `--dangerously-skip-permissions` stays a value and never becomes a flag of its own.
 */
function flagValues(flag: string, values: readonly string[] | undefined): string[] {
  return (values ?? []).map((value) => `${flag}=${value}`);
}

/**
 * The `claude` command line of an attempt: print mode, streaming JSON with partial messages (so stall
 * detection sees text while a long message is still being written), and the stage's options.
 */
export function buildCliArgs(request: BackendRequest, session: SessionPlan, files: CliFiles): string[] {
  const { stage } = request;
  const args = ['-p', '--output-format', 'stream-json', '--verbose', '--include-partial-messages', `--model=${stage.model}`];
  // No hooks, plugins, auto-memory or CLAUDE.md discovery: the stage's context all comes in through the flags below and stdin.
  if (stage.bare) args.push('--bare');
  args.push(...(session.resume ? ['--resume', session.sessionId] : ['--session-id', session.sessionId]));
  const asks = asksMidTurn(stage);
  args.push('--permission-mode', cliPermissionMode(stage));
  // The CLI's permission requests come to us on stdout and our answers go back on stdin (docs/permission-prompts.md).
  if (asks) args.push('--permission-prompt-tool', 'stdio');
  args.push(...flagValues('--allowedTools', stage.allowedTools), ...flagValues('--disallowedTools', stage.disallowedTools));
  if (stage.fallbackModel) args.push(`--fallback-model=${stage.fallbackModel}`);
  const budget = request.maxBudgetUsd ?? stage.maxBudgetUsd;
  if (budget !== undefined) args.push('--max-budget-usd', String(budget));
  // MCP servers come only from the pipeline (`--mcp-config`, each in the sandbox): a workspace's `.mcp.json` is what a
  // repository or an earlier stage put there, and Claude Code would start its servers outside the sandbox.
  args.push('--strict-mcp-config');
  if (files.mcpConfig) args.push(`--mcp-config=${files.mcpConfig}`);
  args.push(...flagValues('--add-dir', request.addDirs));
  if (files.systemPrompt) args.push(`--append-system-prompt-file=${files.systemPrompt}`);
  if (files.settings) args.push(`--settings=${files.settings}`);
  if (files.streamInput || asks) args.push('--input-format', 'stream-json');
  return args;
}

/** Whether the stage's agent asks a person mid-turn (`onPermissionRequest: ask`). */
export function asksMidTurn(stage: Pick<BackendRequest['stage'], 'onPermissionRequest'>): boolean {
  return stage.onPermissionRequest === 'ask';
}

/**
 * The CLI's `--permission-mode`. `dontAsk` (the default) refuses whatever its rules do not allow without asking anyone,
 * so a stage that asks runs in `manual`, where those calls come to us as permission requests instead.
 */
function cliPermissionMode(stage: BackendRequest['stage']): string {
  const mode = stage.permissionMode ?? 'dontAsk';
  return asksMidTurn(stage) && mode === 'dontAsk' ? 'manual' : mode;
}

/** What marks an agent's processes, so they can be found and stopped (see process/sweep.ts). */
export interface AgentMarkers {
  stage: string;
  worker: string;
}

/** The agent's environment: the allow-list, the run's Claude config dir, and the process markers. */
export function agentEnvironment(env: NodeJS.ProcessEnv, claudeConfigDir: string, markers: AgentMarkers): Record<string, string> {
  // Every way Claude Code authenticates (agent-auth.ts), AWS's only with Bedrock on. AGENT_PIPELINE_AGENT_ENV adds
  // variables a stage's tools need (GH_TOKEN for `gh`, SSH_AUTH_SOCK for git pushes).
  const names = [...PASSED_ENV, ...agentAuthVariables(env), ...extraAgentVariables(env)];
  const passed = Object.fromEntries(names.filter((k) => env[k] !== undefined).map((k) => [k, env[k] as string]));
  return {
    ...passed,
    CLAUDE_CONFIG_DIR: claudeConfigDir,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    // Temporal owns retries: they are durable and visible there, while the CLI's own loop waits up to 180 s unseen.
    CLAUDE_CODE_MAX_RETRIES: env.CLAUDE_CODE_MAX_RETRIES ?? '0',
    [STAGE_MARKER]: markers.stage,
    [WORKER_MARKER]: markers.worker,
  };
}
