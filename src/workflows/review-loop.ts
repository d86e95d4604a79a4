import { patched } from '@temporalio/workflow';
import type { ReviewLoopState, StageAttemptInput } from '../contracts/stage-attempt.js';
import { findReworkStages } from '../pipeline/graph.js';
import { diffArtifacts, recordReview, renderReviewerBrief, renderReworkBrief, type ReviewLedger } from '../pipeline/review-ledger.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { ArtifactRef, StageResult } from '../pipeline/stage-result.js';
import type { RunTracker } from './run-tracker.js';
import { commandsFor, type HumanWaits } from './waits.js';

/**
 * A reworked `contract: none` stage is told to give its whole answer again instead of a report block. Only reworks of
 * such stages call patched(), so other histories carry no marker.
 */
export const REWORK_FREE_ANSWER_PATCH = 'rework31-free-answer-brief';

/** Built-in cap on review rounds when `review.maxRounds` is not set. */
export const DEFAULT_MAX_ROUNDS = 3;

type Continuation = NonNullable<StageAttemptInput['continuation']>;
type ReworkEntry = NonNullable<StageAttemptInput['reworkHistory']>[number];


/** What a reviewer's result means for the run. */
export type ReviewOutcome = { kind: 'approved' } | { kind: 'rework'; stages: string[] } | { kind: 'failed'; type: string; message: string };

/**
 * Review rounds: a reviewer's `rework` verdict sends the reviewed stages (and the stages between them and the
 * reviewer) back for another round, with the feedback, until the reviewer approves or `maxRounds` is reached.
 * The ledger of findings makes rounds converge: reworked stages get the open findings, and the reviewer gets
 * the ledger and the files changed since its last round instead of starting over.
 */
export class ReviewLoop {
  private readonly extraRounds: Map<string, number>;
  /** By reviewer: the artifacts of each stage it sent back, as they were when it reviewed them. */
  private readonly artifactsAtReview: Map<string, Map<string, ArtifactRef[]>>;
  private readonly history: Map<string, ReworkEntry[]>;
  private readonly continuations: Map<string, Continuation>;

  constructor(
    private readonly stages: readonly ResolvedStage[],
    private readonly tracker: RunTracker,
    private readonly waits: HumanWaits,
    private readonly sessionOf: (stage: string) => string | undefined,
    /** What an earlier execution of the run remembered (continue-as-new). */
    carried?: ReviewLoopState,
  ) {
    this.extraRounds = new Map(carried?.extraRounds);
    this.artifactsAtReview = new Map(carried?.artifactsAtReview.map(([reviewer, byStage]) => [reviewer, new Map(byStage)]));
    this.history = new Map(carried?.history);
    this.continuations = new Map(carried?.continuations);
  }

  /** What the loops remember, for the run's next execution. */
  snapshot(): ReviewLoopState {
    return {
      extraRounds: [...this.extraRounds],
      artifactsAtReview: [...this.artifactsAtReview].map(([reviewer, byStage]) => [reviewer, [...byStage]]),
      history: [...this.history],
      continuations: [...this.continuations],
    };
  }

  /** Rework feedback the stage has had so far, oldest first. */
  reworkHistory(stage: string): ReworkEntry[] | undefined {
    return this.history.get(stage);
  }

  /** How the stage continues in this round: the rework brief for a reviewed stage, the ledger for a reviewer. */
  takeContinuation(stage: ResolvedStage, round: number): Continuation | undefined {
    const planned = this.continuations.get(stage.id);
    this.continuations.delete(stage.id);
    if (planned) return planned;
    const ledger = this.tracker.state.reviews?.[stage.id];
    if (!stage.review || !ledger || round < 2) return undefined;
    const reviewed = this.artifactsAtReview.get(stage.id) ?? new Map<string, ArtifactRef[]>();
    const changes = [...reviewed].flatMap(([id, before]) => diffArtifacts(id, before, this.tracker.stage(id).result?.artifacts ?? []));
    return { kind: 'rework', sessionId: this.sessionOf(stage.id), message: renderReviewerBrief(ledger, changes, round) };
  }

  /** Records a reviewer's result in its ledger and decides: approved, another round, or failed. */
  async judge(stage: ResolvedStage, result: StageResult, round: number): Promise<ReviewOutcome> {
    const ledger = recordReview(this.tracker.state.reviews?.[stage.id], stage.id, round, result.feedback ?? []);
    (this.tracker.state.reviews ??= {})[stage.id] = ledger;
    if (result.verdict !== 'rework') return { kind: 'approved' };
    const maxRounds = (stage.review?.maxRounds ?? DEFAULT_MAX_ROUNDS) + (this.extraRounds.get(stage.id) ?? 0);
    if (round < maxRounds) return this.planRework(stage, result, ledger, round);

    const open = ledger.findings.filter((f) => f.state === 'open').length;
    const capped = `stage ${stage.id} asked for rework after ${round} of ${maxRounds} review rounds (${open} open findings)`;
    switch (stage.review?.onMaxRounds ?? 'ask') {
      case 'fail':
        return { kind: 'failed', type: 'REVIEW_ROUNDS_EXHAUSTED', message: `[REVIEW_ROUNDS_EXHAUSTED] ${capped}; raise review.maxRounds or fix the work by hand` };
      case 'continue':
        this.tracker.warn(`${capped}; continuing as configured (onMaxRounds: continue)`);
        return { kind: 'approved' };
      case 'ask': {
        const decision = await this.waits.waitFor(stage.id, {
          kind: 'review_rounds',
          message: `${capped}: grant more rounds, accept the work as it is, or reject it`,
          commands: commandsFor('review_rounds', this.tracker.state.runId, stage.id),
        });
        if (decision.kind === 'approve' && decision.input.rounds) {
          this.extraRounds.set(stage.id, (this.extraRounds.get(stage.id) ?? 0) + decision.input.rounds);
          return this.planRework(stage, result, ledger, round);
        }
        if (decision.kind === 'approve') {
          this.tracker.warn(`${capped}; a person accepted the work as it is${decision.input.comment ? `: ${decision.input.comment}` : ''}`);
          return { kind: 'approved' };
        }
        const reason = decision.kind === 'reject' ? decision.reason : decision.kind;
        return { kind: 'failed', type: 'REVIEW_REJECTED', message: `[REVIEW_REJECTED] ${capped}; rejected: ${reason}` };
      }
    }
  }

  private reviewedBy(stage: ResolvedStage): string[] {
    const of = stage.review?.of ?? [];
    return typeof of === 'string' ? [of] : of;
  }

  private planRework(stage: ResolvedStage, result: StageResult, ledger: ReviewLedger, round: number): ReviewOutcome {
    const reviewed = this.reviewedBy(stage);
    const stages = findReworkStages(this.stages, stage.id, reviewed);
    const entry: ReworkEntry = { round, reviewer: stage.id, summary: result.summary, feedback: result.feedback ?? [] };
    const artifacts = new Map<string, ArtifactRef[]>();
    this.artifactsAtReview.set(stage.id, artifacts);
    for (const id of stages) {
      if (id === stage.id) continue;
      artifacts.set(id, this.tracker.stage(id).result?.artifacts ?? []);
      this.history.set(id, [...(this.history.get(id) ?? []), entry]);
      if (reviewed.includes(id)) {
        const free = this.stages.find((s) => s.id === id)?.contract === 'none' && patched(REWORK_FREE_ANSWER_PATCH);
        const message = renderReworkBrief(ledger, result.summary, round + 1, free ? 'none' : 'json');
        this.continuations.set(id, { kind: 'rework', sessionId: this.sessionOf(id), message });
      }
    }
    return { kind: 'rework', stages };
  }
}
