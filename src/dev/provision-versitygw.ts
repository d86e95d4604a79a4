/**
 * Entry point: builds versitygw (the S3-compatible server the store's tests run against) into the user's cache on
 * first use and prints its path. `.ci/run` runs it before the tests so that the build shows its progress on its own.
 * Exits 1 with the reason when it cannot be built.
 */
import { findVersitygw } from './versitygw.js';

const found = await findVersitygw({ build: true });
if (found.path) {
  process.stdout.write(`${found.path}\n`);
} else {
  process.stderr.write(`${found.problem}\n`);
  process.exitCode = 1;
}
