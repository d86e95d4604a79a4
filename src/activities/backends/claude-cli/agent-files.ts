import path from 'node:path';
import type { ResolvedStage } from '../../../pipeline/stage-options.js';
import { writeFileAtomic, type RunWorkspace } from '../../workspace/run-workspace.js';
import { workerFolderOfRun } from '../../workspace/worker-folder.js';
import type { BackendRequest } from '../stage-backend.js';
import type { CliFiles } from './args.js';
import { prepareAgentSettings, type AttemptSandbox } from './agent-settings.js';
import { readScopeOf } from './agent-reads.js';
import { writeMcpConfig } from './mcp-config.js';
import { mcpServersSandbox } from './command-sandbox.js';
import { ownFolderDenyRules } from './own-folder-rules.js';

/** What an agent's launch files are made from: the stage, its run's workspace and the worker's settings. */
export interface AgentFilesRequest {
  stage: ResolvedStage;
  workspace: RunWorkspace;
  /** The stage's own folder, where the files are written. */
  stageDir: string;
  /** The agent's environment: MCP servers started by the CLI get it. */
  agentEnv: Record<string, string>;
  binary: string;
  workerEnv: NodeJS.ProcessEnv;
  sandbox: AttemptSandbox;
  workspacesRoot?: string;
  addDirs?: string[];
  mcpServers?: BackendRequest['mcpServers'];
  system?: string;
}

/**
 * Writes the files an agent's command line names: its settings (sandbox and read limits), MCP configuration and system
 * prompt. An attempt and a process started ahead of time for it write them alike, so that their command lines match.
 * @throws StageFailure when the stage cannot start (its sandbox unavailable, `sandbox: false` refused, a project helper)
 */
export async function writeAgentFiles(r: AgentFilesRequest): Promise<{ files: CliFiles; warnings: string[] }> {
  const { stage, workspace, stageDir } = r;
  const scope = readScopeOf(workspace, stage.id, r.addDirs, r.workspacesRoot);
  const denied = ownFolderDenyRules(workerFolderOfRun(workspace.bookkeeping), r.workerEnv);
  const settings = await prepareAgentSettings(stage, r.workerEnv, scope, r.sandbox, denied);
  const sandboxPrefix = mcpServersSandbox(stage, { workerEnv: r.workerEnv, scope, attempt: r.sandbox, denied, claudeBinary: r.binary });
  const mcpConfig = await writeMcpConfig({ stageId: stage.id, pipelineServers: r.mcpServers, stageServers: stage.mcpServers, dir: stageDir, cwd: workspace.dir, env: r.agentEnv, workerEnv: r.workerEnv, sandboxPrefix });
  const systemPrompt = r.system ? path.join(stageDir, 'system-prompt.md') : undefined;
  if (systemPrompt) await writeFileAtomic(systemPrompt, r.system!);
  return { files: { mcpConfig, systemPrompt, settings: settings.file }, warnings: [...settings.sandbox.warnings] };
}
