import { describe, expect, test } from 'vitest';
import { checkpointSettingsFromEnv } from '../../src/activities/checkpoint/settings.js';

describe('when a worker checkpoints its runs', () => {
  test('with an object store of its own by default, not with the default store on the workspaces\' disk', () => {
    expect(checkpointSettingsFromEnv({}).enabled).toBe(false);
    expect(checkpointSettingsFromEnv({ AGENT_PIPELINE_STORE: 's3://bucket/runs' }).enabled).toBe(true);
    expect(checkpointSettingsFromEnv({ AGENT_PIPELINE_CHECKPOINTS: 'on' }).enabled).toBe(true);
    expect(checkpointSettingsFromEnv({ AGENT_PIPELINE_STORE: 's3://bucket/runs', AGENT_PIPELINE_CHECKPOINTS: 'off' }).enabled).toBe(false);
    expect(() => checkpointSettingsFromEnv({ AGENT_PIPELINE_CHECKPOINTS: 'maybe' })).toThrow('AGENT_PIPELINE_CHECKPOINTS=maybe');
  });
});
