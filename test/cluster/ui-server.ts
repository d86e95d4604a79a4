import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa, type ResultPromise } from 'execa';

export interface UiServer {
  url: string;
  stop(): Promise<void>;
}

/**
 * Runs the Temporal Web UI server (built from `github.com/temporalio/ui-server/v2`) against the cluster, as the
 * compose file's `temporal-ui` service does with `TEMPORAL_ADDRESS`. Resolves once the UI answers over HTTP.
 */
export async function startUiServer(binary: string, temporalAddress: string, port: number, scratch: string): Promise<UiServer> {
  const root = path.join(scratch, 'ui');
  await mkdir(path.join(root, 'config'), { recursive: true });
  await writeFile(
    path.join(root, 'config', 'cluster.yaml'),
    [`temporalGrpcAddress: ${temporalAddress}`, `port: ${port}`, 'enableUi: true', 'defaultNamespace: default', 'refreshInterval: 1m', ''].join('\n'),
  );
  const child: ResultPromise = execa(binary, ['--root', root, '--env', 'cluster', 'start'], { reject: false, all: true, stdin: 'ignore', cleanup: true });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the Web UI server exited with ${child.exitCode}: ${String((await child).all).slice(-2000)}`);
    const status = await fetch(`${url}/api/v1/namespaces/default`).then((r) => r.status, () => 0);
    if (status === 200) break;
    if (Date.now() > deadline) throw new Error(`the Web UI server did not answer at ${url} within 120 s (last status ${status})`);
    await sleep(1_000);
  }
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await child;
    },
  };
}
