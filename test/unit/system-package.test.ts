import { afterEach, describe, expect, it, vi } from 'vitest';
import { CHROMIUM, GO, hasSystemPackage, HIDE_VARIABLE, POSTGRESQL, type SystemPackage } from '../helpers/system-package.js';

/* A test that needs a system package skips on a fresh machine with one line saying what to install; in CI it runs. */

const missing: SystemPackage = {
  key: 'chromium',
  name: 'chromium',
  commands: ['chromium'],
  locate: () => undefined,
  missing: '/nonexistent/chromium is missing',
  install: '`sudo apt-get install -y chromium`',
  neededBy: 'the Web UI test',
};
const present: SystemPackage = { ...missing, locate: () => '/here/chromium' };

describe('a test that needs a system package', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('is skipped without it, with one line naming the package and its install command', () => {
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    expect(hasSystemPackage(missing, {})).toBe(false);
    expect(write.mock.calls).toEqual([['skipped: the Web UI test needs chromium (/nonexistent/chromium is missing): install it with `sudo apt-get install -y chromium`\n']]);
  });

  it('fails in CI, which installs it, rather than skipping', () => {
    expect(() => hasSystemPackage(missing, { CI: 'true' })).toThrow(
      'the Web UI test needs chromium (/nonexistent/chromium is missing): install it with `sudo apt-get install -y chromium`; in CI (.ci/run) every system package must be here',
    );
  });

  it(`is skipped when ${HIDE_VARIABLE} hides it, as the hidden-packages check runs the tests`, () => {
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    expect(hasSystemPackage(present, {})).toBe(true);
    expect(hasSystemPackage(present, { [HIDE_VARIABLE]: 'socat, chromium' })).toBe(false);
    expect(write.mock.calls).toEqual([[expect.stringContaining(`needs chromium (hidden by ${HIDE_VARIABLE})`)]]);
  });

  it('names the packages .ci/run installs, at the paths it checks, and finds go where it adds it to PATH', () => {
    expect([CHROMIUM.file, POSTGRESQL.file]).toEqual(['/usr/bin/chromium', '/usr/lib/postgresql/15/bin/initdb']);
    expect(GO.locate({ PATH: '' })).toBe(GO.locate({ PATH: '/usr/local/go/bin' }));
  });
});
