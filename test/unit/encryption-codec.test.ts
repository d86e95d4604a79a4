import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodePayloads, encodePayloads, payloadCodecsFor } from '../../src/codec/data-converter.js';
import { ENCRYPTED_ENCODING, EncryptionCodec, PayloadDecryptionError } from '../../src/codec/encryption-codec.js';
import { encryptionSecretValues, parseEncryptionKeys } from '../../src/codec/encryption-key.js';
import { payloadFromBytes, payloadToBytes } from '../../src/codec/payload-bytes.js';
import { ConfigError } from '../../src/errors.js';
import { payloadConverter as markingConverter } from '../../src/codec/marking-payload-converter.js';
import { cameUnencrypted, UNENCRYPTED_METADATA } from '../../src/contracts/payload-origin.js';

const key = (): string => randomBytes(32).toString('base64');
const text = (bytes: Uint8Array | undefined | null): string => Buffer.from(bytes ?? new Uint8Array(0)).toString('utf8');
const MARKER = 'MARKER-7f3a-secret-prompt';

describe('AGENT_PIPELINE_ENCRYPTION_KEY', () => {
  it('reads one key or several, the first one encrypting', () => {
    const [a, b] = [key(), key()];
    const keys = parseEncryptionKeys(`new:${a}, old:${b}`);
    expect(keys.map((k) => k.id)).toEqual(['new', 'old']);
    expect(keys[0]!.key).toEqual(Buffer.from(a, 'base64'));
  });

  it.each([
    ['no id', 'c2VjcmV0', /key 1 of 1 is not <keyId>:<base64>/],
    ['a short key', 'k1:c2hvcnQ=', /key 1 of 1 \("k1"\) is not the base64 of 32 bytes \(it decodes to 5\)/],
    ['not base64', `k1:${'!'.repeat(44)}`, /key 1 of 1 \("k1"\) is not the base64 of 32 bytes;/],
    ['a bad id', `k 1:${key()}`, /has the id "k 1", which is not 1 to 64 of/],
    ['a repeated id', `k1:${key()},k1:${key()}`, /key 2 of 2 repeats the id "k1"/],
  ])('refuses %s, naming the variable and the fix and never the key', (_name, value, message) => {
    const attempt = (): unknown => parseEncryptionKeys(value);
    expect(attempt).toThrow(ConfigError);
    expect(attempt).toThrow(message);
    expect(attempt).toThrow(/^\[CONFIG_INVALID\] AGENT_PIPELINE_ENCRYPTION_KEY: .*agent-pipeline keys generate/);
    const secretPart = value.split(',').pop()!.split(':').pop()!;
    try {
      attempt();
    } catch (err) {
      expect((err as Error).message).not.toContain(secretPart);
    }
  });

  it('gives the whole setting and each key to redact', () => {
    const [a, b] = [key(), key()];
    expect(encryptionSecretValues(`new:${a},old:${b}`)).toEqual([`new:${a},old:${b}`, `new:${a}`, `old:${b}`, a, b]);
    expect(encryptionSecretValues(undefined)).toEqual([]);
  });
});

describe('the payload bytes', () => {
  it('are the protobuf encoding of temporal.api.common.v1.Payload, both ways', () => {
    const payload = defaultPayloadConverter.toPayload({ prompt: MARKER, n: 1 });
    const ours = payloadToBytes(payload);
    expect(Buffer.from(temporal.api.common.v1.Payload.encode(payload).finish())).toEqual(ours);
    const theirs = temporal.api.common.v1.Payload.decode(ours);
    expect(text(theirs.data)).toBe(text(payload.data));
    const back = payloadFromBytes(ours);
    expect(text(back.metadata!.encoding)).toBe('json/plain');
    expect(defaultPayloadConverter.fromPayload(back)).toEqual({ prompt: MARKER, n: 1 });
  });
});

describe('the AES-256-GCM payload codec', () => {
  it('encrypts a payload so that nothing of it shows, and decrypts it back', async () => {
    const codecs = payloadCodecsFor(`k1:${key()}`);
    const [encoded] = await encodePayloads(codecs, [defaultPayloadConverter.toPayload({ prompt: MARKER })]);
    expect(text(encoded!.metadata!.encoding)).toBe(ENCRYPTED_ENCODING);
    expect(text(encoded!.metadata!['encryption-key-id'])).toBe('k1');
    expect(Buffer.from(encoded!.data!).includes(MARKER)).toBe(false);
    expect(Object.values(encoded!.metadata!).some((v) => text(v).includes('json'))).toBe(false);
    const [decoded] = await decodePayloads(codecs, [encoded!]);
    expect(defaultPayloadConverter.fromPayload(decoded!)).toEqual({ prompt: MARKER });
  });

  it('uses a fresh nonce for every payload', async () => {
    const codec = new EncryptionCodec(parseEncryptionKeys(`k1:${key()}`));
    const payload = defaultPayloadConverter.toPayload(MARKER);
    const [a, b] = await codec.encode([payload, payload]);
    expect(Buffer.from(a!.data!).equals(Buffer.from(b!.data!))).toBe(false);
  });

  it('after rotation encrypts with the new key and still decrypts what the old key encrypted', async () => {
    const [oldKey, newKey] = [key(), key()];
    const before = new EncryptionCodec(parseEncryptionKeys(`old:${oldKey}`));
    const after = new EncryptionCodec(parseEncryptionKeys(`new:${newKey},old:${oldKey}`));
    const [sealedBefore] = await before.encode([defaultPayloadConverter.toPayload('from before')]);
    const [sealedAfter] = await after.encode([defaultPayloadConverter.toPayload('from after')]);
    expect(text(sealedAfter!.metadata!['encryption-key-id'])).toBe('new');
    expect(defaultPayloadConverter.fromPayload((await after.decode([sealedBefore!]))[0]!)).toBe('from before');
    await expect(before.decode([sealedAfter!])).rejects.toThrow(/encrypted with key "new", which AGENT_PIPELINE_ENCRYPTION_KEY does not hold \(it has old\); add that key/);
  });

  it('refuses a payload under a key of the same id but other bytes, or altered', async () => {
    const writer = new EncryptionCodec(parseEncryptionKeys(`k1:${key()}`));
    const reader = new EncryptionCodec(parseEncryptionKeys(`k1:${key()}`));
    const [sealed] = await writer.encode([defaultPayloadConverter.toPayload(MARKER)]);
    await expect(reader.decode([sealed!])).rejects.toThrow(PayloadDecryptionError);
    // Flip a byte's bits: setting it to a fixed value left it as it was whenever the random ciphertext had that value
    // there (1 run in 256).
    const data = Buffer.from(sealed!.data!);
    data[20] = data[20]! ^ 0xff;
    const altered = { ...sealed!, data };
    await expect(writer.decode([altered])).rejects.toThrow(/does not decrypt/);
  });

  it('passes payloads written before encryption was on (or by a client without the key) through, marked as unencrypted', async () => {
    const codec = new EncryptionCodec(parseEncryptionKeys(`k1:${key()}`));
    const plain = defaultPayloadConverter.toPayload({ prompt: 'old run' });
    const [decoded] = await codec.decode([plain]);
    expect(decoded!.data).toEqual(plain.data);
    expect(text(decoded!.metadata!.encoding)).toBe('json/plain');
    expect(text(decoded!.metadata![UNENCRYPTED_METADATA])).toBe('1');
    // What the codec decrypted carries no mark, even when its sender wrote one into the payload it encrypted.
    const [sealed] = await codec.encode([decoded!]);
    expect((await codec.decode([sealed!]))[0]!.metadata![UNENCRYPTED_METADATA]).toBeUndefined();
  });

  it("the workers' payload converter hangs the mark on the value, where no sender can set or fake it", () => {
    const plain = defaultPayloadConverter.toPayload({ holder: 'stranger', [Symbol.for('agent-pipeline/unencrypted')]: false });
    const marked = { ...plain, metadata: { ...plain.metadata, [UNENCRYPTED_METADATA]: Buffer.from('1') } };
    const value = markingConverter.fromPayload<{ holder: string }>(marked);
    expect(value).toEqual({ holder: 'stranger' });
    expect(cameUnencrypted(value)).toBe(true);
    // Not enumerable: JSON, spreads and canonical JSON (what signatures cover) never carry it on.
    expect(JSON.stringify(value)).toBe('{"holder":"stranger"}');
    expect(cameUnencrypted({ ...value })).toBe(false);
    expect(cameUnencrypted(markingConverter.fromPayload(plain))).toBe(false);
    expect(cameUnencrypted(JSON.parse('{"holder":"x","agent-pipeline/unencrypted":true}'))).toBe(false);
  });

  it('derives a key per purpose from each encryption key, the current one first, never the key itself', () => {
    const [a, b] = [key(), key()];
    const both = new EncryptionCodec(parseEncryptionKeys(`new:${a},old:${b}`));
    const onlyOld = new EncryptionCodec(parseEncryptionKeys(`old:${b}`));
    const [fromNew, fromOld] = both.derivedKeys('lease-ids/v1');
    expect(fromOld).toEqual(onlyOld.derivedKeys('lease-ids/v1')[0]);
    expect(fromNew).not.toEqual(fromOld);
    expect(fromNew).not.toEqual(Buffer.from(a, 'base64'));
    expect(both.derivedKeys('other')[0]).not.toEqual(fromNew);
  });
});
