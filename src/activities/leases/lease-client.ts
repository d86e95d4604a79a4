import { WithStartWorkflowOperation, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { decryptionProblem } from '../../codec/data-converter.js';
import { ApplicationFailure, WorkflowNotFoundError } from '@temporalio/common';
import {
  acquireLeaseUpdate,
  describeLeaseQuery,
  LEASE_WORKFLOW_ID_PREFIX,
  LEASE_WORKFLOW_TYPE,
  leaseWorkflowId,
  MAX_LEASE_KEY_LENGTH,
  releaseLeaseUpdate,
  renewLeaseUpdate,
  type LeaseAnswer,
  type LeaseBookState,
  type LeaseEntry,
  type LeaseWorkflowInput,
} from '../../contracts/lease-messages.js';

export type { LeaseEntry };

/** One lease to take: which key, how many may hold it at once, who asks, and how long it lives without a renewal. */
export interface LeaseRequest {
  /** The key, e.g. `repo:acme/web` (1 to 200 characters, no control characters). Never a secret: keys are listed. */
  key: string;
  /** How many holders the key may have at once (whole number ≥ 1). */
  limit: number;
  /** Unique id of this holder (e.g. `RUN/STAGE/WORKFLOW-RUN/ACTIVITY/ATTEMPT`); asking again with it is idempotent. */
  holder: string;
  /**
   * How long the lease lives without a renewal; a holder that dies is replaced within it. Absent: held until
   * released (a run's life). At least 1000. @unit milliseconds
   */
  ttlMs?: number;
  /** What `agent-pipeline limits` shows for this holder. */
  label?: string;
  /** For a lease without `ttlMs`: the workflow id of the run it is held for; if that run closes without releasing it (terminated), the key's workflow takes it back while somebody waits. */
  run?: string;
}

/** Where a waiting request stands, after each answer of the key's workflow. */
export interface LeaseWait {
  key: string;
  /** Waiters before this one. */
  ahead: number;
  holders: number;
  limit: number;
}

export interface AcquireOptions {
  /** Stops waiting: the request leaves the queue (or gives the key back) and `acquire` throws the signal's reason. */
  signal?: AbortSignal;
  /** Called after each answer while the request waits (at most every `pollMs`): heartbeat here, show the position. */
  onWait?: (wait: LeaseWait) => void;
  /** How long one request waits in the key's workflow before it answers with the position. @unit milliseconds @default min(10000, ttlMs / 3) */
  pollMs?: number;
}

/** A key's book as `limits` lists it. */
export interface LeaseKeyState extends LeaseBookState {
  key: string;
}

/** How long `list` waits for each key's workflow to answer. @unit milliseconds */
const DESCRIBE_DEADLINE_MS = 5_000;
/** gRPC DEADLINE_EXCEEDED. */
const DEADLINE_EXCEEDED = 4;

/** A key's workflow that did not answer in time (no worker takes its tasks). */
export class LeaseQueryTimeoutError extends Error {
  override readonly name = 'LeaseQueryTimeoutError';
}

function isDeadlineExceeded(err: unknown): boolean {
  for (let current = err; current instanceof Error; current = current.cause) {
    if ((current as { code?: unknown }).code === DEADLINE_EXCEEDED) return true;
  }
  return false;
}

/** A request the key's workflow refused (a bad key, limit or ttl): the message says which value and why. */
export class LeaseRequestError extends Error {
  override readonly name = 'LeaseRequestError';
}

/**
 * Leases on keys shared by every run, kept by one Temporal workflow per key (`leaseWorkflow`, on the pipeline task
 * queue): no other store. Use it from an activity (`new LeaseClient(Context.current().client, activityInfo().taskQueue)`)
 * or from a client program. See `holdLeases` for taking several keys around a piece of work.
 */
export class LeaseClient {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
  ) {}

  /**
   * Takes the key, waiting first come first served while it is full; the waiter keeps its place as long as it keeps
   * asking (this loop), so a waiter whose process died drops out. Start renewing (`lease.keepAlive()`) at once.
   * @throws LeaseRequestError for a bad request; the signal's reason when aborted (the request has left the queue)
   */
  async acquire(request: LeaseRequest, options: AcquireOptions = {}): Promise<Lease> {
    checkLeaseKey(request.key);
    const pollMs = options.pollMs ?? Math.min(10_000, Math.floor((request.ttlMs ?? 30_000) / 3));
    try {
      for (;;) {
        options.signal?.throwIfAborted();
        const answer = await this.ask(request, pollMs, options.signal);
        if (answer.granted) return new Lease(this, request, answer.expiresAt);
        options.onWait?.({ key: request.key, ahead: answer.ahead, holders: answer.holders, limit: answer.limit });
      }
    } catch (err) {
      // Leave the queue, or give back a grant that raced the abort.
      if (options.signal?.aborted) await this.release(request.key, request.holder).catch(() => undefined);
      throw err;
    }
  }

  /** Moves the holder's deadline on; `held: false` when the lease expired or was released (it is lost). */
  async renew(key: string, holder: string): Promise<{ held: boolean; expiresAt?: number }> {
    try {
      return await this.client.workflow.getHandle(leaseWorkflowId(key)).executeUpdate(renewLeaseUpdate, { args: [{ holder }] });
    } catch (err) {
      if (closedOrMissing(err)) return { held: false };
      throw err;
    }
  }

  /** Gives the key back, or leaves its queue. True when the holder was in the book; a key with no workflow holds nothing. */
  async release(key: string, holder: string): Promise<boolean> {
    try {
      return await this.client.workflow.getHandle(leaseWorkflowId(key)).executeUpdate(releaseLeaseUpdate, { args: [{ holder }] });
    } catch (err) {
      if (closedOrMissing(err)) return false;
      throw err;
    }
  }

  /**
   * One key's holders and waiters (in order), or undefined when nobody holds or waits for it.
   * @param deadlineMs how long the key's workflow may take to answer @unit milliseconds
   * @throws LeaseQueryTimeoutError when it did not answer within `deadlineMs`
   */
  async describe(key: string, deadlineMs?: number): Promise<LeaseKeyState | undefined> {
    const query = (): Promise<LeaseKeyState> => this.client.workflow.getHandle(leaseWorkflowId(key)).query(describeLeaseQuery);
    try {
      const state = deadlineMs === undefined ? await query() : await this.client.connection.withDeadline(Date.now() + deadlineMs, query);
      return state.holders.length + state.waiters.length > 0 ? state : undefined;
    } catch (err) {
      if (closedOrMissing(err)) return undefined;
      if (deadlineMs !== undefined && isDeadlineExceeded(err)) {
        throw new LeaseQueryTimeoutError(`the lease workflow of key "${key}" did not answer within ${deadlineMs / 1000}s: is a worker running on its task queue?`, { cause: err });
      }
      throw err;
    }
  }

  /** Every key somebody holds or waits for (at most `limit`), by key; each read with one query to its workflow. */
  async list(limit = 100): Promise<LeaseKeyState[]> {
    const keys: string[] = [];
    const query = `WorkflowType = '${LEASE_WORKFLOW_TYPE}' AND ExecutionStatus = 'Running'`;
    for await (const info of this.client.workflow.list({ query, pageSize: Math.min(limit, 100) })) {
      if (info.workflowId.startsWith(LEASE_WORKFLOW_ID_PREFIX)) keys.push(info.workflowId.slice(LEASE_WORKFLOW_ID_PREFIX.length));
      if (keys.length >= limit) break;
    }
    // Every query settles before this returns, failed or not: the caller closes its connection next, and a query
    // still in flight then is retried by the client on a closed channel, which throws outside any promise and ends
    // the process. The deadline keeps a key whose workflow never answers (its worker gone mid-task) to seconds.
    const settled = await Promise.allSettled([...new Set(keys)].sort().map((key) => this.describe(key, DESCRIBE_DEADLINE_MS)));
    const failures = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason as unknown] : []));
    // What this client must fix first (it cannot decrypt the answers: every key fails alike), then a key's own
    // problem (its workflow's queue has no worker), then a key that did not answer in time.
    if (failures.length > 0) {
      throw failures.find((e) => decryptionProblem(e) !== undefined) ?? failures.find((e) => !(e instanceof LeaseQueryTimeoutError)) ?? failures[0];
    }
    return settled.flatMap((s) => (s.status === 'fulfilled' && s.value ? [s.value] : []));
  }

  /** One acquire update (starting the key's workflow if it has none), retried while the workflow hands over or closes. */
  private async ask(request: LeaseRequest, waitMs: number, signal: AbortSignal | undefined): Promise<LeaseAnswer> {
    const { key, holder, limit, ttlMs, label, run } = request;
    for (let attempt = 1; ; attempt++) {
      const start = new WithStartWorkflowOperation(LEASE_WORKFLOW_TYPE, {
        workflowId: leaseWorkflowId(key),
        taskQueue: this.taskQueue,
        args: [{ key } satisfies LeaseWorkflowInput],
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
      try {
        return await this.client.workflow.executeUpdateWithStart(acquireLeaseUpdate, {
          args: [{ holder, limit, ttlMs, label, run, waitMs }],
          startWorkflowOperation: start,
        });
      } catch (err) {
        const refused = refusal(err);
        if (refused) throw new LeaseRequestError(`lease on key "${key}": ${refused}`);
        // The key's workflow closed or handed over between the start and the update: ask the next execution.
        if (attempt >= 5) throw err;
        signal?.throwIfAborted();
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
      }
    }
  }
}

/** A lease held: renew it while the work runs (`keepAlive`), release it when the work ends, on every path. */
export class Lease {
  constructor(
    private readonly leases: LeaseClient,
    readonly request: LeaseRequest,
    /** When it expires unless renewed; undefined for a lease held until released. @unit milliseconds since the epoch */
    public expiresAt: number | undefined,
  ) {}

  get key(): string {
    return this.request.key;
  }

  async renew(): Promise<boolean> {
    const answer = await this.leases.renew(this.request.key, this.request.holder);
    this.expiresAt = answer.expiresAt;
    return answer.held;
  }

  async release(): Promise<void> {
    await this.leases.release(this.request.key, this.request.holder);
  }

  /**
   * Renews every third of the ttl until the returned function is called; `onLost` hears of a renewal that found the
   * lease gone (the process was stalled past the ttl: its heartbeats stopped too, so Temporal retries the attempt).
   */
  keepAlive(onLost?: (key: string) => void): () => void {
    if (this.request.ttlMs === undefined) return () => undefined;
    const timer = setInterval(() => {
      this.renew().then(
        (held) => (held ? undefined : onLost?.(this.key)),
        () => undefined, // a failed renewal is tried again at the next tick, well within the ttl
      );
    }, Math.max(500, Math.floor(this.request.ttlMs / 3)));
    timer.unref();
    return () => clearInterval(timer);
  }
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

/** Checks a key before it names a workflow. @throws LeaseRequestError naming the key and the rule */
export function checkLeaseKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_LEASE_KEY_LENGTH || /[\u0000-\u001f\u007f]/.test(key)) {
    throw new LeaseRequestError(`lease key ${JSON.stringify(key)} must be 1 to ${MAX_LEASE_KEY_LENGTH} characters without control characters`);
  }
}

/** The refusal of the key's workflow (its validator), if that is what failed. */
function refusal(err: unknown): string | undefined {
  if (!(err instanceof WorkflowUpdateFailedError)) return undefined;
  const cause = err.cause;
  return cause instanceof ApplicationFailure && cause.type === 'LEASE_REQUEST_INVALID' ? cause.message : undefined;
}

function closedOrMissing(err: unknown): boolean {
  if (err instanceof WorkflowNotFoundError) return true;
  const text = err instanceof Error ? `${err.name} ${err.message}` : '';
  return /not found|already completed|workflow execution.*(completed|closed)/i.test(text);
}
