import { WithStartWorkflowOperation, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure, WorkflowNotFoundError } from '@temporalio/common';
import {
  acquireLeaseUpdate,
  LEASE_WORKFLOW_TYPE,
  releaseLeaseSignal,
  releaseLeaseUpdate,
  renewLeaseUpdate,
  type LeaseAnswer,
  type LeaseEntry,
  type LeaseWorkflowInput,
} from '../../contracts/lease-messages.js';
import { MESSAGE_NOT_AUTHENTICATED } from '../../contracts/payload-origin.js';
import { MESSAGE_REPLAYED, sealClock, sealMessage } from '../../contracts/message-seal.js';
import { GRPC_STATUS, grpcErrorOf } from '../../grpc-errors.js';
import { describeBooks, listBooks } from './lease-books.js';
import { leaseIdsFor, type LeaseIds } from './lease-ids.js';
import { Lease, type LeaseKeeper } from './lease.js';
import { checkLeaseKey, closedOrMissing, LeaseRequestError, type LeaseKeyState, type LeaseRequest, type LeaseWait } from './lease-request.js';

export type { LeaseEntry, LeaseKeyState, LeaseRequest, LeaseWait };
export { checkLeaseKey, Lease, LeaseRequestError };

export interface AcquireOptions {
  /** Stops waiting: the request leaves the queue (or gives the key back) and `acquire` throws the signal's reason. */
  signal?: AbortSignal;
  /** Called after each answer while the request waits (at most every `pollMs`): show the position. */
  onWait?: (wait: LeaseWait) => void;
  /** How long one request waits in the key's workflow before it answers with the position. @unit milliseconds @default min(10000, ttlMs / 3) */
  pollMs?: number;
}

/** The workflow of an earlier id closed while the request was on its way: nothing is held there any more. */
const GONE = Symbol('gone');

/**
 * The time this process seals its lease messages with: each later than the one before, so a key's workflow, which
 * refuses a message of a holder sealed no later than one it took (a copy read from history), takes each of them.
 */
export const nextSealTime = sealClock();

/**
 * Leases on keys shared by every run, kept by one Temporal workflow per key (`leaseWorkflow`, on the pipeline task
 * queue): no other store. Use it from an activity (`new LeaseClient(Context.current().client, activityInfo().taskQueue)`)
 * or from a client program. See `holdLeases` for taking several keys around a piece of work. Its requests are proven
 * to come from the deployment by its client's encryption (docs/security.md); the books' ids follow `ids`.
 */
export class LeaseClient implements LeaseKeeper {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
    /** How books are named: hashed when the client encrypts (see lease-ids.ts). */
    private readonly ids: LeaseIds = leaseIdsFor(client),
  ) {}

  /**
   * Takes the key, waiting first come first served while it is full; the waiter keeps its place as long as it keeps
   * asking (this loop), so a waiter whose process died drops out. Start renewing (`lease.keepAlive()`) at once. The key
   * is taken in its own book, then in each book of an earlier id that is still open (a rolling deploy).
   * @throws LeaseRequestError for a bad request; the signal's reason when aborted (the request has left the queue)
   */
  async acquire(request: LeaseRequest, options: AcquireOptions = {}): Promise<Lease> {
    checkLeaseKey(request.key);
    const pollMs = options.pollMs ?? Math.min(10_000, Math.floor((request.ttlMs ?? 30_000) / 3));
    const books = [this.ids.current(request.key), ...(await this.openEarlierBooks(request.key))];
    const taken: string[] = [];
    let expiresAt: number | undefined;
    try {
      for (const [index, workflowId] of books.entries()) {
        const answer = await this.waitForGrant(request, workflowId, index === 0, pollMs, options);
        if (answer === GONE) continue;
        taken.push(workflowId);
        expiresAt = expiresAt === undefined ? answer.expiresAt : Math.min(expiresAt, answer.expiresAt ?? expiresAt);
      }
      return new Lease(this, request, expiresAt, taken);
    } catch (err) {
      // Leave the queues, or give back grants that raced the abort; a key taken in only some of its books is given back.
      if (options.signal?.aborted) await this.release(request.key, request.holder).catch(() => undefined);
      else if (taken.length > 0) await this.releaseAt(taken, request.holder).catch(() => undefined);
      throw err;
    }
  }

  /** Moves the holder's deadline on in the key's book; `held: false` when the lease expired or was released (it is lost). */
  renew(key: string, holder: string): Promise<{ held: boolean; expiresAt?: number }> {
    return this.renewAt([this.ids.current(key)], holder);
  }

  /** Gives the key back, or leaves its queue, in every book of the key. True when the holder was in one; a key with no workflow holds nothing. */
  async release(key: string, holder: string): Promise<boolean> {
    const answers = await Promise.all([this.ids.current(key), ...this.ids.earlier(key)].map((id) => this.releaseOne(id, holder)));
    return answers.some(Boolean);
  }

  async renewAt(ids: readonly string[], holder: string): Promise<{ held: boolean; expiresAt?: number }> {
    const answers = await Promise.all(ids.map((id) => this.renewOne(id, holder)));
    const times = answers.flatMap((a) => (a.expiresAt === undefined ? [] : [a.expiresAt]));
    return { held: answers.every((a) => a.held), expiresAt: times.length > 0 ? Math.min(...times) : undefined };
  }

  /**
   * Gives the key back in each book, by signal: Temporal admits ten updates in flight per workflow, and the waiters'
   * requests (each waits up to its poll) can fill them; a release by update then waited out the client's retries
   * (about 40 s), and the waiters with it.
   */
  async releaseAt(ids: readonly string[], holder: string): Promise<void> {
    await Promise.all(
      ids.map(async (id) => {
        try {
          await this.client.workflow.getHandle(id).signal(releaseLeaseSignal, sealMessage({ holder }, releaseLeaseSignal.name, id, nextSealTime()));
        } catch (err) {
          if (!closedOrMissing(err)) throw err;
        }
      }),
    );
  }

  /** One key's holders and waiters (in order), or undefined when nobody holds or waits for it. */
  describe(key: string): Promise<LeaseKeyState | undefined> {
    return describeBooks(this.client, this.ids, key);
  }

  /** Every key somebody holds or waits for (at most `limit`), by key; each read with one query to its workflow. */
  list(limit = 100): Promise<LeaseKeyState[]> {
    return listBooks(this.client, this.ids, limit);
  }

  /** The books of the key under earlier ids whose workflow is open: the key must be taken there too. */
  private async openEarlierBooks(key: string): Promise<string[]> {
    const open = await Promise.all(
      this.ids.earlier(key).map(async (id) => {
        try {
          const { status, type } = await this.client.workflow.getHandle(id).describe();
          return status.name === 'RUNNING' && type === LEASE_WORKFLOW_TYPE ? id : undefined;
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) return undefined;
          throw err;
        }
      }),
    );
    return open.filter((id): id is string => id !== undefined);
  }

  /** Asks one book until it grants the key (or, for an earlier book, until its workflow turns out closed). */
  private async waitForGrant(request: LeaseRequest, workflowId: string, start: boolean, pollMs: number, options: AcquireOptions): Promise<{ expiresAt?: number } | typeof GONE> {
    for (;;) {
      options.signal?.throwIfAborted();
      const answer = await this.ask(request, workflowId, start, pollMs, options.signal);
      if (answer === GONE || answer.granted) return answer;
      options.onWait?.({ key: request.key, ahead: answer.ahead, holders: answer.holders, limit: answer.limit });
    }
  }

  /**
   * One acquire update, retried while the workflow hands over or closes. The key's own book is started if it has no
   * workflow; an earlier book never is (it is only joined while it lasts).
   */
  private async ask(request: LeaseRequest, workflowId: string, start: boolean, waitMs: number, signal: AbortSignal | undefined): Promise<LeaseAnswer | typeof GONE> {
    const { key, holder, limit, ttlMs, label, run } = request;
    const fields = { holder, limit, ttlMs, label, run, waitMs, key };
    // Hand-overs tried so far; a refusal for the workflow's full update slots is not one (it is waited out).
    let handovers = 0;
    for (;;) {
      // Sealed at each try: a try after a hand-over may come later than a seal is taken.
      const update = sealMessage(fields, acquireLeaseUpdate.name, workflowId, nextSealTime());
      try {
        if (!start) return await this.client.workflow.getHandle(workflowId).executeUpdate(acquireLeaseUpdate, { args: [update] });
        const startWorkflowOperation = new WithStartWorkflowOperation(LEASE_WORKFLOW_TYPE, {
          workflowId,
          taskQueue: this.taskQueue,
          args: [{ key } satisfies LeaseWorkflowInput],
          workflowIdConflictPolicy: 'USE_EXISTING',
        });
        return await this.client.workflow.executeUpdateWithStart(acquireLeaseUpdate, { args: [update], startWorkflowOperation });
      } catch (err) {
        const refused = refusal(err);
        if (refused) throw new LeaseRequestError(`lease on key "${key}": ${refused}`);
        if (!start && closedOrMissing(err)) return GONE;
        // Ten other requests are in flight (waiters like this one), or another worker of this holder (an earlier attempt of
        // a run's acquire) sealed a later message by a clock ahead of this one's: asked again, as a waiter polls anyway.
        if (updatesBusy(err) || sealedBefore(err)) {
          signal?.throwIfAborted();
          await new Promise((resolve) => setTimeout(resolve, 200 + Math.floor(Math.random() * 300)));
          continue;
        }
        // The key's workflow closed or handed over between the start and the update: ask the next execution.
        if (++handovers >= 5) throw err;
        signal?.throwIfAborted();
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** handovers));
      }
    }
  }

  private async renewOne(workflowId: string, holder: string): Promise<{ held: boolean; expiresAt?: number }> {
    try {
      return await this.client.workflow.getHandle(workflowId).executeUpdate(renewLeaseUpdate, { args: [sealMessage({ holder }, renewLeaseUpdate.name, workflowId, nextSealTime())] });
    } catch (err) {
      if (closedOrMissing(err)) return { held: false };
      throw err;
    }
  }

  private async releaseOne(workflowId: string, holder: string): Promise<boolean> {
    try {
      return await this.client.workflow.getHandle(workflowId).executeUpdate(releaseLeaseUpdate, { args: [sealMessage({ holder }, releaseLeaseUpdate.name, workflowId, nextSealTime())] });
    } catch (err) {
      if (closedOrMissing(err)) return false;
      throw err;
    }
  }
}

/** Whether the workflow refused an update for having ten in flight (after the client's own retries). */
function updatesBusy(err: unknown): boolean {
  return grpcErrorOf(err)?.code === GRPC_STATUS.RESOURCE_EXHAUSTED;
}

/**
 * Takes several keys in sorted order (so two holders of overlapping keys cannot deadlock), keeps them renewed while
 * `work` runs, and releases them all when it ends, however it ends. Keys already taken are given back if a later
 * one is aborted.
 */
export async function holdLeases<T>(leases: LeaseClient, requests: LeaseRequest[], work: () => Promise<T>, options: AcquireOptions & { onLost?: (key: string) => void } = {}): Promise<T> {
  const ordered = [...requests].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const held: Lease[] = [];
  const stops: (() => void)[] = [];
  try {
    for (const request of ordered) {
      const lease = await leases.acquire(request, options);
      held.push(lease);
      stops.push(lease.keepAlive(options.onLost));
    }
    return await work();
  } finally {
    for (const stop of stops) stop();
    await Promise.all(held.map((lease) => lease.release().catch(() => undefined)));
  }
}

/** Whether the workflow refused a message as sealed no later than one it took from the holder. */
function sealedBefore(err: unknown): boolean {
  return err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure && err.cause.type === MESSAGE_REPLAYED;
}

/** The refusal of the key's workflow (its validator), if that is what failed. */
function refusal(err: unknown): string | undefined {
  if (!(err instanceof WorkflowUpdateFailedError)) return undefined;
  const cause = err.cause;
  return cause instanceof ApplicationFailure && (cause.type === 'LEASE_REQUEST_INVALID' || cause.type === MESSAGE_NOT_AUTHENTICATED) ? cause.message : undefined;
}
