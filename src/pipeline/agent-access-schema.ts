import { z } from 'zod';
import { durationSchema } from './duration-schema.js';
import { TOOL_NAME } from './tool-names.js';

/*
 * What a stage's agent may use and reach, as the pipeline file (a stage or `defaults`) sets it: tool rules, the
 * permission mode, mid-turn permission requests, Claude Code's sandbox around Bash, and MCP servers. Part of the
 * pipeline file schema (schema.ts).
 */

/** Claude Code's permission modes, which a stage's `permissionMode` names. */
export const PERMISSION_MODES = ['default', 'manual', 'acceptEdits', 'dontAsk', 'bypassPermissions', 'plan', 'auto'] as const;

/** A tool name or rule for Claude Code (`Read`, `Bash(npm test:*)`); never something `claude` would read as a flag. */
export const toolNameSchema = z.string().min(1).regex(TOOL_NAME, 'expected a tool name such as Read or "Bash(npm test:*)", not starting with "-"');

/** How long a mid-turn permission request or question (`onPermissionRequest: ask`) waits, and what then. */
export const permissionRequestSchema = z.strictObject({
  /** How long the agent waits for a person's decision. @default 10m; it must stay under the stage's `timeout` */
  timeout: durationSchema.optional(),
  /** `deny` the call (default; the agent goes on without it) or `fail` the stage. */
  onTimeout: z.enum(['deny', 'fail']).optional(),
});

/** A host name (or IP address) an agent's sandboxed Bash may reach, optionally with a leading `*.` wildcard. */
const domainSchema = z
  .string()
  .regex(/^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$|^\[?[0-9A-Fa-f:.]+\]?$/, 'expected a host name such as github.com or *.npmjs.org, without a scheme, port or path');

/**
 * CLI stages: Claude Code's own sandbox around the agent's Bash (bubblewrap and socat on Linux, Seatbelt on macOS).
 * `true` (the default for a stage that may use Bash), `false` to turn it off where the worker allows it, or options.
 */
export const sandboxSchema = z.union([
  z.boolean(),
  z.strictObject({
    /** Run the agent's Bash in Claude Code's sandbox; `false` only on workers that allow it (AGENT_PIPELINE_SANDBOX=permissive). @default true */
    enabled: z.boolean().optional(),
    /** Hosts the agent's Bash may reach through the sandbox's proxy; none when omitted (the model endpoint always works). */
    allowedDomains: z.array(domainSchema).optional(),
    /** Let Claude Code run sandboxed Bash commands without `allowedTools` allowing them. @default false */
    autoAllowBash: z.boolean().optional(),
  }),
]);
export type SandboxOption = z.infer<typeof sandboxSchema>;

/** An MCP server as Claude Code's `--mcp-config` takes it: a command to spawn, or a URL. */
export const mcpServerSchema = z.union([
  z.strictObject({
    type: z.literal('stdio').optional(),
    command: z.string().min(1),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
  }),
  z.strictObject({
    type: z.enum(['http', 'sse']),
    url: z.string().url(),
    headers: z.record(z.string(), z.string()).optional(),
  }),
]);
export type McpServer = z.infer<typeof mcpServerSchema>;
