import { createHash, randomBytes, sign, verify, type KeyObject } from 'node:crypto';
import type { TrustSignature } from '../contracts/trust-types.js';
import { canonicalJson } from './canonical-json.js';
import type { SigningKey } from './keys.js';

/*
 * What a signature covers. Each signed statement names what it is (a run or a decision), the run it is for, a nonce
 * and an expiry, so a signature made for one run or one decision is worth nothing for another.
 */

/**
 * One schedule, as Temporal knows it: its id and when it was created. A schedule's action is signed for both, so a
 * schedule deleted and created again under the same id (by someone who copied the signed action) is another one.
 */
export interface ScheduleIdentity {
  scheduleId: string;
  /** When the server created the schedule (its `createTime`). @unit milliseconds since the epoch */
  createdAt: number;
}

/** What a run signature is for: one workflow id, or every run of one schedule. */
export type RunScope = { workflowId: string } | { schedule: ScheduleIdentity };

/** The run input without its signature, as the hash the statement carries. */
function inputHash(input: object): string {
  const { signature: _signature, ...unsigned } = input as { signature?: unknown };
  return createHash('sha256').update(canonicalJson(unsigned)).digest('hex');
}

function runStatement(input: object, scope: RunScope, nonce: string, expiresAt: number): Buffer {
  // A schedule's statement (v2) names the schedule and its creation; v1 named the action's workflow id alone, so an
  // action signed before v2 no longer verifies and `schedule update` signs it again.
  const named = 'workflowId' in scope ? { type: 'agent-pipeline/run/v1', workflowId: scope.workflowId } : { type: 'agent-pipeline/run/v2', schedule: scope.schedule.scheduleId, scheduleCreatedAt: scope.schedule.createdAt };
  return Buffer.from(canonicalJson({ ...named, nonce, expiresAt, input: inputHash(input) }));
}

function decisionStatement(runId: string, decision: string, args: object, nonce: string, expiresAt: number): Buffer {
  const { signature: _signature, ...unsigned } = args as { signature?: unknown };
  return Buffer.from(canonicalJson({ type: 'agent-pipeline/decision/v1', runId, decision, args: unsigned, nonce, expiresAt }));
}

function envelope(key: SigningKey, statement: (nonce: string) => Buffer, nonce: string, expiresAt: number, schedule?: true): TrustSignature {
  return { keyId: key.keyId, nonce, expiresAt, schedule, value: sign(null, statement(nonce), key.privateKey).toString('base64') };
}

/** Signs a run input for one workflow id, or (`{ schedule }`) for every run that schedule starts. */
export function signRunInput(key: SigningKey, input: object, scope: string | RunScope, expiresAt: number): TrustSignature {
  const nonce = randomBytes(16).toString('base64url');
  const resolved = typeof scope === 'string' ? { workflowId: scope } : scope;
  return envelope(key, (n) => runStatement(input, resolved, n, expiresAt), nonce, expiresAt, 'schedule' in resolved ? true : undefined);
}

/** Signs a decision (the update's name and its arguments) for one run. */
export function signDecision(key: SigningKey, runId: string, decision: string, args: object, expiresAt: number): TrustSignature {
  const nonce = randomBytes(16).toString('base64url');
  return envelope(key, (n) => decisionStatement(runId, decision, args, n, expiresAt), nonce, expiresAt);
}

/** A signature as it arrived: anything; checked field by field before it is used. */
function readSignature(value: unknown): TrustSignature | undefined {
  const s = value as Partial<TrustSignature> | undefined;
  if (typeof s !== 'object' || s === null) return undefined;
  if (typeof s.keyId !== 'string' || typeof s.nonce !== 'string' || typeof s.value !== 'string' || typeof s.expiresAt !== 'number') return undefined;
  return s as TrustSignature;
}

/** A malformed signature (wrong length, not base64) is one that does not verify, never an error. */
function verifies(statement: Buffer, key: KeyObject, value: string): boolean {
  try {
    return verify(null, statement, key, Buffer.from(value, 'base64'));
  } catch {
    return false;
  }
}

/** Checks the shared parts: a signature is there, its key is listed, it has not expired. Returns why not, or the key. */
function findKey(signature: TrustSignature | undefined, keys: ReadonlyMap<string, KeyObject>, variable: string, now: number): string | KeyObject {
  if (!signature) return `it is not signed; set AGENT_PIPELINE_SIGNING_KEY on the client to a key listed in the worker's ${variable}`;
  const key = keys.get(signature.keyId);
  if (!key) return `it is signed by key ${JSON.stringify(signature.keyId)}, which is not in the worker's ${variable}`;
  if (!(signature.expiresAt > now)) return `its signature expired at ${new Date(signature.expiresAt).toISOString()}; sign it again`;
  return key;
}

/**
 * Why a run input's signature is worth nothing whatever it was made for (none, a key not listed, expired), or
 * undefined: checked before anything is asked of the server about the run.
 */
export function findRunKeyProblem(input: object, keys: ReadonlyMap<string, KeyObject>, variable: string, now: number): string | undefined {
  const key = findKey(readSignature((input as { signature?: unknown }).signature), keys, variable, now);
  return typeof key === 'string' ? key : undefined;
}

/** True when the input carries a schedule's signature: it holds only for a run that schedule started. */
export function hasScheduleSignature(input: object): boolean {
  return readSignature((input as { signature?: unknown }).signature)?.schedule === true;
}

/**
 * Why a run input is not trusted, or undefined when a listed key signed it for this scope (the run's workflow id, or
 * the schedule that started it) and it has not expired. A schedule's signature never holds for a workflow id.
 */
export function findRunSignatureProblem(input: object, scope: RunScope, keys: ReadonlyMap<string, KeyObject>, variable: string, now: number): string | undefined {
  const signature = readSignature((input as { signature?: unknown }).signature);
  const key = findKey(signature, keys, variable, now);
  if (typeof key === 'string' || !signature) return key as string;
  if (signature.schedule && 'workflowId' in scope) return `its signature is a schedule's, and run ${scope.workflowId} was not started by that schedule`;
  const statement = runStatement(input, scope, signature.nonce, signature.expiresAt);
  if (!verifies(statement, key, signature.value)) {
    const what = 'workflowId' in scope ? 'another run id or another input' : `another schedule (or schedule ${scope.schedule.scheduleId} before it was deleted and created again) or another input; sign it again with \`agent-pipeline schedule update\``;
    return `its signature by key ${signature.keyId} does not match: it was made for ${what}`;
  }
  return undefined;
}

/** Why a decision is not trusted, or undefined when a listed key signed this decision for this run and it has not expired. */
export function findDecisionSignatureProblem(
  runId: string,
  decision: string,
  args: object,
  keys: ReadonlyMap<string, KeyObject>,
  now: number,
): string | undefined {
  const signature = readSignature((args as { signature?: unknown }).signature);
  const key = findKey(signature, keys, 'AGENT_PIPELINE_DECISION_KEYS (or AGENT_PIPELINE_TRUSTED_KEYS)', now);
  if (typeof key === 'string' || !signature) return key as string;
  const statement = decisionStatement(runId, decision, args, signature.nonce, signature.expiresAt);
  if (!verifies(statement, key, signature.value)) {
    return `its signature by key ${signature.keyId} does not match: it was made for another run or another decision`;
  }
  return undefined;
}
