import { execFileSync, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { contextText, readContextFiles } from '../../src/activities/prompt/context-files.js';
import type { ContextFile } from '../../src/pipeline/schema.js';

/* `context:` entries read from the run's workspace (`from: workspace`): inside it, regular files, capped. */

let base: string;
let pipelineDir: string;
let workspaceDir: string;
beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'context-files-'));
  pipelineDir = path.join(base, 'pipeline');
  workspaceDir = path.join(base, 'workspace');
  await mkdir(path.join(workspaceDir, 'context'), { recursive: true });
  await mkdir(pipelineDir, { recursive: true });
  await writeFile(path.join(workspaceDir, 'context', 'product.md'), 'Product: Tandem.\n');
  await writeFile(path.join(pipelineDir, 'brief.md'), 'Brief from the pipeline.\n');
  await writeFile(path.join(base, 'secret.txt'), 'outside\n');
  await symlink(path.join(base, 'secret.txt'), path.join(workspaceDir, 'context', 'leak.md'));
});
afterAll(async () => rm(base, { recursive: true, force: true }));

const read = async (entries: ContextFile[], limit = 100_000) => {
  const notes: string[] = [];
  let remaining = limit;
  const files = await readContextFiles(entries, { pipelineDir, workspaceDir }, 's', { nextLimit: () => remaining, count: (e) => (remaining -= e.text.length) }, notes);
  return { files, notes };
};
const failureOf = async (entries: ContextFile[]) => read(entries).then(() => undefined, (err: { type?: string; message: string }) => err);

describe('context files from the workspace', () => {
  test('are read from the run\'s workspace, the others from the pipeline\'s folder; {{context}} joins their text', async () => {
    const { files } = await read(['brief.md', { path: 'context/product.md', from: 'workspace' }]);
    expect(files.map((f) => [f.path, f.excerpt.text])).toEqual([['brief.md', 'Brief from the pipeline.\n'], ['context/product.md', 'Product: Tandem.\n']]);
    expect(contextText(files)).toBe('Brief from the pipeline.\n\n\nProduct: Tandem.\n');
  });

  test('a missing optional one is a note; a missing required one fails FILE_NOT_FOUND naming it', async () => {
    const { files, notes } = await read([{ path: 'context/absent.md', from: 'workspace', optional: true }]);
    expect(files).toEqual([]);
    expect(notes).toEqual(['The optional context file context/absent.md does not exist; no such context is available, so work without it.']);
    const missing = await failureOf([{ path: 'context/absent.md', from: 'workspace' }]);
    expect(missing).toMatchObject({ type: 'FILE_NOT_FOUND' });
    expect(missing?.message).toContain(`cannot read context file ${path.join(workspaceDir, 'context/absent.md')}`);
  });

  test('refuses a symlink leading out of the workspace, a path past its top, and anything but a regular file', async () => {
    const leak = await failureOf([{ path: 'context/leak.md', from: 'workspace', optional: true }]);
    expect(leak).toMatchObject({ type: 'CONFIG_INVALID' });
    expect(leak?.message).toContain("leads outside the run's workspace");
    expect(await failureOf([{ path: '../secret.txt', from: 'workspace' }])).toMatchObject({ type: 'CONFIG_INVALID' });
    expect(await failureOf([{ path: 'context', from: 'workspace' }])).toMatchObject({ type: 'CONFIG_INVALID' });
    execFileSync('mkfifo', [path.join(workspaceDir, 'context', 'pipe')]);
    const fifo = await failureOf([{ path: 'context/pipe', from: 'workspace' }]);
    expect(fifo?.message).toContain('is not a regular file');
  });

  test('reads no more than the prompt\'s size bound allows', async () => {
    await writeFile(path.join(workspaceDir, 'big.md'), 'x'.repeat(5_000));
    const { files } = await read([{ path: 'big.md', from: 'workspace' }], 1_000);
    expect(files[0].excerpt).toMatchObject({ bytes: 5_000, cut: true });
    expect(files[0].excerpt.text).toHaveLength(1_000);
  });

  test('a file swapped for a symlink leading out between the check and the open is refused, never read', { timeout: 30_000 }, async () => {
    // A stage running alongside loops atomic renames: `swap/ctx.md` is a regular file, then a link to the secret.
    const dir = path.join(workspaceDir, 'swap');
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'r0'), 'benign\n');
    const script =
      'link "r0", "ctx.md"; my $t = time + 6; ' +
      'while (time < $t) { symlink($ARGV[0], "l"); rename("l", "ctx.md"); link("r0", "r"); rename("r", "ctx.md"); }';
    const swapper = spawn('perl', ['-e', script, path.join(base, 'secret.txt')], { cwd: dir, stdio: 'ignore' });
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const seen = new Set<string>();
      for (let i = 0; i < 1_500; i++) {
        const outcome = await read([{ path: 'swap/ctx.md', from: 'workspace' }]).then(
          ({ files }) => files[0].excerpt.text,
          (err: { type?: string }) => err.type ?? 'thrown',
        );
        seen.add(outcome);
      }
      // Each read got the file, or was refused it (the race lost either way); never the secret.
      for (const outcome of seen) expect(['benign\n', 'CONFIG_INVALID']).toContain(outcome);
    } finally {
      swapper.kill();
    }
  });
});
