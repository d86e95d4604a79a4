import { describe, expect, test } from 'vitest';
import { toFolderName } from '../../src/activities/workspace/run-folder.js';
import { cliMessageOf } from '../../src/errors.js';
import { transcriptNotFound, workersRootOf, type TranscriptSearch } from '../../src/library/transcript-not-found.js';

const RUN = 'demo-1';
const search = (extra: Partial<TranscriptSearch>): TranscriptSearch => ({
  runId: RUN,
  stageId: 'spec',
  root: '/home/me/elsewhere/.agent-pipeline/workspaces',
  rootFrom: 'default',
  folder: '/home/me/elsewhere/.agent-pipeline/workspaces/.agent-pipeline/runs/x/stages/spec',
  reported: [],
  ...extra,
});

describe('logs, when no transcript is where it looked', () => {
  test('names the workspaces folder it used and that it is the default in the current folder', () => {
    const err = transcriptNotFound(search({}));
    expect(err.code).toBe('TRANSCRIPT_NOT_FOUND');
    expect(cliMessageOf(err)).toContain(
      'in the workspaces folder /home/me/elsewhere/.agent-pipeline/workspaces (the default, .agent-pipeline/workspaces in the current folder, as AGENT_PIPELINE_WORKSPACES is not set)',
    );
    expect(cliMessageOf(err)).toMatch(/run logs in the folder the worker was started in, or set AGENT_PIPELINE_WORKSPACES to the workers' folder/);
    expect(cliMessageOf(transcriptNotFound(search({ rootFrom: 'variable' })))).toContain('(AGENT_PIPELINE_WORKSPACES)');
  });

  test("names the workers' folder when the run reported its workspace there", () => {
    const err = transcriptNotFound(search({ reported: [undefined, `/srv/runs/${toFolderName(RUN)}`] }));
    expect(cliMessageOf(err)).toMatch(/The workers keep run demo-1 under \/srv\/runs: run logs again with AGENT_PIPELINE_WORKSPACES=\/srv\/runs, on a host that sees that folder$/);
    // A library caller is told of its option, and the command line of nothing but the variable.
    expect(err.message).toContain('pass it as `workspacesRoot`');
    expect(cliMessageOf(err)).not.toContain('workspacesRoot');
  });

  test('takes no folder from a lent workspace (workspace.dir), which is not under the workers\' folder', () => {
    expect(workersRootOf({ runId: RUN }, ['/home/me/project'])).toBeUndefined();
    expect(workersRootOf({ runId: RUN }, [`/srv/runs/${toFolderName(RUN)}`])).toBe('/srv/runs');
  });
});
