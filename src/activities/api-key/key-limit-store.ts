import { WithStartWorkflowOperation, WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import {
  API_KEY_LIMIT_WORKFLOW_TYPE,
  pauseKeySignal,
  PAUSED_UNTIL_MEMO,
  reserveRequestUpdate,
  type ApiKeyLimitInput,
} from '../../contracts/api-key-limit-messages.js';

/** Where an API key's shared limits live, as one worker's limiter (key-limiter.ts) sees them. */
export interface KeyLimitStore {
  /** The key's pause as every worker last reported it; 0 when none ever was. @unit milliseconds since the epoch */
  readPausedUntil(): Promise<number>;
  /** Pauses new calls on the key until `until`, for every worker. */
  reportPause(until: number): Promise<void>;
  /** A start time for one request under `perMinute`, granted to it alone. @unit milliseconds since the epoch */
  reserve(perMinute: number): Promise<number>;
}

/** Tries of one request for a start time, while the key's workflow hands over to its next execution. */
const RESERVE_TRIES = 4;

/** The limiter workflow of a key on a task queue: the workers of one queue share it. */
export function keyLimitWorkflowId(taskQueue: string, keyId: string): string {
  return `agent-pipeline-api-key-${taskQueue}-${keyId}`;
}

/**
 * The key's limits on Temporal: one long-lived `apiKeyLimitWorkflow` per key (and task queue), started by the first
 * report or request (signal- and update-with-start) and run by the workers of that queue.
 */
export function temporalKeyLimitStore(client: Client, taskQueue: string, keyId: string): KeyLimitStore {
  const workflowId = keyLimitWorkflowId(taskQueue, keyId);
  const args: [ApiKeyLimitInput] = [{ keyId }];
  return {
    async readPausedUntil() {
      try {
        const description = await client.workflow.getHandle(workflowId).describe();
        const value = description.memo?.[PAUSED_UNTIL_MEMO];
        return typeof value === 'number' ? value : 0;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return 0;
        throw err;
      }
    },
    async reportPause(until) {
      await client.workflow.signalWithStart(API_KEY_LIMIT_WORKFLOW_TYPE, { workflowId, taskQueue, args, signal: pauseKeySignal, signalArgs: [{ until }] });
    },
    async reserve(perMinute) {
      for (let attempt = 1; ; attempt++) {
        // An operation serves one call only, so each try makes its own.
        const startWorkflowOperation = new WithStartWorkflowOperation(API_KEY_LIMIT_WORKFLOW_TYPE, { workflowId, taskQueue, args, workflowIdConflictPolicy: 'USE_EXISTING' });
        try {
          const { startAt } = await client.workflow.executeUpdateWithStart(reserveRequestUpdate, { args: [{ perMinute }], startWorkflowOperation });
          return startAt;
        } catch (err) {
          // The workflow refused the request (its validator): asking again changes nothing.
          if (err instanceof WorkflowUpdateFailedError || attempt >= RESERVE_TRIES) throw err;
          // Otherwise the key's workflow was ending or continuing as new between the start and the update: ask the next one.
          await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
        }
      }
    },
  };
}
