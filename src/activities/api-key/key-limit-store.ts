import { WithStartWorkflowOperation, WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import type { Payload, UpdateDefinition } from '@temporalio/common';
import { encryptionCodecOf } from '../../codec/data-converter.js';
import { sealMessage } from '../../contracts/message-seal.js';
import { ENCRYPTED_ENCODING } from '../../codec/encryption-codec.js';
import {
  API_KEY_LIMIT_WORKFLOW_TYPE,
  MAX_PAUSE_MS,
  PAUSED_UNTIL_MEMO,
  reportPauseUpdate,
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

/** Tries of one update, while the key's workflow hands over to its next execution. */
const UPDATE_TRIES = 4;

/** The limiter workflow of a key on a task queue: the workers of one queue share it. */
export function keyLimitWorkflowId(taskQueue: string, keyId: string): string {
  return `agent-pipeline-api-key-${taskQueue}-${keyId}`;
}

/**
 * The key's limits on Temporal: one long-lived `apiKeyLimitWorkflow` per key (and task queue), started by the first
 * report or request (update-with-start) and run by the workers of that queue. With encryption on, the updates are
 * encrypted (the workflow refuses plain ones) and only an encrypted memo is believed: a namespace client without the
 * key can neither pause the key nor fake its pause.
 */
export function temporalKeyLimitStore(client: Client, taskQueue: string, keyId: string): KeyLimitStore {
  const workflowId = keyLimitWorkflowId(taskQueue, keyId);
  const args: [ApiKeyLimitInput] = [{ keyId }];
  const encrypts = encryptionCodecOf(client.options.loadedDataConverter.payloadCodecs) !== undefined;
  /** One update, starting the key's workflow if it has none. */
  async function update<R, A>(definition: UpdateDefinition<R, [A]>, arg: A): Promise<R> {
    for (let attempt = 1; ; attempt++) {
      // An operation serves one call only, so each try makes its own.
      const startWorkflowOperation = new WithStartWorkflowOperation(API_KEY_LIMIT_WORKFLOW_TYPE, { workflowId, taskQueue, args, workflowIdConflictPolicy: 'USE_EXISTING' });
      try {
        return await client.workflow.executeUpdateWithStart(definition, { args: [sealMessage(arg as object, definition.name, workflowId) as A], startWorkflowOperation });
      } catch (err) {
        // The workflow refused the request (its validator): asking again changes nothing.
        if (err instanceof WorkflowUpdateFailedError || attempt >= UPDATE_TRIES) throw err;
        // Otherwise the key's workflow was ending or continuing as new between the start and the update: ask the next one.
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
      }
    }
  }
  return {
    async readPausedUntil() {
      try {
        const description = await client.workflow.getHandle(workflowId).describe();
        const raw = description.raw.workflowExecutionInfo?.memo?.fields?.[PAUSED_UNTIL_MEMO] as Payload | undefined;
        // Only the workflow writes an encrypted memo; a plain one was set by whoever started it (a stranger's pause).
        if (encrypts && raw && Buffer.from(raw.metadata?.encoding ?? []).toString() !== ENCRYPTED_ENCODING) return 0;
        const value = description.memo?.[PAUSED_UNTIL_MEMO];
        // No pause lasts longer than one retry-after may impose, whoever wrote it.
        return typeof value === 'number' ? Math.min(value, Date.now() + MAX_PAUSE_MS) : 0;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return 0;
        throw err;
      }
    },
    async reportPause(until) {
      await update(reportPauseUpdate, { until });
    },
    async reserve(perMinute) {
      const { startAt } = await update(reserveRequestUpdate, { perMinute });
      return startAt;
    },
  };
}
