import { CARRY_OVER_VERSION, type RunCarryOver } from '../contracts/run-carry-over.js';

/** When a run hands over to a fresh execution: the pipeline's `continueAsNew` settings, with their defaults. */
export interface HandOverLimits {
  /** @default 10000 */
  afterEvents: number;
  /** @unit bytes @default 10 MB */
  afterBytes: number;
}

/** Temporal warns about a history at 10,240 events or 10 MB; a run hands over before either. */
export const DEFAULT_HAND_OVER_EVENTS = 10_000;
export const DEFAULT_HAND_OVER_MB = 10;

export function handOverLimits(settings: { afterEvents?: number; afterMb?: number } | undefined): HandOverLimits {
  return { afterEvents: settings?.afterEvents ?? DEFAULT_HAND_OVER_EVENTS, afterBytes: (settings?.afterMb ?? DEFAULT_HAND_OVER_MB) * 1024 * 1024 };
}

/**
 * The carried state of a continued run, checked for the one shape this code knows. A start input with an unknown
 * version is a bug or a newer worker's hand-over: fail loudly rather than run with half a state.
 * @throws TypeError naming the version found
 */
export function readCarryOver(value: unknown): RunCarryOver | undefined {
  if (value === undefined) return undefined;
  const version = (value as { version?: unknown } | null)?.version;
  if (version !== CARRY_OVER_VERSION) throw new TypeError(`unknown carry-over version ${JSON.stringify(version)} (this worker reads ${CARRY_OVER_VERSION})`);
  return value as RunCarryOver;
}
