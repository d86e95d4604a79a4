import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ownerClaim, ownerIdFor } from '../../src/worker/owner-workers.js';

let base: string;

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'owner-id-'));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe('the owner id of a worker', () => {
  test('is one per workspaces folder, so a worker restarted on it polls the same queues', async () => {
    const root = path.join(base, 'a');
    const [first, second] = await Promise.all([ownerIdFor(root, {}), ownerIdFor(root, {})]);
    expect(first).toBe(second);
    expect(await ownerIdFor(root, {})).toBe(first);
    expect(await ownerIdFor(path.join(base, 'b'), {})).not.toBe(first);
    expect(ownerClaim('q', 'me', 1000, first).taskQueue).toBe(`q@owner-${first}`);
  });

  test('AGENT_PIPELINE_OWNER_ID gives a process its own, and a malformed one is refused naming it', async () => {
    const root = path.join(base, 'c');
    expect(await ownerIdFor(root, { AGENT_PIPELINE_OWNER_ID: 'host-7' })).toBe('host-7');
    await expect(ownerIdFor(root, { AGENT_PIPELINE_OWNER_ID: '../x' })).rejects.toThrow('AGENT_PIPELINE_OWNER_ID=../x');
  });

  test('never reads its id through a symlink planted in the workers\' folder', async () => {
    const root = path.join(base, 'd');
    await mkdir(path.join(root, '.agent-pipeline'), { recursive: true });
    const planted = path.join(base, 'planted-id');
    await writeFile(planted, 'someone-elses-queue\n');
    await symlink(planted, path.join(root, '.agent-pipeline', 'owner-id'));
    await expect(ownerIdFor(root, {})).rejects.toThrow('does not hold an owner id');
  });
});
