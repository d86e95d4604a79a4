import { describe, expect, test } from 'vitest';
import { findForkSourceProblem } from '../../src/activities/check-trust.js';
import { generateSigningKey, parsePublicKeys, parseSigningKey } from '../../src/trust/keys.js';
import { signRunInput } from '../../src/trust/signatures.js';
import { RunSigner } from '../../src/trust/signer.js';
import { TRUST_EVERYONE, type WorkerTrust } from '../../src/trust/worker-trust.js';

/*
 * A fork takes over a source run's results only from a run the worker would have run itself: with trusted keys, its
 * start input signed by one of them for that run id. Its signature has long expired by the time it is forked: that is
 * not held against it.
 */

const INPUT = { version: 1, pipeline: { name: 'p', stages: [{ id: 'a', prompt: 'x' }] }, baseDir: '/p', pipelineFile: 'p.yaml', inputs: {} };

describe('the source of a fork', () => {
  const pair = generateSigningKey('team');
  const trust: WorkerTrust = { runKeys: parsePublicKeys(pair.publicLine, 'AGENT_PIPELINE_TRUSTED_KEYS'), decisionKeys: new Map(), allowWorkerFiles: false };
  const signer = new RunSigner(parseSigningKey(pair.privateLine));

  test('is trusted when signed for that run by a trusted key, however long ago its signature expired', () => {
    const expiredYesterday = Date.now() - 86_400_000;
    const old = { ...INPUT, signature: signRunInput(parseSigningKey(pair.privateLine), INPUT, 'source-1', expiredYesterday) };
    expect(findForkSourceProblem(trust, old, 'source-1')).toBeUndefined();
    // Its input changed after it was signed: the signature no longer covers it.
    expect(findForkSourceProblem(trust, { ...old, inputs: { extra: '1' } }, 'source-1')).toMatch(/not trusted/);
  });

  test('is refused unsigned, signed for another run, or signed by a key the worker does not trust', () => {
    expect(findForkSourceProblem(trust, INPUT, 'source-1')).toMatch(/run source-1 is not trusted on this worker/);
    expect(findForkSourceProblem(trust, signer.signRun(INPUT, 'other-run'), 'source-1')).toMatch(/not trusted/);
    const stranger = new RunSigner(parseSigningKey(generateSigningKey('stranger').privateLine)).signRun(INPUT, 'source-1');
    expect(findForkSourceProblem(trust, stranger, 'source-1')).toMatch(/stranger/);
  });

  test('is anyone\'s run on a worker without trusted keys', () => {
    expect(findForkSourceProblem(TRUST_EVERYONE, INPUT, 'source-1')).toBeUndefined();
  });
});
