import { S3Client, CreateBucketCommand } from '@aws-sdk/client-s3';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { findVersitygw } from '../../src/dev/versitygw.js';
import { pickFreePort } from '../../src/dev/dev-server-ports.js';

/*
 * A real S3-compatible server for the tests of the `s3://` store: versitygw over a temp folder (its posix backend), on
 * a free port, with root keys made up per server. Where it is not built (no Go), the tests skip with one line; in CI
 * (.ci/run provisions it) that fails instead.
 */

export interface Versitygw {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** The folder its posix backend keeps buckets in: `<folder>/<bucket>/<key>`, a file's time being its object's LastModified. */
  folder: string;
  /** The environment of a worker or client using bucket `bucket` of this server. */
  storeEnv(bucket: string, prefix?: string): Record<string, string>;
  createBucket(name: string): Promise<void>;
  /** Stops the server as an outage does (its objects kept); the function returned starts it again, as it was. */
  outage(): Promise<() => Promise<void>>;
  /** Stops the server (SIGTERM, then SIGKILL) and removes its folder. */
  stop(): Promise<void>;
}

/** The versitygw binary, or undefined after writing the skip line (throws in CI). */
export async function versitygwOrSkip(neededBy: string): Promise<string | undefined> {
  const found = await findVersitygw();
  if (found.path) return found.path;
  const line = `${neededBy} needs versitygw (${found.problem})`;
  if (process.env.CI) throw new Error(`${line}; .ci/run provisions it`);
  process.stderr.write(`skipped: ${line}\n`);
  return undefined;
}


/** Resolves once the server accepts connections, polling every 50 ms up to `timeoutMs`. */
async function waitForPort(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`versitygw exited with ${child.exitCode}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`versitygw did not listen on ${port} within ${timeoutMs} ms`);
}

export async function startVersitygw(binary: string): Promise<Versitygw> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'versitygw-'));
  const data = path.join(root, 'data');
  await mkdir(data);
  const accessKeyId = `test${randomBytes(6).toString('hex')}`;
  const secretAccessKey = randomBytes(24).toString('base64url');
  const port = await pickFreePort();
  // One server process over the folder; an outage ends it and a later one serves the same folder, port and keys.
  const serve = async (): Promise<() => Promise<void>> => {
    const child = spawn(binary, ['--access', accessKeyId, '--secret', secretAccessKey, '--port', `127.0.0.1:${port}`, '--quiet', 'posix', data], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { PATH: process.env.PATH ?? '', HOME: root },
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
    const end = async (): Promise<void> => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    };
    try {
      await waitForPort(port, child, 30_000);
    } catch (err) {
      await end();
      throw new Error(`${(err as Error).message}: ${stderr}`);
    }
    return end;
  };
  let end: () => Promise<void>;
  try {
    end = await serve();
  } catch (err) {
    await rm(root, { recursive: true, force: true });
    throw err;
  }
  const endpoint = `http://127.0.0.1:${port}`;
  const admin = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId, secretAccessKey } });
  return {
    endpoint,
    accessKeyId,
    secretAccessKey,
    folder: data,
    storeEnv: (bucket, prefix) => ({
      AGENT_PIPELINE_STORE: `s3://${bucket}${prefix ? `/${prefix}` : ''}`,
      AGENT_PIPELINE_STORE_ENDPOINT: endpoint,
      AGENT_PIPELINE_STORE_PATH_STYLE: '1',
      AGENT_PIPELINE_STORE_ACCESS_KEY_ID: accessKeyId,
      AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: secretAccessKey,
    }),
    createBucket: async (name) => {
      await admin.send(new CreateBucketCommand({ Bucket: name }));
    },
    outage: async () => {
      await end();
      return async () => {
        end = await serve();
      };
    },
    stop: async () => {
      admin.destroy();
      await end();
      await rm(root, { recursive: true, force: true });
    },
  };
}
