import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { PROJECT_ROOT } from './project-paths.js';

/*
 * The package as `npm pack` makes it, packed once per build and shared by every test file that installs it
 * (library-pack, library-first-run, library-pack-types): files run in separate processes, so the tarball is cached in
 * a folder of the temp dir named by a hash of what goes into it.
 *
 * It is packed with --ignore-scripts from the dist/ that `npm test` has just built: a build inside a test would rewrite
 * dist/ under the other test files.
 */

export interface PackedPackage {
  /** The .tgz file. */
  tarball: string;
  /** Every path inside the package, as `npm pack --json` lists them (`dist/library/index.js`, …). */
  files: string[];
}

/** Where packed tarballs are cached, one folder per build. */
const CACHE_ROOT = path.join(tmpdir(), 'agent-pipeline-packs');
/** Cached builds older than this are removed when a new one is packed. @unit milliseconds */
const CACHE_MAX_AGE_MS = 6 * 3600_000;
/** What `files` in package.json ships, and what else npm always adds. */
const PACKED_ROOTS = ['package.json', 'README.md', 'CHANGELOG.md', 'LICENSE', 'dist', 'bin', 'docs', 'examples'];

/** Compiled by tests and benchmarks into dist/ while the suite runs, and not shipped (package.json `files`). */
const NOT_PACKED = new Set(['dist/bench', 'dist/examples'].map((folder) => path.join(PROJECT_ROOT, folder)));

/** Path, size and modification time of every file under `entry` (nothing when it does not exist). */
async function describeFiles(entry: string): Promise<string[]> {
  const info = NOT_PACKED.has(entry) ? undefined : await stat(entry).catch(() => undefined);
  if (!info) return [];
  if (!info.isDirectory()) return [`${path.relative(PROJECT_ROOT, entry)} ${info.size} ${info.mtimeMs}`];
  const names = (await readdir(entry)).sort();
  const nested = await Promise.all(names.map((name) => describeFiles(path.join(entry, name))));
  return nested.flat();
}

/** A name for the current build: changes whenever a file that would be packed changes. */
async function buildKey(): Promise<string> {
  const lines = (await Promise.all(PACKED_ROOTS.map((root) => describeFiles(path.join(PROJECT_ROOT, root))))).flat();
  return createHash('sha256').update(PROJECT_ROOT).update('\n').update(lines.join('\n')).digest('hex').slice(0, 16);
}

/** Removes cached builds nobody has packed for a while, so the temp dir does not fill up build after build. */
async function removeStaleBuilds(keep: string): Promise<void> {
  const names = await readdir(CACHE_ROOT).catch(() => [] as string[]);
  for (const name of names) {
    const entry = path.join(CACHE_ROOT, name);
    const info = await stat(entry).catch(() => undefined);
    if (name !== keep && info && Date.now() - info.mtimeMs > CACHE_MAX_AGE_MS) await rm(entry, { recursive: true, force: true });
  }
}

/** Reads a cached build's record, or undefined when it has not been packed. */
async function readCached(folder: string): Promise<PackedPackage | undefined> {
  const text = await readFile(path.join(folder, 'files.json'), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const { filename, files } = JSON.parse(text) as { filename: string; files: string[] };
  return { tarball: path.join(folder, filename), files };
}

/**
 * The packed package of the current build: packed on the first call of any test file, read from the cache after.
 * Two files packing at once each pack into a folder of their own and rename it into place; the loser's is dropped.
 */
export async function packedPackage(): Promise<PackedPackage> {
  const key = await buildKey();
  const folder = path.join(CACHE_ROOT, key);
  const cached = await readCached(folder);
  if (cached) return cached;
  await mkdir(CACHE_ROOT, { recursive: true });
  await removeStaleBuilds(key);
  const staging = await mkdtemp(path.join(CACHE_ROOT, `.packing-${key}-`));
  const packed = await execa('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', staging], { cwd: PROJECT_ROOT });
  const [result] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
  await writeFile(path.join(staging, 'files.json'), JSON.stringify({ filename: result.filename, files: result.files.map((f) => f.path) }));
  try {
    await rename(staging, folder);
  } catch {
    // Another file packed the same build first: use theirs.
    await rm(staging, { recursive: true, force: true });
  }
  const done = await readCached(folder);
  if (!done) throw new Error(`the packed package is missing from ${folder}`);
  return done;
}

export interface InstalledPackage {
  /** The consumer project: `package.json` (`"type": "module"`), nothing else. */
  project: string;
  /** `<project>/node_modules/agent-pipeline`. */
  installed: string;
}

/**
 * Installs the packed package into a fresh project under `dir`. `npm install --offline` needs every dependency's
 * registry metadata in npm's cache, which a fresh machine lacks; so the package is unpacked the way npm places it
 * (`node_modules/agent-pipeline`), and its dependencies (and TypeScript, `@types/node`) resolve from this project's
 * node_modules, linked into `dir` as a hoisted node_modules would be.
 */
export async function installPackedPackage(dir: string, { tarball }: PackedPackage): Promise<InstalledPackage> {
  const project = path.join(dir, 'project');
  const installed = path.join(project, 'node_modules', 'agent-pipeline');
  await mkdir(installed, { recursive: true });
  await execa('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
  await symlink(path.join(PROJECT_ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  const manifest = { name: 'consumer', private: true, type: 'module', dependencies: { 'agent-pipeline': '0.1.0' } };
  await writeFile(path.join(project, 'package.json'), JSON.stringify(manifest));
  return { project, installed };
}
