import type { StageAttemptInput } from '../contracts/stage-attempt.js';
import { needIds } from '../pipeline/graph.js';
import { stagesReadyAfter } from '../pipeline/next-stages.js';
import { objectInputNames } from '../pipeline/object-inputs.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { StageRunnerContext } from './stage-runner-context.js';
import type { Continuation, Round, RunEnd } from './stage-round.js';
import { inlineTemplateValues, prewarmHints } from './template-values.js';

/** What one attempt's input is made of besides the run's state. */
export interface AttemptParts {
  round: Round;
  continuation: Continuation;
  /** How the run ended, for a `finally` stage's `{{run.…}}` values. */
  runEnd?: RunEnd;
  /** The stage's `limits:` keys, rendered. */
  leases?: StageAttemptInput['leases'];
}

/** The input of the stage's next attempt: O(the stage), the run's other values by reference (see template-values.ts). */
export function attemptInput(ctx: StageRunnerContext, stage: ResolvedStage, parts: AttemptParts): StageAttemptInput {
  const { tracker, input } = ctx;
  // Runs recorded before the patch sent every stage's results and all inputs to every stage (history grew with the
  // square of the stages); now only the stages it needs, the rest by reference (see template-values.ts).
  const byReference = ctx.byReference === true;
  const ended = stage.isFinally === true;
  const values = byReference ? inlineTemplateValues(tracker, input.inputs, needIds(stage), ended) : { inputs: input.inputs, priorStages: tracker.templateStages(ended) };
  const prewarm = ctx.stages && !stage.isFinally ? stagesReadyAfter(ctx.stages, stage.id, tracker.isStarted, tracker.isSatisfied) : undefined;
  return {
    ...tracker.ref(),
    pipelineName: input.pipeline.name,
    baseDir: input.baseDir,
    // Only the hash: the activity reads the files from the run's start event, so history holds them once.
    bundleHash: input.bundle?.hash,
    stage: withGranted(ctx, stage, parts.round),
    ...values,
    pipeline: {
      context: input.pipeline.context,
      systemPrompt: input.pipeline.systemPrompt,
      mcpServers: input.pipeline.mcpServers,
      workspace: input.pipeline.workspace,
      isolation: input.pipeline.isolation,
      promptsDir: input.pipeline.promptsDir,
    },
    round: parts.round.number,
    ...(stage.isFinally && parts.runEnd ? { runEnd: parts.runEnd } : {}),
    continuation: parts.continuation,
    reworkHistory: ctx.reviews.reworkHistory(stage.id),
    budgetRemainingUsd: stage.isFinally ? undefined : ctx.budget.remainingUsd(),
    prewarm: byReference ? prewarmHints(stage, prewarm) : prewarm,
    ...objectInputsOf(input.pipeline.inputs),
    ...(parts.leases ? { leases: parts.leases } : {}),
    ...signer(ctx),
    ...promptToken(ctx, stage),
  };
}

/** The stage with the tools people allowed in this round: after denials, and mid-turn with `approve --allow-all`. */
function withGranted(ctx: StageRunnerContext, stage: ResolvedStage, round: Round): ResolvedStage {
  const granted = [...round.granted, ...(ctx.prompts?.allowedTools(stage.id) ?? [])];
  return granted.length > 0 ? { ...stage, allowedTools: [...new Set([...(stage.allowedTools ?? []), ...granted])] } : stage;
}

/**
 * The run's signer, in a run with a stage that asks to go unsandboxed (the worker honours that only in signed runs):
 * every attempt carries it, so that an attempt starting the next stages' agents ahead of time decides as they will.
 */
function signer(ctx: StageRunnerContext): Pick<StageAttemptInput, 'signedBy'> {
  const signedBy = ctx.signedBy?.();
  return signedBy === undefined ? {} : { signedBy };
}

/** The token of the attempt about to be scheduled, when its stage asks mid-turn (see AgentPrompts.tokenFor). */
function promptToken(ctx: StageRunnerContext, stage: ResolvedStage): { promptToken?: string } {
  const token = ctx.prompts?.tokenFor(stage);
  return token === undefined ? {} : { promptToken: token };
}

/** `objectInputs` for the activity input when the pipeline declares inputs `type: object`; nothing otherwise. */
function objectInputsOf(inputs: Record<string, { type?: string }> | undefined): { objectInputs?: string[] } {
  const names = objectInputNames(inputs);
  return names.length > 0 ? { objectInputs: names } : {};
}
