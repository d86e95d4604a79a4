import { DefaultLogger, Runtime, type ActivityInterceptorsFactory, type LogEntry, type Logger, type LogLevel, type MetricsExporterConfig } from '@temporalio/worker';
import { terminalSafe } from './terminal-text.js';

/** Log levels from least to most severe, as Temporal names them. */
const LEVELS: readonly LogLevel[] = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];

/** How the worker logs; everything comes from the environment (see docs/deployment.md). */
export interface LoggingOptions {
  /** @default 'INFO' (`AGENT_PIPELINE_LOG_LEVEL`) */
  level: LogLevel;
  /** `json`: one JSON object per line, for log collectors; `text`: for people. @default json when stderr is not a TTY */
  format: 'json' | 'text';
}

export function loggingOptionsFromEnv(env: NodeJS.ProcessEnv, stderrIsTty: boolean): LoggingOptions {
  const level = (env.AGENT_PIPELINE_LOG_LEVEL ?? 'INFO').toUpperCase();
  if (!LEVELS.includes(level as LogLevel)) {
    throw new Error(`AGENT_PIPELINE_LOG_LEVEL=${env.AGENT_PIPELINE_LOG_LEVEL} is not a log level; use one of ${LEVELS.join(', ')}`);
  }
  const format = env.AGENT_PIPELINE_LOG_FORMAT ?? (stderrIsTty ? 'text' : 'json');
  if (format !== 'json' && format !== 'text') throw new Error(`AGENT_PIPELINE_LOG_FORMAT=${format} is not a log format; use json or text`);
  return { level: level as LogLevel, format };
}

/** Makes log metadata JSON-safe: errors become `{name, message, type?, stack}`, bigints strings. */
function toJsonValue(value: unknown): unknown {
  if (value instanceof Error) {
    const type = (value as { type?: unknown }).type;
    return { name: value.name, message: value.message, ...(typeof type === 'string' ? { type } : {}), stack: value.stack };
  }
  if (typeof value === 'bigint') return value.toString();
  return value;
}

/**
 * Formats one entry. JSON lines carry `time`, `level`, `message` and every metadata field at the top level, so a
 * collector can filter on `workflowId` (the run id), `stage` and `attempt`.
 */
export function formatLogEntry(entry: LogEntry, format: LoggingOptions['format']): string {
  const time = new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString();
  const meta = entry.meta ?? {};
  if (format === 'json') {
    return JSON.stringify({ time, level: entry.level, message: entry.message, ...meta }, (_key, value: unknown) => toJsonValue(value));
  }
  const fields = Object.entries(meta)
    .filter(([key]) => key !== 'sdkComponent' && key !== 'taskToken')
    .map(([key, value]) => `${key}=${typeof value === 'object' ? JSON.stringify(value, (_k, v: unknown) => toJsonValue(v)) : String(value)}`);
  // The text format is for a terminal or a journal: a warning quoting a run's output keeps no terminal control.
  return terminalSafe(`${time} ${entry.level.padEnd(5)} ${entry.message}${fields.length ? ` ${fields.join(' ')}` : ''}`);
}

/** A Temporal logger writing formatted entries to stderr (or `write`). */
export function createLogger(options: LoggingOptions, write: (line: string) => void = (line) => void process.stderr.write(`${line}\n`)): Logger {
  return new DefaultLogger(options.level, (entry) => write(formatLogEntry(entry, options.format)));
}

/**
 * Installs the Temporal runtime with our logger, so the SDK's own lines (worker state, activity failures), the
 * native core's warnings and our activities' `log` calls all come out in one format. Call once, before any Worker.
 */
export function installRuntimeLogging(env: NodeJS.ProcessEnv = process.env, metrics?: MetricsExporterConfig): Logger {
  const logger = createLogger(loggingOptionsFromEnv(env, Boolean(process.stderr.isTTY)));
  // `metrics`: the SDK's Prometheus exporter when AGENT_PIPELINE_METRICS is set (src/telemetry/worker-telemetry.ts).
  Runtime.install({ logger, telemetryOptions: { logging: { forward: {}, filter: { core: 'WARN', other: 'ERROR' } }, metrics } });
  return logger;
}

/**
 * Adds `runId` and `stage` (and the review `round`) to every log line of a stage attempt, and logs each attempt's
 * start and end at INFO. Temporal's activity logger already attaches `workflowId`, `activityType` and `attempt`; the
 * stage is only in the activity's input, so the SDK's own DEBUG "Activity started" line, written before any
 * interceptor runs, is the one line without it.
 */
export const stageLogInterceptor: ActivityInterceptorsFactory = (ctx) => {
  let stage: { stage?: string; round?: number } = {};
  return {
    inbound: {
      async execute(input, next) {
        const arg = input.args[0] as { stage?: { id?: string; backend?: string; model?: string }; round?: number } | undefined;
        stage = { stage: arg?.stage?.id, round: arg?.round };
        const started = Date.now();
        ctx.log.info('stage attempt started', { backend: arg?.stage?.backend, model: arg?.stage?.model });
        try {
          const result = await next(input);
          ctx.log.info('stage attempt ended', { outcome: (result as { status?: string } | undefined)?.status ?? 'completed', durationMs: Date.now() - started });
          return result;
        } catch (err) {
          const outcome = ctx.cancellationSignal.aborted ? 'cancelled' : 'failed';
          ctx.log.info('stage attempt ended', { outcome, error: (err as Error).message, durationMs: Date.now() - started });
          throw err;
        }
      },
    },
    outbound: {
      getLogAttributes(attributes, next) {
        return next({ ...attributes, runId: ctx.info.workflowExecution?.workflowId, ...stage });
      },
    },
  };
};
