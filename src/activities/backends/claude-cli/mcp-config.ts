import path from 'node:path';
import type { McpServer } from '../../../pipeline/agent-access-schema.js';
import { stageFailure } from '../../failures.js';
import { writeFileAtomic } from '../../workspace/run-workspace.js';
import { findExecutable } from '../../process/find-executable.js';
import { refuseLocalMcpHosts } from './sandbox-network.js';

/** What {@link writeMcpConfig} needs. */
export interface McpConfigOptions {
  stageId: string;
  /** Pipeline-level servers. */
  pipelineServers?: Record<string, McpServer>;
  /** The stage's own servers; an entry with the same name wins. */
  stageServers?: Record<string, McpServer>;
  /** Where the config file goes: the stage's bookkeeping folder. */
  dir: string;
  /** The agent's working directory, against which relative commands resolve. */
  cwd: string;
  /** The agent's environment, whose PATH the CLI searches for commands. */
  env: NodeJS.ProcessEnv;
  /** The worker's environment: whether its operator lets remote servers be on this host (sandbox-network.ts). */
  workerEnv: NodeJS.ProcessEnv;
  /**
   * Starts each stdio server in the sandbox: the argv placed before its command (`srt --settings FILE --`, see
   * command-sandbox.ts). Empty when the stage's sandbox is off, and then the servers run as the pipeline wrote them.
   */
  sandboxPrefix: () => Promise<string[]>;
}

/** A variable name `env` takes as one, never as an option or a command. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Merges the pipeline's and the stage's MCP servers (the stage wins), checks that every stdio
 * server's command is installed, puts each in the sandbox, and writes the file for `--mcp-config`. Returns its path, or
 * `undefined` when the stage has no MCP servers.
 * @throws CONFIG_INVALID naming the server and the command when a command is not found, or the servers whose `url` is
 * on this host when the worker does not allow it, before any agent starts
 */
export async function writeMcpConfig(options: McpConfigOptions): Promise<string | undefined> {
  const servers = { ...options.pipelineServers, ...options.stageServers };
  if (Object.keys(servers).length === 0) return undefined;
  refuseLocalMcpHosts(options.stageId, servers, options.workerEnv);
  for (const [name, server] of Object.entries(servers)) {
    if (!('command' in server)) continue;
    if (await findExecutable(server.command, options.env, options.cwd)) continue;
    const where = `mcpServers.${name}.command${options.stageServers?.[name] ? ` of stage ${options.stageId}` : ''}`;
    throw stageFailure({
      type: 'CONFIG_INVALID',
      stageId: options.stageId,
      message: `MCP server "${name}" runs the command "${server.command}", which is not installed on this worker (not found on PATH=${options.env.PATH ?? ''})`,
      hint: `install it where the worker runs, or fix ${where} in the pipeline file`,
      details: { server: name, command: server.command },
    });
  }
  const prefix = Object.values(servers).some((server) => 'command' in server) ? await options.sandboxPrefix() : [];
  const launched = Object.fromEntries(Object.entries(servers).map(([name, server]) => [name, inSandbox(options.stageId, name, server, prefix)]));
  const file = path.join(options.dir, 'mcp-config.json');
  await writeFileAtomic(file, `${JSON.stringify({ mcpServers: launched }, null, 2)}\n`);
  return file;
}

/**
 * A stdio server as Claude Code starts it: its command behind the sandbox's prefix. Claude Code starts MCP servers
 * itself, outside the sandbox it puts around Bash, so the pipeline's command would otherwise run with the worker's
 * reach (its files, other processes' environments). The server's `env` goes to `env`, inside the sandbox: given to the
 * prefix's own process, a `NODE_OPTIONS` or `LD_PRELOAD` would run before the sandbox exists.
 */
function inSandbox(stageId: string, name: string, server: McpServer, prefix: string[]): McpServer {
  if (!('command' in server) || prefix.length === 0) return server;
  const variables = Object.entries(server.env ?? {});
  const bad = variables.find(([key]) => !ENV_NAME.test(key));
  if (bad) {
    throw stageFailure({
      type: 'CONFIG_INVALID',
      stageId,
      message: `MCP server "${name}" sets the variable "${bad[0]}", which is not a variable name (letters, digits and _, not starting with a digit)`,
      hint: `rename it in mcpServers.${name}.env in the pipeline file`,
      details: { server: name, variable: bad[0] },
    });
  }
  const [command, ...rest] = prefix;
  return { command, args: [...rest, 'env', '--', ...variables.map(([key, value]) => `${key}=${value}`), server.command, ...(server.args ?? [])] };
}
