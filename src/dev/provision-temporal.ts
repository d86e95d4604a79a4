/**
 * Entry point: finds the Temporal CLI, building or downloading it into the project cache on first use, and
 * prints its path on stdout (progress goes to stderr). CI runs it before the tests so a first-run build shows
 * its progress on its own rather than inside a test hook. Exits 1 with the reason when no CLI can be had.
 */
import { findTemporalCli } from './temporal-cli.js';

try {
  const startedAt = Date.now();
  const cli = await findTemporalCli();
  process.stderr.write(`Temporal CLI ready in ${((Date.now() - startedAt) / 1000).toFixed(1)}s\n`);
  process.stdout.write(`${cli}\n`);
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
