import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { initRepo } from '../helpers/git-repo.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { emptyHome } from './claude-cli-world.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * Issue 33, "Also": an agent's Read tool read any file the worker's user could (a 0600 key outside the workspace), and
 * its sandboxed Bash did too (the sandbox limited writes only). With the real `claude`, the real bubblewrap and the
 * scripted model: the agent reads a 0600 key in the worker's HOME, a file of another run's folder and one of the
 * worker's reserved folder under the workspaces root, with its Read tool and with `cat` in Bash (the paths built at
 * run time, so that only the sandbox can stop them), and reads back a file it wrote in its own workspace. Its git
 * still reads the repository's `.git` when the repository lies in the hidden home, and nothing else of it.
 */

const missing = MISSING_SANDBOX_PACKAGES;

const HOME_KEY = 'HOME-KEY-5b1e0c7d93';
const OTHER_RUN = 'OTHER-RUN-SECRET-8f2a61c4d0';
const RESERVED = 'RESERVED-FOLDER-3c9d7e2b15';
const OWN_WORK = 'OWN-WORK-6e4f0a9b27';

const RUN_ID = `agent-reads-${Math.random().toString(36).slice(2, 8)}`;
const REPORT = '```json\n{"success": true, "summary": "Read around.", "outputs": {}}\n```';

let harness: Harness;
let scratch: string;
let files: { homeKey: string; otherRun: string; reserved: string; own: string; repo: string };
const REPO_README = 'README-OF-THE-REPOSITORY-2d7c';

/** `cat` of a path the shell builds at run time: no permission rule can match the command, only the sandbox stops it. */
const catAtRunTime = (file: string): string => `f=$(printf '%s' '${file.slice(0, 1)}' '${file.slice(1)}'); cat "$f" || echo "unread: $f"`;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'agent-reads-'));
  const home = await emptyHome(scratch);
  harness = await createHarness('agent-reads', { scenario: { rules: [] }, env: { HOME: home } });
  const root = harness.workspacesRoot;
  files = {
    homeKey: path.join(home, '.ssh', 'id_ed25519'),
    otherRun: path.join(root, 'other-run-0a1b2c3d4e', 'notes', 'secret.txt'),
    reserved: path.join(root, '.agent-pipeline', 'bundles', 'cafe', 'steps', 'task.md'),
    // The run's folder is named after its first execution, which only its start gives (`setScenario` after it).
    own: '',
    repo: path.join(home, 'src', 'project'),
  };
  await initRepo(files.repo, { 'README.md': `${REPO_README}\n` });
  // Only in the repository's own checkout, not in the run's worktree.
  await writeFile(path.join(files.repo, 'local-notes.txt'), `${HOME_KEY}-notes\n`);
  for (const [file, text] of [[files.homeKey, HOME_KEY], [files.otherRun, OTHER_RUN], [files.reserved, RESERVED]] as const) {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, `${text}\n`);
  }
  await chmod(files.homeKey, 0o600);
  setScenario();
});
afterAll(async () => {
  await harness?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/**
 * The scenario of both tests, its turns reading `files` as they are now. The `reads` rule's first turn names no path:
 * the turns after it, which read the run's own folder, are served only once the test has set the scenario again.
 */
function setScenario(): void {
  const turns = [
    { tool: { name: 'Bash', input: { command: `echo ${OWN_WORK} > own.txt` } } },
    { tool: { name: 'Read', input: { file_path: files.own } } },
    { tool: { name: 'Read', input: { file_path: files.homeKey } } },
    { tool: { name: 'Read', input: { file_path: files.otherRun } } },
    { tool: { name: 'Read', input: { file_path: files.reserved } } },
    { tool: { name: 'Bash', input: { command: [files.homeKey, files.otherRun, files.reserved, files.own].map(catAtRunTime).join('; ') } } },
    { text: REPORT },
  ];
  const gitTurns = [
    { tool: { name: 'Bash', input: { command: `git log --oneline -1 && git status --short --branch && cat README.md; ${catAtRunTime(path.join(files.repo, 'local-notes.txt'))}` } } },
    { tool: { name: 'Read', input: { file_path: path.join(files.repo, 'README.md') } } },
    { text: REPORT },
  ];
  // The more specific match first: the first rule whose text occurs in the prompt serves it.
  harness.modelServer.setScenario({
    rules: [
      { name: 'git', match: 'Pipeline: agent-reads-git', turns: gitTurns },
      { name: 'reads', match: 'Pipeline: agent-reads', turns },
    ],
  });
}

/** Every tool result the agent of `rule` got, in order, as text. */
function toolResults(rule = 'reads'): string[] {
  const last = harness.modelServer.requests().filter((r) => r.rule === rule).at(-1);
  const messages = (last?.body as { messages?: { role: string; content: unknown }[] } | undefined)?.messages ?? [];
  return messages
    .filter((m) => m.role === 'user' && Array.isArray(m.content))
    .flatMap((m) => (m.content as { type: string; content?: unknown }[]).filter((c) => c.type === 'tool_result').map((c) => JSON.stringify(c.content)));
}

describe('what an agent can read', () => {
  test.skipIf(missing.length > 0)(
    "neither its Read tool nor its Bash reads the worker's home, another run's folder or the worker's reserved folder; its own workspace it reads",
    { timeout: 180_000 },
    async () => {
      const yaml =
        'name: agent-reads\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 30s, retries: 0 }\n' +
        'stages:\n  - id: reads\n    prompt: Read around.\n    allowedTools: [Bash, Read]\n    sandbox: true\n';
      const handle = await harness.startYaml('agent-reads', yaml, RUN_ID);
      // Before the agent's first turn is done: its `claude` has yet to start in the sandbox and run a Bash command.
      files.own = path.join(harness.runDir(RUN_ID), 'own.txt');
      setScenario();
      const state = await harness.finish(handle);
      expectNoStageLeftRunning(state);
      expect(state.status, JSON.stringify(stageOf(state, 'reads'))).toBe('completed');
      const [, ownRead, homeRead, otherRead, reservedRead, bash] = toolResults();
      expect(ownRead).toContain(OWN_WORK);
      // The file tools: refused, each saying why.
      for (const refused of [homeRead, otherRead, reservedRead]) expect(refused).toMatch(/denied|outside|blocks reads/);
      // Bash, in the sandbox: the same three unread, its own file read.
      expect(bash).toContain(OWN_WORK);
      expect(bash).toContain(`unread: ${files.homeKey}`);
      expect(bash).toContain(`unread: ${files.otherRun}`);
      expect(bash).toContain(`unread: ${files.reserved}`);
      // And nothing of them anywhere the model was sent.
      const everything = JSON.stringify(harness.modelServer.requests().map((r) => r.body));
      for (const secret of [HOME_KEY, OTHER_RUN, RESERVED]) expect(everything).not.toContain(secret);
    },
  );

  test.skipIf(missing.length > 0)(
    "its git reads the repository's .git though the repository lies in the worker's home, and nothing else of the home",
    { timeout: 180_000 },
    async () => {
      const yaml =
        'name: agent-reads-git\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 30s, retries: 0 }\n' +
        `workspace: { repo: ${JSON.stringify(files.repo)} }\n` +
        'stages:\n  - id: git\n    prompt: Look at the repository.\n    allowedTools: [Bash, Read]\n    sandbox: true\n';
      const state = await harness.finish(await harness.startYaml('agent-reads-git', yaml));
      expect(state.status, JSON.stringify(stageOf(state, 'git'))).toBe('completed');
      const [bash, mainCheckout] = toolResults('git');
      // In its worktree: git's history and status, and the file as checked out there.
      expect(bash).toContain('initial');
      expect(bash).toContain(REPO_README);
      // The repository's own checkout, in the home, is not the agent's: neither tool reads it.
      expect(bash).toContain(`unread: ${path.join(files.repo, 'local-notes.txt')}`);
      expect(bash).not.toContain(`${HOME_KEY}-notes`);
      expect(mainCheckout).toMatch(/denied|outside|blocks reads/);
    },
  );
});
