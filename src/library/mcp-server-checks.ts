import { envNameSchema } from '../pipeline/command-stage.js';
import { localHostMessage, localMcpHostsOf } from '../pipeline/local-hosts.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import type { StageDefinition } from '../pipeline/stage-schema.js';

/** A problem of a pipeline's `mcpServers`: where (a path into the pipeline) and what. */
export interface McpServerProblem {
  path: PropertyKey[];
  message: string;
}

type Servers = StageDefinition['mcpServers'];

/** Where a pipeline sets `mcpServers` (its top level, each stage, each `finally` stage), with the map each holds. */
function mcpServerHolders(pipeline: PipelineDefinition): [PropertyKey[], Servers][] {
  return [
    [[], pipeline.mcpServers],
    ...pipeline.stages.map((s, i): [PropertyKey[], Servers] => [['stages', i], s.mcpServers]),
    ...(pipeline.finally ?? []).map((s, i): [PropertyKey[], Servers] => [['finally', i], s.mcpServers]),
  ];
}

/**
 * What the workers would refuse in a pipeline's MCP servers, checked where `validate` can name the line: an `env` name
 * of a stdio server that is not a variable name (the worker sets them inside the stage's sandbox with `env NAME=value`),
 * and, unless `allowLocal` (AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL), an HTTP or SSE `url` on this machine or a cloud
 * metadata host (Claude Code connects to those itself, outside the sandbox).
 */
export function findMcpServerProblems(pipeline: PipelineDefinition, allowLocal: boolean): McpServerProblem[] {
  return mcpServerHolders(pipeline).flatMap(([at, servers]) => [
    ...Object.entries(servers ?? {}).flatMap(([name, server]) =>
      ('env' in server ? Object.keys(server.env ?? {}) : [])
        .filter((key) => !envNameSchema.safeParse(key).success)
        .map((key) => ({
          path: [...at, 'mcpServers', name, 'env', key],
          message: `"${key}" is not a variable name (letters, digits and _, not starting with a digit): the server's variables are set in the stage's sandbox, which refuses it; rename it`,
        })),
    ),
    ...(allowLocal ? [] : localMcpHostsOf(servers).map((entry) => ({ path: [...at, ...entry.path], message: localHostMessage(entry) }))),
  ]);
}
