import path from 'node:path';
import type { McpServer } from '../../../pipeline/agent-access-schema.js';
import { stageFailure } from '../../failures.js';
import { writeFileAtomic } from '../../workspace/run-workspace.js';
import { findExecutable } from '../../process/find-executable.js';

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
}

/**
 * Merges the pipeline's and the stage's MCP servers (the stage wins), checks that every stdio
 * server's command is installed, and writes the file for `--mcp-config`. Returns its path, or
 * `undefined` when the stage has no MCP servers.
 * @throws CONFIG_INVALID naming the server and the command when a command is not found, before any agent starts
 */
export async function writeMcpConfig(options: McpConfigOptions): Promise<string | undefined> {
  const servers = { ...options.pipelineServers, ...options.stageServers };
  if (Object.keys(servers).length === 0) return undefined;
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
  const file = path.join(options.dir, 'mcp-config.json');
  await writeFileAtomic(file, `${JSON.stringify({ mcpServers: servers }, null, 2)}\n`);
  return file;
}
