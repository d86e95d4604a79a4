import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  RUN_LIST_STATUSES,
  type AgentPipelineError,
  type AgentPipelineErrorCode,
  type FollowOptions,
  type RunListItem,
  type RunListStatus,
} from '../../src/library/index.js';
import { buildListQuery } from '../../src/library/list-runs.js';

/* What a TypeScript user of the library sees: lists where the docs show lists, literal unions the compiler checks. */

describe('the library\'s types', () => {
  it('lists the run statuses list() filters on, each once, in one spelling', () => {
    expect(RUN_LIST_STATUSES).toEqual(['running', 'completed', 'failed', 'cancelled', 'terminated', 'timed_out', 'waiting', 'blocked']);
    expectTypeOf<RunListStatus>().toEqualTypeOf<'running' | 'completed' | 'failed' | 'cancelled' | 'terminated' | 'timed_out' | 'waiting' | 'blocked'>();
    // Temporal's spellings still filter as the status they mean.
    expect(buildListQuery({ status: 'timed-out' as RunListStatus })).toBe(buildListQuery({ status: 'timed_out' }));
    expect(buildListQuery({ status: 'canceled' as RunListStatus })).toBe(buildListQuery({ status: 'cancelled' }));
    expect(() => buildListQuery({ status: 'sleeping' as RunListStatus })).toThrow('expected one of running, completed, failed, cancelled, terminated, timed_out, waiting, blocked');
  });

  it('types statuses and error codes as literal unions, and exports FollowOptions', () => {
    expectTypeOf<RunListItem['status']>().toEqualTypeOf<RunListStatus | 'continued_as_new'>();
    expectTypeOf<AgentPipelineError['code']>().toEqualTypeOf<AgentPipelineErrorCode>();
    expectTypeOf<'RUN_CLOSED'>().toExtend<AgentPipelineErrorCode>();
    expectTypeOf<'RUN_CLOSD'>().not.toExtend<AgentPipelineErrorCode>();
    expectTypeOf<FollowOptions>().toBeObject();
  });
});
