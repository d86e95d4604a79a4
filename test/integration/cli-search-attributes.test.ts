import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { describe, expect, inject, test } from 'vitest';
import { PipelineClient } from '../../src/library/pipeline-client.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { eventually, runCli } from './cli-helpers.js';

/*
 * A cluster made without the project's search attributes (a plain `temporal server start-dev`, a namespace of one's
 * own) refuses every start. The refusal names the attribute and gives the command that creates them all, under the
 * code the docs give it; it was `Temporal refused the request: …`, with no code and no fix.
 */

const HELLO = path.join(PROJECT_ROOT, 'examples', 'scripts', 'hello.yaml');

describe('a namespace without the search attributes', () => {
  test('start exits 2 naming the missing attribute and the command that creates them', { timeout: 180_000 }, async () => {
    const address = inject('temporalAddress');
    const namespace = `no-attributes-${randomBytes(4).toString('hex')}`;
    const connection = await Connection.connect({ address });
    try {
      await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    } finally {
      await connection.close();
    }
    // The server knows a new namespace once its cache refreshes: wait until a start meets the refusal under test.
    const client = await PipelineClient.connect({ address, namespace, taskQueue: 'no-attributes' });
    try {
      const refusal = await eventually(
        () => client.start(HELLO, { id: 'never-started' }).then(() => 'started', (err: unknown) => (err as { code?: string }).code ?? String(err)),
        (code) => code !== 'NAMESPACE_NOT_FOUND',
        60_000,
        'the new namespace',
      );
      expect(refusal).toBe('TEMPORAL_REFUSED');
    } finally {
      await client.close();
    }
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, TEMPORAL_ADDRESS: address, TEMPORAL_NAMESPACE: namespace };
    const result = await runCli(['start', HELLO], env);
    expect(result.exitCode, result.all).toBe(2);
    expect(result.stderr).toBe(
      `agent-pipeline: [TEMPORAL_REFUSED] namespace ${namespace} has no search attribute AgentPipeline, which runs are listed by; create the project's ` +
        `search attributes once per namespace: temporal operator search-attribute create --namespace ${namespace} --name AgentPipeline --type Keyword ` +
        '--name AgentPipelineStages --type KeywordList --name AgentPipelineCostUsd --type Double --name AgentPipelineStatus --type Keyword ' +
        '(docs/deployment.md, "Search attributes on a self-hosted cluster"; `agent-pipeline dev` creates them itself)',
    );
  });
});
