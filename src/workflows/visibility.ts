import { setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import { renderRunReport } from './run-report.js';
import type { RunTracker } from './run-tracker.js';
import { COST_USD_ATTRIBUTE, CURRENT_STAGES_ATTRIBUTE, RUN_STATUS_ATTRIBUTE } from './search-attributes.js';

/**
 * Keeps what the Web UI and `list` show in step with the run: the current details (a markdown report, held
 * in memory and served by a built-in query, so it costs no history) and the search attributes (each upsert is
 * a history event, so they are upserted only when they change).
 */
export class RunVisibility {
  private published = '';

  constructor(private readonly tracker: RunTracker) {}

  publish(): void {
    const state = this.tracker.state;
    setCurrentDetails(renderRunReport(state, Date.now()));
    const stages = this.tracker.currentStageIds();
    // Rounded as `status` shows it; cost changes after attempts, which also change stage states.
    const costUsd = Math.round(state.costUsd * 10_000) / 10_000;
    const key = JSON.stringify([stages, costUsd, state.status]);
    if (key === this.published) return;
    this.published = key;
    upsertSearchAttributes([
      { key: CURRENT_STAGES_ATTRIBUTE, value: stages },
      { key: COST_USD_ATTRIBUTE, value: costUsd },
      { key: RUN_STATUS_ATTRIBUTE, value: state.status },
    ]);
  }
}
