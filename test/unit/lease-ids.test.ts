import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EncryptionCodec } from '../../src/codec/encryption-codec.js';
import { parseEncryptionKeys } from '../../src/codec/encryption-key.js';
import { HASHED_LEASE_ID_PREFIX, hashedLeaseIds, isIdOf, PLAIN_LEASE_IDS } from '../../src/activities/leases/lease-ids.js';

const codec = (value: string): EncryptionCodec => new EncryptionCodec(parseEncryptionKeys(value));
const key = (id: string): string => `${id}:${randomBytes(32).toString('base64')}`;

describe('lease workflow ids', () => {
  it('without encryption name the key, as they always did', () => {
    expect(PLAIN_LEASE_IDS.current('repo:acme/web')).toBe('agent-pipeline-lease:repo:acme/web');
    expect(PLAIN_LEASE_IDS.earlier('repo:acme/web')).toEqual([]);
  });

  it('with encryption are a keyed hash that names nothing of the key, the same on every worker holding the key', () => {
    const shared = key('k1');
    const ids = hashedLeaseIds(codec(shared).derivedKeys('lease-ids/v1'));
    const id = ids.current('workspace.dir:/srv/work/atlas-task-42');
    expect(id).toMatch(new RegExp(`^${HASHED_LEASE_ID_PREFIX}[0-9a-f]{40}$`));
    expect(id).not.toContain('atlas');
    expect(hashedLeaseIds(codec(shared).derivedKeys('lease-ids/v1')).current('workspace.dir:/srv/work/atlas-task-42')).toBe(id);
    // Another deployment's key (or a guess without one) gives another id: a reader cannot confirm a guessed key.
    expect(hashedLeaseIds(codec(key('k1')).derivedKeys('lease-ids/v1')).current('workspace.dir:/srv/work/atlas-task-42')).not.toBe(id);
  });

  it('after a key rotation still know the books under the older key and under the plain key, newest first', () => {
    const [newer, older] = [key('new'), key('old')];
    const before = hashedLeaseIds(codec(older).derivedKeys('lease-ids/v1'));
    const after = hashedLeaseIds(codec(`${newer},${older}`).derivedKeys('lease-ids/v1'));
    expect(after.current('repo:x')).not.toBe(before.current('repo:x'));
    expect(after.earlier('repo:x')).toEqual([before.current('repo:x'), 'agent-pipeline-lease:repo:x']);
    expect(isIdOf(after, 'repo:x', before.current('repo:x'))).toBe(true);
    expect(isIdOf(after, 'repo:y', before.current('repo:x'))).toBe(false);
  });
});
