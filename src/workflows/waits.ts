import { ApplicationFailure, CancellationScope, condition } from '@temporalio/workflow';
import type { WaitingFor } from '../pipeline/run-state.js';
import { agentPipelineCommand, shellWord } from '../pipeline/shell-words.js';
import { UPDATE_REJECTED, type ApproveStageInput } from '../contracts/messages.js';
import type { RunTracker } from './run-tracker.js';

/** What a person decided about a wait. */
export type Decision =
  | { kind: 'answer'; text: string }
  | { kind: 'approve'; input: ApproveStageInput }
  | { kind: 'reject'; reason: string }
  | { kind: 'retry'; feedback?: string }
  | { kind: 'skip' }
  | { kind: 'timeout' }
  /** A mid-turn prompt refused (`deny [--message]`). */
  | { kind: 'deny'; message?: string }
  /** A mid-turn prompt whose attempt ended, or that a later attempt's ask replaced: nobody can answer it any more. */
  | { kind: 'closed' };

export type WaitKind = WaitingFor['kind'];

/** One open wait: a stage parked on a `condition()` until an update decides. */
export interface OpenWait {
  stage: string;
  kind: WaitKind;
  decision?: Decision;
  /** Why nothing reads a retry's feedback here (a command stage, a merge or a push): `retry --feedback` is refused. */
  noFeedback?: string;
}

/** What a stage's wait needs to know besides what `status` shows. */
export interface WaitOptions {
  /** How long it waits before `{kind: 'timeout'}`. @unit milliseconds @default for ever */
  timeoutMs?: number;
  /** Why no agent reads a retry's feedback, said in a refusal of `retry --feedback` ("runs a command (`run:`), …"). */
  noFeedback?: string;
}

/** The failure an update handler or validator throws for a decision that does not apply. */
export const rejectUpdate = (message: string): ApplicationFailure => ApplicationFailure.create({ type: UPDATE_REJECTED, message, nonRetryable: true });

/**
 * The exact commands that move a wait on, as `status` and the Web UI show them: the run id, stage and tools as shell
 * words, so a pasted line runs that command whatever the id holds (one that starts with "-" after `--`). A failure's
 * `retry --feedback` only with `feedback` (an agent reads it; a command stage, a merge or a push does not).
 */
export function commandsFor(kind: WaitKind, runId: string, stage: string, extra: { tools?: string[]; budgetUsd?: number; feedback?: boolean } = {}): string[] {
  const onStage = `--stage ${shellWord(stage)}`;
  /** `agent-pipeline COMMAND RUN --stage STAGE OPTIONS… OPERANDS…` (the run after `--` when it starts with "-"). */
  const command = (name: string, options: string[] = [], operands: string[] = []): string => agentPipelineCommand(name, runId, [onStage, ...options], operands);
  const rejectCommand = command('reject', ['--reason "..."']);
  switch (kind) {
    case 'answer':
      return [command('answer', [], ['"..."']), rejectCommand];
    case 'approval':
      return [command('approve'), rejectCommand];
    case 'permission':
      return [...(extra.tools ?? []).map((tool) => command('approve', [`--allow ${shellWord(tool)}`])), command('approve', ['--allow-all']), rejectCommand];
    case 'review_rounds':
      return [command('approve', ['--rounds 1']), command('approve'), rejectCommand];
    case 'budget':
      // The whole run's budget: no stage.
      return [agentPipelineCommand('approve', runId, [`--budget-usd ${extra.budgetUsd ?? 'N'}`]), agentPipelineCommand('reject', runId, ['--reason "..."'])];
    case 'tool_request':
      return [command('approve'), command('approve', ['--allow-all']), command('deny', ['--message "..."'])];
    case 'question':
      return [command('answer', [], ['"..."']), command('deny', ['--message "..."'])];
    case 'failure':
      return [command('retry'), ...(extra.feedback ? [command('retry', ['--feedback "..."'])] : []), command('skip'), agentPipelineCommand('cancel', runId)];
  }
}

const DESCRIBE: Record<WaitKind, string> = {
  answer: 'an answer to its question',
  approval: 'an approval',
  permission: 'permission for denied tool calls',
  review_rounds: 'a decision on more review rounds',
  budget: 'more budget',
  failure: 'a decision on its failure (retry or skip)',
  tool_request: 'permission for a tool call, while its agent waits',
  question: 'an answer to its question, while its agent waits',
};

/**
 * The run's open waits. A stage parks on {@link waitFor}; an update handler finds the wait it targets with
 * {@link resolve} (which also validates), records a {@link Decision}, and the stage moves on. Waiting is a
 * `condition()`: no timer, no activity, nothing to pay for, and it survives worker and server restarts.
 */
export class HumanWaits {
  private readonly open = new Map<string, OpenWait>();

  constructor(
    private readonly tracker: RunTracker,
    private readonly onChange: () => void,
  ) {}

  /** Parks `stage` until a person decides, or until `options.timeoutMs` passes (then `{kind: 'timeout'}`). */
  async waitFor(stage: string, waiting: Omit<WaitingFor, 'since' | 'timeoutAt'>, options: WaitOptions = {}): Promise<Decision> {
    const { timeoutMs } = options;
    const wait: OpenWait = { stage, kind: waiting.kind, ...(options.noFeedback ? { noFeedback: options.noFeedback } : {}) };
    this.open.set(stage, wait);
    const since = Date.now();
    this.tracker.markWaiting(stage, { ...waiting, since, timeoutAt: timeoutMs === undefined ? undefined : since + timeoutMs });
    this.onChange();
    try {
      if (timeoutMs === undefined) await condition(() => wait.decision !== undefined);
      else await condition(() => wait.decision !== undefined, timeoutMs, { summary: `stage ${stage} waits for ${DESCRIBE[waiting.kind]}` });
      return wait.decision ?? { kind: 'timeout' };
    } finally {
      // A later wait of the stage may have taken this one's place (a mid-turn prompt asked again by a retried attempt):
      // that one is the stage's now, and stays shown.
      if (this.open.get(stage) === wait) {
        this.open.delete(stage);
        this.tracker.markResumed(stage);
        this.onChange();
      }
    }
  }

  /**
   * The waits an update acts on: the named stage's, or the only one that accepts it. Budget waits are one
   * decision for the whole run, so every stage held by the budget is returned together.
   * @throws ApplicationFailure (type UPDATE_REJECTED) saying what is wrong and what would work.
   */
  resolve(command: string, stage: string | undefined, accepts: readonly WaitKind[]): OpenWait[] {
    const open = [...this.open.values()];
    let chosen: OpenWait;
    if (stage !== undefined) {
      if (!this.tracker.hasStage(stage)) {
        throw rejectUpdate(`unknown stage "${stage}"; stages of this run: ${this.tracker.state.stages.map((s) => s.id).join(', ')}`);
      }
      const wait = this.open.get(stage);
      if (!wait) throw rejectUpdate(`stage "${stage}" is not waiting (it is ${this.tracker.stage(stage).status}), so there is nothing to ${command}`);
      chosen = wait;
    } else {
      const candidates = open.filter((w) => accepts.includes(w.kind));
      if (candidates.length === 0) {
        const waiting = open.map((w) => `${w.stage} waits for ${DESCRIBE[w.kind]}`).join('; ');
        throw rejectUpdate(`no stage waits for \`${command}\`${waiting ? ` (${waiting})` : '; no stage is waiting'}`);
      }
      if (candidates.some((w) => w.kind !== 'budget') && candidates.length > 1) {
        throw rejectUpdate(`several stages wait (${candidates.map((w) => `${w.stage}: ${w.kind}`).join(', ')}); name one with --stage`);
      }
      chosen = candidates[0];
    }
    if (!accepts.includes(chosen.kind)) {
      const commands = this.tracker.stage(chosen.stage).waitingFor?.commands ?? [];
      throw rejectUpdate(`stage "${chosen.stage}" waits for ${DESCRIBE[chosen.kind]}, which \`${command}\` does not give; use ${commands.join(' or ')}`);
    }
    return chosen.kind === 'budget' ? open.filter((w) => w.kind === 'budget') : [chosen];
  }

  /** Ends the stage's open mid-turn prompt, if any, as `closed`: its attempt ended, so nobody can answer it now. */
  closePrompt(stage: string): void {
    const wait = this.open.get(stage);
    if (!wait || wait.decision || (wait.kind !== 'tool_request' && wait.kind !== 'question')) return;
    wait.decision = { kind: 'closed' };
    this.open.delete(stage);
    this.tracker.markResumed(stage);
    this.onChange();
  }

  /** Records a decision, then waits until every decided stage has moved on, so the caller sees the new state. */
  async decide(waits: readonly OpenWait[], decision: Decision): Promise<void> {
    for (const wait of waits) wait.decision = decision;
    // Not cancellable: a handler must not throw CancelledFailure when the run is cancelled meanwhile.
    await CancellationScope.nonCancellable(() => condition(() => waits.every((w) => this.open.get(w.stage) !== w)));
  }
}
