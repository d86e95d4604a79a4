import { Command, InvalidArgumentError } from 'commander';
import { ScheduleNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure, WorkflowNotFoundError } from '@temporalio/common';
import { describe, expect, test } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { buildListQuery } from '../../src/library/list-runs.js';
import { describeRunListSearchAttributes, RUN_LIST_SEARCH_ATTRIBUTES, RUN_LIST_STATUSES } from '../../src/library/run-list-status.js';
import { SEARCH_ATTRIBUTES } from '../../src/contracts/search-attributes.js';
import { addListCommand } from '../../src/cli/commands/list.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { NoWorkerError, PipelineInvalidError, RunNotFoundError, TemporalUnavailableError } from '../../src/library/errors.js';
import { toLibraryError } from '../../src/library/temporal-errors.js';
import { EXIT, exitCodeFor, UsageError } from '../../src/cli/errors.js';
import { parseDurationMs, parseOverlap } from '../../src/cli/options.js';
import { buildSchedule } from '../../src/library/schedule-spec.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { formatLogEntry, loggingOptionsFromEnv } from '../../src/logging.js';
import { PipelineValidationError } from '../../src/pipeline/errors.js';
import type { PipelineRunInput } from '../../src/contracts/messages.js';
import { workerOptionsFromEnv } from '../../src/worker/env.js';
import { TemporalCliNotFoundError } from '../../src/dev/temporal-cli.js';

describe('worker settings from the environment', () => {
  test('have defaults for a worker, which fails closed: the sandbox is required', () => {
    expect(workerOptionsFromEnv({})).toEqual({
      maxConcurrentStages: 8,
      maxConcurrentWorkflowTasks: 40,
      shutdownGraceMs: 30_000,
      shutdownForceAfterGraceMs: 60_000,
      healthFile: undefined,
      killGraceMs: 5_000,
      prewarm: { enabled: true, ttlMs: 120_000 },
      sandbox: 'required',
      sandboxAllowLocal: false,
      apiKeyLimits: { requestsPerMinute: undefined, concurrentRequests: undefined },
      ownerTimeoutMs: 60_000,
      stickyTimeoutMs: 10_000,
      storeSweepMs: 3_600_000,
    });
  });

  test('are read from AGENT_PIPELINE_* variables', () => {
    expect(
      workerOptionsFromEnv({
        AGENT_PIPELINE_MAX_CONCURRENT_STAGES: '3',
        AGENT_PIPELINE_MAX_CONCURRENT_WORKFLOW_TASKS: '10',
        AGENT_PIPELINE_SHUTDOWN_GRACE: '2m',
        AGENT_PIPELINE_SHUTDOWN_FORCE: '15s',
        AGENT_PIPELINE_HEALTH_FILE: '/tmp/health',
        AGENT_PIPELINE_KILL_GRACE: '2s',
        AGENT_PIPELINE_PREWARM: 'off',
        AGENT_PIPELINE_PREWARM_TTL: '30s',
        AGENT_PIPELINE_SANDBOX: 'auto',
        AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL: '1',
        AGENT_PIPELINE_API_REQUESTS_PER_MINUTE: '50',
        AGENT_PIPELINE_API_CONCURRENT_REQUESTS: '4',
        AGENT_PIPELINE_OWNER_TIMEOUT: '20s',
        AGENT_PIPELINE_STICKY_TIMEOUT: '2s',
        AGENT_PIPELINE_STORE_SWEEP: 'off',
      }),
    ).toEqual({
      maxConcurrentStages: 3,
      maxConcurrentWorkflowTasks: 10,
      shutdownGraceMs: 120_000,
      shutdownForceAfterGraceMs: 15_000,
      healthFile: '/tmp/health',
      killGraceMs: 2_000,
      prewarm: { enabled: false, ttlMs: 30_000 },
      sandbox: 'auto',
      sandboxAllowLocal: true,
      apiKeyLimits: { requestsPerMinute: 50, concurrentRequests: 4 },
      ownerTimeoutMs: 20_000,
      stickyTimeoutMs: 2_000,
      storeSweepMs: undefined,
    });
  });

  test('refuse an API key limit that is not a whole number in range, naming the variable', () => {
    expect(() => workerOptionsFromEnv({ AGENT_PIPELINE_API_CONCURRENT_REQUESTS: '-1' })).toThrow(
      new ConfigError(
        "[CONFIG_INVALID] AGENT_PIPELINE_API_CONCURRENT_REQUESTS=-1 is not a whole number from 1 to 1000; set the limit of your API key's plan, or unset it for no limit",
      ),
    );
  });

  test('refuse a sandbox mode other than required, permissive, auto or off, naming the variable', () => {
    expect(() => workerOptionsFromEnv({ AGENT_PIPELINE_SANDBOX: 'strict' })).toThrow(
      new ConfigError('[CONFIG_INVALID] AGENT_PIPELINE_SANDBOX=strict is not one of required, permissive, auto, off; unset it for the default (required)'),
    );
  });

  test('refuse a warm start setting that is not on or off, or a TTL that is not a duration', () => {
    expect(() => workerOptionsFromEnv({ AGENT_PIPELINE_PREWARM: 'maybe' })).toThrow(
      new ConfigError('[CONFIG_INVALID] AGENT_PIPELINE_PREWARM=maybe is not on or off; unset it for the default (on)'),
    );
    expect(() => workerOptionsFromEnv({ AGENT_PIPELINE_PREWARM_TTL: 'soon' })).toThrow(/AGENT_PIPELINE_PREWARM_TTL=soon is not a duration/);
  });

  test('refuse values that are not numbers or durations, naming the variable and the fix', () => {
    expect(() => workerOptionsFromEnv({ AGENT_PIPELINE_MAX_CONCURRENT_STAGES: '0' })).toThrow(
      new ConfigError('[CONFIG_INVALID] AGENT_PIPELINE_MAX_CONCURRENT_STAGES=0 is not a whole number of 1 or more; unset it for the default 8'),
    );
    expect(() => workerOptionsFromEnv({ AGENT_PIPELINE_SHUTDOWN_GRACE: 'soon' })).toThrow('AGENT_PIPELINE_SHUTDOWN_GRACE=soon is not a duration; write it like 30s, 2m or 1h');
    expect(() => workerOptionsFromEnv({ AGENT_PIPELINE_OWNER_TIMEOUT: 'soon' })).toThrow('AGENT_PIPELINE_OWNER_TIMEOUT=soon is not a duration; write it like 30s, 2m or 1h');
    expect(() => workerOptionsFromEnv({ AGENT_PIPELINE_STICKY_TIMEOUT: 'soon' })).toThrow('AGENT_PIPELINE_STICKY_TIMEOUT=soon is not a duration; write it like 30s, 2m or 1h');
    expect(() => workerOptionsFromEnv({ AGENT_PIPELINE_KILL_GRACE: 'a bit' })).toThrow('AGENT_PIPELINE_KILL_GRACE=a bit is not a duration; write it like 30s, 2m or 1h');
  });
});

describe('structured logs', () => {
  const entry = {
    level: 'INFO' as const,
    message: 'stage attempt ended',
    timestampNanos: 1_700_000_000_123_000_000n,
    meta: { workflowId: 'run-1', runId: 'run-1', stage: 'spec', attempt: 2, error: ApplicationFailure.create({ type: 'CLI_CRASHED', message: 'boom' }) },
  };

  test('are one JSON object per line with time, level, message and every field at the top level', () => {
    const line = formatLogEntry(entry, 'json');
    expect(line).not.toContain('\n');
    expect(JSON.parse(line)).toMatchObject({
      time: '2023-11-14T22:13:20.123Z',
      level: 'INFO',
      message: 'stage attempt ended',
      workflowId: 'run-1',
      runId: 'run-1',
      stage: 'spec',
      attempt: 2,
      error: { name: 'ApplicationFailure', message: 'boom', type: 'CLI_CRASHED' },
    });
  });

  test('read as text on a terminal', () => {
    expect(formatLogEntry({ ...entry, meta: { stage: 'spec', attempt: 2 } }, 'text')).toBe('2023-11-14T22:13:20.123Z INFO  stage attempt ended stage=spec attempt=2');
  });

  test('default to JSON when stderr is not a terminal, and refuse unknown levels', () => {
    expect(loggingOptionsFromEnv({}, false)).toEqual({ level: 'INFO', format: 'json' });
    expect(loggingOptionsFromEnv({ AGENT_PIPELINE_LOG_LEVEL: 'debug' }, true)).toEqual({ level: 'DEBUG', format: 'text' });
    expect(() => loggingOptionsFromEnv({ AGENT_PIPELINE_LOG_LEVEL: 'loud' }, true)).toThrow('AGENT_PIPELINE_LOG_LEVEL=loud is not a log level');
  });
});

describe('Web UI links', () => {
  test('name the host the address names, as the dev server prints its UI, and none for a remote cluster', () => {
    // The demo printed its UI once as http://127.0.0.1:18933 (the dev server's) and once as http://localhost:18933.
    expect(loadConfig({ TEMPORAL_ADDRESS: '127.0.0.1:17933' }).webUiUrl).toBe('http://127.0.0.1:18933');
    expect(loadConfig({ TEMPORAL_ADDRESS: 'localhost:7233' }).webUiUrl).toBe('http://localhost:8233');
    expect(loadConfig({}).webUiUrl).toBe('http://localhost:8233');
    expect(loadConfig({ TEMPORAL_ADDRESS: 'temporal.internal:7233' }).webUiUrl).toBe('');
    expect(loadConfig({ TEMPORAL_ADDRESS: '127.0.0.1:7233', AGENT_PIPELINE_WEB_UI: 'https://ui.example.com/' }).webUiUrl).toBe('https://ui.example.com');
  });
});

describe('list filters', () => {
  test('become a visibility query on the workflow type, our search attributes and the start time', () => {
    expect(buildListQuery({})).toBe("WorkflowType = 'pipelineWorkflow' AND ExecutionStatus != 'ContinuedAsNew'");
    expect(buildListQuery({ pipeline: "it's", status: 'failed', sinceMs: 3_600_000 }, Date.UTC(2024, 0, 1, 12))).toBe(
      "WorkflowType = 'pipelineWorkflow' AND ExecutionStatus != 'ContinuedAsNew' AND AgentPipeline = 'it\\'s' AND ExecutionStatus = 'Failed' AND StartTime > '2024-01-01T11:00:00.000Z'",
    );
  });

  test('filter on the search attributes list --help and docs/cli.md name, and on no other', () => {
    // Every attribute some filter's query compares, but the workflow type every query names.
    const queries = [buildListQuery({ pipeline: 'p', sinceMs: 1 }), ...RUN_LIST_STATUSES.map((status) => buildListQuery({ status }))];
    const compared = new Set(queries.flatMap((query) => [...query.matchAll(/\b([A-Z]\w*) (?:=|!=|>|IN)/g)].map((m) => m[1])));
    compared.delete('WorkflowType');
    expect([...compared].sort()).toEqual([...RUN_LIST_SEARCH_ATTRIBUTES].sort());
    // The project's own are those the workflow keeps current.
    const own = RUN_LIST_SEARCH_ATTRIBUTES.filter((name) => name.startsWith('AgentPipeline'));
    for (const name of own) expect(SEARCH_ATTRIBUTES.map((key) => key.name)).toContain(name);
    // Said the same in `list --help` and docs/cli.md (they named three and four).
    const program = new Command();
    addListCommand(program);
    let help = '';
    program.commands[0].configureOutput({ writeOut: (text) => (help += text) }).outputHelp();
    expect(help).toContain(`Filters on the search attributes ${describeRunListSearchAttributes()} of the visibility store`);
    expect(help).toContain('AgentPipeline, AgentPipelineStatus, ExecutionStatus and StartTime');
    expect(readFileSync(path.join(PROJECT_ROOT, 'docs', 'cli.md'), 'utf8')).toContain(`Filters on the search attributes ${describeRunListSearchAttributes('`')} of the visibility store`);
  });

  test('durations are checked', () => {
    expect(parseDurationMs('90s')).toBe(90_000);
    expect(() => parseDurationMs('1 week')).toThrow(InvalidArgumentError);
  });
});

describe('schedules', () => {
  const input: PipelineRunInput = {
    pipeline: { name: 'nightly', stages: [{ id: 'a', prompt: 'x' }] },
    baseDir: '/p',
    pipelineFile: 'nightly.yaml',
    inputs: { branch: 'main' },
  };

  test('start pipelineWorkflow with the run input, tagged with the pipeline name, with the overlap policy asked for', () => {
    const options = buildSchedule({ scheduleId: 'nightly', input, taskQueue: 'q', cron: '0 2 * * *', overlap: 'buffer-one', note: 'n' });
    expect(options).toMatchObject({
      scheduleId: 'nightly',
      spec: { cronExpressions: ['0 2 * * *'] },
      action: { type: 'startWorkflow', workflowType: 'pipelineWorkflow', taskQueue: 'q', args: [input], workflowId: 'nightly' },
      policies: { overlap: 'BUFFER_ONE' },
      state: { note: 'n' },
      memo: { agentPipeline: { pipeline: 'nightly', pipelineFile: 'nightly.yaml', spec: 'cron 0 2 * * *', overlap: 'buffer-one', inputs: { branch: 'main' } } },
    });
    expect(options.action.typedSearchAttributes).toEqual([{ key: expect.objectContaining({ name: 'AgentPipeline' }), value: 'nightly' }]);
    expect(buildSchedule({ scheduleId: 's', input, taskQueue: 'q', every: { text: '2h', ms: 7_200_000 }, overlap: 'skip' }).spec).toEqual({ intervals: [{ every: 7_200_000 }] });
  });

  test('refuse an unknown overlap policy, listing the known ones', () => {
    expect(parseOverlap('allow-all')).toBe('allow-all');
    expect(() => parseOverlap('never')).toThrow('expected one of skip, buffer-one, buffer-all, cancel-other, terminate-other, allow-all, got "never"');
  });
});

describe('errors', () => {
  test('from Temporal become messages a user can act on, with the exit code that fits', () => {
    const missingRun = toLibraryError(new WorkflowNotFoundError('not found', 'r1', undefined));
    // The library's typed error, with its stable code: the commands and the library share one mapping.
    expect(missingRun).toBeInstanceOf(RunNotFoundError);
    expect(missingRun).toMatchObject({ code: 'RUN_NOT_FOUND', runId: 'r1' });
    expect(exitCodeFor(missingRun)).toBe(EXIT.USAGE);
    expect((missingRun as Error).message).toBe('[RUN_NOT_FOUND] no run "r1"; `client.list()` (`agent-pipeline list`) shows the runs');
    expect((toLibraryError(new ScheduleNotFoundError('nf', 's1')) as Error).message).toContain('no schedule "s1"');
    const rejected = toLibraryError(new WorkflowUpdateFailedError('Workflow Update failed', ApplicationFailure.create({ message: 'stage ship is not waiting' })));
    expect((rejected as Error).message).toBe('[REQUEST_REJECTED] stage ship is not waiting');
    const plain = new Error('something else');
    expect(toLibraryError(plain)).toBe(plain);
  });

  test('map to exit codes: 2 bad usage or file, 3 no Temporal, 1 anything else', () => {
    expect(exitCodeFor(new UsageError('x'))).toBe(EXIT.USAGE);
    expect(exitCodeFor(new PipelineValidationError('f.yaml', []))).toBe(EXIT.USAGE);
    expect(exitCodeFor(new ConfigError('x'))).toBe(EXIT.USAGE);
    expect(exitCodeFor(new TemporalUnavailableError('x'))).toBe(EXIT.TEMPORAL_UNREACHABLE);
    expect(exitCodeFor(new TemporalCliNotFoundError(['TEMPORAL_CLI=/nope: no such file; fix the path or unset it']))).toBe(EXIT.USAGE);
    expect(exitCodeFor(new NoWorkerError('x'))).toBe(EXIT.TEMPORAL_UNREACHABLE);
    expect(exitCodeFor(new PipelineInvalidError('f.yaml', [], 'x'))).toBe(EXIT.USAGE);
    expect(exitCodeFor(new Error('x'))).toBe(EXIT.PIPELINE_FAILED);
  });
});
