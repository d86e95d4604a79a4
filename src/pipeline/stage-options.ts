import type { PERMISSION_MODES } from './agent-access-schema.js';
import { COMMAND_BACKEND, isCommandStage } from './command-stage.js';
import { toMilliseconds } from './duration.js';
import { INPUT_TEMPLATE } from './input-template.js';
import { mergeRetry } from './retry-policy.js';
import type { PipelineDefinition } from './schema.js';
import type { BackendName } from './stage-options-schema.js';
import type { StageDefinition, StageNeed, TemplateSyntax } from './stage-schema.js';

/** A stage with every option decided: file value, else pipeline `defaults`, else these built-ins. */
export interface ResolvedStage
  extends Omit<StageDefinition, 'timeout' | 'heartbeatTimeout' | 'stallTimeout' | 'firstOutputTimeout' | 'prompt' | 'permissionMode' | 'maxBudgetUsd'> {
  /** Claude Code's permission mode (a `{{inputs.NAME}}` one filled for the run; unfilled, the default). */
  permissionMode?: PermissionMode;
  /** The stage's spending cap (a `{{inputs.NAME}}` one filled for the run; unfilled, none). @unit US dollars */
  maxBudgetUsd?: number;
  /** The step template; empty when the agent file alone says what to do. */
  prompt: string;
  /** True for a stage with neither agent nor prompt: only a person's approval, no agent runs. */
  gateOnly: boolean;
  /**
   * Options the stage itself set in the file, as opposed to inherited from `defaults`. An agent
   * file's frontmatter (`model`, `tools`, `backend`) fills only the others: stage > agent > defaults.
   */
  setByStage?: string[];
  backend: BackendName;
  model: string;
  /** Start-to-close timeout of one attempt. @unit milliseconds */
  timeoutMs: number;
  /** @unit milliseconds */
  heartbeatTimeoutMs: number;
  /** No output for this long kills the agent as stalled. @unit milliseconds */
  stallTimeoutMs: number;
  /** Like `stallTimeoutMs`, before the agent's first output. @unit milliseconds */
  firstOutputTimeoutMs: number;
  retries: number;
  contractRetries: number;
  /** API backend: continuations of an answer cut off at `maxTokens`. */
  maxContinuations: number;
  onPermissionDenied: 'fail' | 'ask' | 'ignore';
  onFailure: 'fail' | 'ask';
  /** A `BLOCKED:` answer: `wait` for a person, or `fail` the run with `AGENT_BLOCKED`. */
  onBlocked: 'wait' | 'fail';
  /** As written (ids or `{stage, allowFailure}`); `needIds` in graph.ts gives the ids. */
  needs: StageNeed[];
  /** `none`: no report block; the answer's last paragraph is the summary. */
  contract: 'json' | 'none';
  /** The stage's, else the pipeline's, else `strict`. */
  templateSyntax: TemplateSyntax;
  /** A stage from the pipeline's `finally:` list: it runs after the run has ended. */
  isFinally?: boolean;
}

/** Built-in defaults, chosen for unattended runs of real agents. */
export const STAGE_DEFAULTS = {
  backend: 'claude-cli',
  model: 'sonnet',
  timeout: '30m',
  heartbeatTimeout: '2m',
  stallTimeout: '5m',
  firstOutputTimeout: '5m',
  retries: 3,
  contractRetries: 1,
  maxContinuations: 2,
  onPermissionDenied: 'ignore',
  onFailure: 'fail',
  onBlocked: 'wait',
  contract: 'json',
  templateSyntax: 'strict',
} as const;

type PermissionMode = (typeof PERMISSION_MODES)[number];

/** A value still `{{inputs.NAME}}`: the run fills it (stage-option-inputs.ts); a pipeline read without a run has none. */
const unfilled = (value: unknown): value is string => typeof value === 'string' && INPUT_TEMPLATE.test(value);

/**
 * The stage's options decided. Options given as `{{inputs.NAME}}` are filled for a run before this
 * (`fillStageOptions`); left unfilled (a pipeline read without a run), they count as not set.
 */
export function resolveStage(pipeline: PipelineDefinition, stage: StageDefinition, isFinally = false): ResolvedStage {
  const defaults = pipeline.defaults ?? {};
  const { timeout: given, heartbeatTimeout, stallTimeout, firstOutputTimeout, permissionMode, maxBudgetUsd, ...rest } = { ...defaults, ...stage };
  const timeout = unfilled(given) ? undefined : given;
  return {
    ...rest,
    ...(permissionMode === undefined || unfilled(permissionMode) ? {} : { permissionMode }),
    ...(maxBudgetUsd === undefined || unfilled(maxBudgetUsd) ? {} : { maxBudgetUsd }),
    prompt: stage.prompt ?? '',
    gateOnly: stage.prompt === undefined && stage.agent === undefined && !isCommandStage(stage),
    setByStage: Object.keys(stage),
    // A command stage has no agent: the worker's command runner, and no model (the activity's summary then names none).
    backend: isCommandStage(stage) ? COMMAND_BACKEND : (stage.backend ?? defaults.backend ?? STAGE_DEFAULTS.backend),
    model: isCommandStage(stage) ? '' : (stage.model ?? defaults.model ?? STAGE_DEFAULTS.model),
    timeoutMs: toMilliseconds(timeout ?? STAGE_DEFAULTS.timeout),
    heartbeatTimeoutMs: toMilliseconds(heartbeatTimeout ?? STAGE_DEFAULTS.heartbeatTimeout),
    stallTimeoutMs: toMilliseconds(stallTimeout ?? STAGE_DEFAULTS.stallTimeout),
    firstOutputTimeoutMs: toMilliseconds(firstOutputTimeout ?? STAGE_DEFAULTS.firstOutputTimeout),
    retries: stage.retries ?? defaults.retries ?? STAGE_DEFAULTS.retries,
    contractRetries: stage.contractRetries ?? defaults.contractRetries ?? STAGE_DEFAULTS.contractRetries,
    maxContinuations: stage.maxContinuations ?? defaults.maxContinuations ?? STAGE_DEFAULTS.maxContinuations,
    onPermissionDenied: stage.onPermissionDenied ?? defaults.onPermissionDenied ?? STAGE_DEFAULTS.onPermissionDenied,
    onFailure: stage.onFailure ?? defaults.onFailure ?? STAGE_DEFAULTS.onFailure,
    onBlocked: stage.onBlocked ?? defaults.onBlocked ?? STAGE_DEFAULTS.onBlocked,
    // Field by field: `defaults.retry.nonRetryable` with a stage's own `initialInterval` keeps both.
    retry: mergeRetry(defaults.retry, stage.retry),
    needs: stage.needs ?? [],
    contract: stage.contract ?? defaults.contract ?? STAGE_DEFAULTS.contract,
    templateSyntax: stage.templateSyntax ?? pipeline.templateSyntax ?? STAGE_DEFAULTS.templateSyntax,
    ...(isFinally ? { isFinally } : {}),
  };
}
