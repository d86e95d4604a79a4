import type { Logger, LogLevel, LogMetadata, Worker } from '@temporalio/worker';
import { describe, expect, test } from 'vitest';
import { NO_WORKFLOWS_WARNING, quietAboutNoWorkflows, withoutNoWorkflowsWarning } from '../../src/worker/owner-workers.js';

function recordingLogger(): { logger: Logger; lines: [LogLevel, string, LogMetadata | undefined][] } {
  const lines: [LogLevel, string, LogMetadata | undefined][] = [];
  const at = (level: LogLevel) => (message: string, meta?: LogMetadata) => void lines.push([level, message, meta]);
  const logger: Logger = { log: (level, message, meta) => void lines.push([level, message, meta]), trace: at('TRACE'), debug: at('DEBUG'), info: at('INFO'), warn: at('WARN'), error: at('ERROR') };
  return { logger, lines };
}

describe("the owner Workers' log", () => {
  test('drops only the warning that a Worker has no workflows', () => {
    const { logger, lines } = recordingLogger();
    const quiet = withoutNoWorkflowsWarning(logger);
    quiet.warn(NO_WORKFLOWS_WARNING, { taskQueue: 'q@owner-1' });
    quiet.log('WARN', NO_WORKFLOWS_WARNING);
    quiet.warn('Activity failed', { taskQueue: 'q@owner-1' });
    quiet.log('WARN', 'something else');
    quiet.info(NO_WORKFLOWS_WARNING);
    quiet.error('broken');
    quiet.debug('d');
    quiet.trace('t');
    expect(lines).toEqual([
      ['WARN', 'Activity failed', { taskQueue: 'q@owner-1' }],
      ['WARN', 'something else', undefined],
      ['INFO', NO_WORKFLOWS_WARNING, undefined],
      ['ERROR', 'broken', undefined],
      ['DEBUG', 'd', undefined],
      ['TRACE', 't', undefined],
    ]);
  });

  test("is swapped into the Worker where the SDK reads it when it starts polling", () => {
    const { logger, lines } = recordingLogger();
    const worker = { logger } as unknown as Worker;
    quietAboutNoWorkflows(worker);
    const swapped = (worker as unknown as { logger: Logger }).logger;
    swapped.warn(NO_WORKFLOWS_WARNING);
    swapped.warn('kept');
    expect(lines).toEqual([['WARN', 'kept', undefined]]);
  });
});
