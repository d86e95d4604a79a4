import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Why a stage attempt ended, as the `outcome` label says it. */
export type StageOutcome = 'completed' | 'needs_input' | 'failed' | 'cancelled';

/** A label value as it may appear in a series: a name, not free text. Anything else is counted as `invalid`. */
const LABEL_VALUE = /^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,99}$/;
/** Distinct `pipeline`/`stage`/`backend`/`model` sets a worker keeps series for; later ones are counted as `other`. */
export const MAX_LABEL_SETS = 1_000;

/**
 * The project's own Prometheus metrics, in a registry of their own (no Node default metrics: the SDK's worker
 * metrics are served next to them). Created only when `AGENT_PIPELINE_METRICS` is set.
 */
export class PipelineMetrics {
  readonly registry = new Registry();
  /** Wall time of each stage attempt, by how it ended. */
  readonly stageDuration = new Histogram({
    name: 'agent_pipeline_stage_duration_seconds',
    help: 'Wall time of one stage attempt, from the activity start to its result or failure.',
    labelNames: ['pipeline', 'stage', 'backend', 'outcome'] as const,
    // Agent stages run from seconds to an hour.
    buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600],
    registers: [this.registry],
  });
  readonly stageCost = new Counter({
    name: 'agent_pipeline_stage_cost_usd_total',
    help: 'Model cost of stage attempts in US dollars (each attempt counted once, retries included).',
    labelNames: ['pipeline', 'stage', 'backend', 'model'] as const,
    registers: [this.registry],
  });
  readonly tokens = new Counter({
    name: 'agent_pipeline_tokens_total',
    help: 'Model tokens used by stage attempts; direction is input, output or cache.',
    labelNames: ['pipeline', 'stage', 'backend', 'model', 'direction'] as const,
    registers: [this.registry],
  });
  readonly stageFailures = new Counter({
    name: 'agent_pipeline_stage_failures_total',
    help: 'Stage attempts that failed, by failure type (the catalogue in src/failure-types.ts, or CANCELLED).',
    labelNames: ['pipeline', 'stage', 'backend', 'type'] as const,
    registers: [this.registry],
  });
  readonly agentsRunning = new Gauge({
    name: 'agent_pipeline_agents_running',
    help: 'Stage attempts (agent processes or API calls) running on this worker now.',
    labelNames: ['backend'] as const,
    registers: [this.registry],
  });
  readonly runsWaiting: Gauge;
  /** The label sets seen so far, to cap them at {@link MAX_LABEL_SETS}. */
  private readonly labelSets = new Set<string>();

  /**
   * @param countWaitingRuns counts the open runs that wait for a person, read at each scrape (a Visibility count
   *   over the whole namespace, so every worker reports the same number: aggregate with `max`, not `sum`).
   */
  constructor(countWaitingRuns?: () => Promise<number>) {
    this.runsWaiting = new Gauge({
      name: 'agent_pipeline_runs_waiting_for_person',
      help: 'Open runs in the namespace that wait for a person (an answer, approval, budget or failure decision).',
      registers: [this.registry],
      async collect() {
        if (!countWaitingRuns) return;
        // A scrape must not fail because Visibility is slow or down; the last value stays.
        await countWaitingRuns().then((n) => this.set(n), () => undefined);
      },
    });
  }

  /**
   * Label values from a run's input made safe for series: a value that is not a plain name becomes `invalid`, and
   * once {@link MAX_LABEL_SETS} sets are known every new one becomes `other`, so no run can grow the worker's memory
   * or the scrape without bound by naming its pipelines and stages at will.
   */
  boundLabels<K extends string>(values: Record<K, string>): Record<K, string> {
    const clean = Object.fromEntries(Object.entries<string>(values).map(([key, value]) => [key, LABEL_VALUE.test(value) ? value : 'invalid'])) as Record<K, string>;
    const key = JSON.stringify(clean);
    if (this.labelSets.has(key)) return clean;
    if (this.labelSets.size >= MAX_LABEL_SETS) return Object.fromEntries(Object.keys(clean).map((k) => [k, 'other'])) as Record<K, string>;
    this.labelSets.add(key);
    return clean;
  }

  /** Text exposition of the project's metrics. */
  async text(): Promise<string> {
    return this.registry.metrics();
  }
}
