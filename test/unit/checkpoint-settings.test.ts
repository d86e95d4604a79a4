import { describe, expect, test } from 'vitest';
import { checkpointSettingsFromEnv } from '../../src/activities/checkpoint/settings.js';

describe('when a worker checkpoints its runs', () => {
  test('fully with an object store of its own by default; with the default store on the workspaces\' disk, only the fork points', () => {
    const mode = (env: NodeJS.ProcessEnv) => {
      const { enabled, forkPointsOnly } = checkpointSettingsFromEnv(env);
      return enabled ? (forkPointsOnly ? 'fork-points' : 'on') : 'off';
    };
    expect(mode({})).toBe('fork-points');
    expect(mode({ AGENT_PIPELINE_STORE: 's3://bucket/runs' })).toBe('on');
    expect(mode({ AGENT_PIPELINE_CHECKPOINTS: 'on' })).toBe('on');
    expect(mode({ AGENT_PIPELINE_CHECKPOINTS: 'fork-points', AGENT_PIPELINE_STORE: 's3://bucket/runs' })).toBe('fork-points');
    expect(mode({ AGENT_PIPELINE_STORE: 's3://bucket/runs', AGENT_PIPELINE_CHECKPOINTS: 'off' })).toBe('off');
    expect(mode({ AGENT_PIPELINE_CHECKPOINTS: 'off' })).toBe('off');
    // Fork points are taken at every stage's start: a smaller cap by default, so a filled run folder is not archived each time.
    expect(checkpointSettingsFromEnv({}).maxBytes).toBe(256 * 1024 ** 2);
    expect(checkpointSettingsFromEnv({ AGENT_PIPELINE_CHECKPOINTS: 'on' }).maxBytes).toBe(2 * 1024 ** 3);
    expect(checkpointSettingsFromEnv({ AGENT_PIPELINE_CHECKPOINT_MAX_BYTES: '1000' }).maxBytes).toBe(1000);
    expect(() => checkpointSettingsFromEnv({ AGENT_PIPELINE_CHECKPOINTS: 'maybe' })).toThrow('AGENT_PIPELINE_CHECKPOINTS=maybe is not understood; expected on, off or fork-points');
  });
});
