import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { cloneBare, git, initRepo } from '../helpers/git-repo.js';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { TEST_PERMISSIVE_SANDBOX_MODE } from '../helpers/sandbox-host.js';
import { approveStageUpdate } from '../../src/contracts/messages.js';
import { expectNoStageLeftRunning, stageOf, summarize, waitForWaiting } from './workflow-helpers.js';

const EXAMPLE = path.join(PROJECT_ROOT, 'examples', 'work-and-review');

describe('the work-and-review example', () => {
  let harness: Harness;
  let base: string;
  let project: string;
  let remote: string;
  beforeAll(async () => {
    // Its `sync` command stage runs `bd sync` unsandboxed (`sandbox: false`), which only a `permissive` worker honours.
    // Without warm start: here no stage could adopt an agent started ahead for it (the second review resumes its
    // session; the blocked bead's review never starts; the pipeline's budget keeps the first review from being started
    // ahead), so each would only be started and stopped: a `claude` and its `npm root -g` each. claude-cli-warm-start
    // has warm start, and its agents stopped on a differing command line.
    harness = await createHarness('work-review', {
      scenario: path.join(EXAMPLE, 'scenario.yaml'),
      env: { AGENT_PIPELINE_SANDBOX: TEST_PERMISSIVE_SANDBOX_MODE, AGENT_PIPELINE_PREWARM: 'off' },
    });
    // The example lives at the root of a project's repository, which pushes to a (here: bare) remote.
    base = await mkdtemp(path.join(tmpdir(), 'work-review-'));
    project = path.join(base, 'project');
    remote = path.join(base, 'remote.git');
    await cp(EXAMPLE, project, { recursive: true });
    await initRepo(project);
    await cloneBare(project, remote);
    await git(project, 'remote', 'add', 'origin', remote);
  });
  afterAll(async () => {
    await harness?.close();
    await rm(base, { recursive: true, force: true });
  });

  test('goes through one rework round, converges on the ledger, and waits for approval', async () => {
    const handle = await harness.start(path.join(project, 'pipeline.yaml'));
    const waiting = await waitForWaiting(handle, 'ready', 'approval', 90_000);
    expect(summarize(waiting)).toMatchObject({
      status: 'waiting',
      stages: [
        { id: 'work', status: 'completed', round: 2 },
        { id: 'review', status: 'completed', round: 2 },
        { id: 'ready', status: 'waiting', waiting: 'approval' },
        { id: 'track', status: 'pending' },
        { id: 'sync', status: 'pending' },
        { id: 'push', status: 'pending' },
      ],
    });
    expect(stageOf(waiting, 'ready').waitingFor?.commands).toContain(`agent-pipeline approve ${handle.workflowId} --stage ready`);

    // The ledger: both round-1 findings were fixed in round 2.
    expect(waiting.reviews?.review.findings.map((f) => [f.id, f.state, f.fixedInRound])).toEqual([
      ['F1', 'fixed', 2],
      ['F2', 'fixed', 2],
    ]);
    // The work agent resumed its session with the findings; the reviewer resumed its own with the ledger and the changes.
    const conversation = (body: unknown): string => JSON.stringify((body as { messages: unknown[] }).messages);
    const requests = harness.modelServer.requests().filter((r) => r.path === '/v1/messages');
    const reworkRequest = requests.find((r) => r.rule === 'work' && r.turn === 3);
    expect(conversation(reworkRequest?.body)).toContain('F1: Leading and trailing dashes');
    const reReview = requests.find((r) => r.rule === 'review' && r.turn === 2);
    const brief = conversation(reReview?.body);
    expect(brief).toContain('Review round 2');
    expect(brief).toContain('F2 (open, raised in round 1): No test for an empty title');
    expect(brief).toMatch(/src\/slugify\.js \(modified by work\)/);
    // The reviewer was given the branch's diff against its base.
    const firstReview = conversation(requests.find((r) => r.rule === 'review' && r.turn === 0)?.body);
    expect(firstReview).toContain('The change on branch beads-7-Add-slugify');
    expect(firstReview).toContain('+++ b/src/slugify.js');
    expect(firstReview).toContain("+  return title.toLowerCase().replace(/[^a-z0-9]+/g, '-');");

    const afterApproval = await handle.executeUpdate(approveStageUpdate, { args: [{ comment: 'ship it' }] });
    expect(stageOf(afterApproval, 'ready').status).toBe('completed');
    const final = await harness.finish(handle);
    expectNoStageLeftRunning(final);
    expect(final.status).toBe('completed');
    expect(stageOf(final, 'work').totals).toMatchObject({ attempts: 2, inputTokens: 2400 + 2800 + 3000 + 3600 + 3900 + 4100 });
    expect(final.costUsd).toBeGreaterThan(0);
    const code = await readFile(path.join(final.workspace!, 'src', 'slugify.js'), 'utf8');
    expect(code).toContain(".replace(/^-+|-+$/g, '')");
    // Each round's work was committed as the bead and the branch was pushed; then the finally stage recorded the
    // outcome, and its `bd sync` committed and pushed the tracker.
    const branch = 'beads-7-Add-slugify';
    expect(final.outputs).toMatchObject({ branch, commit: await git(remote, 'rev-parse', `${branch}~1`) });
    expect((await git(remote, 'log', '--format=%s', `main..${branch}`)).split('\n')).toEqual(['bd sync', 'Bead 7: Add slugify', 'Bead 7: Add slugify']);
    // The reviewer's `issues` (the seed's JSON, beside the contract's fields) reached the `track` command stage through
    // its environment, which filed the one raised on approval as a new bead; no model was asked after the run.
    expect(stageOf(final, 'review').result?.report?.issues).toEqual([expect.objectContaining({ title: 'Accented letters are dropped', severity: 'low' })]);
    expect(stageOf(final, 'track').result?.answer).toBe('recorded bead 7 as completed');
    expect(await git(remote, 'show', `${branch}:.beads/issues.jsonl`)).toBe('{"id":"7","status":"completed"}\n{"title":"Accented letters are dropped","status":"open"}');
    expect(stageOf(final, 'sync')).toMatchObject({ status: 'completed', backend: 'command' });
    expect(harness.modelServer.requests().filter((r) => r.path === '/v1/messages' && !['work', 'review'].includes(r.rule ?? ''))).toEqual([]);
  });

  test('a BLOCKED answer ends the bead: the run fails AGENT_BLOCKED with the reason and the tracker records it blocked', async () => {
    const handle = await harness.start(path.join(project, 'pipeline.yaml'), { bead_id: '8', title: 'Charge cards' });
    const final = await harness.finish(handle);
    expectNoStageLeftRunning(final);
    // Not the waiting state `blocked`: the run has ended, as the seed's orchestrator stops a blocked bead.
    expect(final.status).toBe('failed');
    expect(final.error?.type).toBe('AGENT_BLOCKED');
    expect(final.error?.message).toContain('no payments sandbox key is available; add PAYMENTS_SANDBOX_KEY');
    expect(stageOf(final, 'work')).toMatchObject({ status: 'failed', error: { type: 'AGENT_BLOCKED' } });
    expect(stageOf(final, 'review').status).not.toBe('completed');
    expect(stageOf(final, 'track').status).toBe('completed');
    expect(stageOf(final, 'sync').status).toBe('completed');
    expect(await readFile(path.join(final.workspace!, '.beads', 'issues.jsonl'), 'utf8')).toBe(
      '{"id":"8","status":"blocked"}\n{"title":"Bead 8 blocked: no payments sandbox key is available; add PAYMENTS_SANDBOX_KEY to the worker\'s environment","status":"open"}\n',
    );
  });
});
