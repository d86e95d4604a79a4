import { activityInfo, cancellationSignal, heartbeat } from '@temporalio/activity';
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import { readAgentOutput } from '../pipeline/contract.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { StageResult } from '../pipeline/stage-result.js';
import type { TemplateStage } from '../pipeline/template.js';
import type { AttemptProgress, BackendOutcome, BackendRequest } from './backends/backend.js';
import { stageFailure } from './failures.js';
import { assemblePrompt } from './prompt.js';
import { collectArtifacts, openRunWorkspace, snapshotFiles, writeFileAtomic, type FileSnapshot } from './workspace.js';

/** What the workflow sends for one stage attempt. */
export interface StageAttemptInput {
  runId: string;
  pipelineName: string;
  baseDir: string;
  stage: ResolvedStage;
  inputs: Record<string, string>;
  /** Completed earlier stages, as step templates and the prompt refer to them. */
  priorStages: Record<string, TemplateStage>;
  /** Pipeline-level settings every stage shares. */
  pipeline: Pick<PipelineDefinition, 'context' | 'systemPrompt' | 'mcpServers' | 'workspace'>;
  /** Review round: 1 the first time, +1 for each rework. */
  round: number;
  /** Continue this stage's earlier session with a message: a person's answer, granted tools, rework feedback. */
  continuation?: { kind: 'answer' | 'permission' | 'rework' | 'retry'; sessionId?: string; message: string };
  /** Reviewer feedback from earlier rounds, oldest first. */
  reworkHistory?: { round: number; reviewer: string; summary: string; feedback: unknown[] }[];
  /** What is left of the pipeline budget; the stage's own cap never exceeds it. @unit US dollars */
  budgetRemainingUsd?: number;
}

export type Backend = (request: BackendRequest) => Promise<BackendOutcome>;

export interface RunStageDependencies {
  /** Folder under which each run gets its workspace. */
  workspacesRoot: string;
  backends: Record<ResolvedStage['backend'], Backend>;
}

/** Attempts whose answer breaks the output contract are retried this many times before failing for good. */
const CONTRACT_RETRIES = 1;

/** Creates the activity that runs one attempt of one stage. */
export function createRunStage(deps: RunStageDependencies) {
  return async function runStage(input: StageAttemptInput): Promise<StageResult> {
    const { stage } = input;
    const { attempt, heartbeatDetails } = activityInfo();
    const previous = heartbeatDetails as AttemptProgress | undefined;
    const workspace = await openRunWorkspace(deps.workspacesRoot, input.runId);
    const stageDir = workspace.stageDir(stage.id);
    const baseline = await loadBaseline(path.join(stageDir, 'baseline.json'), workspace.dir);

    const prompt = await assemblePrompt({
      stage,
      baseDir: input.baseDir,
      pipelineName: input.pipelineName,
      context: {
        inputs: input.inputs,
        stages: input.priorStages,
        run: { id: input.runId, pipeline: input.pipelineName },
        attempt,
      },
    });
    const transcriptPath = path.join(stageDir, `attempt-${attempt}.jsonl`);
    const outcome = await deps.backends[stage.backend]({
      stage,
      prompt,
      workspace,
      attempt,
      resumeSessionId: previous?.sessionId,
      transcriptPath,
      signal: cancellationSignal(),
      heartbeat: (progress) => heartbeat(progress),
    });
    const artifacts = await collectArtifacts(workspace.dir, baseline);
    const reading = readAgentOutput(outcome.text);
    const common = {
      artifacts,
      sessionId: outcome.sessionId,
      usage: outcome.usage,
      costUsd: outcome.costUsd,
      numTurns: outcome.numTurns,
      durationMs: outcome.durationMs,
      warnings: outcome.warnings,
      transcript: path.relative(workspace.dir, transcriptPath),
      workspace: workspace.dir,
      attempt,
    };
    switch (reading.kind) {
      case 'report':
        return {
          ...common,
          status: reading.report.success ? 'completed' : 'failed',
          summary: reading.report.summary,
          outputs: reading.report.outputs,
          error: reading.report.error,
        };
      case 'needs_input':
        return { ...common, status: 'needs_input', summary: reading.question, outputs: {}, question: reading.question };
      case 'violation':
        throw stageFailure({
          type: 'OUTPUT_CONTRACT_VIOLATION',
          stageId: stage.id,
          message: `${reading.reason}; the agent must end with a fenced JSON block {"success", "summary", "outputs"}`,
          nonRetryable: attempt > CONTRACT_RETRIES,
          details: { answerTail: outcome.text.slice(-500), sessionId: outcome.sessionId, costUsd: outcome.costUsd },
        });
    }
  };
}

/**
 * The files that existed before the stage's first attempt. Kept on disk so that a retried attempt
 * still reports what an earlier, killed attempt wrote.
 */
async function loadBaseline(file: string, dir: string): Promise<FileSnapshot> {
  try {
    return new Map(JSON.parse(await readFile(file, 'utf8')) as [string, { bytes: number; mtimeMs: number }][]);
  } catch {
    const snapshot = await snapshotFiles(dir);
    await writeFileAtomic(file, JSON.stringify([...snapshot]));
    return snapshot;
  }
}
