/*
 * Durations as text (`90s`, `30m`): their type, milliseconds and the way people read them. No zod here (the schema
 * is duration-schema.ts): the command line formats durations in commands that load no schema.
 */

/** The units a duration ends with: milliseconds, seconds, minutes, hours, days. */
export type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd';
/**
 * A duration as text: a number and a unit, `90s`, `1.5h`, `30 m`. A template-literal type, so `'1 minute'` or `'30'`
 * in a definition fails to compile instead of at `start`.
 */
export type DurationText = `${number}${DurationUnit}` | `${number} ${DurationUnit}`;
/** A duration as written in the file: `90s`, `30m`, `2h`, `1d`, or a number of milliseconds. */
export type Duration = number | DurationText;

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * Converts a file duration (`"30m"`, `90000`) to milliseconds. The schema has usually checked the format already;
 * text from elsewhere (a variable, a flag) is checked here. @throws Error naming the format for text that is not one
 */
export function toMilliseconds(duration: Duration | string): number {
  if (typeof duration === 'number') return duration;
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/.exec(duration);
  if (!match) throw new Error(`invalid duration "${duration}": write a number and a unit (ms, s, m, h or d), such as "90s", "30m" or "2h"`);
  return Math.round(Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]);
}

/** Formats milliseconds for people: `850ms`, `12.3s`, `4m05s`, `1h02m`. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)}s`;
  const totalSeconds = Math.round(ms / 1_000);
  if (totalSeconds < 3_600) return `${Math.floor(totalSeconds / 60)}m${String(totalSeconds % 60).padStart(2, '0')}s`;
  const totalMinutes = Math.floor(totalSeconds / 60);
  return `${Math.floor(totalMinutes / 60)}h${String(totalMinutes % 60).padStart(2, '0')}m`;
}
