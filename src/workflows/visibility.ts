import { setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import { renderRunReport, StageRows } from './run-report.js';
import type { RunTracker } from './run-tracker.js';
import { COST_USD_ATTRIBUTE, CURRENT_STAGES_ATTRIBUTE, RUN_STATUS_ATTRIBUTE } from '../contracts/search-attributes.js';

/** Runs recorded before it listed every current stage in the search attribute (see {@link boundCurrentStages}). */
export const BOUNDED_STAGES_PATCH = 'bounded-current-stages';
/** The most current stages the search attribute lists. */
export const MAX_LISTED_STAGES = 20;
/** Temporal refuses a search attribute value over 2,048 bytes (and fails the run); stay well under it. @unit characters */
const MAX_LISTED_STAGES_CHARS = 1_500;

/**
 * The first current stages, in pipeline order, as many as fit the search attribute. A wide fan-out would otherwise
 * exceed Temporal's size limit, which fails the run, and every stage that started or ended would upsert the whole
 * list again, growing the history with the square of the width; past the first ones, a change lists the same.
 */
export function boundCurrentStages(ids: readonly string[]): string[] {
  const listed: string[] = [];
  let chars = 2;
  for (const id of ids.slice(0, MAX_LISTED_STAGES)) {
    chars += JSON.stringify(id).length + 1;
    if (chars > MAX_LISTED_STAGES_CHARS) break;
    listed.push(id);
  }
  return listed;
}

/**
 * Keeps what the Web UI and `list` show in step with the run: the current details (a markdown report, held
 * in memory and served by a built-in query, so it costs no history) and the search attributes (each upsert is
 * a history event, so they are upserted only when they change).
 */
export class RunVisibility {
  private published = '';
  /** The report's rows, each rendered again only when its stage changed. */
  private readonly rows: StageRows;

  /** @param bounded whether the run lists at most the first current stages (runs recorded before list them all) */
  constructor(
    private readonly tracker: RunTracker,
    private readonly bounded: boolean,
  ) {
    this.rows = new StageRows(() => tracker.takeReportChanged());
  }

  /** A render of the report is due at the end of the current run of workflow code. */
  private rendering = false;

  publish(): void {
    const state = this.tracker.state;
    this.renderSoon();
    const current = this.tracker.currentStageIds();
    const stages = this.bounded ? boundCurrentStages(current) : current;
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

  /**
   * The report is rendered once however many times the run changed in one go (a stage that ends marks itself, then
   * the scheduler starts the next: each publishes): in a microtask, which runs before the activation completes. The
   * report costs no command, so rendering it later changes no history; the search attributes above stay in order.
   */
  private renderSoon(): void {
    if (this.rendering) return;
    this.rendering = true;
    void Promise.resolve().then(() => {
      this.rendering = false;
      setCurrentDetails(renderRunReport(this.tracker.state, Date.now(), this.rows));
    });
  }
}
