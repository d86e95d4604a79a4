import { Context } from '@temporalio/activity';
import { leaseWaitSignal, type LeaseWaitReport } from '../../contracts/lease-wait.js';
import { sealMessage } from '../../contracts/message-seal.js';
import { nextSealTime, type LeaseWait } from './lease-client.js';

/**
 * Tells the activity's run what it waits for, only when the key or the position changes, and that the wait is over
 * once it is (nothing when it never waited). A run that is gone misses the report; the wait goes on regardless.
 */
export class WaitReports {
  private last = '';

  constructor(
    private readonly runWorkflowId: string,
    private readonly stage: string | undefined,
  ) {}

  waiting(wait: LeaseWait): void {
    const report: LeaseWaitReport = { stage: this.stage, key: wait.key, ahead: wait.ahead, holders: wait.holders, limit: wait.limit };
    const changed = JSON.stringify([wait.key, wait.ahead]);
    if (changed === this.last) return;
    this.last = changed;
    void this.send(report);
  }

  async over(): Promise<void> {
    if (this.last === '') return;
    this.last = '';
    await this.send({ stage: this.stage });
  }

  /** Sealed for the run (contracts/message-seal.ts), so that a report copied from its history is not taken again. */
  private send(report: LeaseWaitReport): Promise<void> {
    return Context.current()
      .client.workflow.getHandle(this.runWorkflowId)
      .signal(leaseWaitSignal, sealMessage(report, leaseWaitSignal.name, this.runWorkflowId, nextSealTime()))
      .catch(() => undefined);
  }
}
