import { createHash } from 'node:crypto';
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AttemptLog } from '../../src/activities/attempt/log.js';
import { FileClaims } from '../../src/activities/outputs/file-claims.js';
import { readFileExcerpt } from '../../src/activities/prompt/file-excerpt.js';
import { checkReportedPaths, isPathOutput } from '../../src/activities/outputs/reported-paths.js';
import { stageCommitMessage } from '../../src/activities/delivery/stage-commit.js';
import { resolveInside } from '../../src/files/inside.js';
import { collectArtifacts, openRunWorkspace, snapshotFiles, writeFileAtomic } from '../../src/activities/workspace/run-workspace.js';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'workspace-unit-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

describe('run workspaces', () => {
  it('are one folder per run, reopened as they are, with their bookkeeping in the workers\' own folder, outside the tree', async () => {
    const first = await openRunWorkspace(root, { runId: 'demo/run:1' });
    const again = await openRunWorkspace(root, { runId: 'demo/run:1' });
    expect(path.basename(first.dir)).toMatch(/^demo_run_1-[0-9a-f]{10}$/);
    expect(again.dir).toBe(first.dir);
    expect(first.bookkeeping).toBe(path.join(root, '.agent-pipeline', 'runs', path.basename(first.dir)));
    expect(first.claudeConfigDir).toBe(path.join(first.bookkeeping, 'claude'));
    expect(first.stageDir('spec')).toBe(path.join(first.bookkeeping, 'stages', 'spec'));
    expect(JSON.parse(await readFile(path.join(first.bookkeeping, 'run.json'), 'utf8'))).toEqual({ runId: 'demo/run:1' });
    // The agents' tree holds nothing of the worker's.
    expect(await readdir(first.dir)).toEqual([]);
  });

  it('report files created or changed since the baseline, with size and sha256, and never bookkeeping', async () => {
    const ws = await openRunWorkspace(root, { runId: 'r' });
    await writeFile(path.join(ws.dir, 'old.md'), 'old');
    await writeFile(path.join(ws.dir, 'same.md'), 'same');
    const before = await snapshotFiles(ws.dir);
    await writeFile(path.join(ws.dir, 'old.md'), 'changed!');
    await mkdir(path.join(ws.dir, 'src'));
    await writeFile(path.join(ws.dir, 'src', 'new.js'), 'new');
    await mkdir(path.join(ws.dir, 'src', 'deep', 'er'), { recursive: true });
    await writeFile(path.join(ws.dir, 'src', 'deep', 'er', 'x.txt'), 'x');
    // What an agent's installs and git write are not artifacts.
    await mkdir(path.join(ws.dir, 'node_modules', 'pkg'), { recursive: true });
    await writeFile(path.join(ws.dir, 'node_modules', 'pkg', 'index.js'), 'module');
    await mkdir(ws.stageDir('x'), { recursive: true });
    await writeFile(path.join(ws.stageDir('x'), 'bookkeeping.json'), '{}');
    const { artifacts, warnings } = await collectArtifacts(ws.dir, before);
    expect(artifacts).toEqual([
      { path: 'old.md', bytes: 8, sha256: sha256('changed!') },
      { path: 'src/deep/er/x.txt', bytes: 1, sha256: sha256('x') },
      { path: 'src/new.js', bytes: 3, sha256: sha256('new') },
    ]);
    expect(warnings).toEqual([]);
  });

  it('report a new symlink that leads outside the workspace instead of an artifact', async () => {
    const ws = await openRunWorkspace(root, { runId: 'r' });
    const before = await snapshotFiles(ws.dir);
    await symlink('/etc/hostname', path.join(ws.dir, 'escape'));
    const { artifacts, warnings } = await collectArtifacts(ws.dir, before);
    expect(artifacts).toEqual([]);
    expect(warnings).toEqual(['escape is a symlink to /etc/hostname, outside the workspace; it is not reported as an artifact']);
  });
});

describe('paths', () => {
  it('that escape the workspace are refused', () => {
    expect(resolveInside('/ws', 'docs/a.md')).toBe('/ws/docs/a.md');
    expect(resolveInside('/ws', '../../etc/passwd')).toBeUndefined();
    expect(resolveInside('/ws', '/etc/passwd')).toBeUndefined();
    expect(resolveInside('/ws', '..')).toBeUndefined();
    expect(resolveInside('/ws', '..foo/a')).toBe('/ws/..foo/a');
  });

  it('reported by an agent in path-like outputs are checked: outside ones dropped, missing ones noted', async () => {
    await writeFile(path.join(root, 'a.md'), 'a');
    const checked = checkReportedPaths(root, { files: ['a.md', '../../etc/passwd', 'gone.md'], specPath: '/etc/passwd', title: '../x', count: 2 });
    expect(checked.outputs).toEqual({ files: ['a.md', 'gone.md'], title: '../x', count: 2 });
    expect(checked.warnings).toEqual([
      'output "files": ../../etc/passwd is outside the workspace; it was dropped from the stage\'s outputs',
      'output "files": gone.md does not exist in the workspace',
      'output "specPath": /etc/passwd is outside the workspace; it was dropped from the stage\'s outputs',
    ]);
    expect(['file', 'paths', 'spec_file', 'test-paths', 'outputFiles'].every(isPathOutput)).toBe(true);
    expect(['profile', 'title', 'filename'].some(isPathOutput)).toBe(false);
  });
});

describe('writeFileAtomic', () => {
  it('creates folders and leaves no temp files behind', async () => {
    const file = path.join(root, 'deep', 'er', 'out.md');
    await writeFileAtomic(file, 'one');
    await writeFileAtomic(file, 'two');
    expect(await readFile(file, 'utf8')).toBe('two');
    expect(await readdir(path.dirname(file))).toEqual(['out.md']);
  });
});

describe('readFileExcerpt', () => {
  it('reads at most the bound, never splitting a character, and spots binary files', async () => {
    await writeFile(path.join(root, 'text.md'), 'aé€😀');
    expect(await readFileExcerpt(path.join(root, 'text.md'), 100)).toEqual({ text: 'aé€😀', bytes: 10, cut: false, binary: false });
    expect(await readFileExcerpt(path.join(root, 'text.md'), 5)).toEqual({ text: 'aé', bytes: 10, cut: true, binary: false });
    expect(await readFileExcerpt(path.join(root, 'text.md'), 6)).toEqual({ text: 'aé€', bytes: 10, cut: true, binary: false });
    await writeFile(path.join(root, 'bin'), Buffer.from([1, 0, 2]));
    expect(await readFileExcerpt(path.join(root, 'bin'), 100)).toMatchObject({ binary: true, bytes: 3 });
  });
});

describe('the attempt log', () => {
  it('remembers how attempts failed, for {{previous.failed}} and contract retries, across reopenings', async () => {
    const log = await AttemptLog.open(path.join(root, 'exec'));
    expect(log.previousFailureMessage(1)).toBe('');
    expect(log.previousFailureMessage(2)).toBe('attempt 1 stopped before it finished (its worker stopped, or it timed out)');
    await log.recordFailure({ attempt: 2, type: 'OUTPUT_CONTRACT_VIOLATION', message: 'no block', sessionId: 's1', at: 1 });
    const reopened = await AttemptLog.open(path.join(root, 'exec'));
    expect(reopened.previousFailureMessage(3)).toBe('no block');
    expect(reopened.failureBefore(3)).toMatchObject({ sessionId: 's1' });
    expect(reopened.countFailures('OUTPUT_CONTRACT_VIOLATION')).toBe(1);
    expect(reopened.transcriptPath(3)).toBe(path.join(root, 'exec', 'attempt-3.jsonl'));
  });

  it('keeps the baseline of the first attempt, so a retry still reports what a killed attempt wrote', async () => {
    const ws = await openRunWorkspace(root, { runId: 'r' });
    const log = await AttemptLog.open(path.join(ws.stageDir('s'), 'exec'));
    const first = await log.baseline(ws.dir);
    await writeFile(path.join(ws.dir, 'killed-attempt.md'), 'partial');
    const retried = await AttemptLog.open(path.join(ws.stageDir('s'), 'exec'));
    const again = await retried.baseline(ws.dir);
    const { artifacts } = await collectArtifacts(ws.dir, again.files);
    expect(artifacts.map((a) => a.path)).toEqual(['killed-attempt.md']);
    // The retry's window for other stages' claims still starts at the first attempt (file times may round).
    expect(Math.abs(again.takenAtMs - first.takenAtMs)).toBeLessThan(1_000);
  });
});

describe('stage commit messages', () => {
  it('use the stage and the summary\'s first line as subject, and name the run', () => {
    expect(stageCommitMessage('build', 'Added the greeter.\nWith tests.', 'run-1', 2)).toBe(
      'build: Added the greeter.\n\nAdded the greeter.\nWith tests.\n\nAgent-Pipeline-Run: run-1\nAgent-Pipeline-Stage: build (attempt 2)\n',
    );
    expect(stageCommitMessage('s', 'x'.repeat(100), 'r', 1).split('\n')[0]).toHaveLength(72);
  });
});

describe('file claims of stages that share the run folder', () => {
  it('records each file once, workspace-relative, and keeps them for the execution\'s next attempt', async () => {
    const ws = await openRunWorkspace(root, { runId: 'claims' });
    const execution = path.join(ws.stageDir('a'), 'exec');
    await mkdir(execution, { recursive: true });
    const claims = new FileClaims(ws.dir, execution);
    claims.add(path.join(ws.dir, 'src', 'a.ts'));
    claims.add('src/a.ts');
    claims.add('docs/../notes.md');
    claims.add('/etc/passwd');
    claims.add('../outside.txt');
    const reopened = new FileClaims(ws.dir, execution);
    expect(['src/a.ts', 'notes.md', 'etc/passwd', 'outside.txt'].map((p) => reopened.has(p))).toEqual([true, true, false, false]);
    expect((await readFile(path.join(execution, 'claims.jsonl'), 'utf8')).trim().split('\n')).toHaveLength(2);
  });

  it('gives the files other stages claimed while this one ran, not its own nor older claims', async () => {
    const ws = await openRunWorkspace(root, { runId: 'claims-others' });
    const claim = async (stage: string, execution: string, file: string): Promise<void> => {
      const dir = path.join(ws.stageDir(stage), execution);
      await mkdir(dir, { recursive: true });
      new FileClaims(ws.dir, dir).add(file);
    };
    await claim('old', 'exec', 'old.txt');
    await sleep(5);
    const since = Date.now();
    await claim('self', 'exec', 'mine.txt');
    await claim('b', 'round-1', 'b1.txt');
    await claim('b', 'round-2', 'b2.txt');
    // Found through the run's log of claims: the claims files' own times no longer count.
    await utimes(path.join(ws.stageDir('b'), 'round-1', 'claims.jsonl'), new Date(1_000), new Date(1_000));
    const stagesDir = path.dirname(ws.stageDir('self'));
    expect([...(await FileClaims.ofOtherStages(stagesDir, 'self', since))].sort()).toEqual(['b1.txt', 'b2.txt']);
    // A line of the log that would lead out of the stages folder is not followed; one cut short by a crash is skipped.
    await mkdir(path.join(ws.bookkeeping, 'x'), { recursive: true });
    await writeFile(path.join(ws.bookkeeping, 'x', 'claims.jsonl'), '"escaped.txt"\n');
    await appendFile(path.join(ws.bookkeeping, 'claims-log.jsonl'), `${JSON.stringify([Date.now(), '../x'])}\n[${Date.now()}, "b/ro`);
    expect([...(await FileClaims.ofOtherStages(stagesDir, 'self', since))].sort()).toEqual(['b1.txt', 'b2.txt']);
  });

  it('finds them by the claims files\' times in a run whose stages claimed before the run had a log', async () => {
    const ws = await openRunWorkspace(root, { runId: 'claims-unlogged' });
    const write = async (stage: string, file: string, at: number): Promise<void> => {
      const claims = path.join(ws.stageDir(stage), 'exec', 'claims.jsonl');
      await mkdir(path.dirname(claims), { recursive: true });
      await writeFile(claims, `${JSON.stringify(file)}\n`);
      await utimes(claims, new Date(at), new Date(at));
    };
    await write('old', 'old.txt', 1_000);
    await write('self', 'mine.txt', 20_000);
    await write('b', 'b.txt', 20_000);
    expect([...(await FileClaims.ofOtherStages(path.dirname(ws.stageDir('self')), 'self', 10_000))]).toEqual(['b.txt']);
  });
});
