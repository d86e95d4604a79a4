import { allHandlersFinished, condition, continueAsNew, setHandler, upsertMemo, workflowInfo } from '@temporalio/workflow';
import { MAX_REQUESTS_PER_MINUTE } from '../contracts/api-key-limit-messages.js';
import { extendPause, emptyWindow, idleAt, reserveStart } from './api-key-window.js';
import { keyWindowQuery, pauseKeySignal, PAUSED_UNTIL_MEMO, reserveRequestUpdate, type ApiKeyLimitInput } from '../contracts/api-key-limit-messages.js';

/** History length past which the workflow continues as new, so that a busy key's history stays small. */
const CONTINUE_AS_NEW_AFTER_EVENTS = 2_000;

/**
 * One API key's shared limits, for every worker using the key: the pause a 429/529 with `retry-after` imposes on new
 * model calls, and the start times granted under `requestsPerMinute`. Workers read the pause from the memo
 * (describe, answered by the server alone) and ask for a start time with an update. The workflow ends once the key
 * has nothing to remember, and the next report or request starts it again (signal- and update-with-start).
 */
export async function apiKeyLimitWorkflow(input: ApiKeyLimitInput): Promise<void> {
  const window = input.window ?? emptyWindow();
  let changed = false;
  setHandler(pauseKeySignal, ({ until }) => {
    if (extendPause(window, until, Date.now())) changed = true;
  });
  setHandler(
    reserveRequestUpdate,
    ({ perMinute }) => {
      changed = true;
      return { startAt: reserveStart(window, Date.now(), perMinute) };
    },
    {
      validator: ({ perMinute }) => {
        if (!Number.isInteger(perMinute) || perMinute < 1 || perMinute > MAX_REQUESTS_PER_MINUTE) throw new Error(`perMinute must be a whole number from 1 to ${MAX_REQUESTS_PER_MINUTE}`);
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
    if (workflowInfo().historyLength > (input.continueAsNewAfterEvents ?? CONTINUE_AS_NEW_AFTER_EVENTS) || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      return continueAsNew<typeof apiKeyLimitWorkflow>({ ...input, window });
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
