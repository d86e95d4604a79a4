import { afterEach, describe, expect, it, vi } from 'vitest';
import { CHROMIUM, hasSystemPackage, POSTGRESQL } from '../helpers/system-package.js';

/* A test that needs a system package skips on a fresh machine with one line saying what to install; in CI it runs. */

const missing = { name: 'chromium', file: '/nonexistent/chromium', install: 'sudo apt-get install -y chromium', neededBy: 'the Web UI test' };

describe('a test that needs a system package', () => {
  const ci = process.env.CI;
  afterEach(() => {
    if (ci === undefined) delete process.env.CI;
    else process.env.CI = ci;
    vi.restoreAllMocks();
  });

  it('is skipped without it, with one line naming the package and its install command', () => {
    delete process.env.CI;
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    expect(hasSystemPackage(missing)).toBe(false);
    expect(write.mock.calls).toEqual([['skipped: the Web UI test needs chromium (/nonexistent/chromium is missing): install it with `sudo apt-get install -y chromium`\n']]);
  });

  it('fails in CI, which installs it, rather than skipping', () => {
    process.env.CI = 'true';
    expect(() => hasSystemPackage(missing)).toThrow('the Web UI test needs chromium (/nonexistent/chromium is missing): install it with `sudo apt-get install -y chromium`; CI (.ci/run) installs it');
  });

  it('names the packages .ci/run installs, at the paths it checks', () => {
    expect([CHROMIUM.file, POSTGRESQL.file]).toEqual(['/usr/bin/chromium', '/usr/lib/postgresql/15/bin/initdb']);
  });
});
