import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { FileStore } from '../../src/store/file-store.js';
import { openStore } from '../../src/store/open-store.js';
import { S3Store } from '../../src/store/s3-store.js';
import { storeSecretValues, storeSettingsFromEnv } from '../../src/store/store-settings.js';

describe('AGENT_PIPELINE_STORE', () => {
  test('unset, the store is the default folder; file:// a folder; s3:// a bucket and prefix with its settings', () => {
    expect(storeSettingsFromEnv({}, '/w/.agent-pipeline/store')).toEqual({ kind: 'file', dir: '/w/.agent-pipeline/store', explicit: false });
    expect(storeSettingsFromEnv({ AGENT_PIPELINE_STORE: 'file:///srv/store' }, '/d')).toEqual({ kind: 'file', dir: path.resolve('/srv/store'), explicit: true });
    expect(
      storeSettingsFromEnv(
        {
          AGENT_PIPELINE_STORE: 's3://my-bucket/team/a/',
          AGENT_PIPELINE_STORE_ENDPOINT: 'http://127.0.0.1:7070/',
          AGENT_PIPELINE_STORE_PATH_STYLE: '1',
          AGENT_PIPELINE_STORE_ACCESS_KEY_ID: 'AKIDEXAMPLE',
          AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI',
        },
        '/d',
      ),
    ).toEqual({
      kind: 's3',
      bucket: 'my-bucket',
      prefix: 'team/a',
      endpoint: 'http://127.0.0.1:7070',
      region: 'us-east-1',
      pathStyle: true,
      credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI' },
    });
    // Without keys of its own the SDK's default chain is used: no credentials are set.
    expect(storeSettingsFromEnv({ AGENT_PIPELINE_STORE: 's3://b1b' }, '/d')).not.toHaveProperty('credentials');
    expect(openStore({}, { defaultDir: '/d' })).toBeInstanceOf(FileStore);
    expect(openStore({ AGENT_PIPELINE_STORE: 's3://bucket' }, { defaultDir: '/d' })).toBeInstanceOf(S3Store);
  });

  test.each([
    [{ AGENT_PIPELINE_STORE: 'ftp://x' }, /AGENT_PIPELINE_STORE: "ftp:\/\/x" is not a store URL; set it to file:\/\/\/absolute\/path or s3:\/\/bucket\/prefix/],
    [{ AGENT_PIPELINE_STORE: 'file://relative/x' }, /AGENT_PIPELINE_STORE: .* is not a file URL with an absolute path; write it as file:\/\/\/absolute\/path/],
    [{ AGENT_PIPELINE_STORE: 's3://Bad_Bucket' }, /AGENT_PIPELINE_STORE: "Bad_Bucket" is not a bucket name/],
    [{ AGENT_PIPELINE_STORE: 's3://bucket/a/../b' }, /the prefix "a\/..\/b" is not made of/],
    [{ AGENT_PIPELINE_STORE: 's3://bucket', AGENT_PIPELINE_STORE_ENDPOINT: 'localhost:7070' }, /AGENT_PIPELINE_STORE_ENDPOINT: "localhost:" is not http: or https:/],
    [{ AGENT_PIPELINE_STORE: 's3://bucket', AGENT_PIPELINE_STORE_ENDPOINT: 'http://u:p@h' }, /AGENT_PIPELINE_STORE_ENDPOINT: the URL holds credentials; put them in AGENT_PIPELINE_STORE_ACCESS_KEY_ID/],
    [{ AGENT_PIPELINE_STORE: 's3://bucket', AGENT_PIPELINE_STORE_PATH_STYLE: 'yes' }, /AGENT_PIPELINE_STORE_PATH_STYLE: "yes" is not 1 or 0/],
    [{ AGENT_PIPELINE_STORE: 's3://bucket', AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: 'sekrit-value' }, /AGENT_PIPELINE_STORE_ACCESS_KEY_ID: is not set while AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY is; set both/],
    [{ AGENT_PIPELINE_STORE: 's3://bucket', AGENT_PIPELINE_STORE_ACCESS_KEY_ID: 'AKID' }, /AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: is not set while/],
  ])('%o is refused, naming the variable and the fix', (env, message) => {
    expect(() => storeSettingsFromEnv(env, '/d')).toThrow(ConfigError);
    expect(() => storeSettingsFromEnv(env, '/d')).toThrow(message);
  });

  test('the store credentials are secrets to redact', () => {
    expect(storeSecretValues({ AGENT_PIPELINE_STORE_ACCESS_KEY_ID: 'AKIDEXAMPLE', AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI' })).toEqual(['AKIDEXAMPLE', 'wJalrXUtnFEMI']);
  });
});
