import { allHandlersFinished, condition, makeContinueAsNewFunc, patched, setHandler, upsertMemo, workflowInfo } from '@temporalio/workflow';
import { MAX_REQUESTS_PER_MINUTE } from '../contracts/api-key-limit-messages.js';
import { cameUnencrypted } from '../contracts/payload-origin.js';
import { extendPause, emptyWindow, idleAt, reserveStart } from './api-key-window.js';
import { requireKeyHolder } from './key-holders.js';
import { rejectUpdate } from './waits.js';
import { keyWindowQuery, pauseKeySignal, PAUSED_UNTIL_MEMO, reportPauseUpdate, reserveRequestUpdate, type ApiKeyLimitInput } from '../contracts/api-key-limit-messages.js';

/** History length past which the workflow continues as new, so that a busy key's history stays small. */
const CONTINUE_AS_NEW_AFTER_EVENTS = 2_000;

/**
 * Patch (issue 33): a pause signal no key holder wrote is ignored, and so are the window and the hand-over point of a
 * start input no key holder wrote. Decided once, at the execution's first task, so an execution recorded before it
 * replays its signals as they were applied.
 */
export const API_KEY_TRUST_PATCH = 'trust33-api-key-key-holders';

/**
 * One API key's shared limits, for every worker using the key: the pause a 429/529 with `retry-after` imposes on new
 * model calls, and the start times granted under `requestsPerMinute`. Workers read the pause from the memo
 * (describe, answered by the server alone) and ask for a start time with an update. The workflow ends once the key
 * has nothing to remember, and the next report or request starts it again (update-with-start).
 */
export async function apiKeyLimitWorkflow(input: ApiKeyLimitInput): Promise<void> {
  const checks = patched(API_KEY_TRUST_PATCH);
  // A namespace client may start the key's workflow first; its window (a pause for everyone) is not taken.
  const given: Partial<ApiKeyLimitInput> = checks && cameUnencrypted(input) ? {} : input;
  const window = given.window ?? emptyWindow();
  let changed = false;
  const pause = (until: number): void => {
    if (extendPause(window, until, Date.now())) changed = true;
  };
  setHandler(pauseKeySignal, (report) => {
    if (checks && (cameUnencrypted(report) || typeof report?.until !== 'number')) return;
    pause(report.until);
  });
  setHandler(reportPauseUpdate, ({ until }) => pause(until), {
    validator: (report) => {
      requireKeyHolder(report, 'the reportPause update', reportPauseUpdate.name);
      if (typeof report?.until !== 'number' || !Number.isFinite(report.until)) throw rejectUpdate('a pause needs `until`, a time in milliseconds since the epoch');
    },
  });
  setHandler(
    reserveRequestUpdate,
    ({ perMinute }) => {
      changed = true;
      return { startAt: reserveStart(window, Date.now(), perMinute) };
    },
    {
      validator: (request) => {
        requireKeyHolder(request, 'the reserveRequest update', reserveRequestUpdate.name);
        const perMinute = request?.perMinute;
        if (!Number.isInteger(perMinute) || perMinute < 1 || perMinute > MAX_REQUESTS_PER_MINUTE) throw rejectUpdate(`perMinute must be a whole number from 1 to ${MAX_REQUESTS_PER_MINUTE}`);
      },
    },
  );
  setHandler(keyWindowQuery, () => ({ pausedUntil: window.pausedUntil, starts: [...window.starts] }));
  let published = -1;
  for (;;) {
    if (window.pausedUntil !== published) {
      upsertMemo({ [PAUSED_UNTIL_MEMO]: window.pausedUntil });
      published = window.pausedUntil;
    }
    if (workflowInfo().historyLength > (given.continueAsNewAfterEvents ?? CONTINUE_AS_NEW_AFTER_EVENTS) || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      // The pause goes with it in the memo: the next execution publishes it only at its first task, and a worker that
      // described the key in between would have read no pause.
      const next = makeContinueAsNewFunc<typeof apiKeyLimitWorkflow>({ memo: { [PAUSED_UNTIL_MEMO]: window.pausedUntil } });
      return next({ ...given, keyId: input.keyId, window });
    }
    changed = false;
    const rest = idleAt(window) - Date.now();
    if (rest <= 0) {
      if (allHandlersFinished()) return;
      await condition(allHandlersFinished);
      continue;
    }
    await condition(() => changed, rest);
  }
}
